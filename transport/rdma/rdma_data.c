/* RDMA transport: the data path. SENDs with credits, RDMA READs, receive
 * buffers and their release, completion processing, the pending-event queue.
 * No malloc, registration or lock beyond the connection's spinlock per message
 * (the MR cache registers a region once, on its first read). */
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

static inline uint32_t sq_used(const struct rps_rdma_conn *c)
{
	return c->sq_head - c->sq_tail;
}

static inline struct rps_rdma_slot *sq_next(struct rps_rdma_conn *c)
{
	return &c->slots[c->sq_head & c->slot_mask];
}

static inline int want_signal(struct rps_rdma_conn *c, uint64_t ctx)
{
	if (ctx || ++c->unsig >= c->sig_every) {
		c->unsig = 0;
		return 1;
	}
	return 0;
}

static void post_unlock(struct rps_rdma_conn *c);

/* Post a zero-length credit frame if enough credits are owed. Any thread;
 * never waits for another poster: if one is at it, it sends the credits
 * when it is done (post_unlock). */
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
	    sq_used(c) >= c->nslots - 1) {
		/* stays pending: a completion or the peer's credits retry it */
		pthread_spin_unlock(&c->lock);
		pthread_mutex_unlock(&c->post_lock);
		return;
	}
	{
		struct rps_rdma_slot *s = sq_next(c);

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
	wr.send_flags = want_signal(c, 0) ? IBV_SEND_SIGNALED : 0;
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
static void post_unlock(struct rps_rdma_conn *c)
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
	if (atomic_load(&c->state) != C_UP) {
		/* dead: its drain marker may be posted already; nothing after it */
		pthread_spin_unlock(&c->lock);
		post_unlock(c);
		return -ECONNRESET;
	}
	if (c->sent - atomic_load(&c->peer_freed) >= c->grant || sq_used(c) >= c->nslots - 1 ||
	    c->sb_head - c->sb_tail >= c->nsbuf) {
		pthread_spin_unlock(&c->lock);
		post_unlock(c);
		return -EAGAIN;
	}
	buf = c->sbuf + (size_t)(c->sb_head % c->nsbuf) * c->t->buf_bytes;
	s = sq_next(c);
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
	wr.send_flags = want_signal(c, ctx) ? IBV_SEND_SIGNALED : 0;
	rc = ibv_post_send(c->qp, &wr, &bad);
	if (rc) {
		pthread_spin_lock(&c->lock); /* nobody posted after us: undo */
		c->sent--;
		c->sq_head--;
		c->sb_head--;
		atomic_store(&c->reported, prev);
		pthread_spin_unlock(&c->lock);
		post_unlock(c);
		RPS_ERR("send to %s: ibv_post_send: %s", c->base.peer, strerror(rc));
		return atomic_load(&c->state) == C_DEAD ? -ECONNRESET : -rc;
	}
	post_unlock(c);
	atomic_fetch_add(&c->t->st_frames_sent, 1);
	return 0;
}

/* Reap completions unless another thread is at it; events it queued go to
 * the poll() thread. Returns how many. */
static int reap_if_free(struct rps_rdma_transport *t)
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
	if (reap_if_free(t) <= 0)
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

	if (reap_if_free(t) > 0 || atomic_load(&t->res_gen) != gen)
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
		t->base.ops->wake(&t->base);
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

/* Transport-internal frames (HELLO_ACK). */
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
	if (sq_used(c) >= c->nslots) {
		pthread_spin_unlock(&c->lock);
		pthread_mutex_unlock(&c->post_lock);
		return -ENOSPC;
	}
	s = sq_next(c);
	s->kind = WR_DRAIN;
	s->has_buf = 0;
	s->ctx = 0;
	wr.wr_id = (uintptr_t)s;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	rc = ibv_post_send(c->qp, &wr, &bad);
	if (!rc)
		c->sq_head++;
	else if (sq_used(c) == 0)
		atomic_store(&c->drained, 1);
	pthread_spin_unlock(&c->lock);
	pthread_mutex_unlock(&c->post_lock);
	return -rc;
}

/* --------------------------------------------------------- RDMA READ */

