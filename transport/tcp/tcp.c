/* TCP transport: the ops table, connection set-up and the poller.
 *
 * - epoll, level-triggered; non-blocking sockets with TCP_NODELAY; an eventfd
 *   for wake(). The poller reads at most TCP_RX_BUDGET bytes per connection
 *   per wake-up so that one busy peer cannot starve the others.
 * - connect(): blocking TCP connect (poll() with the timeout), HELLO frame,
 *   then HELLO_ACK (the ack payload is returned) or ERROR (its status is
 *   returned, its text logged).
 * - Listening side: an accepted socket must send its HELLO within the
 *   timeout; the hello is checked against params.secret, then params.on_hello;
 *   a refusal is answered with ERROR (status + reason) and the socket closed,
 *   an acceptance with HELLO_ACK and an ACCEPTED event.
 * - conn->hello: listening side, the peer's hello; connecting side, the hello
 *   we sent. The secret bytes are zeroed in both.
 * - close() may be called from any thread: the connection is shut down at
 *   once and freed by the poller (or destroy) once no sender is inside it.
 *   No event for it is returned after the poll() that follows close().
 *   Queued, unsent frames are dropped.
 * - A poll() running concurrently with connect() may report events of the
 *   new connection (e.g. a frame the server sent right after its ack) before
 *   connect() has returned it.
 * - release() and destroy(): every token must be released before destroy().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/config.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/tcp/tcp.h"

_Thread_local struct tcp_transport *tcp_polling;

static struct tcp_transport *tt_of(struct rps_transport *t)
{
	return rps_container_of(t, struct tcp_transport, base);
}

static void sockaddr_str(const struct sockaddr *sa, char *out, size_t n)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(out, n, "%s:%u", ip, ntohs(s4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(out, n, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		snprintf(out, n, "?");
	}
}

static void set_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		RPS_DEBUG("tcp: TCP_NODELAY: %m");
}

static struct tcp_conn *conn_new(struct tcp_transport *tt, int fd, const char *peer, int phase)
{
	struct tcp_conn *c = rps_calloc(1, sizeof(*c));
	pthread_condattr_t ca;

	if (!c)
		return NULL;
	c->stage = rps_malloc(TCP_STAGE_BYTES);
	if (!c->stage) {
		rps_free(c);
		return NULL;
	}
	c->kind = TCP_K_CONN;
	c->tt = tt;
	c->base.tr = &tt->base;
	snprintf(c->base.peer, sizeof(c->base.peer), "%s", peer);
	c->phase = phase;
	c->rx_state = TCP_RX_HDR;
	c->fd = fd;
	pthread_mutex_init(&c->slock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->scond, &ca);
	pthread_condattr_destroy(&ca);
	return c;
}

/* Memory and socket of a connection nobody else can see yet (or any more). */
static void conn_destroy(struct tcp_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	pthread_cond_destroy(&c->scond);
	pthread_mutex_destroy(&c->slock);
	rps_free(c->done);
	rps_free(c->stage);
	rps_free(c);
}

/* Register with epoll, then make it known (destroy frees what is on tt->conns).
 * From here on a concurrent poll() may report events for it. */
static int conn_add(struct tcp_transport *tt, struct tcp_conn *c)
{
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = &c->kind};

	pthread_mutex_lock(&tt->lock);
	c->anext = tt->conns;
	if (tt->conns)
		tt->conns->aprev = c;
	tt->conns = c;
	pthread_mutex_unlock(&tt->lock);
	if (epoll_ctl(tt->ep, EPOLL_CTL_ADD, c->fd, &e) < 0) {
		int rc = -errno;

		pthread_mutex_lock(&tt->lock);
		if (c->aprev)
			c->aprev->anext = c->anext;
		else
			tt->conns = c->anext;
		if (c->anext)
			c->anext->aprev = c->aprev;
		pthread_mutex_unlock(&tt->lock);
		return rc;
	}
	return 0;
}

