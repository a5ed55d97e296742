/* The read strategy's per-slice state machine (clock, data, header reads)
 * and the posting of its reads; see worker/read.h. */
#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/store.h"
#include "src/util.h"
#include "worker/lowprec.h"
#include "worker/read.h"

/* ---- consistency ---- */

int rps_wread_clock_ok(struct rps_worker *w, struct rps_wshard *sh, uint32_t min_clock)
{
	if (!min_clock)
		return 1;
	switch (w->consistency) {
	case RPS_BSP:
		return atomic_load(&sh->clock_seen) >= min_clock;
	case RPS_SSP:
		return (uint64_t)atomic_load(&sh->clock_seen) + w->staleness >= min_clock;
	case RPS_ASP:
	default:
		return atomic_load(&sh->wclock_seen) >= min_clock;
	}
}

/* ---- posting ---- */

static struct rps_rpost *rpost_new(struct rps_rposts *out, struct rps_piece *p, uint8_t sub)
{
	struct rps_rpost *r = &out->p[out->n++];

	r->wc = p->conn;
	r->remote_key = p->u.rp.remote_key;
	r->ctx = rps_piece_ctx(p, sub);
	r->nsge = 0;
	return r;
}

/* A READ could not be posted: account it as done with an error (lost: its
 * connection is gone, which aborts the request). */
static void post_failed(struct rps_worker *w, uint64_t ctx, int rc, int lost,
			struct rps_rposts *out)
{
	struct rps_piece *p;
	uint8_t sub = rps_ctx_sub(ctx);

	pthread_mutex_lock(&w->core.lock);
	p = rps_piece_by_ctx(&w->core, ctx);
	if (p && (p->kind == RPS_PK_RPULL || p->kind == RPS_PK_RHDR) && p->u.rp.outstanding) {
		p->u.rp.outstanding--;
		if (sub < RPS_RD_WINDOW)
			p->u.rp.rd[sub].busy = 0;
		if (lost)
			rps_piece_conn_lost_locked(&w->core, p, rc);
		else if (!p->status)
			p->status = rc;
		rps_wread_step_locked(w, p, out); /* failed: posts nothing, finishes when idle */
	}
	rps_wcore_unlock(&w->core);
}

void rps_wread_post_all(struct rps_worker *w, struct rps_rposts *out)
{
	for (int i = 0; i < out->n; i++) {
		struct rps_rpost *r = &out->p[i];
		int marked = rps_wconn_dead(r->wc), rc = marked;

		if (!rc)
			rc = rps_tr_read_remote(r->wc->c, r->sge, r->nsge, r->raddr, r->remote_key,
						r->ctx);
		if (rc) {
			struct rps_rposts none;

			none.n = 0;
			if (rps_wread_conn_lost(rc)) {
				if (!marked) /* once, not per READ of a batch */
					rps_wconn_mark_dead(w, r->wc, rc);
			} else {
				RPS_ERR("server %u channel %u: read: %s", r->wc->srv->rank,
					r->wc->channel, rps_strerror(rc));
			}
			post_failed(w, r->ctx, rc, marked || rps_wread_conn_lost(rc), &none);
		}
	}
	out->n = 0;
}

