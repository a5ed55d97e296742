/* Frames of the worker: posting a piece, matching the server's answer. */
#include <errno.h>
#include <string.h>

#include "src/log.h"
#include "src/store.h"
#include "src/util.h"
#include "worker/lowprec.h"
#include "worker/table.h"
#include "worker/worker_int.h"

void rps_wpost_piece(struct rps_worker *w, struct rps_piece *p)
{
	struct rps_wconn *wc = p->conn;
	uint32_t id = rps_piece_reqid(p);
	const struct rps_frame_hdr *hp;
	struct rps_frame_hdr h;
	struct iovec iov[3];
	uint64_t ctx = 0;
	int cnt = 1;
	int rc;
	/* frames sent by copy (ctx 0) go from the stack, not from the piece */
	union {
		struct rps_declare d;
		struct rps_pull pl;
	} copy;
	struct rps_optim_wire spec; /* a DECLARE's optimizer, sent by copy too */

	rc = rps_wconn_dead(wc);
	if (rc)
		goto err;
	iov[0].iov_base = &copy;
	hp = &h;
	switch (p->kind) {
	case RPS_PK_DECLARE:
		copy.d = p->u.decl.fixed;
		iov[0].iov_len = sizeof(copy.d);
		if (p->u.decl.optim) {
			rps_optim_wire_encode(p->u.decl.optim, &spec);
			iov[1].iov_base = &spec;
			iov[1].iov_len = sizeof(spec);
			cnt = 2;
		}
		rps_proto_hdr_init(&h, RPS_OP_DECLARE,
				   (uint32_t)(iov[0].iov_len + (cnt > 1 ? iov[1].iov_len : 0)), id);
		if (p->u.decl.optim)
			h.flags = RPS_DECLARE_FLAG_OPTIM;
		if (p->u.decl.fixed.reserved) /* a pull precision (worker/lowprec.h) */
			h.flags |= RPS_DECLARE_FLAG_LOWPREC;
		break;
	case RPS_PK_PULL:
		copy.pl = p->u.pull.fixed;
		iov[0].iov_len = sizeof(copy.pl);
		rps_proto_hdr_init(&h, p->u.pull.lp ? RPS_OP_PULL_LP : RPS_OP_PULL,
				   (uint32_t)iov[0].iov_len, id);
		h.flags = p->u.pull.lp;
		break;
	case RPS_PK_PUSH:
		/* zero copy: the piece (header, fixed part) and the caller's data
		 * stay put until SEND_DONE */
		iov[0].iov_base = &p->u.push.fixed;
		iov[0].iov_len = sizeof(p->u.push.fixed);
		iov[1].iov_base = (void *)p->u.push.data;
		iov[1].iov_len = (size_t)p->u.push.fixed.count * sizeof(float);
		if (p->u.push.codec) { /* compressed (worker/compress.h) */
			iov[1].iov_base = (void *)p->u.push.cdata;
			iov[1].iov_len = p->u.push.clen;
		}
		rps_proto_hdr_init(&p->u.push.hdr, p->u.push.assign ? RPS_OP_ASSIGN : RPS_OP_PUSH,
				   (uint32_t)(sizeof(p->u.push.fixed) + iov[1].iov_len), id);
		p->u.push.hdr.flags = p->u.push.codec;
		cnt = iov[1].iov_len ? 2 : 1;
		if (p->u.push.seq) { /* replicated shards: its sequence number first */
			p->u.push.hdr.flags |= RPS_PUSH_FLAG_SEQ;
			p->u.push.hdr.len += (uint32_t)sizeof(p->u.push.seq);
			iov[2] = iov[1];
			iov[1].iov_base = &p->u.push.seq;
			iov[1].iov_len = sizeof(p->u.push.seq);
			cnt++;
		}
		ctx = rps_piece_ctx(p, 0);
		hp = &p->u.push.hdr;
		break;
	default:
		rc = -EINVAL;
		goto err;
	}
	rc = rps_tr_post_send(wc->c, hp, iov, cnt, ctx);
	if (!rc)
		return;
	if (rc != -ECONNRESET)
		RPS_ERR("server %u channel %u: send %s: %s", wc->srv->rank, wc->channel,
			rps_proto_op_name(hp->op), rps_strerror(rc));
err:
	if (wc->c && rps_wrepl_lost(rc) && rc != -ETIMEDOUT)
		rps_wconn_mark_dead(w, wc, rc); /* now, not when the transport says so */
	pthread_mutex_lock(&w->core.lock);
	if (rps_piece_by_reqid(&w->core, id) == p && p->kind && w->core.keep_pushes &&
	    (p->kind == RPS_PK_PUSH || p->kind == RPS_PK_PULL) && rps_wrepl_lost(rc)) {
		/* replicated shards: the connection died under this post; keep the
		 * piece for the promoted backup as rps_wcore_fail_conn_locked does
		 * (the reconnector waits for every submitter before it sends the
		 * kept pieces again, so this one is among them) */
		p->waits &= (uint8_t)~RPS_PW_SEND;
		if (p->kind == RPS_PK_PULL)
			p->u.pull.receiving = 0;
		p->resend = 1;
		rps_wcore_unlock(&w->core);
		return;
	}
	if (rps_piece_by_reqid(&w->core, id) == p && p->kind) {
		if (p->kind == RPS_PK_PUSH && !p->u.push.assign) {
			struct rps_wshard *sh = rps_wshard_get(w, p->server, p->shard);

			/* the frame never left: do not count it in the CLOCK */
			if (p->u.push.fixed.clock == atomic_load(&w->clock) && sh->pushes)
				sh->pushes--;
		}
		rps_piece_clear_locked(&w->core, p, RPS_PW_ALL, rc);
	}
	rps_wcore_unlock(&w->core);
}

