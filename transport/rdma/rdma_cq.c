/* RDMA transport: completion processing. Receives (their buffers go to the
 * consumer and come back by release(), which returns the credit), send and
 * READ completions (events, or a read_notify's flag), per connection slots. */
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
		if (hdr.magic == RPS_PROTO_MAGIC && hdr.version == RPS_PROTO_VERSION &&
		    hdr.op == RPS_OP_ERROR && hdr.len <= 1024 &&
		    (uint64_t)hdr.len + RDMA_HDR_LEN == wc->byte_len) {
			char text[RPS_LOG_ESC_BUF];
			int st_err = hdr.status < 0 ? hdr.status : -EPROTO;

			RPS_ERR("connect %s: refused: %s (%s)", c->base.peer,
				rps_log_escape(b->buf + RDMA_HDR_LEN, hdr.len, text, sizeof(text)),
				strerror(-st_err));
			recv_done_internal(c, b);
			atomic_store(&c->ack_state, st_err);
			rps_rdma_conn_fail(c, st_err, NULL);
			return;
		}
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
	if (st == C_ACCEPTING || st == C_PROVING) {
		/* the client's PROOF comes first: nothing else is taken before */
		struct rps_auth_proof proof = {0};

		memset(&hdr, 0, sizeof(hdr));
		if (wc->byte_len == RDMA_HDR_LEN + sizeof(proof)) {
			memcpy(&hdr, b->buf, RDMA_HDR_LEN);
			memcpy(&proof, b->buf + RDMA_HDR_LEN, sizeof(proof));
		} else if (wc->byte_len == RDMA_HDR_LEN) { /* an ERROR: no proof */
			memcpy(&hdr, b->buf, RDMA_HDR_LEN);
		}
		recv_done_internal(c, b);
		rps_rdma_proof_in(c, &hdr, &proof);
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