/* Post the next READ of slot i, if it has one. 0 or -errno (build failed). */
static int slot_step(struct rps_worker *w, struct rps_piece *p, int i, struct rps_rposts *out)
{
	struct rps_rpull *rp = &p->u.rp;
	struct rps_rd *rd = &rp->rd[i];
	struct rps_rpost *r;
	struct rps_wdest dd;
	uint64_t lo, maxc;
	float *dst;
	char *lines;
	int n;

	if (!rd->lines || rd->busy)
		return 0;
	if (rd->torn) {
		uint32_t b = (uint32_t)__builtin_ctzll(rd->torn);
		uint64_t rest = ~(rd->torn >> b);

		lo = rd->lo + b;
		maxc = rest ? (uint64_t)__builtin_ctzll(rest) : 64 - b;
		lines = rd->lines + rps_rplan_lines_off(&rp->plan, b);
		rd->run_lo = b;
	} else if (rp->next < rp->nchunks) {
		lo = rp->next;
		maxc = rp->bounce ? w->read->bper : w->read->per_read;
		lines = rd->lines;
		rd->lo = lo;
		rd->run_lo = 0;
	} else {
		return 0;
	}
	if (rp->bounce) {
		/* chunk rd->lo's data at the block's start, the rest after it */
		dst = (float *)((uintptr_t)rd->bounce - (uintptr_t)rd->lo * rp->plan.chunk_bytes);
		dd.lo = (uintptr_t)rd->bounce;
		dd.hi = dd.lo + w->read->bounce.blk;
		dd.handle = rd->bounce_mrh;
	} else {
		dst = rp->dest;
		dd.lo = rp->dest_lo;
		dd.hi = rp->dest_hi;
		dd.handle = rp->dest_mrh;
	}
	r = rpost_new(out, p, (uint8_t)i);
	n = -EINVAL;
	if (rp->nchunks == 1 && w->read->max_sge >= RPS_RPLAN_MIN_SGE) {
		/* most small keys: the scatter list straight from the geometry */
		r->nsge = rps_rplan_build1(&rp->plan, dst, lines, w->read->junk, r->sge, &r->raddr);
		if (r->nsge)
			n = 1;
	}
	if (n < 0)
		n = rps_rplan_build(&rp->plan, lo, maxc, dst, lines, w->read->junk, r->sge,
				    w->read->max_sge, &r->nsge, &r->raddr);
	if (n < 0) {
		out->n--;
		return n;
	}
	rps_wread_set_handles(w->read, &dd, rd->lines, rd->lines_mrh, r->sge, r->nsge);
	if (rd->torn) {
		rp->torn_retries += (uint64_t)n;
		atomic_fetch_add_explicit(&w->stat_torn, (uint64_t)n, memory_order_relaxed);
	} else {
		rd->n = (uint32_t)n;
		rp->next += (uint64_t)n;
	}
	rd->run_n = (uint32_t)n;
	rd->busy = 1;
	rp->outstanding++;
	return 0;
}

/* slot_step; a plan that cannot be built fails the piece. 0 or -errno. */
int rps_wread_slot_step_or_fail(struct rps_worker *w, struct rps_piece *p, int i,
				struct rps_rposts *out)
{
	int rc = slot_step(w, p, i, out);

	if (rc) {
		RPS_ERR("read pull: no read plan for server %u shard %u: %s", p->server, p->shard,
			rps_strerror(rc));
		p->status = rc;
	}
	return rc;
}

void rps_wread_step_locked(struct rps_worker *w, struct rps_piece *p, struct rps_rposts *out)
{
	struct rps_rpull *rp = &p->u.rp;
	struct rps_wshard *sh = rps_wshard_get(w, p->server, p->shard);
	int idle = 1;

	if (p->status) {
		if (!rp->outstanding && !rp->retry_at)
			rps_piece_clear_locked(&w->core, p, RPS_PW_READ, 0);
		return;
	}
	if (rp->phase == RPS_RP_HDR) {
		struct rps_rpost *r;

		if (rp->outstanding)
			return;
		if (rp->next) { /* header read and checked */
			rps_piece_clear_locked(&w->core, p, RPS_PW_READ, 0);
			return;
		}
		r = rpost_new(out, p, RPS_RD_SUB_HDR);
		r->sge[0].addr = rp->rd[0].lines;
		/* the header line and the clock line after it */
		r->sge[0].len = RPS_STORE_WCLOCK_OFF;
		r->sge[0].handle = rp->rd[0].lines_mrh;
		r->nsge = 1;
		r->raddr = sh->desc.addr;
		rp->outstanding++;
		return;
	}
	if (rp->phase == RPS_RP_CLOCK) {
		if (!rps_wread_clock_ok(w, sh, rp->min_clock)) {
			if (!rp->outstanding && !rp->retry_at) {
				struct rps_rpost *r = rpost_new(out, p, RPS_RD_SUB_CLOCK);

				r->sge[0].addr = rp->rd[0].lines;
				r->sge[0].len = sizeof(uint64_t);
				r->sge[0].handle = rp->rd[0].lines_mrh;
				r->nsge = 1;
				r->raddr = rp->clock_raddr;
				rp->outstanding++;
			}
			return;
		}
		if (rp->nchunks && w->consistency != RPS_ASP)
			rps_wstat_staleness(w, rp->min_clock, atomic_load(&sh->clock_seen));
		rp->phase = RPS_RP_DATA;
	}
	for (int i = 0; i < RPS_RD_WINDOW; i++) {
		if (rps_wread_slot_step_or_fail(w, p, i, out))
			break;
		if (rp->rd[i].busy || rp->rd[i].torn)
			idle = 0;
	}
	if (p->status) {
		if (!rp->outstanding)
			rps_piece_clear_locked(&w->core, p, RPS_PW_READ, 0);
		return;
	}
	if (idle && !rp->outstanding && rp->next >= rp->nchunks)
		rps_piece_clear_locked(&w->core, p, RPS_PW_READ, 0);
}

