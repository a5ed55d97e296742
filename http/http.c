/* A tiny HTTP/1.1 server: one thread, a poll() loop, non-blocking sockets,
 * one request per connection. See http/http.h for the contract.
 *
 * Connection states: READ (collecting the request; the request line is
 * checked as soon as it is complete) -> WRITE (the answer, with Connection:
 * close) -> DRAIN (our side shut down; read and discard until the peer closes,
 * so that closing with unread input does not reset the connection and lose
 * the answer) -> closed. Every state has a deadline. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/metrics.h"
#include "src/util.h"
#include "http/http.h"

#define HTTP_TARGET_MAX	   1024
#define HTTP_DRAIN_MS	   1000
#define HTTP_BACKLOG	   64
#define HTTP_DEFAULT_CTYPE "text/plain; charset=utf-8"

enum hc_state {
	HC_FREE = 0,
	HC_READ,
	HC_WRITE,
	HC_DRAIN,
};

struct http_conn {
	int fd;
	enum hc_state st;
	int line_ok; /* request line complete and valid */
	uint64_t deadline_ns;
	char *in; /* max_request + 1 bytes */
	size_t in_len;
	char *out;
	size_t out_len, out_off;
	char peer[64];
};

struct rps_http_server {
	int lfd;
	int wfd; /* eventfd: stop */
	uint16_t port;
	pthread_t th;
	struct rps_http_opts o;
	rps_http_handler_fn fn;
	void *arg;
	struct http_conn *conns;
	int nconn;
	char *inbuf;
	struct pollfd *pfd;
	int *pidx; /* pfd slot -> conns index */
};

static const char *reason(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 431:
		return "Request Header Fields Too Large";
	default:
		return "Internal Server Error";
	}
}

static void hc_close(struct rps_http_server *srv, struct http_conn *c)
{
	close(c->fd);
	rps_free(c->out);
	c->out = NULL;
	c->fd = -1;
	c->st = HC_FREE;
	srv->nconn--;
}

static void hc_write(struct rps_http_server *srv, struct http_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			RPS_DEBUG("http: %s: send: %s", c->peer, strerror(errno));
			hc_close(srv, c);
			return;
		}
		c->out_off += (size_t)n;
	}
	rps_free(c->out);
	c->out = NULL;
	shutdown(c->fd, SHUT_WR);
	c->st = HC_DRAIN;
	c->deadline_ns =
	    rps_now_ns() + (uint64_t)RPS_MIN(srv->o.timeout_ms, HTTP_DRAIN_MS) * 1000000ull;
}

/* Queue the answer (head: headers only) and start sending it. */
static void hc_respond(struct rps_http_server *srv, struct http_conn *c, int code,
		       const char *ctype, const char *body, size_t blen, int head,
		       const char *extra)
{
	char hdr[512];
	int hlen = snprintf(hdr, sizeof(hdr),
			    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			    "Connection: close\r\n%s\r\n",
			    code, reason(code), ctype ? ctype : HTTP_DEFAULT_CTYPE, blen,
			    extra ? extra : "");
	size_t total;

	if (hlen < 0 || (size_t)hlen >= sizeof(hdr)) {
		hc_close(srv, c);
		return;
	}
	total = (size_t)hlen + (head ? 0 : blen);
	c->out = rps_malloc(total);
	if (!c->out) {
		RPS_WARN("http: %s: out of memory for a %zu-byte answer", c->peer, total);
		hc_close(srv, c);
		return;
	}
	memcpy(c->out, hdr, (size_t)hlen);
	if (!head && blen)
		memcpy(c->out + hlen, body, blen);
	c->out_len = total;
	c->out_off = 0;
	c->st = HC_WRITE;
	c->deadline_ns = rps_now_ns() + (uint64_t)srv->o.timeout_ms * 1000000ull;
	if (code >= 400)
		RPS_DEBUG("http: %s: %d %s", c->peer, code, reason(code));
	hc_write(srv, c);
}

static void hc_error(struct rps_http_server *srv, struct http_conn *c, int code, const char *text)
{
	hc_respond(srv, c, code, NULL, text, strlen(text), 0,
		   code == 405 ? "Allow: GET, HEAD\r\n" : NULL);
}