/* The slice geometry of a DECLARE_ACK (hdr.aux, src/proto.h) into sl.
 * 0 or -EPROTO with a logged reason. */
static int ack_geom(const struct rps_wconn *wc, const struct rps_declare_ack *a, uint32_t aux,
		    struct rps_wslice *sl)
{
	uint32_t srv_cb = wc->srv->chunk_bytes;
	uint32_t cb, line, last;

	if (!aux) { /* an older server: its chunk size, 64-byte lines, whole chunks */
		cb = srv_cb;
		line = RPS_STORE_LINE;
		last = cb;
	} else {
		cb = aux & RPS_DECLARE_ACK_BYTES;
		line = aux & RPS_DECLARE_ACK_COMPACT ? RPS_STORE_WORD : RPS_STORE_LINE;
		last = rps_store_geom_last(cb, line, a->nelems);
	}
	if (!cb || cb % line || cb > srv_cb ||
	    (line == RPS_STORE_WORD && a->nelems > cb / sizeof(float))) {
		RPS_ERR("server %u: declare ack of key %llu slice %u: chunk geometry %#x "
			"(%u data bytes, %u-byte lines, %llu elements) does not fit a store "
			"of %u-byte chunks",
			wc->srv->rank, (unsigned long long)a->key, a->slice, aux, cb, line,
			(unsigned long long)a->nelems, srv_cb);
		return -EPROTO;
	}
	sl->chunk_bytes = cb;
	sl->line = line;
	sl->last_bytes = last;
	return 0;
}

static struct rps_piece *match(struct rps_worker *w, struct rps_wconn *wc, uint32_t req_id,
			       uint8_t kind, uint8_t op)
{
	struct rps_piece *p = rps_piece_by_reqid(&w->core, req_id);

	if (!p || p->kind != kind || p->conn != wc || !(p->waits & RPS_PW_RESP)) {
		RPS_DEBUG("server %u: stale %s for request %#x", wc->srv->rank,
			  rps_proto_op_name(op), req_id);
		return NULL;
	}
	return p;
}