/* ---- pieces ---- */

void rps_wread_piece_fini_locked(struct rps_worker *w, struct rps_piece *p)
{
	struct rps_rpull *rp = &p->u.rp;

	if (p->kind != RPS_PK_RPULL && p->kind != RPS_PK_RHDR)
		return;

	if (rp->retry_at) {
		for (struct rps_piece **pp = &w->read->retry_head; *pp; pp = &(*pp)->next) {
			if (*pp == p) {
				*pp = p->next;
				break;
			}
		}
		rp->retry_at = 0;
	}
	for (int i = 0; i < RPS_RD_WINDOW; i++) {
		if (rp->rd[i].lines && w->read)
			rps_wread_scratch_put_locked(w, rp->rd[i].lines, rp->rd[i].lines_mrh);
		rp->rd[i].lines = NULL;
		if (rp->rd[i].bounce && w->read)
			rps_wread_blk_put_locked(&w->read->bounce, rp->rd[i].bounce,
						 rp->rd[i].bounce_mrh);
		rp->rd[i].bounce = NULL;
	}
	rps_wreg_put(rp->reg);
	rp->reg = NULL;
}

void rps_wread_bounce_out(struct rps_rpull *rp, const struct rps_rd *rd)
{
	uint64_t epc = rp->plan.chunk_bytes / sizeof(float);
	uint64_t e0 = rd->lo * epc, e1 = RPS_MIN(rp->plan.nelems, (rd->lo + rd->n) * epc);

	if (rp->lp_prec) { /* words of a low-precision copy: widen (worker/lowprec.h) */
		uint64_t h0 = 2 * e0, h1 = RPS_MIN(rp->lp_n, 2 * e1);

		if (h1 > h0)
			rps_wlp_widen(rp->lp_prec, rd->bounce, rp->dest + h0, h1 - h0);
		return;
	}
	if (e1 > e0)
		memcpy(rp->dest + e0, rd->bounce, (e1 - e0) * sizeof(float));
}

/* The READ plan of a slice: its place and geometry (DECLARE_ACK) checked
 * against the shard's store: its chunks lie after the store's data_off,
 * 8-aligned, wholly inside the registered region. 0 or -EPROTO. */
int rps_wread_slice_plan(struct rps_worker *w, const struct rps_wslice *sl, struct rps_rplan *plan)
{
	struct rps_wserver *srv = &w->servers[sl->server];
	struct rps_wshard *sh = &srv->shards[sl->shard];
	uint64_t off, span;

	plan->chunk_bytes = sl->chunk_bytes;
	plan->line = sl->line;
	plan->last_bytes = sl->last_bytes;
	plan->nelems = sl->nelems;
	if (!sh->data_off || !sl->chunk_bytes || sl->chunk_bytes > srv->chunk_bytes ||
	    (sl->line != RPS_STORE_WORD && sl->line != RPS_STORE_LINE))
		return -EPROTO; /* store header not read, or no geometry from the ack */
	/* store_off names chunk 0's data; its begin line is just before */
	if (sl->store_off < sl->line)
		return -EPROTO;
	off = sl->store_off - sl->line;
	if (off < sh->data_off || off % RPS_STORE_WORD)
		return -EPROTO;
	span = rps_rplan_span(plan);
	if (off > sh->desc.size || span > sh->desc.size - off)
		return -EPROTO;
	plan->raddr0 = sh->desc.addr + off;
	return 0;
}