/* "METHOD SP /target SP HTTP/1.x" (the line without its line end).
 * Fills method / target on success. */
static int parse_request_line(const char *p, size_t n, char *method, size_t mlen, char *target,
			      size_t tlen)
{
	size_t i = 0, m, t;

	if (n && p[n - 1] == '\r')
		n--;
	while (i < n && p[i] >= 'A' && p[i] <= 'Z')
		i++;
	if (i == 0 || i >= mlen || i >= n || p[i] != ' ')
		return -1;
	memcpy(method, p, i);
	method[i] = '\0';
	m = ++i;
	if (i >= n || p[i] != '/')
		return -1;
	while (i < n && p[i] > 0x20 && p[i] < 0x7f)
		i++;
	t = i - m;
	if (t >= tlen || i >= n || p[i] != ' ')
		return -1;
	memcpy(target, p + m, t);
	target[t] = '\0';
	i++;
	if (n - i != 8 || (memcmp(p + i, "HTTP/1.1", 8) && memcmp(p + i, "HTTP/1.0", 8)))
		return -1;
	return 0;
}

static void hc_request(struct rps_http_server *srv, struct http_conn *c)
{
	char method[16], target[HTTP_TARGET_MAX], *q, *body = NULL;
	const char *ctype = NULL;
	size_t blen = 0;
	int head, rc;
	char *nl = memchr(c->in, '\n', c->in_len);

	if (!nl || parse_request_line(c->in, (size_t)(nl - c->in), method, sizeof(method), target,
				      sizeof(target))) {
		hc_error(srv, c, 400, "bad request\n");
		return;
	}
	head = !strcmp(method, "HEAD");
	if (!head && strcmp(method, "GET")) {
		hc_error(srv, c, 405, "method not allowed\n");
		return;
	}
	q = strchr(target, '?');
	if (q)
		*q = '\0';
	rc = srv->fn(target, srv->arg, &body, &blen, &ctype);
	if (rc == -ENOENT) {
		hc_error(srv, c, 404, "not found\n");
		return;
	}
	if (rc) {
		RPS_WARN("http: %s: handler for %s: %s", c->peer, target, strerror(-rc));
		hc_error(srv, c, 500, "internal error\n");
		return;
	}
	hc_respond(srv, c, 200, ctype, body, blen, head, NULL);
	rps_free(body);
}

/* End of the header block, or NULL. */
static const char *headers_end(const char *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (p[i] != '\n')
			continue;
		if (p[i + 1] == '\n')
			return p + i + 2;
		if (p[i + 1] == '\r' && i + 2 < n && p[i + 2] == '\n')
			return p + i + 3;
	}
	return NULL;
}

static void hc_read(struct rps_http_server *srv, struct http_conn *c)
{
	for (;;) {
		size_t room = srv->o.max_request - c->in_len;
		ssize_t n;

		if (!room) {
			hc_error(srv, c, 431, "request too large\n");
			return;
		}
		n = recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				RPS_DEBUG("http: %s: recv: %s", c->peer, strerror(errno));
				hc_close(srv, c);
			}
			return;
		}
		if (n == 0) {
			hc_close(srv, c); /* gone before asking */
			return;
		}
		c->in_len += (size_t)n;
		c->in[c->in_len] = '\0';
		if (!c->line_ok) {
			char *nl = memchr(c->in, '\n', c->in_len);
			char m[16], t[HTTP_TARGET_MAX];

			if (nl && parse_request_line(c->in, (size_t)(nl - c->in), m, sizeof(m), t,
						     sizeof(t))) {
				hc_error(srv, c, 400, "bad request\n");
				return;
			}
			c->line_ok = nl != NULL;
		}
		if (c->line_ok && headers_end(c->in, c->in_len)) {
			hc_request(srv, c);
			return;
		}
	}
}

static void hc_drain(struct rps_http_server *srv, struct http_conn *c)
{
	char scratch[4096];

	for (;;) {
		ssize_t n = recv(c->fd, scratch, sizeof(scratch), MSG_DONTWAIT);

		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		hc_close(srv, c);
		return;
	}
}

