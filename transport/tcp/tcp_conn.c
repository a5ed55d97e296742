/* TCP transport: connection objects and their end. A connection is made by
 * tcp_conn_new, listed by tcp_conn_add, failed by tcp_conn_fail (the poller:
 * socket closed, CLOSED event or, in the hello phase, freed), closed by its
 * owner with close() (any thread) and freed by the poller in
 * tcp_process_closes once no sender is inside it. Depends on tcp_send.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/tcp/tcp_int.h"

void tcp_sockaddr_str(const struct sockaddr *sa, char *out, size_t n)
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

void tcp_set_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		RPS_DEBUG("tcp: TCP_NODELAY: %m");
}

struct tcp_conn *tcp_conn_new(struct tcp_transport *tt, int fd, const char *peer, int phase)
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
	pthread_mutex_init(&c->tlock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->scond, &ca);
	pthread_condattr_destroy(&ca);
	return c;
}

/* Memory and socket of a connection nobody else can see yet (or any more). */
void tcp_conn_destroy(struct tcp_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	tcp_tls_ssl_free(c->ssl);
	pthread_mutex_destroy(&c->tlock);
	pthread_cond_destroy(&c->scond);
	pthread_mutex_destroy(&c->slock);
	rps_free(c->done);
	rps_free(c->stage);
	rps_free(c);
}

/* Poller: c's socket is closed; it leaves the admission counts. */
void tcp_conn_uncount(struct tcp_conn *c)
{
	if (c->counted) {
		c->counted = 0;
		c->tt->naccepted--;
	}
}

/* Take c off tt->conns (the list destroy frees). */
static void conns_unlink(struct tcp_transport *tt, struct tcp_conn *c)
{
	pthread_mutex_lock(&tt->lock);
	if (c->aprev)
		c->aprev->anext = c->anext;
	else
		tt->conns = c->anext;
	if (c->anext)
		c->anext->aprev = c->aprev;
	pthread_mutex_unlock(&tt->lock);
}

/* Register with epoll, then make it known (destroy frees what is on tt->conns).
 * From here on a concurrent poll() may report events for it. */
int tcp_conn_add(struct tcp_transport *tt, struct tcp_conn *c)
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

		conns_unlink(tt, c);
		return rc;
	}
	return 0;
}

void tcp_hello_unlink(struct tcp_transport *tt, struct tcp_conn *c)
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
	tcp_again_del(c);
	if (c->rx_buf)
		tcp_pool_discard(&tt->pool, c->rx_buf);
	if (c->phase != TCP_PH_OPEN)
		tcp_hello_unlink(tt, c);
	while ((r = c->sq_head)) {
		c->sq_head = r->next;
		rps_free(r);
	}

	conns_unlink(tt, c);
	tcp_conn_uncount(c);
	tcp_conn_destroy(c);
}

void tcp_conn_fail(struct tcp_conn *c, int status, int send_error, const char *fmt, ...)
{
	struct tcp_transport *tt = c->tt;
	char why[256] = "";
	int user_closed;

	if (c->failed)
		return;
	c->failed = 1;
	if (fmt) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
	}

	pthread_mutex_lock(&c->slock);
	user_closed = c->user_closed;
	if (fmt && !user_closed) {
		/* a flood of bad peers must not flood the log */
		if (send_error || status != -ECONNRESET)
			RPS_LOG_RATELIMITED_EX(RPS_LOG_WARN, RPS_LOG_RL_MS, 20, "closing %s: %s",
					       c->base.peer, why);
		else
			RPS_LOG_RATELIMITED_EX(RPS_LOG_INFO, RPS_LOG_RL_MS, 20, "closing %s: %s",
					       c->base.peer, why);
	}
	tcp_send_end_locked(c, status, send_error ? why : NULL);
	if (c->fd >= 0) {
		epoll_ctl(tt->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	tcp_conn_uncount(c); /* its descriptor is free: it no longer counts */
	pthread_cond_broadcast(&c->scond);
	pthread_mutex_unlock(&c->slock);

	if (c->rx_buf) {
		tcp_pool_discard(&tt->pool, c->rx_buf);
		c->rx_buf = NULL;
	}
	if (c->phase != TCP_PH_OPEN) {
		tcp_conn_free(c);
		return;
	}
	if (!user_closed) {
		struct rps_tr_event ev = {
		    .type = RPS_TR_EV_CLOSED, .conn = &c->base, .status = status};

		if (tcp_evq_push(tt, &ev) < 0)
			RPS_ERR("closing %s: CLOSED event lost", c->base.peer);
	}
}

void tcp_close(struct rps_conn *bc)
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
void tcp_process_closes(struct tcp_transport *tt)
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