/* A new RPULL piece of req for a slice, set up to its first step, with
 * scratch for its read slots. Under core.lock; NULL when out of pieces (req
 * failed). A slice that does not fit the shard's store leaves p->status set. */
struct rps_piece *rps_wread_rpull_new_locked(struct rps_worker *w, struct rps_req *req,
					     uint32_t server, uint32_t shard,
					     const struct rps_wslice *sl, float *dest,
					     struct rps_wreg *reg, uint32_t min_clock)
{
	struct rps_wshard *sh = rps_wshard_get(w, server, shard);
	struct rps_piece *p = rps_piece_alloc_locked(&w->core, req, RPS_PK_RPULL, RPS_PW_READ);
	struct rps_rpull *rp;
	uint64_t slots, per;
	int rc;

	if (!p) {
		rps_wreq_fail_locked(req, -ENOMEM);
		return NULL;
	}
	p->conn = sh->conn;
	p->server = server;
	p->shard = shard;
	rp = &p->u.rp;
	memset(rp, 0, sizeof(*rp));
	rp->dest = dest;
	if (reg) {
		rps_wreg_hold(reg);
		rp->reg = reg;
		rp->dest_lo = atomic_load_explicit(&reg->lo, memory_order_relaxed);
		rp->dest_hi = atomic_load_explicit(&reg->hi, memory_order_relaxed);
		rp->dest_mrh = reg->handle;
	} else {
		rp->bounce = dest != NULL;
	}
	rp->remote_key = sh->desc.remote_key;
	rp->min_clock = min_clock;
	rp->phase = RPS_RP_CLOCK;
	if (w->consistency == RPS_ASP)
		rp->clock_raddr = sh->desc.addr + RPS_STORE_WCLOCK_OFF + 8ull * w->rank;
	else
		rp->clock_raddr = sh->desc.addr + RPS_STORE_CLOCK_OFF;
	if (dest && sl && sl->lp_nelems) { /* a low-precision copy (worker/lowprec.h) */
		rp->lp_prec = sl->lp_prec;
		rp->lp_n = sl->lp_nelems;
	}
	if (dest && sl) {
		rc = rps_wread_slice_plan(w, sl, &rp->plan);
		if (!rc)
			rp->nchunks = rps_rplan_nchunks(&rp->plan);
		if (rc) {
			RPS_ERR("read pull: slice at store offset %llu does not fit shard %u/%u",
				(unsigned long long)sl->store_off, server, shard);
			p->status = rc;
			return p;
		}
	}
	per = rp->bounce ? w->read->bper : w->read->per_read;
	slots = rp->nchunks <= per ? 1 : (rp->nchunks + per - 1) / per;
	slots = RPS_MIN(slots, (uint64_t)RPS_RD_WINDOW);
	for (uint64_t i = 0; i < slots; i++) {
		struct rps_rd *rd = &rp->rd[i];

		rd->lines = rps_wread_scratch_get_locked(w, &rd->lines_mrh);
		if (rd->lines && rp->bounce && rp->nchunks)
			rd->bounce = rps_wread_blk_get_locked(w, &w->read->bounce, &rd->bounce_mrh);
		if (!rd->lines || (rp->bounce && rp->nchunks && !rd->bounce)) {
			p->status = -ENOMEM;
			break;
		}
		rp->nslots++;
	}
	return p;
}

int rps_wread_submit_slice(struct rps_worker *w, struct rps_req *req, uint32_t server,
			   uint32_t shard, const struct rps_wslice *sl, float *dest,
			   struct rps_wreg *reg, uint32_t min_clock)
{
	struct rps_rposts out;
	struct rps_piece *p;
	int rc;

	out.n = 0;
	pthread_mutex_lock(&w->core.lock);
	p = rps_wread_rpull_new_locked(w, req, server, shard, sl, dest, reg, min_clock);
	if (!p) {
		pthread_mutex_unlock(&w->core.lock);
		return -ENOMEM;
	}
	rc = p->status;
	rps_wread_step_locked(w, p, &out);
	pthread_mutex_unlock(&w->core.lock);
	rps_wread_post_all(w, &out);
	return rc;
}
