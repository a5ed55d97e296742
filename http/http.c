/* The /metrics endpoint (and the dashboard) on GNU libmicrohttpd: one
 * internal epoll thread (the handler runs there, one request at a time),
 * bounded connections, bounded memory per connection, idle connections cut,
 * and cut faster when the connections run short. See http/http.h.
 *
 * The listening socket is ours (bound here, handed to the daemon with
 * MHD_OPTION_LISTEN_SOCKET) so that a busy port, an address that is not ours
 * and a name that does not resolve keep their own error codes, and "every
 * interface" means IPv4 and IPv6 whatever bindv6only says. */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/metrics.h"
#include "src/util.h"
#include "http/http.h"

#define RPS_HTTP_HOST_MAX 256
#define HTTP_BACKLOG	   256
#define HTTP_DEFAULT_CTYPE "text/plain; charset=utf-8"
#define HTTP_PRESSURE_S	   1 /* idle timeout of every connection under pressure */

struct rps_http_server {
	struct MHD_Daemon *d;
	uint16_t port;
	rps_http_handler_fn fn;	 /* GET/HEAD by path, or */
	rps_http_req_fn req_fn;	 /* any method, the handler chooses the code */
	void *arg;
	unsigned int max_clients;
	unsigned int timeout_s;
	/* open connections (touched by the daemon's thread only) */
	struct http_conn *conns;
	unsigned int nconns;
	int pressure;
};

/* An open connection, for the pressure rule. */
struct http_conn {
	struct MHD_Connection *c;
	struct http_conn *prev, *next;
};

/* Every connection's idle timeout to secs (resets their timers). */
static void set_timeouts(struct rps_http_server *srv, unsigned int secs)
{
	for (struct http_conn *h = srv->conns; h; h = h->next)
		MHD_set_connection_option(h->c, MHD_CONNECTION_OPTION_TIMEOUT, secs);
}

/* Connections come and go: under pressure (3/4 of max_clients open) idle
 * ones are cut after HTTP_PRESSURE_S, so that a crowd of idle or slow
 * clients cannot hold every place until the normal timeout. */
static void on_notify(void *cls, struct MHD_Connection *c, void **socket_context,
		      enum MHD_ConnectionNotificationCode code)
{
	struct rps_http_server *srv = cls;
	struct http_conn *h = *socket_context;
	unsigned int high = srv->max_clients - srv->max_clients / 4;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		h = rps_calloc(1, sizeof(*h));
		if (!h)
			return; /* not tracked: it keeps the normal timeout */
		h->c = c;
		h->next = srv->conns;
		if (srv->conns)
			srv->conns->prev = h;
		srv->conns = h;
		*socket_context = h;
		srv->nconns++;
		if (srv->pressure)
			MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
						  HTTP_PRESSURE_S);
		else if (srv->nconns >= high && srv->timeout_s > HTTP_PRESSURE_S) {
			srv->pressure = 1;
			RPS_WARN("http: %u of %u connections open: idle ones are cut after %d s",
				 srv->nconns, srv->max_clients, HTTP_PRESSURE_S);
			set_timeouts(srv, HTTP_PRESSURE_S);
		}
		return;
	}
	if (!h)
		return;
	if (h->prev)
		h->prev->next = h->next;
	else
		srv->conns = h->next;
	if (h->next)
		h->next->prev = h->prev;
	rps_free(h);
	*socket_context = NULL;
	srv->nconns--;
	if (srv->pressure && srv->nconns <= srv->max_clients / 2) {
		srv->pressure = 0;
		RPS_INFO("http: %u connections open: idle timeout back to %u s", srv->nconns,
			 srv->timeout_s);
	}
}

__attribute__((format(printf, 2, 0))) static void http_log(void *cls, const char *fmt,
							     va_list ap)
{
	char msg[256];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	RPS_DEBUG("http: %s", msg);
}

static void body_free(void *p)
{
	rps_free(p);
}

