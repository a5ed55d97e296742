/* TCP transport: the send path and the event queue.
 *
 * post_send writes header + iov at once when nothing is queued; what the
 * socket does not take is queued (copied for ctx == 0, referenced for
 * ctx != 0) and EPOLLOUT is armed; the poller flushes the queue, gathering
 * several queued frames per sendmsg. On a connection we opened, more than
 * TCP_SQ_MAX queued bytes make post_send wait (up to the timeout; on the
 * poller thread itself it flushes in place instead, since nobody else
 * would). On an accepted connection nobody waits: past params.sq_max the
 * peer is cut (cut_locked), and tcp_limits.c cuts one whose queue does not
 * move for the timeout. Completions found outside the
 * poller are kept per connection and handed over through tt->done_head.
 * Depends on tcp_pool.c only.
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

_Thread_local struct tcp_transport *tcp_polling;

int tcp_evq_push(struct tcp_transport *tt, const struct rps_tr_event *ev)
{
	struct tcp_evq *q = &tt->evq;

	if (q->tail == q->cap) {
		if (q->head > 0) {
			memmove(q->ev, q->ev + q->head, (q->tail - q->head) * sizeof(*q->ev));
			q->tail -= q->head;
			q->head = 0;
		} else {
			size_t ncap = q->cap ? q->cap * 2 : 256;
			struct rps_tr_event *n = rps_realloc(q->ev, ncap * sizeof(*n));

			if (!n) {
				RPS_ERR("tcp: event queue: out of memory");
				return -ENOMEM;
			}
			q->ev = n;
			q->cap = ncap;
		}
	}
	q->ev[q->tail++] = *ev;
	return 0;
}

void tcp_kick(struct tcp_transport *tt)
{
	uint64_t one = 1;

	if (!atomic_load(&tt->sleeping))
		return;
	if (atomic_exchange(&tt->wake_pending, 1))
		return;
	if (write(tt->wfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		RPS_ERR("tcp: eventfd write: %m");
}

/* slock held. */
static void done_add(struct tcp_conn *c, uint64_t ctx, int status)
{
	struct tcp_transport *tt = c->tt;

	if (c->done_n == c->done_cap) {
		uint32_t ncap = c->done_cap ? c->done_cap * 2 : 16;
		struct tcp_done *n = rps_realloc(c->done, ncap * sizeof(*n));

		if (!n) {
			RPS_ERR("send to %s: completion queue: out of memory", c->base.peer);
			return;
		}
		c->done = n;
		c->done_cap = ncap;
	}
	c->done[c->done_n].ctx = ctx;
	c->done[c->done_n].status = status;
	c->done_n++;
	if (!c->done_listed) {
		struct tcp_conn *head = atomic_load(&tt->done_head);

		c->done_listed = 1;
		do {
			c->done_next = head;
		} while (!atomic_compare_exchange_weak(&tt->done_head, &head, c));
		tcp_kick(tt);
	}
}

/* Poller, slock held: move c's completions to the event queue. */
static void done_to_events(struct tcp_conn *c)
{
	for (uint32_t i = 0; i < c->done_n; i++) {
		struct rps_tr_event ev = {.type = RPS_TR_EV_SEND_DONE,
					  .conn = &c->base,
					  .status = c->done[i].status,
					  .ctx = c->done[i].ctx};

		if (!c->user_closed)
			tcp_evq_push(c->tt, &ev);
	}
	c->done_n = 0;
}

void tcp_drain_done(struct tcp_transport *tt)
{
	struct tcp_conn *c = atomic_exchange(&tt->done_head, NULL);

	while (c) {
		struct tcp_conn *next = c->done_next; /* before done_listed is cleared */

		pthread_mutex_lock(&c->slock);
		done_to_events(c);
		c->done_listed = 0;
		pthread_mutex_unlock(&c->slock);
		c = next;
	}
}