/* A READ whose slot is of kind (WR_READ: ctx is the caller's; WR_RNOTIFY: ctx
 * is its struct rps_tr_done). */
static int post_read(struct rps_conn *conn, const struct rps_tr_sge *sge, int nsge,
		     uint64_t raddr, uint32_t rkey, int kind, uint64_t ctx)
{
	struct rps_rdma_conn *c = rps_rdma_c(conn);
	struct rps_rdma_transport *t = c->t;
	struct ibv_sge sg[RDMA_MAX_SGE];
	struct ibv_mr *tmp[RDMA_MAX_SGE], **tmp_copy = NULL;
	struct ibv_send_wr wr = {0}, *bad;
	uint64_t total = 0, deadline = 0;
	int ntmp = 0, rc;

	if (nsge < 1 || nsge > t->base.max_read_sge) {
		RPS_ERR("read from %s: %d sges (1..%d)", c->base.peer, nsge, t->base.max_read_sge);
		return -EINVAL;
	}
	if (atomic_load(&c->state) != C_UP)
		return -ECONNRESET;
	for (int i = 0; i < nsge; i++) {
		if (sge[i].handle) { /* the caller's own registration: its lkey */
			sg[i].lkey = sge[i].handle;
		} else {
			tmp[ntmp] = NULL;
			rc = rps_rdma_mrc_lkey(t, sge[i].addr, sge[i].len, &sg[i].lkey,
					       &tmp[ntmp]);
			if (rc)
				goto err_tmp;
			if (tmp[ntmp])
				ntmp++;
		}
		sg[i].addr = (uintptr_t)sge[i].addr;
		sg[i].length = sge[i].len;
		total += sge[i].len;
	}
	if (total > (1ull << 31)) {
		RPS_ERR("read from %s: %llu bytes in one read (max 2 GiB)", c->base.peer,
			(unsigned long long)total);
		rc = -EMSGSIZE;
		goto err_tmp;
	}
	wr.opcode = IBV_WR_RDMA_READ;
	wr.sg_list = sg;
	wr.num_sge = nsge;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ntmp) { /* the completion deregisters them */
		tmp_copy = rps_malloc(ntmp * sizeof(*tmp_copy));
		if (!tmp_copy) {
			rc = -ENOMEM;
			goto err_tmp;
		}
		memcpy(tmp_copy, tmp, ntmp * sizeof(*tmp));
	}
	for (;;) {
		struct rps_rdma_slot *s;
		uint64_t gen = atomic_load(&t->res_gen);

		if (atomic_load(&c->state) != C_UP || atomic_load(&c->user_closed)) {
			rc = -ECONNRESET;
			goto err_tmp;
		}
		pthread_mutex_lock(&c->post_lock);
		pthread_spin_lock(&c->lock);
		if (atomic_load(&c->state) != C_UP) {
			pthread_spin_unlock(&c->lock);
			post_unlock(c);
			rc = -ECONNRESET;
			goto err_tmp;
		}
		if (sq_used(c) < c->nslots - 1) {
			s = sq_next(c);
			s->kind = (uint8_t)kind;
			s->has_buf = 0;
			s->ctx = ctx;
			s->ntmp = ntmp;
			s->tmp_mr = tmp_copy;
			c->sq_head++;
			pthread_spin_unlock(&c->lock);
			/* the slot is ours; post_lock keeps later posts behind */
			wr.wr_id = (uintptr_t)s;
			rc = ibv_post_send(c->qp, &wr, &bad);
			if (rc) {
				s->tmp_mr = NULL;
				s->ntmp = 0;
				pthread_spin_lock(&c->lock); /* nobody posted after us: undo */
				c->sq_head--;
				pthread_spin_unlock(&c->lock);
			}
			post_unlock(c);
			if (rc) {
				RPS_ERR("read from %s: ibv_post_send: %s", c->base.peer,
					strerror(rc));
				rc = atomic_load(&c->state) == C_DEAD ? -ECONNRESET : -rc;
				goto err_tmp;
			}
			atomic_fetch_add(&t->st_reads, 1);
			return 0;
		}
		pthread_spin_unlock(&c->lock);
		post_unlock(c);
		if (!deadline)
			deadline = rps_now_ns() + (uint64_t)t->timeout_ms * 1000000ull;
		else if (rps_now_ns() > deadline) {
			RPS_ERR("read from %s: send queue full for %d ms", c->base.peer,
				t->timeout_ms);
			rc = -ETIMEDOUT;
			goto err_tmp;
		}
		rps_rdma_progress_or_wait(t, gen, deadline - (uint64_t)t->timeout_ms * 1000000ull);
	}

