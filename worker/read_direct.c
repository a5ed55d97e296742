/* The read strategy's one-key pull (rps_wread_pull1): a one-chunk slice
 * as a direct request (one READ, no piece, no event, finished by whoever
 * waits for it), or one piece posted at once; see worker/read.h. */
#include <errno.h>
#include <string.h>

#include "src/log.h"
#include "src/store.h"
#include "src/util.h"
#include "worker/read.h"

void rps_wread_direct_fini_locked(void *arg, struct rps_req *req)
{
	rps_wread_scratch_put_locked(arg, req->dr.lines, req->dr.lines_mrh);
	req->dr.lines = NULL;
}

/* Post dr's READ. 0 or -errno; a READ not posted leaves dr finished with
 * that status. */
static int direct_post(struct rps_worker *w, struct rps_rdirect *dr)
{
	int marked, rc;

	rps_wsubmit_enter(w);
	marked = rps_wconn_dead(dr->conn);
	rc = marked ? marked
		    : rps_tr_read_notify(dr->conn->c, dr->sge, dr->nsge, dr->raddr, dr->remote_key,
					 &dr->done);
	rps_wsubmit_leave(w);
	if (rc) {
		if (!rps_wread_conn_lost(rc))
			RPS_ERR("server %u channel %u: read: %s", dr->conn->srv->rank,
				dr->conn->channel, rps_strerror(rc));
		else if (!marked)
			rps_wconn_mark_dead(w, dr->conn, rc);
		dr->done.status = rc;
		atomic_store_explicit(&dr->done.state, RPS_TR_DONE, memory_order_release);
	}
	return rc;
}

/* Is req's READ back, clean? Torn: read it again. 1: finished. */
static int direct_step(void *arg, struct rps_req *req, int arm)
{
	struct rps_worker *w = arg;
	struct rps_rdirect *dr = &req->dr;
	int st = atomic_load_explicit(&dr->done.state, memory_order_acquire), torn;

	if (st != RPS_TR_DONE) {
		/* lost to the completion: the caller's check under the lock sees it */
		if (arm && st == RPS_TR_PENDING)
			atomic_compare_exchange_strong(&dr->done.state, &st, RPS_TR_PENDING_WAKE);
		return 0;
	}
	if (dr->done.status) {
		if (rps_wread_conn_lost(dr->done.status))
			rps_wconn_mark_dead(w, dr->conn, dr->done.status);
		req->status = dr->done.status;
		return 1;
	}
	if (dr->copy) {
		torn = rps_rplan_torn_whole1(dr->lines, dr->line, dr->len);
		if (!torn)
			memcpy(dr->dest, dr->lines + dr->line, dr->copy);
	} else {
		torn = rps_rplan_torn(dr->lines, 1, dr->line) != 0;
	}
	if (!torn)
		return 1;
	atomic_fetch_add_explicit(&w->stat_torn, 1, memory_order_relaxed);
	if (direct_post(w, dr)) {
		req->status = dr->done.status;
		return 1;
	}
	return 0;
}

/* rps_wcore.direct_step: direct_step; a finished request lets go of the
 * registered buffer it read into. */
int rps_wread_direct_step(void *arg, struct rps_req *req, int arm)
{
	int done = direct_step(arg, req, arm);

	if (done && req->dr.reg) {
		rps_wreg_put(req->dr.reg);
		req->dr.reg = NULL;
	}
	return done;
}

/* dr's READ as build1's scatter list: begin line and end line into scratch,
 * the data straight into dest (its tensor's buffer: vals, len bytes), which
 * must lie in a registered buffer. 0 if it does not, or the plan is not for
 * build1: then the general path reads it through a bounce block. */
static int direct_scatter(struct rps_worker *w, struct rps_rdirect *dr,
			  const struct rps_rplan *plan, float *dest, float *vals, size_t len)
{
	struct rps_wread *sc = w->read;
	struct rps_wreg *reg;
	struct rps_wdest dd;

	dr->nsge = rps_rplan_build1(plan, dest, dr->lines, sc->junk, dr->sge, &dr->raddr);
	if (!dr->nsge)
		return 0;
	reg = rps_wreg_get(w, vals, len);
	if (!reg)
		return 0;
	dd.lo = atomic_load_explicit(&reg->lo, memory_order_relaxed);
	dd.hi = atomic_load_explicit(&reg->hi, memory_order_relaxed);
	dd.handle = reg->handle;
	rps_wread_set_handles(sc, &dd, dr->lines, dr->lines_mrh, dr->sge, dr->nsge);
	dr->reg = reg;
	dr->copy = 0;
	return 1;
}

/* A one-chunk slice whose clock condition holds: one READ, finished by the
 * caller's wait or test. A chunk that fits a scratch block is read whole
 * (one sge) and its data copied out when clean; a bigger one by build1's
 * scatter list. -EAGAIN: use the general path (which also reports what went
 * wrong here). */