/* Queue an answer; body (rps_malloc'd) is handed over, NULL: text (static). */
static enum MHD_Result respond_ex(struct MHD_Connection *conn, unsigned int code,
				  const char *ctype, char *body, size_t blen, const char *text,
				  const char *cache, const char *csp, const char *allow)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (body)
		r = MHD_create_response_from_buffer_with_free_callback(blen, body, body_free);
	else
		r = MHD_create_response_from_buffer(strlen(text), (void *)text,
						    MHD_RESPMEM_PERSISTENT);
	if (!r) {
		RPS_WARN("http: out of memory for a %zu-byte answer", body ? blen : strlen(text));
		rps_free(body);
		return MHD_NO; /* closes the connection */
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				ctype ? ctype : HTTP_DEFAULT_CTYPE);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	MHD_add_response_header(r, MHD_HTTP_HEADER_X_CONTENT_TYPE_OPTIONS, "nosniff");
	if (cache)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, cache);
	if (csp)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_SECURITY_POLICY, csp);
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	if (code == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"rdmaps\"");
	if (code >= 400)
		RPS_DEBUG("http: %u for %s", code, text ? text : "");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned int code, const char *ctype,
			       char *body, size_t blen, const char *text)
{
	return respond_ex(conn, code, ctype, body, blen, text, NULL, NULL, "GET, HEAD");
}

/* rps_http_start_req's handler: any of GET, HEAD, POST; it picks the code. */
static enum MHD_Result on_request_req(struct rps_http_server *srv, struct MHD_Connection *conn,
				      const char *url, const char *method)
{
	struct rps_http_req rq = {.method = method, .path = url};
	struct rps_http_resp rs = {0};
	int rc;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD) &&
	    strcmp(method, MHD_HTTP_METHOD_POST))
		return respond_ex(conn, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, NULL, 0,
				  "method not allowed\n", NULL, NULL, "GET, HEAD, POST");
	rq.authorization =
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	rc = srv->req_fn(&rq, srv->arg, &rs);
	if (rc == -ENOENT)
		return respond(conn, MHD_HTTP_NOT_FOUND, NULL, NULL, 0, "not found\n");
	if (rc) {
		rps_free(rs.body);
		RPS_WARN("http: handler for %s %s: %s", method, url, strerror(-rc));
		return respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, NULL, 0,
			       "internal error\n");
	}
	if (!rs.body) /* an empty answer: the library needs a buffer of its own */
		rs.body = rps_malloc(1);
	if (!rs.body)
		return MHD_NO;
	return respond_ex(conn, rs.code ? rs.code : MHD_HTTP_OK, rs.ctype, rs.body, rs.len, NULL,
			  rs.cache, rs.csp, "GET, HEAD, POST");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct rps_http_server *srv = cls;
	const char *ctype = NULL;
	char *body = NULL;
	size_t blen = 0;
	int rc;

	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(version, MHD_HTTP_VERSION_1_1) && strcmp(version, MHD_HTTP_VERSION_1_0))
		return respond(conn, MHD_HTTP_BAD_REQUEST, NULL, NULL, 0, "bad request\n");
	if (url[0] != '/')
		return respond(conn, MHD_HTTP_BAD_REQUEST, NULL, NULL, 0, "bad request\n");
	if (srv->req_fn)
		return on_request_req(srv, conn, url, method);
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, NULL, 0,
			       "method not allowed\n");
	rc = srv->fn(url, srv->arg, &body, &blen, &ctype);
	if (rc == -ENOENT)
		return respond(conn, MHD_HTTP_NOT_FOUND, NULL, NULL, 0, "not found\n");
	if (rc) {
		RPS_WARN("http: handler for %s: %s", url, strerror(-rc));
		return respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, NULL, 0,
			       "internal error\n");
	}
	if (!body) /* an empty answer: the library needs a buffer of its own */
		body = rps_malloc(1);
	if (!body)
		return MHD_NO;
	return respond(conn, MHD_HTTP_OK, ctype, body, blen, NULL);
}

