/* RDMA transport: the send side and the pending-event queue. SENDs with
 * credits (a zero-length credit frame returns them when no data does), the
 * wait for credits, slots and buffers, the drain marker. No malloc,
 * registration or lock beyond the connection's post lock per message.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/rdma/rdma_int.h"

/* ---------------------------------------------------------- event queue */

void rps_rdma_evq_push(struct rps_rdma_transport *t, const struct rps_tr_event *ev)
{
	struct rps_rdma_evq *q = &t->evq;

	if (q->tail - q->head == q->cap) {
		uint32_t ncap = q->cap ? 2 * q->cap : 1024;
		struct rps_tr_event *n = rps_malloc(ncap * sizeof(*n));

		if (!n) {
			RPS_ERR("rdma: out of memory for the event queue: event %d dropped",
				ev->type);
			return;
		}
		for (uint32_t i = 0; i < q->tail - q->head; i++)
			n[i] = q->ev[(q->head + i) % (q->cap ? q->cap : 1)];
		q->tail -= q->head;
		q->head = 0;
		rps_free(q->ev);
		q->ev = n;
		q->cap = ncap;
	}
	q->ev[q->tail++ & (q->cap - 1)] = *ev;
}

int rps_rdma_evq_pop(struct rps_rdma_transport *t, struct rps_tr_event *ev_p)
{
	struct rps_rdma_evq *q = &t->evq;

	if (q->head == q->tail)
		return 0;
	*ev_p = q->ev[q->head++ & (q->cap - 1)];
	return 1;
}

/* Drop c's events (c is being freed); RECV buffers go back. */
void rps_rdma_evq_purge(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	struct rps_rdma_evq *q = &t->evq;
	uint32_t n = q->tail - q->head, keep = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct rps_tr_event ev = q->ev[(q->head + i) & (q->cap - 1)];

		if (ev.conn == &c->base) {
			if (ev.type == RPS_TR_EV_RECV)
				rps_rdma_release(&t->base, ev.token);
			continue;
		}
		q->ev[(q->head + keep++) & (q->cap - 1)] = ev;
	}
	q->tail = q->head + keep;
}

void rps_rdma_notify_poller(struct rps_rdma_transport *t)
{
	uint64_t one = 1;

	if (atomic_load(&t->poll_sleeping) && write(t->efd, &one, sizeof(one)) < 0)
		RPS_DEBUG("rdma: eventfd write: %m");
}

/* --------------------------------------------------------- send side */

/* Post a zero-length credit frame if enough credits are owed. Any thread;
 * never waits for another poster: if one is at it, it sends the credits
 * when it is done (rps_rdma_post_unlock). */
void rps_rdma_maybe_ctrl(struct rps_rdma_conn *c)
{
	struct rps_rdma_transport *t = c->t;
	struct ibv_send_wr wr = {0}, *bad;
	uint32_t f = atomic_load(&c->freed), prev;
	int rc;

	if (f - atomic_load(&c->reported) < c->ctrl_thresh) {
		atomic_store(&c->ctrl_pending, 0);
		return;
	}
	if (atomic_load(&c->state) != C_UP)
		return;
	atomic_store(&c->ctrl_pending, 1); /* before the trylock: see post_unlock */
	atomic_thread_fence(memory_order_seq_cst);
	if (pthread_mutex_trylock(&c->post_lock))
		return;
	pthread_spin_lock(&c->lock);
	f = atomic_load(&c->freed);
	prev = atomic_load(&c->reported);
	if (atomic_load(&c->state) != C_UP || f - prev < c->ctrl_thresh) {
		atomic_store(&c->ctrl_pending, 0);
		pthread_spin_unlock(&c->lock);
		pthread_mutex_unlock(&c->post_lock);
		return;
	}
	if (c->sent - atomic_load(&c->peer_freed) >= c->peer_window ||
	    rps_rdma_sq_used(c) >= c->nslots - 1) {
		/* stays pending: a completion or the peer's credits retry it */
		pthread_spin_unlock(&c->lock);
		pthread_mutex_unlock(&c->post_lock);
		return;
	}
	{
		struct rps_rdma_slot *s = rps_rdma_sq_next(c);

		s->kind = WR_CTRL;
		s->has_buf = 0;
		s->ctx = 0;
		wr.wr_id = (uintptr_t)s;
	}
	c->sent++;
	c->sq_head++;
	atomic_store(&c->reported, f);
	atomic_store(&c->ctrl_pending, 0);
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(f);
	wr.send_flags = rps_rdma_want_signal(c, 0) ? IBV_SEND_SIGNALED : 0;
	pthread_spin_unlock(&c->lock);
	rc = ibv_post_send(c->qp, &wr, &bad);
	if (rc) {
		RPS_ERR("credit frame to %s: ibv_post_send: %s", c->base.peer, strerror(rc));
		pthread_spin_lock(&c->lock); /* nobody posted after us: undo */
		c->sent--;
		c->sq_head--;
		atomic_store(&c->reported, prev);
		pthread_spin_unlock(&c->lock);
	} else {
		atomic_fetch_add(&t->st_ctrl_sent, 1);
	}
	pthread_mutex_unlock(&c->post_lock);
}