/* slock held. */
static int set_events(struct tcp_conn *c, int out, int rx_paused)
{
	struct epoll_event e = {.events = (rx_paused ? 0 : EPOLLIN) | (out ? EPOLLOUT : 0),
				.data.ptr = &c->kind};

	if (c->fd < 0)
		return -EBADF;
	if (epoll_ctl(c->tt->ep, EPOLL_CTL_MOD, c->fd, &e) < 0) {
		RPS_ERR("send to %s: epoll_ctl: %m", c->base.peer);
		return -errno;
	}
	c->out_armed = out;
	c->rx_paused = rx_paused;
	return 0;
}

static void set_out(struct tcp_conn *c, int on)
{
	if (c->out_armed != on)
		set_events(c, on, c->rx_paused);
}

void tcp_want_out(struct tcp_conn *c, int on)
{
	pthread_mutex_lock(&c->slock);
	set_out(c, on);
	pthread_mutex_unlock(&c->slock);
}

int tcp_rx_pause_check(struct tcp_conn *c)
{
	int paused;

	pthread_mutex_lock(&c->slock);
	if (!c->rx_paused && c->sq_bytes >= TCP_RX_PAUSE_BYTES)
		set_events(c, c->out_armed, 1);
	paused = c->rx_paused;
	pthread_mutex_unlock(&c->slock);
	return paused;
}

/* slock held: a write failed. The poller sees the reset and reports it. */
static int write_failed(struct tcp_conn *c, int err)
{
	if (!c->wr_err)
		RPS_WARN("send to %s: %s", c->base.peer, strerror(err));
	c->wr_err = -ECONNRESET;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	return -ECONNRESET;
}

/* One non-blocking sendmsg, retried on EINTR: the bytes it took, -EAGAIN if
 * the socket is full, or -ECONNRESET (write_failed) if the connection broke. */
