/* TCP transport: the send path, the receive state machine, failures.
 *
 * Send: post_send writes header + iov at once when nothing is queued; what
 * the socket does not take is queued (copied for ctx == 0, referenced for
 * ctx != 0) and EPOLLOUT is armed; the poller flushes the queue, gathering
 * several queued frames per sendmsg. More than TCP_SQ_MAX queued bytes make
 * post_send wait (up to the timeout; on the poller thread itself it flushes
 * in place instead, since nobody else would).
 *
 * Receive: bytes are read into a per-connection staging buffer and parsed
 * there (header, check, fixed part, check, data), so a burst of small frames
 * costs one read. Data of at least TCP_DIRECT_MIN bytes is read in place
 * (readv into the destination, with the staging buffer as the second iovec
 * to catch the start of the next frame): into params.recv_dest memory when
 * the callback gives some, else into a pool buffer.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/tcp/tcp.h"

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
static void set_out(struct tcp_conn *c, int on)
{
	struct epoll_event e = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = &c->kind};

	if (c->out_armed == on || c->fd < 0)
		return;
	if (epoll_ctl(c->tt->ep, EPOLL_CTL_MOD, c->fd, &e) < 0) {
		RPS_ERR("send to %s: epoll_ctl: %m", c->base.peer);
		return;
	}
	c->out_armed = on;
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

/* slock held: write as much of the queue as the socket takes.
 * 0, or -ECONNRESET if the connection broke. */