err_tmp:
	rps_free(tmp_copy);
	for (int i = 0; i < ntmp; i++)
		ibv_dereg_mr(tmp[i]);
	return rc;
}

int rps_rdma_read_remote(struct rps_conn *conn, const struct rps_tr_sge *sge, int nsge,
			 uint64_t raddr, uint32_t rkey, uint64_t ctx)
{
	return post_read(conn, sge, nsge, raddr, rkey, WR_READ, ctx);
}

int rps_rdma_read_notify(struct rps_conn *conn, const struct rps_tr_sge *sge, int nsge,
			 uint64_t raddr, uint32_t rkey, struct rps_tr_done *d)
{
	d->status = 0;
	atomic_store_explicit(&d->state, RPS_TR_PENDING, memory_order_relaxed);
	return post_read(conn, sge, nsge, raddr, rkey, WR_RNOTIFY, (uintptr_t)d);
}

static void push_done(struct rps_rdma_transport *t, struct rps_rdma_conn *c, int type, uint64_t ctx,
		      int status);

/* A read_notify's READ is over: tell d, and a sleeper if one asked. Not a
 * word of d after the state changed: its owner may reuse it at once. */
static void notify_done(struct rps_rdma_transport *t, struct rps_rdma_conn *c, uint64_t ctx,
			int status)
{
	struct rps_tr_done *d = (struct rps_tr_done *)(uintptr_t)ctx;

	d->status = status;
	if (atomic_exchange_explicit(&d->state, RPS_TR_DONE, memory_order_acq_rel) ==
	    RPS_TR_PENDING_WAKE)
		push_done(t, c, RPS_TR_EV_READ_DONE, RPS_TR_CTX_NOTIFY, status);
}

/* c is given up without its drain marker: its outstanding read_notify
 * READs end now, with status, and their slots forget them (a completion
 * that still comes touches nothing). */
void rps_rdma_notify_abandon(struct rps_rdma_conn *c, int status)
{
	if (!c->slots)
		return;
	pthread_spin_lock(&c->lock);
	for (uint32_t i = c->sq_tail; i != c->sq_head; i++) {
		struct rps_rdma_slot *s = &c->slots[i & c->slot_mask];

		if (s->kind == WR_RNOTIFY && s->ctx) {
			notify_done(c->t, c, s->ctx, status);
			s->ctx = 0;
		}
	}
	pthread_spin_unlock(&c->lock);
}

/* ----------------------------------------------------------- receive */

void rps_rdma_release(struct rps_transport *tr, void *token)
{
	struct rps_rdma_rbuf *b = token;
	struct rps_rdma_conn *c = b->conn;

	(void)tr;
	b->conn = NULL;
	/* re-post before the credit goes back: the peer may send at once */
	rps_rdma_srq_post(b->srq, b);
	if (c) {
		atomic_fetch_add(&c->freed, 1);
		rps_rdma_maybe_ctrl(c);
		rps_rdma_conn_put(c);
	}
}

static void recv_done_internal(struct rps_rdma_conn *c, struct rps_rdma_rbuf *b)
{
	rps_rdma_srq_post(b->srq, b);
	if (c) {
		atomic_fetch_add(&c->freed, 1);
		rps_rdma_maybe_ctrl(c);
	}
}

static void handle_recv(struct rps_rdma_transport *t, const struct ibv_wc *wc,
			struct rps_rdma_rbuf *b)
{
	struct rps_rdma_srq *s = b->srq;
	int32_t left = atomic_fetch_sub(&s->posted, 1) - 1;
	int64_t lw = atomic_load(&t->st_low_water);
	struct rps_rdma_conn *c;
	struct rps_frame_hdr hdr;
	struct rps_tr_event ev;
	const char *why = NULL;
	uint64_t maxp;
	int st, rc, fixed;