static void hello_unlink(struct tcp_transport *tt, struct tcp_conn *c)
{
	if (c->hprev)
		c->hprev->hnext = c->hnext;
	else if (tt->hello_head == c)
		tt->hello_head = c->hnext;
	if (c->hnext)
		c->hnext->hprev = c->hprev;
	else if (tt->hello_tail == c)
		tt->hello_tail = c->hprev;
	c->hnext = c->hprev = NULL;
}

/* Drop queued events of c (it is being freed), releasing their tokens. */
static void evq_purge(struct tcp_transport *tt, struct tcp_conn *c)
{
	struct tcp_evq *q = &tt->evq;
	size_t w = q->head;

	for (size_t r = q->head; r < q->tail; r++) {
		if (q->ev[r].conn == &c->base) {
			if (q->ev[r].type == RPS_TR_EV_RECV && q->ev[r].token)
				tcp_pool_put(&tt->pool, q->ev[r].token);
			continue;
		}
		q->ev[w++] = q->ev[r];
	}
	q->tail = w;
}

void tcp_conn_free(struct tcp_conn *c)
{
	struct tcp_transport *tt = c->tt;
	struct tcp_sreq *r;

	if (c->fd >= 0) {
		epoll_ctl(tt->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	evq_purge(tt, c);
	if (c->rx_buf)
		tcp_pool_put(&tt->pool, c->rx_buf);
	if (c->phase == TCP_PH_HELLO)
		hello_unlink(tt, c);
	while ((r = c->sq_head)) {
		c->sq_head = r->next;
		rps_free(r);
	}

	pthread_mutex_lock(&tt->lock);
	if (c->aprev)
		c->aprev->anext = c->anext;
	else
		tt->conns = c->anext;
	if (c->anext)
		c->anext->aprev = c->aprev;
	pthread_mutex_unlock(&tt->lock);
	conn_destroy(c);
}

static int tcp_create(const struct rps_tr_params *p, struct rps_transport **t_p)
{
	struct tcp_transport *tt = rps_calloc(1, sizeof(*tt));
	struct epoll_event e = {.events = EPOLLIN};
	uint64_t max_msg;
	int rc;

	if (!tt)
		return -ENOMEM;
	tt->base.ops = &rps_tcp_ops;
	tt->base.params = *p;
	tt->secret = rps_strdup(p->secret ? p->secret : "");
	if (!tt->secret) {
		rc = -ENOMEM;
		goto err_free;
	}
	tt->base.params.secret = tt->secret;
	max_msg = p->max_msg;
	if (!max_msg)
		max_msg = p->cfg && p->cfg->max_msg ? p->cfg->max_msg : TCP_DEFAULT_MAX_MSG;
	if (max_msg > UINT32_MAX)
		max_msg = UINT32_MAX; /* hdr.len is 32 bits */
	tt->max_msg = max_msg;
	tt->base.params.max_msg = max_msg;
	tt->timeout_ms = p->timeout_ms > 0		    ? p->timeout_ms
			 : p->cfg && p->cfg->timeout_ms > 0 ? p->cfg->timeout_ms
							    : TCP_DEFAULT_TIMEOUT_MS;
	tt->base.params.timeout_ms = tt->timeout_ms;
	tt->base.caps = RPS_TR_CAP_RECV_DEST;
	tt->base.max_frame = max_msg + sizeof(struct rps_frame_hdr);
	tt->base.max_read_sge = 0;
	tt->wake_kind = TCP_K_WAKE;
	pthread_mutex_init(&tt->lock, NULL);
	atomic_init(&tt->done_head, NULL);
	atomic_init(&tt->close_head, NULL);
	atomic_init(&tt->sleeping, 0);
	atomic_init(&tt->wake_pending, 0);
	atomic_init(&tt->user_wake, 0);
	tcp_pool_init(&tt->pool);

	tt->ep = epoll_create1(EPOLL_CLOEXEC);
	if (tt->ep < 0) {
		rc = -errno;
		RPS_ERR("tcp: epoll_create1: %m");
		goto err_secret;
	}
	tt->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (tt->wfd < 0) {
		rc = -errno;
		RPS_ERR("tcp: eventfd: %m");
		goto err_ep;
	}
	e.data.ptr = &tt->wake_kind;
	if (epoll_ctl(tt->ep, EPOLL_CTL_ADD, tt->wfd, &e) < 0) {
		rc = -errno;
		RPS_ERR("tcp: epoll_ctl eventfd: %m");
		goto err_wfd;
	}
	*t_p = &tt->base;
	return 0;

err_wfd:
	close(tt->wfd);
err_ep:
	close(tt->ep);
err_secret:
	rps_free(tt->secret);
	pthread_mutex_destroy(&tt->lock);
err_free:
	rps_free(tt);
	return rc;
}

static void tcp_destroy(struct rps_transport *t)
{
	struct tcp_transport *tt = tt_of(t);
	struct tcp_evq *q = &tt->evq;

	for (int i = 0; i < tt->nlisteners; i++) {
		close(tt->listeners[i]->fd);
		rps_free(tt->listeners[i]);
	}
	tt->nlisteners = 0;
	/* Every connection, whatever list it is on, is on tt->conns. */
	while (tt->conns)
		tcp_conn_free(tt->conns);
	for (size_t i = q->head; i < q->tail; i++)
		if (q->ev[i].type == RPS_TR_EV_RECV && q->ev[i].token)
			tcp_pool_put(&tt->pool, q->ev[i].token);
	rps_free(q->ev);
	tcp_pool_fini(&tt->pool);
	close(tt->wfd);
	close(tt->ep);
	pthread_mutex_destroy(&tt->lock);
	rps_free(tt->secret);
	rps_free(tt);
}

static int tcp_listen(struct rps_transport *t, const char *host, uint16_t port, uint16_t *port_p)
{
	struct tcp_transport *tt = tt_of(t);
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	struct tcp_listener *l;
	struct epoll_event e = {.events = EPOLLIN};
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ports[8];
	int fd = -1, rc, one = 1;

	if (host && (!host[0] || !strcmp(host, "*")))
		host = NULL;
	snprintf(ports, sizeof(ports), "%u", port);
	rc = getaddrinfo(host, ports, &hints, &res);
	if (rc) {
		RPS_ERR("listen %s:%u: %s", host ? host : "*", port, gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0)
			break;
		rc = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		RPS_ERR("listen %s:%u: %s", host ? host : "*", port, strerror(-rc));
		return rc;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		RPS_ERR("listen %s:%u: getsockname: %m", host ? host : "*", port);
		goto err_close;
	}
	l = rps_calloc(1, sizeof(*l));
	if (!l) {
		rc = -ENOMEM;
		goto err_close;
	}
	l->kind = TCP_K_LISTENER;
	l->fd = fd;
	l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	pthread_mutex_lock(&tt->lock);
	if (tt->nlisteners == TCP_MAX_LISTENERS) {
		pthread_mutex_unlock(&tt->lock);
		RPS_ERR("listen %s:%u: more than %d listeners", host ? host : "*", port,
			TCP_MAX_LISTENERS);
		rc = -EMFILE;
		goto err_free;
	}
	tt->listeners[tt->nlisteners++] = l;
	pthread_mutex_unlock(&tt->lock);
	e.data.ptr = &l->kind;
	if (epoll_ctl(tt->ep, EPOLL_CTL_ADD, fd, &e) < 0) {
		rc = -errno;
		RPS_ERR("listen %s:%u: epoll_ctl: %m", host ? host : "*", port);
		pthread_mutex_lock(&tt->lock);
		tt->nlisteners--;
		pthread_mutex_unlock(&tt->lock);
		goto err_free;
	}
	RPS_DEBUG("tcp: listening on %s:%u", host ? host : "*", l->port);
	if (port_p)
		*port_p = l->port;
	return 0;

err_free:
	rps_free(l);
err_close:
	close(fd);
	return rc;
}

static void tcp_accept(struct tcp_transport *tt, struct tcp_listener *l)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct tcp_conn *c;
		char peer[64];
		int fd;

		fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				RPS_WARN("tcp: accept on port %u: %m", l->port);
			return;
		}
		set_nodelay(fd);
		sockaddr_str((struct sockaddr *)&ss, peer, sizeof(peer));
		c = conn_new(tt, fd, peer, TCP_PH_HELLO);
		if (!c) {
			RPS_ERR("tcp: accept %s: out of memory", peer);
			close(fd);
			continue;
		}
		if (conn_add(tt, c) < 0) {
			RPS_ERR("tcp: accept %s: epoll_ctl: %m", peer);
			conn_destroy(c);
			continue;
		}
		c->hello_deadline = rps_now_ns() + (uint64_t)tt->timeout_ms * 1000000ull;
		c->hprev = tt->hello_tail;
		if (tt->hello_tail)
			tt->hello_tail->hnext = c;
		else
			tt->hello_head = c;
		tt->hello_tail = c;
		RPS_DEBUG("tcp: accepted %s", peer);
	}
}