static void accept_all(struct rps_http_server *srv)
{
	while (srv->nconn < srv->o.max_clients) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char host[48], serv[8];
		struct http_conn *c = NULL;
		int fd =
		    accept4(srv->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				RPS_WARN("http: accept: %s", strerror(errno));
			return;
		}
		for (int i = 0; i < srv->o.max_clients; i++)
			if (srv->conns[i].st == HC_FREE) {
				c = &srv->conns[i];
				break;
			}
		c->fd = fd;
		c->st = HC_READ;
		c->line_ok = 0;
		c->in_len = 0;
		c->out = NULL;
		c->deadline_ns = rps_now_ns() + (uint64_t)srv->o.timeout_ms * 1000000ull;
		if (getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv),
				NI_NUMERICHOST | NI_NUMERICSERV))
			snprintf(c->peer, sizeof(c->peer), "fd %d", fd);
		else
			snprintf(c->peer, sizeof(c->peer), "%s:%s", host, serv);
		srv->nconn++;
	}
}

static void *http_thread(void *arg)
{
	struct rps_http_server *srv = arg;

	for (;;) {
		uint64_t now = rps_now_ns(), next = UINT64_MAX;
		int n = 0, lslot = -1, first_conn, timeout, rc;

		/* deadlines first: a closed connection frees a slot for the listener */
		for (int i = 0; i < srv->o.max_clients; i++) {
			struct http_conn *c = &srv->conns[i];

			if (c->st == HC_FREE || now < c->deadline_ns)
				continue;
			if (c->st == HC_READ)
				hc_error(srv, c, 408, "request timeout\n");
			else
				hc_close(srv, c);
		}
		srv->pfd[n++] = (struct pollfd){.fd = srv->wfd, .events = POLLIN};
		if (srv->nconn < srv->o.max_clients) {
			lslot = n;
			srv->pfd[n++] = (struct pollfd){.fd = srv->lfd, .events = POLLIN};
		}
		first_conn = n;
		for (int i = 0; i < srv->o.max_clients; i++) {
			struct http_conn *c = &srv->conns[i];

			if (c->st == HC_FREE)
				continue;
			srv->pidx[n] = i;
			srv->pfd[n++] = (struct pollfd){
			    .fd = c->fd, .events = c->st == HC_WRITE ? POLLOUT : POLLIN};
			next = RPS_MIN(next, c->deadline_ns);
		}
		if (next == UINT64_MAX)
			timeout = -1;
		else
			timeout = (int)RPS_MIN((next - now + 999999) / 1000000, 60000ull);
		rc = poll(srv->pfd, (nfds_t)n, timeout);
		if (rc < 0) {
			if (errno != EINTR) {
				RPS_ERR("http: poll: %s", strerror(errno));
				usleep(10000);
			}
			continue;
		}
		if (srv->pfd[0].revents)
			break;
		for (int k = first_conn; k < n; k++) {
			struct http_conn *c = &srv->conns[srv->pidx[k]];

			if (!srv->pfd[k].revents || c->st == HC_FREE)
				continue;
			if (c->st == HC_READ)
				hc_read(srv, c);
			else if (c->st == HC_WRITE)
				hc_write(srv, c);
			else
				hc_drain(srv, c);
		}
		if (lslot >= 0 && srv->pfd[lslot].revents)
			accept_all(srv);
	}
	return NULL;
}

static void server_free(struct rps_http_server *srv)
{
	rps_free(srv->pidx);
	rps_free(srv->pfd);
	rps_free(srv->inbuf);
	rps_free(srv->conns);
	rps_free(srv);
}