/* Drop post_lock; send the credits another thread could not send while we
 * held it (it set ctrl_pending before its trylock failed). The fences here
 * and in rps_rdma_maybe_ctrl pair up: either its trylock sees the lock free,
 * or this load sees its ctrl_pending, on any memory model. */
void rps_rdma_post_unlock(struct rps_rdma_conn *c)
{
	pthread_mutex_unlock(&c->post_lock);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&c->ctrl_pending))
		rps_rdma_maybe_ctrl(c);
}

/* Try to post one frame now: 0, -EAGAIN (no credit, slot or buffer),
 * or another -errno. */
static int try_send(struct rps_rdma_conn *c, const struct rps_frame_hdr *hdr,
		    const struct iovec *iov, int iovcnt, const void *payload, uint32_t total,
		    uint64_t ctx)
{
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_sge sge;
	struct rps_rdma_slot *s;
	char *buf, *p;
	uint32_t f, prev;
	int rc;

	pthread_mutex_lock(&c->post_lock);
	pthread_spin_lock(&c->lock);
	if (atomic_load(&c->state) != C_UP &&
	    !(payload && atomic_load(&c->state) == C_CONNECTING)) {
		/* dead: its drain marker may be posted already; nothing after it.
		 * Connecting: only the transport's own PROOF */
		pthread_spin_unlock(&c->lock);
		rps_rdma_post_unlock(c);
		return -ECONNRESET;
	}
	if (c->sent - atomic_load(&c->peer_freed) >= c->grant ||
	    rps_rdma_sq_used(c) >= c->nslots - 1 || c->sb_head - c->sb_tail >= c->nsbuf) {
		pthread_spin_unlock(&c->lock);
		rps_rdma_post_unlock(c);
		return -EAGAIN;
	}
	buf = c->sbuf + (size_t)(c->sb_head % c->nsbuf) * c->t->buf_bytes;
	s = rps_rdma_sq_next(c);
	s->kind = WR_SEND;
	s->has_buf = 1;
	s->ctx = ctx;
	f = atomic_load(&c->freed);
	prev = atomic_load(&c->reported);
	c->sent++;
	c->sq_head++;
	c->sb_head++;
	atomic_store(&c->reported, f);
	pthread_spin_unlock(&c->lock);
	/* the slot and buffer are ours; post_lock keeps later posts behind */
	memcpy(buf, hdr, RDMA_HDR_LEN);
	p = buf + RDMA_HDR_LEN;
	if (payload) {
		memcpy(p, payload, total - RDMA_HDR_LEN);
	} else {
		for (int i = 0; i < iovcnt; i++) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
	}
	sge.addr = (uintptr_t)buf;
	sge.length = total;
	sge.lkey = c->smr->lkey;
	wr.wr_id = (uintptr_t)s;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(f);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = rps_rdma_want_signal(c, ctx) ? IBV_SEND_SIGNALED : 0;
	rc = ibv_post_send(c->qp, &wr, &bad);
	if (rc) {
		pthread_spin_lock(&c->lock); /* nobody posted after us: undo */
		c->sent--;
		c->sq_head--;
		c->sb_head--;
		atomic_store(&c->reported, prev);
		pthread_spin_unlock(&c->lock);
		rps_rdma_post_unlock(c);
		RPS_ERR("send to %s: ibv_post_send: %s", c->base.peer, strerror(rc));
		return atomic_load(&c->state) == C_DEAD ? -ECONNRESET : -rc;
	}
	rps_rdma_post_unlock(c);
	atomic_fetch_add(&c->t->st_frames_sent, 1);
	return 0;
}

/* Reap completions unless another thread is at it; events it queued go to
 * the poll() thread. Returns how many. */
int rps_rdma_reap_if_free(struct rps_rdma_transport *t)
{
	int n = 0;

	if (!pthread_mutex_trylock(&t->prog_lock)) {
		n = rps_rdma_progress_cq(t);
		if (n > 0)
			rps_rdma_notify_poller(t);
		pthread_mutex_unlock(&t->prog_lock);
	}
	return n;
}

void rps_rdma_progress_or_yield(struct rps_rdma_transport *t)
{
	if (rps_rdma_reap_if_free(t) <= 0)
		sched_yield();
}

#define RES_SPIN_NS 20000ull /* a sender spins this long before it sleeps */

void rps_rdma_res_freed(struct rps_rdma_transport *t)
{
	atomic_fetch_add(&t->res_gen, 1);
	if (atomic_load(&t->res_waiters)) {
		pthread_mutex_lock(&t->res_lock);
		pthread_cond_broadcast(&t->res_cv);
		pthread_mutex_unlock(&t->res_lock);
	}
}