static ssize_t send_some(struct tcp_conn *c, const struct msghdr *msg)
{
	ssize_t n;

	do
		n = c->ssl ? tcp_tls_sendmsg(c, msg)
			   : sendmsg(c->fd, msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return -EAGAIN;
	return write_failed(c, errno);
}

/* slock held: write as much of the queue as the socket takes.
 * 0, or -ECONNRESET if the connection broke. */
static int flush_locked(struct tcp_conn *c)
{
	struct iovec v[TCP_IOV_BATCH];
	uint64_t before = c->sq_bytes;

	if (c->ssl) { /* TLS: the ciphertext gathered first (tcp_tls.c) */
		int rc = tcp_tls_flush(c);

		if (rc < 0)
			return write_failed(c, -rc);
	}
	while (c->sq_head) {
		struct msghdr msg = {.msg_iov = v};
		struct tcp_sreq *r;
		size_t want = 0;
		ssize_t n;
		int cnt = 0;

		for (r = c->sq_head; r && cnt < TCP_IOV_BATCH; r = r->next)
			for (int i = r->idx; i < r->iovcnt && cnt < TCP_IOV_BATCH; i++) {
				v[cnt++] = r->iov[i];
				want += r->iov[i].iov_len;
			}
		msg.msg_iovlen = (size_t)cnt;
		n = send_some(c, &msg);
		if (n == -EAGAIN)
			break;
		if (n < 0)
			return (int)n;
		c->sq_bytes -= (uint64_t)n;
		if (n > 0)
			c->last_tx_ns = rps_now_ns();
		while (n > 0) {
			r = c->sq_head;
			while (n > 0 && r->idx < r->iovcnt) {
				struct iovec *io = &r->iov[r->idx];
				size_t take = RPS_MIN((size_t)n, io->iov_len);

				io->iov_base = (char *)io->iov_base + take;
				io->iov_len -= take;
				r->left -= take;
				n -= (ssize_t)take;
				if (io->iov_len == 0)
					r->idx++;
			}
			if (r->left)
				break;
			c->sq_head = r->next;
			if (!c->sq_head)
				c->sq_tail = NULL;
			if (r->ctx)
				done_add(c, r->ctx, 0);
			rps_free(r);
		}
		if ((size_t)n < want)
			break; /* the socket is full: don't ask again */
	}
	if (!c->sq_head)
		set_out(c, c->ssl && tcp_tls_out_pending(c));
	if (c->sq_bytes < before && c->nsenders)
		pthread_cond_broadcast(&c->scond);
	return 0;
}

/* slock held: queue v[0..cnt) (`left` bytes; v[0] may be partly written).
 * hdr_first: v[0] is (the rest of) the caller's header, which lives on the
 * caller's stack and is therefore always copied. */
static int enqueue(struct tcp_conn *c, const struct rps_frame_hdr *hdr, const struct iovec *v,
		   int cnt, int hdr_first, uint64_t left, uint64_t ctx)
{
	struct tcp_sreq *r;

	if (!ctx) {
		char *p;

		r = rps_malloc(sizeof(*r) + sizeof(struct iovec) + left);
		if (!r)
			return -ENOMEM;
		p = (char *)(r->iov + 1);
		r->iov[0].iov_base = p;
		r->iov[0].iov_len = left;
		r->iovcnt = 1;
		for (int j = 0; j < cnt; j++) {
			memcpy(p, v[j].iov_base, v[j].iov_len);
			p += v[j].iov_len;
		}
	} else {
		r = rps_malloc(sizeof(*r) + (size_t)cnt * sizeof(struct iovec));
		if (!r)
			return -ENOMEM;
		r->iovcnt = 0;
		for (int j = 0; j < cnt; j++) {
			char *base = v[j].iov_base;

			if (v[j].iov_len == 0)
				continue;
			if (j == 0 && hdr_first) {
				r->hdr = *hdr;
				base = (char *)&r->hdr + (sizeof(*hdr) - v[j].iov_len);
			}
			r->iov[r->iovcnt].iov_base = base;
			r->iov[r->iovcnt].iov_len = v[j].iov_len;
			r->iovcnt++;
		}
	}
	r->next = NULL;
	r->ctx = ctx;
	r->left = left;
	r->idx = 0;
	if (!c->sq_head)
		c->last_tx_ns = rps_now_ns(); /* the stall clock starts */
	if (c->sq_tail)
		c->sq_tail->next = r;
	else
		c->sq_head = r;
	c->sq_tail = r;
	c->sq_bytes += left;
	set_out(c, 1);
	return 0;
}

/* slock held: wait until `frame` more bytes fit in the queue. */
static int wait_room(struct tcp_conn *c, uint64_t frame)
{
	struct tcp_transport *tt = c->tt;
	uint64_t deadline = rps_now_ns() + (uint64_t)tt->timeout_ms * 1000000ull;
	struct timespec abs;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &abs);
	abs.tv_sec += tt->timeout_ms / 1000;
	abs.tv_nsec += (long)(tt->timeout_ms % 1000) * 1000000L;
	if (abs.tv_nsec >= 1000000000L) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000L;
	}
	c->nsenders++;
	while (!c->dead && !c->wr_err && c->sq_head && c->sq_bytes + frame > TCP_SQ_MAX) {
		if (tcp_polling == tt) {
			/* We are the poller: nobody else will flush. */
			struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
			uint64_t now = rps_now_ns();

			if (flush_locked(c) < 0)
				break;
			if (!c->sq_head || c->sq_bytes + frame <= TCP_SQ_MAX)
				break;
			if (now >= deadline) {
				rc = -ETIMEDOUT;
				break;
			}
			poll(&pfd, 1, (int)RPS_MAX((deadline - now) / 1000000ull, 1));
			continue;
		}
		if (pthread_cond_timedwait(&c->scond, &c->slock, &abs) == ETIMEDOUT) {
			if (!c->dead && c->sq_head && c->sq_bytes + frame > TCP_SQ_MAX)
				rc = -ETIMEDOUT;
			break;
		}
	}
	c->nsenders--;
	if (c->dead || c->wr_err)
		return -ECONNRESET;
	if (rc)
		RPS_WARN("send to %s: %llu bytes queued for %d ms, peer not reading", c->base.peer,
			 (unsigned long long)c->sq_bytes, tt->timeout_ms);
	return rc;
}

