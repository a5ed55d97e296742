/* TCP transport: the ops table, create/destroy and the poller (files: tcp_int.h).
 *
 * - epoll, level-triggered; non-blocking sockets with TCP_NODELAY; an eventfd
 *   for wake(). The poller reads at most TCP_RX_BUDGET bytes per connection
 *   per wake-up so that one busy peer cannot starve the others.
 * - connect(): blocking TCP connect (poll() with the timeout), HELLO frame,
 *   then HELLO_ACK (the ack payload is returned) or ERROR (its status is
 *   returned, its text logged).
 * - Listening side: an accepted socket must send its HELLO within the
 *   timeout; the handshake proves params.secret (tcp_listen.c), then params.on_hello;
 *   a refusal is answered with ERROR (status + reason) and the socket closed,
 *   an acceptance with HELLO_ACK and an ACCEPTED event.
 * - conn->hello: listening side, the peer's hello; connecting side, the hello
 *   we sent (with its nonce). No secret is ever in it.
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

static int tcp_create(const struct rps_tr_params *p, struct rps_transport **t_p)
{
	struct epoll_event e = {.events = EPOLLIN};
	struct tcp_transport *tt;
	uint64_t max_msg;
	int rc;

	if (!p->max_msg || p->timeout_ms <= 0) {
		/* the settings as given (rps_tr_params_from_config): no defaults here */
		RPS_ERR("tcp: transport parameters not set (max_msg %" PRIu64 ", timeout %d ms)",
			p->max_msg, p->timeout_ms);
		return -EINVAL;
	}
	tt = rps_calloc(1, sizeof(*tt));
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
	if (max_msg > UINT32_MAX)
		max_msg = UINT32_MAX; /* hdr.len is 32 bits */
	tt->max_msg = max_msg;
	tt->base.params.max_msg = max_msg;
	tt->timeout_ms = p->timeout_ms;
	tt->base.caps = RPS_TR_CAP_RECV_DEST;
	tt->base.max_frame = max_msg + sizeof(struct rps_frame_hdr);
	tt->base.max_read_sge = 0;
	tt->wake_kind = TCP_K_WAKE;
	tt->reserve_fd = -1;
	pthread_mutex_init(&tt->lock, NULL);
	atomic_init(&tt->done_head, NULL);
	atomic_init(&tt->close_head, NULL);
	atomic_init(&tt->sleeping, 0);
	atomic_init(&tt->wake_pending, 0);
	atomic_init(&tt->user_wake, 0);
	tcp_pool_init(&tt->pool);
	if (p->tls) {
		rc = tcp_tls_init(tt);
		if (rc)
			goto err_secret;
	}

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
	tcp_tls_fini(tt);
	rps_free(tt->secret);
	pthread_mutex_destroy(&tt->lock);
err_free:
	rps_free(tt);
	return rc;
}

static void tcp_destroy(struct rps_transport *t)
{
	struct tcp_transport *tt = tcp_tt(t);
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
	if (tt->reserve_fd >= 0)
		close(tt->reserve_fd);
	close(tt->wfd);
	close(tt->ep);
	tcp_tls_fini(tt);
	pthread_mutex_destroy(&tt->lock);
	rps_free(tt->secret);
	rps_free(tt);
}

static void tcp_release(struct rps_transport *t, void *token)
{
	if (token)
		tcp_pool_put(&tcp_tt(t)->pool, token);
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
	uint64_t now = rps_now_ns();

	tcp_process_closes(tt);
	tcp_drain_done(tt);
	if (tt->hello_head)
		expire_hellos(tt, now);
	if (tt->naccepted || tt->accept_resume_ns)
		tcp_limits_sweep(tt, now);
	/* only once the owner took every event: so a peer never has more
	 * than TCP_RX_FRAMES frames waiting in the event queue */
	if (tt->again && tt->evq.head == tt->evq.tail)
		tcp_again_run(tt);
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
	if (c->phase == TCP_PH_TLS) {
		/* RDMAPS_TLS=1: the TLS handshake first; then the hello may be in */
		if (tcp_tls_accept_step(c) < 0 || c->phase == TCP_PH_TLS)
			return; /* may be freed */
		tcp_rx(c);
		return;
	}
	if (e->events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
		/* a peer that does not read its answers is not read from either
		 * (its requests wait in the socket); errors are always taken */
		int skip = c->accepted && !(e->events & (EPOLLERR | EPOLLHUP)) &&
			   c->phase == TCP_PH_OPEN && tcp_rx_pause_check(c);

		if (!skip && tcp_rx(c) < 0)
			return; /* may be freed */
	}
	if ((e->events & EPOLLOUT) && !c->failed && tcp_out(c) < 0)
		tcp_conn_fail(c, -ECONNRESET, 0, NULL);
}

static int tcp_poll(struct rps_transport *t, struct rps_tr_event *ev, int max, int timeout_ms)
{
	struct tcp_transport *tt = tcp_tt(t);
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
		if (wait != 0) {
			int lw = tcp_limits_wait_ms(tt, rps_now_ns());

			if (lw >= 0 && (wait < 0 || lw < wait))
				wait = lw;
		}
		atomic_store(&tt->sleeping, 1);
		if (atomic_load(&tt->done_head) || atomic_load(&tt->close_head) || tt->again)
			wait = 0; /* (the event queue is empty here) */
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
	struct tcp_transport *tt = tcp_tt(t);
	uint64_t one = 1;

	atomic_store(&tt->user_wake, 1);
	if (write(tt->wfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		RPS_ERR("tcp: eventfd write: %m");
}

const struct rps_transport_ops rps_tcp_ops = {
    .name = "tcp",
    .create = tcp_create,
    .destroy = tcp_destroy,
    .listen = tcp_listen,
    .connect = tcp_connect,
    .post_send = tcp_post_send,
    .poll = tcp_poll,
    .release = tcp_release,
    .reg_mem = tcp_reg_mem,
    .dereg_mem = tcp_dereg_mem,
    .close = tcp_close,
    .wake = tcp_wake,
};