static int flush_locked(struct tcp_conn *c)
{
	struct iovec v[TCP_IOV_BATCH];
	uint64_t before = c->sq_bytes;

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
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return write_failed(c, errno);
		}
		c->sq_bytes -= (uint64_t)n;
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
		set_out(c, 0);
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
	if (c->sq_head && c->sq_bytes + total > TCP_SQ_MAX) {
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
			n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					break;
				rc = write_failed(c, errno);
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

void tcp_out(struct tcp_conn *c)
{
	int rc = 0;

	pthread_mutex_lock(&c->slock);
	if (!c->dead && !c->wr_err)
		rc = flush_locked(c);
	pthread_mutex_unlock(&c->slock);
	if (rc < 0)
		tcp_conn_fail(c, -ECONNRESET, 0, NULL);
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
	if (sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		RPS_DEBUG("error frame to %s: %m", c->base.peer);
}

void tcp_send_error(struct tcp_conn *c, int status, const char *why)
{
	pthread_mutex_lock(&c->slock);
	if (!c->dead && !c->wr_err && !c->sq_head && c->fd >= 0)
		send_error_locked(c, status, why);
	pthread_mutex_unlock(&c->slock);
}

void tcp_conn_fail(struct tcp_conn *c, int status, int send_error, const char *fmt, ...)
{
	struct tcp_transport *tt = c->tt;
	char why[256] = "";
	struct tcp_sreq *r;
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
		if (send_error || status != -ECONNRESET)
			RPS_WARN("closing %s: %s", c->base.peer, why);
		else
			RPS_INFO("closing %s: %s", c->base.peer, why);
	}
	if (send_error && !c->dead && !c->wr_err && !c->sq_head && c->fd >= 0)
		send_error_locked(c, status, why);
	c->dead = 1;
	/* completions in order: what was written, then what never will be */
	done_to_events(c);
	while ((r = c->sq_head)) {
		c->sq_head = r->next;
		if (r->ctx && !user_closed) {
			struct rps_tr_event ev = {.type = RPS_TR_EV_SEND_DONE,
						  .conn = &c->base,
						  .status = -ECONNRESET,
						  .ctx = r->ctx};

			tcp_evq_push(tt, &ev);
		}
		rps_free(r);
	}
	c->sq_tail = NULL;
	c->sq_bytes = 0;
	if (c->fd >= 0) {
		epoll_ctl(tt->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	pthread_cond_broadcast(&c->scond);
	pthread_mutex_unlock(&c->slock);

	if (c->rx_buf) {
		tcp_pool_put(&tt->pool, c->rx_buf);
		c->rx_buf = NULL;
	}
	if (c->phase == TCP_PH_HELLO) {
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

/* A frame failed a check: log it with what we saw, answer ERROR, close. */
static int rx_bad(struct tcp_conn *c, int status, const char *why)
{
	const struct rps_frame_hdr *h = &c->rx_hdr;

	tcp_conn_fail(c, status, 1, "%s (magic 0x%08x version %u op %u len %u)", why, h->magic,
		      h->version, h->op, h->len);
	return status;
}

static int rx_emit(struct tcp_conn *c)
{
	struct rps_tr_event ev = {.type = RPS_TR_EV_RECV,
				  .conn = &c->base,
				  .hdr = c->rx_hdr,
				  .fixed = c->rx_buf->fixed,
				  .data = c->rx_data_len ? c->rx_dst : NULL,
				  .data_len = c->rx_data_len,
				  .token = c->rx_buf};
	int rc = tcp_evq_push(c->tt, &ev);

	if (rc < 0) {
		tcp_conn_fail(c, rc, 0, "receive: out of memory");
		return rc;
	}
	c->rx_buf = NULL;
	c->rx_dst = NULL;
	c->rx_state = TCP_RX_HDR;
	return 0;
}

static int rx_hdr_in(struct tcp_conn *c)
{
	uint64_t max = c->phase == TCP_PH_HELLO ? sizeof(struct rps_hello) : c->tt->max_msg;
	const char *why = NULL;
	int rc = rps_proto_hdr_check(&c->rx_hdr, max, &why);

	if (rc)
		return rx_bad(c, rc, why);
	if (c->phase == TCP_PH_HELLO && c->rx_hdr.op != RPS_OP_HELLO)
		return rx_bad(c, -EPROTO, "expected a hello");
	if (c->phase == TCP_PH_OPEN && c->rx_hdr.op == RPS_OP_HELLO)
		return rx_bad(c, -EPROTO, "unexpected hello");
	c->rx_fixed_len = (uint32_t)rps_proto_fixed_len(c->rx_hdr.op);
	c->rx_data_len = c->rx_hdr.len - c->rx_fixed_len;
	c->rx_got = 0;
	c->rx_state = TCP_RX_FIXED;
	return 0;
}

static int rx_fixed_in(struct tcp_conn *c)
{
	struct tcp_transport *tt = c->tt;
	const struct rps_tr_params *p = &tt->base.params;
	const char *why = NULL;
	void *dest = NULL;
	int rc;

	if (c->rx_fixed_len) {
		rc = rps_proto_payload_check(&c->rx_hdr, c->rx_fixed, &why);
		if (rc)
			return rx_bad(c, rc, why);
	}
	if (c->phase == TCP_PH_HELLO) {
		rc = tcp_hello_in(c);
		if (rc == 0)
			c->rx_state = TCP_RX_HDR;
		return rc;
	}
	if (c->rx_data_len && p->recv_dest)
		dest = p->recv_dest(p->arg, &c->base, &c->rx_hdr, c->rx_fixed);
	c->rx_buf = tcp_pool_get(&tt->pool, dest ? 0 : c->rx_data_len);
	if (!c->rx_buf) {
		tcp_conn_fail(c, -ENOMEM, 1, "no buffer for a %llu-byte frame",
			      (unsigned long long)c->rx_hdr.len);
		return -ENOMEM;
	}
	memcpy(c->rx_buf->fixed, c->rx_fixed, c->rx_fixed_len);
	c->rx_dst = dest ? dest : c->rx_buf->data;
	if (!c->rx_data_len)
		return rx_emit(c);
	c->rx_state = TCP_RX_DATA;
	return 0;
}

/* Consume the staged bytes. <0: the connection failed. */
static int rx_parse(struct tcp_conn *c)
{
	for (;;) {
		size_t avail = c->stage_len - c->stage_pos;
		uint8_t *p = c->stage + c->stage_pos;
		size_t n;
		int rc;

		switch (c->rx_state) {
		case TCP_RX_HDR:
			if (avail < sizeof(c->rx_hdr))
				return 0;
			memcpy(&c->rx_hdr, p, sizeof(c->rx_hdr));
			c->stage_pos += sizeof(c->rx_hdr);
			rc = rx_hdr_in(c);
			break;
		case TCP_RX_FIXED:
			if (avail < c->rx_fixed_len)
				return 0;
			memcpy(c->rx_fixed, p, c->rx_fixed_len);
			c->stage_pos += c->rx_fixed_len;
			rc = rx_fixed_in(c);
			break;
		default: /* TCP_RX_DATA */
			n = (size_t)RPS_MIN((uint64_t)avail, c->rx_data_len - c->rx_got);
			if (n == 0)
				return 0;
			memcpy(c->rx_dst + c->rx_got, p, n);
			c->rx_got += n;
			c->stage_pos += n;
			if (c->rx_got < c->rx_data_len)
				return 0;
			rc = rx_emit(c);
			break;
		}
		if (rc)
			return rc;
	}
}

int tcp_rx(struct tcp_conn *c)
{
	uint64_t total = 0;

	for (;;) {
		struct iovec v[2];
		size_t direct = 0, want;
		ssize_t n;
		int cnt = 0, rc, short_read;

		rc = rx_parse(c);
		if (rc)
			return rc;
		if (total >= TCP_RX_BUDGET)
			return 0; /* level-triggered: epoll reports the rest */
		if (c->stage_pos) {
			memmove(c->stage, c->stage + c->stage_pos, c->stage_len - c->stage_pos);
			c->stage_len -= c->stage_pos;
			c->stage_pos = 0;
		}
		if (c->rx_state == TCP_RX_DATA && c->rx_data_len - c->rx_got >= TCP_DIRECT_MIN) {
			/* the staging buffer is empty here: rx_parse consumed it */
			direct = (size_t)(c->rx_data_len - c->rx_got);
			v[cnt].iov_base = c->rx_dst + c->rx_got;
			v[cnt++].iov_len = direct;
		}
		v[cnt].iov_base = c->stage + c->stage_len;
		v[cnt++].iov_len = TCP_STAGE_BYTES - c->stage_len;
		want = direct + (TCP_STAGE_BYTES - c->stage_len);
		n = readv(c->fd, v, cnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			tcp_conn_fail(c, -ECONNRESET, 0, "read: %m");
			return -ECONNRESET;
		}
		if (n == 0) {
			int mid = c->rx_state != TCP_RX_HDR || c->stage_len;

			if (c->phase == TCP_PH_HELLO)
				tcp_conn_fail(c, -ECONNRESET, 0, "peer closed before its hello");
			else
				tcp_conn_fail(c, -ECONNRESET, 0, "peer closed%s",
					      mid ? " in the middle of a frame" : "");
			return -ECONNRESET;
		}
		total += (uint64_t)n;
		short_read = (size_t)n < want;
		if (direct) {
			size_t k = RPS_MIN((size_t)n, direct);

			c->rx_got += k;
			n -= (ssize_t)k;
			if (c->rx_got == c->rx_data_len) {
				rc = rx_emit(c);
				if (rc)
					return rc;
			}
		}
		c->stage_len += (size_t)n;
		if (short_read) {
			/* the socket is drained: parse what came and stop */
			rc = rx_parse(c);
			return rc < 0 ? rc : 0;
		}
	}
}