static void clock_seen_max(_Atomic uint32_t *a, uint32_t v)
{
	uint32_t cur = atomic_load(a);

	while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

void rps_wrecv_locked(struct rps_worker *w, struct rps_wconn *wc, const struct rps_tr_event *ev)
{
	const struct rps_frame_hdr *h = &ev->hdr;
	struct rps_piece *p;
	/* a status is 0 or -errno; anything else from a peer is its mistake,
	 * never a result our caller should see as one */
	int st = h->status > 0 ? -EPROTO : h->status;

	switch (h->op) {
	case RPS_OP_DECLARE_ACK: {
		const struct rps_declare_ack *a = ev->fixed;

		p = match(w, wc, h->req_id, RPS_PK_DECLARE, h->op);
		if (!p)
			return;
		if (st && ev->data_len && ev->data) { /* the server's reason (a spec refused) */
			char why[RPS_LOG_ESC_BUF];

			RPS_ERR("server %u: declare refused (%s): %s", wc->srv->rank,
				rps_strerror(st),
				rps_log_escape(ev->data,
					       RPS_MIN(ev->data_len, RPS_DECLARE_REASON_MAX), why,
					       sizeof(why)));
		}
		if (!st) {
			const struct rps_declare *d = &p->u.decl.fixed;

			if (!a || a->key != d->key || a->slice != d->slice ||
			    a->nelems != d->nelems) {
				RPS_ERR("server %u: declare ack does not match key %llu slice %u",
					wc->srv->rank, (unsigned long long)d->key, d->slice);
				st = -EPROTO;
			} else if (p->u.decl.out) { /* NULL: detached by an abort */
				st = ack_geom(wc, a, h->aux, p->u.decl.out);
				if (!st)
					p->u.decl.out->store_off = a->offset;
				if (!st && d->reserved) /* its low-precision copy */
					st = (h->flags & RPS_DECLARE_FLAG_LOWPREC)
						 ? rps_wlp_ack(wc, a, ev->data, ev->data_len,
							       d->reserved, p->u.decl.out)
						 : -EPROTO;
			}
		}
		rps_piece_clear_locked(&w->core, p, RPS_PW_RESP, st);
		return;
	}
	case RPS_OP_PUSH_ACK:
		p = match(w, wc, h->req_id, RPS_PK_PUSH, h->op);
		if (p)
			rps_piece_clear_locked(&w->core, p, RPS_PW_RESP, st);
		return;
	case RPS_OP_PULL_RESP:
	case RPS_OP_PULL_LP_RESP: { /* 2 bytes an element (worker/lowprec.h) */
		const struct rps_pull *f = ev->fixed;
		const struct rps_pull *mine;
		uint64_t bytes;
		int lp = h->op == RPS_OP_PULL_LP_RESP;

		p = match(w, wc, h->req_id, RPS_PK_PULL, h->op);
		if (!p)
			return;
		mine = &p->u.pull.fixed;
		bytes = (uint64_t)mine->count * (lp ? 2u : sizeof(float));
		if (!st && lp != !!p->u.pull.lp) {
			RPS_ERR("server %u: %s for a %s pull of key %llu", wc->srv->rank,
				rps_proto_op_name(h->op), p->u.pull.lp ? "low-precision" : "float32",
				(unsigned long long)mine->key);
			st = -EPROTO;
		}
		if (!st) {
			clock_seen_max(&rps_wshard_get(w, p->server, p->shard)->clock_seen, h->aux);
			if (mine->count && w->consistency != RPS_ASP)
				rps_wstat_staleness(w, mine->min_clock, h->aux);
			if (!f || f->key != mine->key || f->slice != mine->slice ||
			    f->offset != mine->offset || f->count != mine->count) {
				RPS_ERR("server %u: pull answer does not match key %llu slice %u",
					wc->srv->rank, (unsigned long long)mine->key, mine->slice);
				st = -EPROTO;
			} else if (lp && bytes && p->u.pull.dest) {
				if (!ev->data || ev->data_len != bytes)
					st = -EPROTO;
				else /* widened exactly: the servers' rounded copy */
					rps_wlp_widen(p->u.pull.lp, ev->data, p->u.pull.dest,
						      mine->count);
			} else if (bytes && p->u.pull.dest && ev->data != (void *)p->u.pull.dest) {
				/* the transport did not honour recv_dest: copy */
				if (!ev->data || ev->data_len != bytes)
					st = -EPROTO;
				else
					memcpy(p->u.pull.dest, ev->data, bytes);
			}
			if (!st)
				atomic_fetch_add_explicit(&w->stat_bytes_in, bytes,
							  memory_order_relaxed);
		}
		rps_piece_clear_locked(&w->core, p, RPS_PW_RESP, st);
		return;
	}
	case RPS_OP_ERROR: {
		char why[RPS_LOG_ESC_BUF];

		RPS_ERR("server %u channel %u: error %s: %s", wc->srv->rank, wc->channel,
			rps_strerror(st ? st : -EPROTO),
			rps_log_escape(ev->data, ev->data_len, why, sizeof(why)));
		p = rps_piece_by_reqid(&w->core, h->req_id);
		if (h->req_id && p && p->kind && p->conn == wc && (p->waits & RPS_PW_RESP))
			rps_piece_clear_locked(&w->core, p, RPS_PW_RESP, st ? st : -EPROTO);
		return;
	}
	case RPS_OP_TABLE_DECLARE_ACK:
	case RPS_OP_ROWS_PULL_RESP:
	case RPS_OP_ROWS_PUSH_ACK:
	case RPS_OP_TABLE_MAP_RESP:
		rps_wtable_recv_locked(w, wc, ev); /* table_rows.c */
		return;
	default:
		RPS_WARN("server %u: unexpected %s frame", wc->srv->rank, rps_proto_op_name(h->op));
		return;
	}
}

void *rps_wrecv_dest(void *arg, struct rps_conn *c, const struct rps_frame_hdr *h,
		     const void *fixed)
{
	struct rps_worker *w = arg;
	const struct rps_pull *f = fixed;
	struct rps_piece *p;

	/* Runs inside poll() on the progress thread, the only thread that
	 * finishes a piece whose frame went out: p stays valid meanwhile. */
	if (h->op != RPS_OP_PULL_RESP || h->status || !f)
		return NULL;
	p = rps_piece_by_reqid(&w->core, h->req_id);
	if (!p || p->kind != RPS_PK_PULL || !p->conn || p->conn->c != c || !p->u.pull.dest ||
	    !(p->waits & RPS_PW_RESP))
		return NULL;
	if (f->key != p->u.pull.fixed.key || f->slice != p->u.pull.fixed.slice ||
	    f->offset != p->u.pull.fixed.offset || f->count != p->u.pull.fixed.count ||
	    h->len != sizeof(*f) + (uint64_t)f->count * sizeof(float))
		return NULL;
	p->u.pull.receiving = 1; /* an abort must not detach it now */
	return p->u.pull.dest;
}