void rps_rdma_progress_or_wait(struct rps_rdma_transport *t, uint64_t gen, uint64_t since_ns)
{
	struct timespec ts;

	if (rps_rdma_reap_if_free(t) > 0 || atomic_load(&t->res_gen) != gen)
		return;
	if (rps_now_ns() - since_ns < RES_SPIN_NS) {
		for (int i = 0; i < 64; i++)
			rps_cpu_relax();
		return;
	}
	/* sleep: the poll() thread reaps (and must arm its completion channel,
	 * which it does not while callers reap for themselves) */
	atomic_fetch_add(&t->res_waiters, 1);
	if (atomic_load(&t->caller_poll_ns))
		rps_tr_wake(&t->base);
	rps_deadline_ms(&ts, 1);
	pthread_mutex_lock(&t->res_lock);
	if (atomic_load(&t->res_gen) == gen)
		pthread_cond_timedwait(&t->res_cv, &t->res_lock, &ts);
	pthread_mutex_unlock(&t->res_lock);
	atomic_fetch_sub(&t->res_waiters, 1);
}

static int send_wait(struct rps_rdma_conn *c, const struct rps_frame_hdr *hdr,
		     const struct iovec *iov, int iovcnt, const void *payload, uint64_t ctx,
		     int timeout_ms)
{
	struct rps_rdma_transport *t = c->t;
	uint64_t total = (uint64_t)RDMA_HDR_LEN + hdr->len;
	uint64_t deadline = 0;
	int rc, waited = 0;

	if (payload == NULL) {
		uint64_t sum = 0;

		for (int i = 0; i < iovcnt; i++)
			sum += iov[i].iov_len;
		if (sum != hdr->len) {
			RPS_ERR("send to %s: iov holds %llu bytes but hdr.len is %u", c->base.peer,
				(unsigned long long)sum, hdr->len);
			return -EINVAL;
		}
	}
	if (total > t->buf_bytes || total > c->peer_buf) {
		RPS_ERR("send to %s: frame of %llu bytes exceeds the receive buffer (%u here, "
			"%u at the peer; RDMAPS_RDMA_BUF_BYTES)",
			c->base.peer, (unsigned long long)total, t->buf_bytes, c->peer_buf);
		return -EMSGSIZE;
	}
	for (;;) {
		int st = atomic_load(&c->state);
		uint64_t gen = atomic_load(&t->res_gen);

		if (st == C_DEAD || atomic_load(&c->user_closed))
			return -ECONNRESET;
		rc = try_send(c, hdr, iov, iovcnt, payload, (uint32_t)total, ctx);
		if (rc != -EAGAIN)
			return rc;
		if (timeout_ms == 0)
			return -EAGAIN;
		if (!waited) {
			waited = 1;
			atomic_fetch_add(&t->st_credit_waits, 1);
			deadline =
			    rps_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
		}
		if (timeout_ms > 0 && rps_now_ns() > deadline) {
			RPS_ERR("send to %s: no credit for %d ms (peer not releasing its receive "
				"buffers?)",
				c->base.peer, timeout_ms);
			return -ETIMEDOUT;
		}
		rps_rdma_progress_or_wait(t, gen, deadline - (uint64_t)timeout_ms * 1000000ull);
	}
}

int rps_rdma_post_send(struct rps_conn *conn, const struct rps_frame_hdr *hdr,
		       const struct iovec *iov, int iovcnt, uint64_t ctx)
{
	struct rps_rdma_conn *c = rps_rdma_c(conn);

	if (atomic_load(&c->state) != C_UP)
		return -ECONNRESET;
	return send_wait(c, hdr, iov, iovcnt, NULL, ctx, c->t->timeout_ms);
}

/* Transport-internal frames (HELLO_ACK; PROOF while connecting). */
int rps_rdma_send_frame(struct rps_rdma_conn *c, const struct rps_frame_hdr *hdr,
			const void *payload, uint32_t len, int timeout_ms)
{
	static const char empty;

	(void)len;
	return send_wait(c, hdr, NULL, 0, payload ? payload : &empty, 0, timeout_ms);
}

int rps_rdma_post_drain(struct rps_rdma_conn *c)
{
	struct ibv_send_wr wr = {0}, *bad;
	struct rps_rdma_slot *s;
	int rc;

	/* after every post that reserved its slot before the state went dead */
	pthread_mutex_lock(&c->post_lock);
	pthread_spin_lock(&c->lock);
	if (rps_rdma_sq_used(c) >= c->nslots) {
		pthread_spin_unlock(&c->lock);
		pthread_mutex_unlock(&c->post_lock);
		return -ENOSPC;
	}
	s = rps_rdma_sq_next(c);
	s->kind = WR_DRAIN;
	s->has_buf = 0;
	s->ctx = 0;
	wr.wr_id = (uintptr_t)s;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	rc = ibv_post_send(c->qp, &wr, &bad);
	if (!rc)
		c->sq_head++;
	else if (rps_rdma_sq_used(c) == 0)
		atomic_store(&c->drained, 1);
	pthread_spin_unlock(&c->lock);
	pthread_mutex_unlock(&c->post_lock);
	return -rc;
}