int rps_http_start(const char *host, uint16_t port, const struct rps_http_opts *opts,
		   rps_http_handler_fn fn, void *arg, struct rps_http_server **srv_p)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	struct rps_http_server *srv;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const char *node = host && *host && strcmp(host, "*") ? host : NULL;
	char portstr[8];
	int rc, one = 1;

	if (!fn)
		return -EINVAL;
	srv = rps_calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->fn = fn;
	srv->arg = arg;
	srv->lfd = srv->wfd = -1;
	srv->o.timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : RPS_HTTP_TIMEOUT_MS;
	srv->o.max_request = opts && opts->max_request ? opts->max_request : RPS_HTTP_MAX_REQUEST;
	srv->o.max_clients =
	    opts && opts->max_clients > 0 ? opts->max_clients : RPS_HTTP_MAX_CLIENTS;
	srv->conns = rps_calloc((size_t)srv->o.max_clients, sizeof(*srv->conns));
	srv->inbuf = rps_malloc((size_t)srv->o.max_clients * (srv->o.max_request + 1));
	srv->pfd = rps_calloc((size_t)srv->o.max_clients + 2, sizeof(*srv->pfd));
	srv->pidx = rps_calloc((size_t)srv->o.max_clients + 2, sizeof(*srv->pidx));
	if (!srv->conns || !srv->inbuf || !srv->pfd || !srv->pidx) {
		rc = -ENOMEM;
		goto err_free;
	}
	for (int i = 0; i < srv->o.max_clients; i++) {
		srv->conns[i].fd = -1;
		srv->conns[i].in = srv->inbuf + (size_t)i * (srv->o.max_request + 1);
	}

	snprintf(portstr, sizeof(portstr), "%u", port);
	rc = getaddrinfo(node, portstr, &hints, &res);
	if (rc) {
		RPS_ERR("http: resolve %s: %s", node ? node : "*", gai_strerror(rc));
		rc = -EINVAL;
		goto err_free;
	}
	rc = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!node && ai->ai_family == AF_INET6) {
			int zero = 0; /* every interface: IPv4 too, whatever bindv6only says */

			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		}
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, HTTP_BACKLOG) < 0) {
			rc = -errno;
			close(fd);
			continue;
		}
		srv->lfd = fd;
		break;
	}
	freeaddrinfo(res);
	if (srv->lfd < 0) {
		RPS_ERR("http: listen on %s:%u: %s", node ? node : "*", port, strerror(-rc));
		goto err_free;
	}
	if (getsockname(srv->lfd, (struct sockaddr *)&ss, &sl) == 0)
		srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							   : ((struct sockaddr_in *)&ss)->sin_port);
	srv->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (srv->wfd < 0) {
		rc = -errno;
		RPS_ERR("http: eventfd: %s", strerror(-rc));
		goto err_close;
	}
	rc = -pthread_create(&srv->th, NULL, http_thread, srv);
	if (rc) {
		RPS_ERR("http: thread: %s", strerror(-rc));
		goto err_close;
	}
	pthread_setname_np(srv->th, "rps-http");
	RPS_INFO("http: serving on %s:%u", node ? node : "*", srv->port);
	*srv_p = srv;
	return 0;

err_close:
	if (srv->wfd >= 0)
		close(srv->wfd);
	close(srv->lfd);
err_free:
	server_free(srv);
	return rc;
}

uint16_t rps_http_port(const struct rps_http_server *srv)
{
	return srv->port;
}

void rps_http_stop(struct rps_http_server *srv)
{
	uint64_t one = 1;

	if (!srv)
		return;
	if (write(srv->wfd, &one, sizeof(one)) < 0)
		RPS_WARN("http: wake for stop: %s", strerror(errno));
	pthread_join(srv->th, NULL);
	for (int i = 0; i < srv->o.max_clients; i++)
		if (srv->conns[i].st != HC_FREE)
			hc_close(srv, &srv->conns[i]);
	close(srv->wfd);
	close(srv->lfd);
	server_free(srv);
}

int rps_http_metrics_handler(const char *path, void *arg, char **body_p, size_t *len_p,
			     const char **ctype_p)
{
	int rc;

	if (strcmp(path, "/metrics"))
		return -ENOENT;
	if (!arg)
		return -EINVAL;
	rc = rps_metrics_render(arg, body_p, len_p);
	if (rc)
		return rc;
	*ctype_p = RPS_METRICS_CONTENT_TYPE;
	return 0;
}