	if (lw < 0 || left < lw)
		atomic_store(&t->st_low_water, left);
	c = rps_rdma_qpmap_get(t, wc->qp_num);
	if (!c) {
		rps_rdma_srq_post(s, b);
		return;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		int err;
		const char *r = rps_rdma_wc_reason(wc->status, &err);

		rps_rdma_srq_post(s, b);
		rps_rdma_conn_fail(c, err, wc->status == IBV_WC_WR_FLUSH_ERR ? NULL : r);
		return;
	}
	if ((wc->wc_flags & IBV_WC_WITH_IMM) &&
	    atomic_exchange(&c->peer_freed, ntohl(wc->imm_data)) != ntohl(wc->imm_data))
		rps_rdma_res_freed(t); /* new credits */
	st = atomic_load(&c->state);
	if (wc->byte_len == 0) {
		atomic_fetch_add(&t->st_ctrl_recv, 1);
		recv_done_internal(c, b);
		goto out;
	}
	if (st == C_DEAD || atomic_load(&c->user_closed)) {
		recv_done_internal(c, b);
		return;
	}
	if (st == C_CONNECTING) {
		/* the HELLO_ACK: its payload is the owner's (may be empty) */
		memset(&hdr, 0, sizeof(hdr));
		if (wc->byte_len >= RDMA_HDR_LEN)
			memcpy(&hdr, b->buf, RDMA_HDR_LEN);
		if (hdr.magic != RPS_PROTO_MAGIC || hdr.version != RPS_PROTO_VERSION ||
		    hdr.op != RPS_OP_HELLO_ACK || hdr.len > RPS_TR_ACK_MAX ||
		    (uint64_t)hdr.len + RDMA_HDR_LEN != wc->byte_len) {
			RPS_ERR("closing %s: expected HELLO_ACK (<= %d bytes), got op %u of %u "
				"bytes",
				c->base.peer, RPS_TR_ACK_MAX, hdr.op, wc->byte_len);
			recv_done_internal(c, b);
			atomic_store(&c->ack_state, -EPROTO);
			rps_rdma_conn_fail(c, -EPROTO, NULL);
			return;
		}
		memcpy(c->ack, b->buf + RDMA_HDR_LEN, hdr.len);
		c->ack_len = hdr.len;
		atomic_store(&c->state, C_UP);
		recv_done_internal(c, b);
		atomic_store(&c->ack_state, 1);
		return;
	}
	maxp = RPS_MIN(t->max_msg, (uint64_t)t->buf_bytes - RDMA_HDR_LEN);
	if (wc->byte_len < RDMA_HDR_LEN) {
		why = "frame shorter than its header";
		rc = -EPROTO;
	} else {
		memcpy(&hdr, b->buf, RDMA_HDR_LEN);
		rc = rps_proto_hdr_check(&hdr, maxp, &why);
		if (!rc && (uint64_t)hdr.len + RDMA_HDR_LEN != wc->byte_len) {
			why = "frame length does not match its header";
			rc = -EPROTO;
		}
		if (!rc)
			rc = rps_proto_payload_check(&hdr, b->buf + RDMA_HDR_LEN, &why);
	}
	if (rc) {
		if (rc == -EPROTO && wc->byte_len >= RDMA_HDR_LEN && hdr.magic != RPS_PROTO_MAGIC)
			RPS_ERR("closing %s: %s 0x%08x", c->base.peer, why, hdr.magic);
		else
			RPS_ERR("closing %s: %s", c->base.peer, why);
		recv_done_internal(c, b);
		rps_rdma_conn_fail(c, rc, NULL);
		return;
	}
	fixed = rps_proto_fixed_len(hdr.op);
	memset(&ev, 0, sizeof(ev));
	ev.type = RPS_TR_EV_RECV;
	ev.conn = &c->base;
	ev.hdr = hdr;
	ev.fixed = b->buf + RDMA_HDR_LEN;
	ev.data = b->buf + RDMA_HDR_LEN + fixed;
	ev.data_len = hdr.len - (uint32_t)fixed;
	ev.token = b;
	b->conn = c;
	atomic_fetch_add(&c->refs, 1);
	rps_rdma_evq_push(t, &ev);
	atomic_fetch_add(&t->st_frames_recv, 1);
out:
	if ((wc->wc_flags & IBV_WC_WITH_IMM) && atomic_load(&c->ctrl_pending))
		rps_rdma_maybe_ctrl(c);
}