/* slock held: an accepted peer would hold more than its share of queued
 * output. It is cut, never waited on: the poller (or an update thread) must
 * not stop for one peer that does not read. */
static int cut_locked(struct tcp_conn *c, uint64_t frame, uint64_t cap)
{
	RPS_LOG_RATELIMITED(RPS_LOG_WARN,
			    "closing %s: peer not reading: %llu bytes queued, %llu more would pass "
			    "the limit of %llu (RDMAPS_SEND_QUEUE_BYTES)",
			    c->base.peer, (unsigned long long)c->sq_bytes,
			    (unsigned long long)frame, (unsigned long long)cap);
	c->wr_err = -ECONNRESET;
	tcp_abort_on_close(c);
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR); /* the poller (tcp_limits.c) fails it */
	return -ECONNRESET;
}

static int send_frame(struct tcp_conn *c, const struct rps_frame_hdr *hdr, const struct iovec *iov,
		      int iovcnt, uint64_t ctx, uint64_t limit)
{
	struct iovec small[16], *v = small;
	size_t total = sizeof(*hdr), done = 0;
	int cnt, rc = 0;

	if (hdr->len > limit)
		return -EMSGSIZE;
	if (iovcnt < 0 || iovcnt > TCP_IOV_MAX - 1 || (iovcnt && !iov))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (total - sizeof(*hdr) != hdr->len)
		return -EINVAL;
	cnt = iovcnt + 1;
	if (cnt > (int)RPS_ARRAY_SIZE(small)) {
		v = rps_malloc((size_t)cnt * sizeof(*v));
		if (!v)
			return -ENOMEM;
	}
	v[0].iov_base = (void *)hdr;
	v[0].iov_len = sizeof(*hdr);
	for (int i = 0; i < iovcnt; i++)
		v[i + 1] = iov[i];

	pthread_mutex_lock(&c->slock);
	if (c->dead || c->wr_err) {
		rc = -ECONNRESET;
		goto out_unlock;
	}
	if (c->accepted) {
		uint64_t cap = c->tt->base.params.sq_max ? c->tt->base.params.sq_max : TCP_SQ_MAX;

		/* one frame always fits an empty queue, whatever its size */
		if (c->sq_head && c->sq_bytes + total > cap) {
			rc = cut_locked(c, total, cap);
			goto out_unlock;
		}
	} else if (c->sq_head && c->sq_bytes + total > TCP_SQ_MAX) {
		rc = wait_room(c, total);
		if (rc)
			goto out_unlock;
	}
	if (!c->sq_head) {
		/* Nothing queued: write straight away. */
		int first = 0;

		while (done < total) {
			int k = RPS_MIN(cnt - first, TCP_IOV_MAX);
			struct msghdr msg = {.msg_iov = v + first, .msg_iovlen = (size_t)k};
			size_t want = 0;
			ssize_t n;

			for (int i = 0; i < k; i++)
				want += v[first + i].iov_len;
			n = send_some(c, &msg);
			if (n == -EAGAIN)
				break;
			if (n < 0) {
				rc = (int)n;
				goto out_unlock;
			}
			done += (size_t)n;
			/* advance v (our copy) past what went out */
			for (size_t m = (size_t)n; m > 0;) {
				size_t take = RPS_MIN(m, v[first].iov_len);

				v[first].iov_base = (char *)v[first].iov_base + take;
				v[first].iov_len -= take;
				m -= take;
				if (v[first].iov_len == 0)
					first++;
			}
			while (first < cnt && v[first].iov_len == 0)
				first++;
			if ((size_t)n < want)
				break; /* the socket is full */
		}
		if (done == total) {
			if (ctx)
				done_add(c, ctx, 0);
			if (c->ssl && tcp_tls_out_pending(c))
				set_out(c, 1); /* TLS: ciphertext left to send */
			goto out_unlock;
		}
		rc = enqueue(c, hdr, v + first, cnt - first, first == 0, total - done, ctx);
	} else {
		rc = enqueue(c, hdr, v, cnt, 1, total, ctx);
	}
	if (rc)
		RPS_ERR("send to %s: queue: %s", c->base.peer, strerror(-rc));
out_unlock:
	pthread_mutex_unlock(&c->slock);
	if (v != small)
		rps_free(v);
	return rc;
}