/* Bind and listen on host:port; the socket in *fd_p. */
static int http_listen(const char *node, uint16_t port, int *fd_p)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	char portstr[8];
	int rc, one = 1;

	snprintf(portstr, sizeof(portstr), "%u", port);
	rc = getaddrinfo(node, portstr, &hints, &res);
	if (rc) {
		RPS_ERR("http: resolve %s: %s", node ? node : "*", gai_strerror(rc));
		return -EINVAL;
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
		*fd_p = fd;
		rc = 0;
		break;
	}
	freeaddrinfo(res);
	if (rc)
		RPS_ERR("http: listen on %s:%u: %s", node ? node : "*", port, strerror(-rc));
	return rc;
}

/* max_clients within what the process may open: a quarter of RLIMIT_NOFILE
 * (the rest is the node's own connections). */
static int clamp_clients(int want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)want > rl.rlim_cur / 4)
		want = (int)RPS_MAX(rl.rlim_cur / 4, 4);
	return want;
}

static int http_start(const char *host, uint16_t port, const struct rps_http_opts *opts,
		      rps_http_handler_fn fn, rps_http_req_fn req_fn, void *arg,
		      struct rps_http_server **srv_p)
{
	const char *node = host && *host && strcmp(host, "*") ? host : NULL;
	struct rps_http_server *srv;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : RPS_HTTP_TIMEOUT_MS;
	size_t max_request = opts && opts->max_request ? opts->max_request : RPS_HTTP_MAX_REQUEST;
	int max_clients = opts && opts->max_clients > 0 ? opts->max_clients
							: clamp_clients(RPS_HTTP_MAX_CLIENTS);
	int fd = -1, rc;

	if (!fn && !req_fn)
		return -EINVAL;
	srv = rps_calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->fn = fn;
	srv->req_fn = req_fn;
	srv->arg = arg;
	srv->max_clients = (unsigned int)max_clients;
	srv->timeout_s = (unsigned int)((timeout_ms + 999) / 1000);
	rc = http_listen(node, port, &fd);
	if (rc)
		goto err_free;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							   : ((struct sockaddr_in *)&ss)->sin_port);
	/* the daemon owns fd from here: MHD_stop_daemon closes it */
	srv->d = MHD_start_daemon(
	    MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, srv,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned int)max_clients, MHD_OPTION_CONNECTION_MEMORY_LIMIT, max_request,
	    MHD_OPTION_CONNECTION_TIMEOUT, srv->timeout_s, MHD_OPTION_NOTIFY_CONNECTION, on_notify,
	    srv, MHD_OPTION_EXTERNAL_LOGGER, http_log, NULL, MHD_OPTION_END);
	if (!srv->d) {
		rc = errno ? -errno : -ENOMEM;
		RPS_ERR("http: cannot start the HTTP daemon on %s:%u: %s", node ? node : "*",
			srv->port, strerror(-rc));
		close(fd);
		goto err_free;
	}
	RPS_INFO("http: serving on %s:%u", node ? node : "*", srv->port);
	*srv_p = srv;
	return 0;

err_free:
	rps_free(srv);
	return rc;
}

int rps_http_start(const char *host, uint16_t port, const struct rps_http_opts *opts,
		   rps_http_handler_fn fn, void *arg, struct rps_http_server **srv_p)
{
	return http_start(host, port, opts, fn, NULL, arg, srv_p);
}

int rps_http_start_req(const char *host, uint16_t port, const struct rps_http_opts *opts,
		       rps_http_req_fn fn, void *arg, struct rps_http_server **srv_p)
{
	return http_start(host, port, opts, NULL, fn, arg, srv_p);
}

const char *rps_http_shown_host(const char *host)
{
	static _Thread_local char buf[RPS_HTTP_HOST_MAX + 2];

	if (!host || !*host || !strcmp(host, "*") || !strcmp(host, "0.0.0.0"))
		return "127.0.0.1";
	if (strchr(host, ':') && host[0] != '[') {
		snprintf(buf, sizeof(buf), "[%s]", host);
		return buf;
	}
	return host;
}

uint16_t rps_http_port(const struct rps_http_server *srv)
{
	return srv->port;
}

void rps_http_stop(struct rps_http_server *srv)
{
	if (!srv)
		return;
	MHD_stop_daemon(srv->d);
	rps_free(srv);
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