int tcp_hello_in(struct tcp_conn *c)
{
	struct tcp_transport *tt = c->tt;
	const struct rps_tr_params *p = &tt->base.params;
	struct rps_frame_hdr h;
	struct rps_hello hello;
	const char *why = NULL;
	size_t ack_len = 0;
	struct iovec v;
	int rc;

	memcpy(&hello, c->rx_fixed, sizeof(hello));
	rc = rps_proto_hello_check(&hello, tt->secret, &why);
	c->base.hello = hello;
	memset(c->base.hello.secret, 0, sizeof(c->base.hello.secret));
	if (!rc && p->on_hello) {
		rc = p->on_hello(p->arg, &c->base, &hello, tt->ack, &ack_len, &why);
		if (rc > 0)
			rc = -EPERM;
		if (!rc && ack_len > RPS_TR_ACK_MAX) {
			RPS_ERR("tcp: on_hello gave a %zu-byte ack (at most %d)", ack_len,
				RPS_TR_ACK_MAX);
			rc = -EMSGSIZE;
			why = "server error: ack too large";
		}
	}
	memset(&hello, 0, sizeof(hello));
	if (rc) {
		if (!why)
			why = "refused";
		RPS_WARN("refusing %s (role %u rank %u): %s", c->base.peer, c->base.hello.role,
			 c->base.hello.rank, why);
		tcp_send_error(c, rc, why);
		tcp_conn_fail(c, rc, 0, NULL);
		return rc;
	}
	hello_unlink(tt, c);
	c->phase = TCP_PH_OPEN;
	rps_proto_hdr_init(&h, RPS_OP_HELLO_ACK, (uint32_t)ack_len, 0);
	v.iov_base = tt->ack;
	v.iov_len = ack_len;
	rc = tcp_send_internal(c, &h, &v, ack_len ? 1 : 0);
	if (rc) {
		tcp_conn_fail(c, rc, 0, "hello ack: %s", strerror(-rc));
		return rc;
	}
	RPS_DEBUG("tcp: %s said hello (role %u rank %u)", c->base.peer, c->base.hello.role,
		  c->base.hello.rank);
	{
		struct rps_tr_event ev = {.type = RPS_TR_EV_ACCEPTED, .conn = &c->base};

		rc = tcp_evq_push(tt, &ev);
		if (rc) {
			tcp_conn_fail(c, rc, 0, "accept: out of memory");
			return rc;
		}
	}
	return 0;
}