static void push_done(struct rps_rdma_transport *t, struct rps_rdma_conn *c, int type, uint64_t ctx,
		      int status)
{
	struct rps_tr_event ev;

	if (atomic_load(&c->user_closed) || !c->handed)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.conn = &c->base;
	ev.ctx = ctx;
	ev.status = status;
	rps_rdma_evq_push(t, &ev);
}

static void handle_slot(struct rps_rdma_transport *t, const struct ibv_wc *wc,
			struct rps_rdma_slot *slot)
{
	struct rps_rdma_conn *c = slot->c;
	int err = 0, drained = 0, last, last_kind = 0;
	const char *why = NULL;

	if (wc->status != IBV_WC_SUCCESS)
		why = rps_rdma_wc_reason(wc->status, &err);
	pthread_spin_lock(&c->lock);
	do {
		struct rps_rdma_slot *cur = &c->slots[c->sq_tail & c->slot_mask];
		int st;

		if (c->sq_head == c->sq_tail) {
			RPS_ERR("rdma: completion for %s with an empty send queue", c->base.peer);
			break;
		}
		last = cur == slot;
		st = last ? err : 0;
		last_kind = cur->kind;
		if (cur->has_buf)
			c->sb_tail++;
		switch (cur->kind) {
		case WR_SEND:
			if (cur->ctx)
				push_done(t, c, RPS_TR_EV_SEND_DONE, cur->ctx, st);
			break;
		case WR_READ:
		case WR_RNOTIFY:
			if (cur->kind == WR_READ)
				push_done(t, c, RPS_TR_EV_READ_DONE, cur->ctx, st);
			else if (cur->ctx)
				notify_done(t, c, cur->ctx, st);
			if (cur->tmp_mr) {
				for (int i = 0; i < cur->ntmp; i++)
					ibv_dereg_mr(cur->tmp_mr[i]);
				rps_free(cur->tmp_mr);
				cur->tmp_mr = NULL;
			}
			break;
		case WR_DRAIN:
			drained = 1;
			break;
		default:
			break;
		}
		c->sq_tail++;
	} while (!last);
	pthread_spin_unlock(&c->lock);
	rps_rdma_res_freed(t); /* send-queue slots, perhaps send buffers */
	if (err && last_kind != WR_DRAIN)
		rps_rdma_conn_fail(c, err, wc->status == IBV_WC_WR_FLUSH_ERR ? NULL : why);
	if (drained)
		rps_rdma_conn_drained(c);
	else if (atomic_load(&c->ctrl_pending))
		rps_rdma_maybe_ctrl(c);
}

/* Caller holds prog_lock. Returns the number of events queued. */
int rps_rdma_progress_cq(struct rps_rdma_transport *t)
{
	struct rps_rdma_dev *d = atomic_load(&t->dev);
	struct ibv_wc wc[RDMA_POLL_BATCH];
	uint32_t before = t->evq.tail;
	int n;

	if (!d)
		return 0;
	do {
		n = ibv_poll_cq(d->cq, RDMA_POLL_BATCH, wc);
		if (n < 0) {
			RPS_ERR("rdma device %s: ibv_poll_cq failed (%d)", d->name, n);
			break;
		}
		for (int i = 0; i < n; i++) {
			/* the tag is in wr_id itself: the entry's memory was written by
			 * the poster, ordered only through the device */
			if (wc[i].wr_id & RDMA_WRID_RECV)
				handle_recv(t, &wc[i],
					    (struct rps_rdma_rbuf *)(uintptr_t)(wc[i].wr_id &
										~RDMA_WRID_RECV));
			else
				handle_slot(t, &wc[i],
					    (struct rps_rdma_slot *)(uintptr_t)wc[i].wr_id);
		}
	} while (n == RDMA_POLL_BATCH);
	return (int)(t->evq.tail - before);
}