int tcp_post_send(struct rps_conn *bc, const struct rps_frame_hdr *hdr, const struct iovec *iov,
		  int iovcnt, uint64_t ctx)
{
	struct tcp_conn *c = rps_container_of(bc, struct tcp_conn, base);

	return send_frame(c, hdr, iov, iovcnt, ctx, c->tt->max_msg);
}

int tcp_send_internal(struct tcp_conn *c, const struct rps_frame_hdr *hdr, const struct iovec *iov,
		      int iovcnt)
{
	return send_frame(c, hdr, iov, iovcnt, 0, UINT32_MAX);
}

int tcp_out(struct tcp_conn *c)
{
	int rc = 0;

	pthread_mutex_lock(&c->slock);
	if (!c->dead && !c->wr_err)
		rc = flush_locked(c);
	if (rc == 0 && c->rx_paused && c->sq_bytes < TCP_RX_PAUSE_BYTES / 2) {
		set_events(c, c->out_armed, 0); /* the peer reads again: so do we */
		c->rx_deadline = 0;		 /* its frame's clock starts again */
		tcp_again_add(c);		 /* whole frames may wait staged */
	}
	pthread_mutex_unlock(&c->slock);
	return rc < 0 ? -ECONNRESET : 0;
}

/* slock held, queue empty: best effort, never blocks. */
static void send_error_locked(struct tcp_conn *c, int status, const char *why)
{
	struct rps_frame_hdr h;
	size_t n = RPS_MIN(strlen(why), (size_t)TCP_ERR_TEXT_MAX);
	struct iovec v[2] = {{&h, sizeof(h)}, {(void *)why, n}};
	struct msghdr msg = {.msg_iov = v, .msg_iovlen = 2};

	rps_proto_hdr_init(&h, RPS_OP_ERROR, (uint32_t)n, 0);
	h.status = status;
	if ((c->ssl ? tcp_tls_sendmsg(c, &msg)
		    : sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0)
		RPS_DEBUG("error frame to %s: %m", c->base.peer);
}

void tcp_send_error(struct tcp_conn *c, int status, const char *why)
{
	pthread_mutex_lock(&c->slock);
	if (!c->dead && !c->wr_err && !c->sq_head && c->fd >= 0)
		send_error_locked(c, status, why);
	pthread_mutex_unlock(&c->slock);
}

void tcp_send_end_locked(struct tcp_conn *c, int status, const char *why)
{
	struct tcp_sreq *r;

	if (why && !c->dead && !c->wr_err && !c->sq_head && c->fd >= 0)
		send_error_locked(c, status, why);
	c->dead = 1;
	/* completions in order: what was written, then what never will be */
	done_to_events(c);
	while ((r = c->sq_head)) {
		c->sq_head = r->next;
		if (r->ctx && !c->user_closed) {
			struct rps_tr_event ev = {.type = RPS_TR_EV_SEND_DONE,
						  .conn = &c->base,
						  .status = -ECONNRESET,
						  .ctx = r->ctx};

			tcp_evq_push(c->tt, &ev);
		}
		rps_free(r);
	}
	c->sq_tail = NULL;
	c->sq_bytes = 0;
}