static int direct_pull(struct rps_worker *w, const struct rps_wslice *sl, struct rps_wshard *sh,
		       float *vals, size_t len, uint32_t min_clock, struct rps_req **req_p)
{
	struct rps_rplan plan;
	struct rps_rdirect *dr;
	struct rps_req *req;
	uint32_t whole;

	if (rps_wread_slice_plan(w, sl, &plan))
		return -EAGAIN;
	req = rps_wreq_new_direct(&w->core);
	if (!req)
		return -EAGAIN;
	dr = &req->dr;
	dr->reg = NULL;
	if (!dr->lines) {
		pthread_mutex_lock(&w->core.lock);
		dr->lines = rps_wread_scratch_get_locked(w, &dr->lines_mrh);
		pthread_mutex_unlock(&w->core.lock);
		if (!dr->lines)
			goto err;
	}
	dr->conn = sh->conn;
	dr->remote_key = sh->desc.remote_key;
	dr->line = plan.line;
	whole = rps_rplan_whole1(&plan);
	if (whole && whole <= w->read->scratch.blk) {
		dr->sge[0] =
		    (struct rps_tr_sge){.addr = dr->lines, .len = whole, .handle = dr->lines_mrh};
		dr->nsge = 1;
		dr->raddr = plan.raddr0;
		dr->dest = vals + sl->offset;
		dr->len = whole - 2u * plan.line;
		dr->copy = (uint32_t)(plan.nelems * sizeof(float));
	} else if (!direct_scatter(w, dr, &plan, vals + sl->offset, vals, len)) {
		goto err;
	}
	if (w->consistency != RPS_ASP)
		rps_wstat_staleness(w, min_clock, atomic_load(&sh->clock_seen));
	if (direct_post(w, dr))
		goto err;
	atomic_fetch_add_explicit(&w->stat_pulls, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&w->stat_direct, 1, memory_order_relaxed);
	*req_p = req;
	return 0;
err:
	rps_wreg_put(dr->reg);
	dr->reg = NULL;
	rps_wreq_free_direct(req);
	return -EAGAIN;
}

int rps_wread_pull1(struct rps_worker *w, const struct rps_wkey *k, float *vals, uint32_t min_clock,
		    struct rps_req **req_p)
{
	const struct rps_wslice *sl;
	struct rps_wshard *sh;
	struct rps_wreg *reg;
	uint64_t nch;
	struct rps_rposts out;
	struct rps_piece *p;
	struct rps_req *req;

	if (!k || k->nslices != 1)
		return -EAGAIN;
	sl = &k->slices[0];
	sh = rps_wshard_get(w, sl->server, sl->shard);
	nch = rps_store_geom_nchunks(sl->chunk_bytes, sl->nelems);
	/* a clock read first, a read plan that may not fit, several READs, a
	 * connection being replaced: all for the general path */
	if (!sh->data_off || !sl->chunk_bytes || rps_wconn_dead(sh->conn) ||
	    !rps_wread_clock_ok(w, sh, min_clock) || nch > w->read->per_read)
		return -EAGAIN;
	/* one chunk: a direct request, unless the caller is the progress thread
	 * (a callback; it must not wait) */
	if (w->read->direct && nch == 1 && !rps_wcore_on_progress(&w->core) &&
	    direct_pull(w, sl, sh, vals, k->nelems * sizeof(float), min_clock, req_p) == 0)
		return 0;
	reg = rps_wreg_get(w, vals, k->nelems * sizeof(float));
	out.n = 0;
	rps_wsubmit_enter(w);
	pthread_mutex_lock(&w->core.lock);
	req = rps_wreq_new_locked(&w->core, NULL, NULL);
	if (!req) {
		pthread_mutex_unlock(&w->core.lock);
		rps_wsubmit_leave(w);
		rps_wreg_put(reg);
		return -ENOMEM;
	}
	p = rps_wread_rpull_new_locked(w, req, sl->server, sl->shard, sl, vals + sl->offset, reg,
				       min_clock);
	rps_wreg_put(reg); /* the piece holds its own */
	if (p && !p->status) {
		/* the clock condition holds: to the data at once, as step_locked's
		 * CLOCK phase would go */
		if (w->consistency != RPS_ASP)
			rps_wstat_staleness(w, min_clock, atomic_load(&sh->clock_seen));
		p->u.rp.phase = RPS_RP_DATA;
		if (p->u.rp.nslots == 1)
			rps_wread_slot_step_or_fail(w, p, 0, &out);
		else /* bounce blocks hold fewer chunks: every slot */
			rps_wread_step_locked(w, p, &out);
	}
	if (p && p->status)
		rps_wread_step_locked(w, p, &out); /* failed: finishes the piece */
	rps_wreq_seal_locked(req);
	pthread_mutex_unlock(&w->core.lock);
	rps_wread_post_all(w, &out);
	rps_wsubmit_leave(w);
	atomic_fetch_add_explicit(&w->stat_pulls, 1, memory_order_relaxed);
	*req_p = req;
	return 0;
}