/* Blocking I/O of exactly len bytes on a non-blocking socket, until deadline. */
static int io_full(int fd, void *buf, size_t len, uint64_t deadline, int writing)
{
	char *p = buf;

	while (len) {
		ssize_t n = writing ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			struct pollfd pfd = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
			uint64_t now = rps_now_ns();

			if (now >= deadline)
				return -ETIMEDOUT;
			n = poll(&pfd, 1, (int)RPS_MAX((deadline - now) / 1000000ull, 1));
			if (n < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		return errno == EPIPE ? -ECONNRESET : -errno;
	}
	return 0;
}

/* TCP connect to one address, up to deadline. fd or -errno. */
static int connect_one(const struct addrinfo *ai, uint64_t deadline)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err = 0;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			err = errno;
			goto err_close;
		}
		for (;;) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			uint64_t now = rps_now_ns();
			int n;

			if (now >= deadline) {
				err = ETIMEDOUT;
				goto err_close;
			}
			n = poll(&pfd, 1, (int)RPS_MAX((deadline - now) / 1000000ull, 1));
			if (n > 0)
				break;
			if (n < 0 && errno != EINTR) {
				err = errno;
				goto err_close;
			}
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		if (err)
			goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return -err;
}

struct tcp_hello_frame {
	struct rps_frame_hdr h;
	struct rps_hello hello;
};
_Static_assert(sizeof(struct tcp_hello_frame) == 72, "hello frame without padding");

static int tcp_connect(struct rps_transport *t, const char *host, uint16_t port,
		       const struct rps_hello *hello, void *ack, size_t ack_cap, size_t *ack_len_p,
		       int timeout_ms, struct rps_conn **conn_p)
{
	struct tcp_transport *tt = tt_of(t);
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	struct tcp_hello_frame req;
	struct rps_frame_hdr h;
	struct tcp_conn *c;
	char ports[8], peer[64];
	uint64_t deadline;
	int fd = -1, rc;

	if (!host || !hello || !conn_p)
		return -EINVAL;
	if (timeout_ms <= 0)
		timeout_ms = tt->timeout_ms;
	deadline = rps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	snprintf(ports, sizeof(ports), "%u", port);
	snprintf(peer, sizeof(peer), "%s:%u", host, port);
	rc = getaddrinfo(host, ports, &hints, &res);
	if (rc) {
		RPS_ERR("connect %s: %s", peer, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	rc = -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai, deadline);
		if (fd >= 0) {
			sockaddr_str(ai->ai_addr, peer, sizeof(peer));
			break;
		}
		rc = fd;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		/* callers retry a peer that is not up yet: that is not an error */
		if (rc == -ECONNREFUSED)
			RPS_DEBUG("connect %s: %s", peer, strerror(-rc));
		else
			RPS_ERR("connect %s: %s", peer, strerror(-rc));
		return rc;
	}
	set_nodelay(fd);

	rps_proto_hdr_init(&req.h, RPS_OP_HELLO, sizeof(req.hello), 0);
	req.hello = *hello;
	rc = io_full(fd, &req, sizeof(req), deadline, 1);
	memset(&req.hello.secret, 0, sizeof(req.hello.secret));
	if (rc)
		goto err_io;
	rc = io_full(fd, &h, sizeof(h), deadline, 0);
	if (rc)
		goto err_io;
	if (h.magic != RPS_PROTO_MAGIC || h.version != RPS_PROTO_VERSION ||
	    (h.op != RPS_OP_HELLO_ACK && h.op != RPS_OP_ERROR) || h.len > RPS_TR_ACK_MAX) {
		RPS_ERR("connect %s: bad answer to hello (magic 0x%08x version %u op %u len %u)",
			peer, h.magic, h.version, h.op, h.len);
		rc = -EPROTO;
		goto err_close;
	}
	if (h.op == RPS_OP_ERROR) {
		char text[RPS_TR_ACK_MAX + 1];

		rc = io_full(fd, text, h.len, deadline, 0);
		if (rc)
			goto err_io;
		text[h.len] = 0;
		rc = h.status < 0 ? h.status : -EPROTO;
		RPS_ERR("connect %s: refused: %s (%s)", peer, text, strerror(-rc));
		goto err_close;
	}
	if (h.len > ack_cap || (h.len && !ack)) {
		RPS_ERR("connect %s: hello ack of %u bytes, room for %zu", peer, h.len, ack_cap);
		rc = -EMSGSIZE;
		goto err_close;
	}
	rc = io_full(fd, ack, h.len, deadline, 0);
	if (rc)
		goto err_io;

	c = conn_new(tt, fd, peer, TCP_PH_OPEN);
	if (!c) {
		rc = -ENOMEM;
		RPS_ERR("connect %s: out of memory", peer);
		goto err_close;
	}
	c->base.hello = *hello;
	memset(c->base.hello.secret, 0, sizeof(c->base.hello.secret));
	rc = conn_add(tt, c);
	if (rc) {
		RPS_ERR("connect %s: epoll_ctl: %s", peer, strerror(-rc));
		conn_destroy(c); /* closes fd */
		return rc;
	}
	if (ack_len_p)
		*ack_len_p = h.len;
	*conn_p = &c->base;
	return 0;

err_io:
	RPS_ERR("connect %s: hello: %s", peer, strerror(-rc));
err_close:
	close(fd);
	return rc;
}

static void tcp_release(struct rps_transport *t, void *token)
{
	if (token)
		tcp_pool_put(&tt_of(t)->pool, token);
}

static int tcp_reg_mem(struct rps_transport *t, void *addr, size_t len, unsigned access,
		       struct rps_tr_mr *mr_p)
{
	mr_p->addr = addr;
	mr_p->len = len;
	mr_p->remote_addr = (uint64_t)(uintptr_t)addr;
	mr_p->remote_key = 0;
	mr_p->handle = 0;
	mr_p->priv = NULL;
	return 0;
}

static void tcp_dereg_mem(struct rps_transport *t, struct rps_tr_mr *mr)
{
	memset(mr, 0, sizeof(*mr));
}

static void tcp_close(struct rps_conn *bc)
{
	struct tcp_conn *c = rps_container_of(bc, struct tcp_conn, base);
	struct tcp_transport *tt = c->tt;
	struct tcp_conn *head;
	struct tcp_sreq *r;

	pthread_mutex_lock(&c->slock);
	if (c->user_closed) {
		pthread_mutex_unlock(&c->slock);
		RPS_ERR("tcp: %s closed twice", c->base.peer);
		return;
	}
	c->user_closed = 1;
	c->dead = 1;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR); /* the poller sees it and closes the socket */
	while ((r = c->sq_head)) {
		c->sq_head = r->next;
		rps_free(r);
	}
	c->sq_tail = NULL;
	c->sq_bytes = 0;
	c->done_n = 0;
	pthread_cond_broadcast(&c->scond);
	pthread_mutex_unlock(&c->slock);

	head = atomic_load(&tt->close_head);
	do {
		c->close_next = head;
	} while (!atomic_compare_exchange_weak(&tt->close_head, &head, c));
	tcp_kick(tt);
}

/* Poller: free the connections closed by their owner. */
static void process_closes(struct tcp_transport *tt)
{
	/* Take the close list before draining completions: a completion
	 * recorded before close() is then surely drained before the free. */
	struct tcp_conn *c = atomic_exchange(&tt->close_head, NULL);
	struct tcp_conn *list = tt->deferred;

	if (!c && !list)
		return;
	tt->deferred = NULL;
	while (c) {
		struct tcp_conn *next = c->close_next;

		c->close_next = list;
		list = c;
		c = next;
	}
	tcp_drain_done(tt);
	while ((c = list)) {
		int busy;

		list = c->close_next;
		pthread_mutex_lock(&c->slock);
		busy = c->nsenders > 0 || c->done_listed;
		pthread_mutex_unlock(&c->slock);
		if (busy) {
			c->close_next = tt->deferred;
			tt->deferred = c;
			continue;
		}
		tcp_conn_free(c);
	}
}

/* Poller: drop connections that did not say hello in time. */
static void expire_hellos(struct tcp_transport *tt, uint64_t now)
{
	while (tt->hello_head && tt->hello_head->hello_deadline <= now)
		tcp_conn_fail(tt->hello_head, -ETIMEDOUT, 0, "no hello within %d ms",
			      tt->timeout_ms);
}

static int evq_pop(struct tcp_transport *tt, struct rps_tr_event *ev, int max)
{
	struct tcp_evq *q = &tt->evq;
	int n = 0;

	while (n < max && q->head < q->tail)
		ev[n++] = q->ev[q->head++];
	if (q->head == q->tail)
		q->head = q->tail = 0;
	return n;
}

static void housekeeping(struct tcp_transport *tt)
{
	process_closes(tt);
	tcp_drain_done(tt);
	if (tt->hello_head)
		expire_hellos(tt, rps_now_ns());
}

static void handle(struct tcp_transport *tt, const struct epoll_event *e)
{
	int kind = *(int *)e->data.ptr;
	struct tcp_conn *c;

	if (kind == TCP_K_WAKE) {
		uint64_t v;

		atomic_store(&tt->wake_pending, 0);
		if (read(tt->wfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			RPS_ERR("tcp: eventfd read: %m");
		return;
	}
	if (kind == TCP_K_LISTENER) {
		tcp_accept(tt, rps_container_of(e->data.ptr, struct tcp_listener, kind));
		return;
	}
	c = rps_container_of(e->data.ptr, struct tcp_conn, kind);
	if (c->failed)
		return;
	if (e->events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
		if (tcp_rx(c) < 0)
			return; /* may be freed */
	}
	if ((e->events & EPOLLOUT) && !c->failed)
		tcp_out(c);
}

static int tcp_poll(struct rps_transport *t, struct rps_tr_event *ev, int max, int timeout_ms)
{
	struct tcp_transport *tt = tt_of(t);
	struct epoll_event evs[64];
	uint64_t deadline = 0;
	int first = 1;

	if (max <= 0)
		return 0;
	tcp_polling = tt;
	if (timeout_ms > 0)
		deadline = rps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		int wait, n;

		housekeeping(tt);
		if (tt->evq.head < tt->evq.tail)
			return evq_pop(tt, ev, max);
		if (atomic_exchange(&tt->user_wake, 0))
			return 0;
		if (timeout_ms == 0) {
			if (!first)
				return 0;
			wait = 0;
		} else if (timeout_ms < 0) {
			wait = -1;
		} else {
			uint64_t now = rps_now_ns();

			if (now >= deadline && !first)
				return 0;
			wait = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
		}
		if (tt->hello_head && wait != 0) {
			uint64_t now = rps_now_ns(), d = tt->hello_head->hello_deadline;
			int hw = d > now ? (int)((d - now + 999999) / 1000000) : 0;

			if (wait < 0 || hw < wait)
				wait = hw;
		}
		if (tt->deferred && (wait < 0 || wait > 10))
			wait = 10;
		atomic_store(&tt->sleeping, 1);
		if (atomic_load(&tt->done_head) || atomic_load(&tt->close_head))
			wait = 0;
		n = epoll_wait(tt->ep, evs, (int)RPS_ARRAY_SIZE(evs), wait);
		atomic_store(&tt->sleeping, 0);
		if (n < 0) {
			if (errno != EINTR) {
				RPS_ERR("tcp: epoll_wait: %m");
				return -errno;
			}
			n = 0;
		}
		for (int i = 0; i < n; i++)
			handle(tt, &evs[i]);
		first = 0;
	}
}

static void tcp_wake(struct rps_transport *t)
{
	struct tcp_transport *tt = tt_of(t);
	uint64_t one = 1;

	atomic_store(&tt->user_wake, 1);
	if (write(tt->wfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		RPS_ERR("tcp: eventfd write: %m");
}

uint64_t rps_tcp_pool_created(struct rps_transport *t)
{
	return atomic_load(&tt_of(t)->pool.created);
}

const struct rps_transport_ops rps_tcp_ops = {
    .name = "tcp",
    .create = tcp_create,
    .destroy = tcp_destroy,
    .listen = tcp_listen,
    .connect = tcp_connect,
    .post_send = tcp_post_send,
    .read_remote = NULL,
    .poll = tcp_poll,
    .release = tcp_release,
    .reg_mem = tcp_reg_mem,
    .dereg_mem = tcp_dereg_mem,
    .close = tcp_close,
    .wake = tcp_wake,
};
