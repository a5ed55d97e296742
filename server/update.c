/* The update thread's work: applying pushes (ASP/SSP), summing them (BSP),
 * first assignments (RPS_INIT_PUSH), assignments (ASSIGN), and the clocks.
 *
 * Clocks (docs/protocol.md): a shard counts, per worker and clock, the pushes
 * it applied (BSP: accumulated) and learns from CLOCK how many there were.
 * Worker w is done with clock c when both agree; then worker_clock[w] = c + 1
 * and clock = min over live workers. Counts are kept in a window of `win`
 * clocks per worker starting at worker_clock[w].
 *
 * BSP: the shard accumulates one clock at a time. A push for a later clock
 * (which a well-behaved worker never sends) waits on the deferred list. When
 * every live worker is done with clock c, each dirty slice's sum is applied
 * once with step = c and the clock becomes c + 1.
 *
 * The thread itself (rps_shard_start / rps_shard_stop) pops the shard's ring
 * and hands each entry to rps_shard_handle.
 */
#include "server/update.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "server/bsp_sum.h"
#include "server/codec_push.h"
#include "server/ckpt.h"
#include "server/ckpt_async.h"
#include "server/lowprec.h"
#include "server/pull.h"
#include "server/repl.h"
#include "server/snap.h"
#include "server/table.h"
#include "src/alloc.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/util.h"

#define RPS_STALE_WARNINGS 3

/* ---- validation and ring entries (network thread) --------------------------- */

int rps_shard_push_check(const struct rps_shard *sh, const struct rps_push *p,
			 struct rps_slice_meta **meta_p)
{
	struct rps_slice_meta *m = rps_srv_keytab_lookup(&sh->tab, p->key, p->slice);

	if (!m)
		return -ENOENT;
	if (p->offset > m->nelems || p->count > m->nelems - p->offset)
		return -EINVAL;
	*meta_p = m;
	return 0;
}

void rps_shard_push_entry(const struct rps_shard *sh, struct rps_srv_req *req,
			  struct rps_ring_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->shard = sh->p.idx;
	e->ptr = req;
	e->ptr2 = req->sc;
	e->info.worker = req->worker;
	if (req->op == RPS_REQ_PUSH) {
		const struct rps_push *p = &req->u.push;
		uint64_t clock = rps_store_clock(&sh->store);

		e->type = RPS_ENT_PUSH;
		e->info.key = p->key;
		e->info.clock = p->clock;
		e->info.staleness = clock > p->clock ? (uint32_t)(clock - p->clock) : 0;
		e->info.timestamp_ns = p->timestamp_ns;
		e->info.norm = p->norm;
		e->info.nelems = p->count;
	} else {
		/* control entries (and assignments): as fresh and as urgent as
		 * anything */
		e->type = req->op == RPS_REQ_ASSIGN ? RPS_ENT_ASSIGN : RPS_ENT_DECLARE;
		e->info.key = req->op == RPS_REQ_ASSIGN ? req->u.push.key : req->u.decl.key;
		e->info.timestamp_ns = UINT64_MAX;
		e->info.norm = INFINITY;
	}
}

/* ---- applying (update thread) ------------------------------------------------ */

/* Gradient clipping is per tensor: the worker sends the L2 norm of the whole
 * tensor (key) with each of its pieces, and every piece is scaled by
 * min(1, clip_norm / tensor_norm), so the result does not depend on how the
 * tensor was cut into slices and frames. A piece without a tensor norm
 * (tensor_norm 0) is taken as a tensor of its own. Under BSP each worker's
 * tensor is clipped before it is added to the clock's sum; the sum itself is
 * applied as it is. clip_norm is the slice's: its spec's, or the shard's
 * default. */
static float clip_scale(const struct rps_shard *sh, const struct rps_slice_meta *m,
			const struct rps_push *p, const float *g)
{
	float c = m->spec ? m->spec->opts.clip_norm : sh->p.optim.clip_norm;
	float nrm;

	if (!(c > 0) || !p->count)
		return 1.0f;
	nrm = p->tensor_norm > 0 ? p->tensor_norm : cblas_snrm2((int)p->count, g, 1);
	return nrm > c ? c / nrm : 1.0f;
}

/* Elements [off, off + n) of a slice from g[0..n), chunk run by chunk run,
 * each under its chunk's seqlock: one optimizer step (assign false) of the
 * slice's optimizer (its spec, or the shard's default), without clipping
 * (done per tensor, above) or, for RPS_INIT_PUSH, the values become the
 * parameters (assign true). */
static inline void write_runs(struct rps_shard *sh, struct rps_slice_meta *m, uint64_t off,
			      uint64_t n, float *g, bool assign, uint64_t step, uint32_t staleness)
{
	const struct rps_optim_opts *o = m->spec ? &m->spec->noclip : &sh->optim_noclip;
	uint32_t epc = m->sl.epc;
	uint64_t e = off, end = off + n;

	while (e < end) {
		uint64_t c = e / epc;
		uint64_t i = e % epc;
		uint64_t len = RPS_MIN(epc - i, end - e);
		float *w = rps_store_chunk_data(&sh->store, &m->sl, c) + i;

		rps_ckpt_cow_chunk(m, c); /* a snapshot in flight keeps the old values */
		rps_store_write_begin(&sh->store, &m->sl, c);
		if (assign)
			memcpy(w, g + (e - off), len * sizeof(float));
		else
			rps_optim_apply(o, w, g + (e - off), m->opt.m ? m->opt.m + e : NULL,
					m->opt.v ? m->opt.v + e : NULL, len, step, staleness);
		rps_store_write_end(&sh->store, &m->sl, c);
		rps_lp_refresh(sh, m, e, len); /* its low-precision copy, if any */
		e += len;
	}
}

static void step_runs(struct rps_shard *sh, struct rps_slice_meta *m, uint64_t off, uint64_t n,
		      float *g, uint64_t step, uint32_t staleness)
{
	write_runs(sh, m, off, n, g, false, step, staleness);
}

/* RPS_INIT_PUSH: the piece's values become the parameters; the slice leaves
 * pending_init once every element was assigned. */
static void assign_runs(struct rps_shard *sh, struct rps_slice_meta *m, uint64_t off, uint64_t n,
			float *g)
{
	uint64_t end = off + n;

	write_runs(sh, m, off, n, g, true, 0, 0);
	for (uint64_t e = off; e < end; e++) {
		uint8_t bit = (uint8_t)(1u << (e & 7));

		if (!(m->assigned_map[e >> 3] & bit)) {
			m->assigned_map[e >> 3] |= bit;
			m->assigned++;
		}
	}
	if (m->assigned == m->nelems) {
		m->pending_init = 0;
		rps_free(m->assigned_map);
		m->assigned_map = NULL;
		RPS_DEBUG("shard %u: key %llu slice %u assigned by its first pushes", sh->p.idx,
			  (unsigned long long)m->key, m->slice);
	}
}

/* ASSIGN (rps_worker_load_model): elements [offset, offset + count) of the
 * slice become the values, under the seqlocks as every write, and the
 * optimizer starts afresh on them: their state is zeroed and the slice's step
 * count goes back to 0 (under BSP the step is the clock, which stays). It is
 * no push of any clock: neither counted for a worker's clock nor held back
 * under BSP. An open BSP clock's sum (pushes already received) is still
 * applied when that clock ends. A refused one (unknown key, wrong offset or
 * count) only answers with its status. */
static void handle_assign(struct rps_shard *sh, struct rps_srv_req *req)
{
	const struct rps_push *p = &req->u.push;
	struct rps_slice_meta *m = req->meta;

	if (!req->status && p->count) {
		if (m->pending_init)
			assign_runs(sh, m, p->offset, p->count, req->data);
		else
			write_runs(sh, m, p->offset, p->count, req->data, true, 0, 0);
		if (m->opt.m)
			memset(m->opt.m + p->offset, 0, p->count * sizeof(float));
		if (m->opt.v)
			memset(m->opt.v + p->offset, 0, p->count * sizeof(float));
		m->elems_applied = 0;
		m->opt.step = 0;
		RPS_DEBUG("shard %u: key %llu slice %u [%llu, +%u) assigned by worker %u",
			  sh->p.idx, (unsigned long long)p->key, p->slice,
			  (unsigned long long)p->offset, p->count, req->worker);
	}
	sh->io->push_done(sh->io_arg, sh, req, req->status);
}

static void apply_push(struct rps_shard *sh, struct rps_srv_req *req)
{
	const struct rps_push *p = &req->u.push;
	struct rps_slice_meta *m = req->meta;

	if (!p->count)
		return;
	if (m->pending_init) {
		assign_runs(sh, m, p->offset, p->count, req->data);
	} else if (sh->p.consistency == RPS_BSP) {
		rps_bsp_sum_add(m, req->worker, p->offset, p->count,
				clip_scale(sh, m, p, req->data), req->data);
		if (!m->dirty) {
			m->dirty = 1;
			m->dirty_next = sh->dirty;
			sh->dirty = m;
		}
	} else {
		uint64_t step = m->elems_applied / (m->nelems ? m->nelems : 1);
		uint32_t stale = sh->clock > p->clock ? (uint32_t)(sh->clock - p->clock) : 0;

		float scale = clip_scale(sh, m, p, req->data);

		if (scale != 1.0f)
			cblas_sscal((int)p->count, scale, req->data, 1);
		step_runs(sh, m, p->offset, p->count, req->data, step, stale);
		m->elems_applied += p->count;
		m->opt.step = m->elems_applied / (m->nelems ? m->nelems : 1);
	}
	atomic_fetch_add_explicit(&sh->pushes_applied, 1, memory_order_relaxed);
}

/* BSP: apply the sums of clock c once each (each summed in worker-rank
 * order, bsp_sum.h). */
static void apply_dirty(struct rps_shard *sh, uint64_t c)
{
	struct rps_slice_meta *m = sh->dirty;

	sh->dirty = NULL;
	while (m) {
		struct rps_slice_meta *n = m->dirty_next;
		float *sum = rps_bsp_sum_total(m); /* in worker-rank order */

		if (sum)
			step_runs(sh, m, 0, m->nelems, sum, c, 0);
		rps_bsp_sum_clear(m);
		m->opt.step = c + 1;
		m->dirty = 0;
		m->dirty_next = NULL;
		m = n;
	}
}

/* ---- clocks ---------------------------------------------------------------------- */

static void shard_advance(struct rps_shard *sh)
{
	uint64_t min = UINT64_MAX;

	for (uint32_t w = 0; w < sh->p.nworkers; w++)
		if (sh->live[w] && sh->wclock[w] < min)
			min = sh->wclock[w];
	if (min == UINT64_MAX || min <= sh->clock)
		return; /* no live worker, or no progress */
	if (sh->p.consistency == RPS_BSP) {
		while (sh->clock < min) {
			apply_dirty(sh, sh->clock);
			if (sh->tables)
				rps_shard_tables_apply_clock(sh, sh->clock);
			sh->clock++;
			rps_shard_creq_at_clock(sh); /* a request for this clock */
			rps_shard_ckpt_maybe(sh);    /* every clock boundary: one cut */
		}
		sh->redo = 1;
	} else {
		sh->clock = min;
	}
	rps_store_set_clock(&sh->store, sh->clock);
	sh->changed = 1;
	RPS_TRACE("shard %u: clock %llu", sh->p.idx, (unsigned long long)sh->clock);
	if (sh->p.consistency != RPS_BSP)
		rps_shard_ckpt_maybe(sh); /* at the clock boundary (BSP: in the loop) */
	if (RPS_FAULT_SHOULD_KILL("server", (int)atomic_load(&sh->server_rank), sh->clock)) {
		char why[96];

		snprintf(why, sizeof(why), "server %d shard %u reached clock %llu (kill_at_clock)",
			 (int)atomic_load(&sh->server_rank), sh->p.idx,
			 (unsigned long long)sh->clock);
		rps_fault_kill(why);
	}
}

static void worker_progress(struct rps_shard *sh, uint32_t w)
{
	uint32_t mask = sh->win - 1;
	uint64_t wc = sh->wclock[w];
	size_t base = (size_t)w * sh->win;

	for (;;) {
		size_t slot = base + (wc & mask);

		if (sh->expected[slot] == RPS_CLOCK_NONE || sh->applied[slot] < sh->expected[slot])
			break;
		sh->expected[slot] = RPS_CLOCK_NONE;
		sh->applied[slot] = 0;
		wc++;
	}
	if (wc == sh->wclock[w])
		return;
	sh->wclock[w] = wc;
	rps_store_set_worker_clock(&sh->store, w, wc);
	sh->changed = 1;
	shard_advance(sh);
}

/* Slot of (w, clock) in the window, or NULL (with a warning naming `what`,
 * none for an old clock if what is NULL) if outside. */
static uint32_t *clock_slot(struct rps_shard *sh, uint32_t *arr, uint32_t w, uint32_t clock,
			    const char *what)
{
	uint64_t wc = sh->wclock[w];

	if (clock < wc && !what)
		return NULL;
	if (clock < wc) {
		/* a worker that rejoined may run through old clocks: say it a few
		 * times, not for every frame */
		if (sh->nwarn[w] < RPS_STALE_WARNINGS)
			RPS_WARN("shard %u: %s from worker %u for clock %u, which it already "
				 "finished (clock %llu)%s",
				 sh->p.idx, what, w, clock, (unsigned long long)wc,
				 sh->nwarn[w] + 1 == RPS_STALE_WARNINGS ? "; no more of these"
									: "");
		if (sh->nwarn[w] < RPS_STALE_WARNINGS)
			sh->nwarn[w]++;
		return NULL;
	}
	if (clock - wc >= sh->win) {
		RPS_WARN("shard %u: %s from worker %u for clock %u, %llu clocks ahead: not counted",
			 sh->p.idx, what ? what : "push", w, clock,
			 (unsigned long long)(clock - wc));
		return NULL;
	}
	return &arr[(size_t)w * sh->win + (clock & (sh->win - 1))];
}

static void handle_push(struct rps_shard *sh, struct rps_srv_req *req)
{
	const struct rps_push *p = &req->u.push;
	uint32_t w = req->worker;
	uint32_t *slot;
	int status = req->status;

	if (req->has_seq && rps_repl_seen_check(sh, w, req->seq)) {
		/* resent after a failure, already applied here: once only */
		RPS_LOG_RATELIMITED(RPS_LOG_INFO, "shard %u: push of worker %u (sequence number "
				    "%llu) seen already: acknowledged, not applied again",
				    sh->p.idx, w, (unsigned long long)req->seq);
		sh->io->push_done(sh->io_arg, sh, req, 0);
		return;
	}

	if (sh->p.consistency == RPS_BSP && p->clock > sh->clock && w < sh->p.nworkers &&
	    sh->live[w]) {
		/* a push for a later clock: keep it until the shard gets there
		 * (its sequence number is counted as seen already) */
		req->has_seq = 0;
		req->next = NULL;
		if (sh->deferred_tail)
			sh->deferred_tail->next = req;
		else
			sh->deferred = req;
		sh->deferred_tail = req;
		return;
	}
	if (!status && req->codec)
		status = req->status = rps_srv_push_widen(sh, req); /* codec_push.c */
	if (!status) {
		if (sh->p.consistency == RPS_BSP && p->clock < sh->clock && w < sh->p.nworkers &&
		    sh->nwarn[w] < RPS_STALE_WARNINGS)
			RPS_WARN("shard %u: push of key %llu from worker %u for clock %u, shard at "
				 "%llu: summed into the current clock",
				 sh->p.idx, (unsigned long long)p->key, w, p->clock,
				 (unsigned long long)sh->clock);
		apply_push(sh, req);
	}
	if (w < sh->p.nworkers) {
		/* a refused push for a finished clock is noise, not news */
		slot = clock_slot(sh, sh->applied, w, p->clock, status ? NULL : "push");
		if (slot)
			(*slot)++;
	}
	sh->io->push_done(sh->io_arg, sh, req, status);
	if (w < sh->p.nworkers)
		worker_progress(sh, w);
}

/* Tables (table.c): a row push frame counts for its clock as a PUSH does. */
void rps_shard_count_push(struct rps_shard *sh, uint32_t w, uint32_t clock, int status)
{
	uint32_t *slot;

	if (w >= sh->p.nworkers)
		return;
	slot = clock_slot(sh, sh->applied, w, clock, status ? NULL : "row push");
	if (slot)
		(*slot)++;
}

void rps_shard_push_progress(struct rps_shard *sh, uint32_t w)
{
	if (w < sh->p.nworkers)
		worker_progress(sh, w);
}

static void handle_clock(struct rps_shard *sh, uint32_t w, uint32_t clock, uint64_t pushes)
{
	uint32_t *slot;

	if (w >= sh->p.nworkers)
		return;
	if (pushes & RPS_ENT_CLOCK_RESENT) {
		/* sent again after a failover (replicated shards): one this
		 * shard finished already is no news */
		pushes &= ~RPS_ENT_CLOCK_RESENT;
		if (clock < sh->wclock[w])
			return;
	}
	slot = clock_slot(sh, sh->expected, w, clock, "clock");
	if (!slot)
		return;
	*slot = pushes >= RPS_CLOCK_NONE ? RPS_CLOCK_NONE - 1 : (uint32_t)pushes;
	worker_progress(sh, w);
}

/* A worker is gone (pid: the incarnation the notice is about, 0 any). The
 * notice comes by the control channel, the replacement's SYNC by the data
 * path: a notice about an older incarnation handled after its replacement
 * synced must not make the replacement dead. */
static void handle_dead(struct rps_shard *sh, uint32_t w, uint32_t pid)
{
	if (w >= sh->p.nworkers || !sh->live[w])
		return;
	if (pid && sh->wpid[w] && sh->wpid[w] != pid) {
		RPS_DEBUG("shard %u: notice of worker %u (pid %u) gone ignored: its replacement "
			  "(pid %u) synced already",
			  sh->p.idx, w, pid, sh->wpid[w]);
		return;
	}
	sh->live[w] = 0;
	sh->wpid[w] = 0;
	if (!sh->p.idx)
		RPS_INFO(
		    "worker %u no longer waited for: shard 0 at clock %llu, the worker at %llu", w,
		    (unsigned long long)sh->clock, (unsigned long long)sh->wclock[w]);
	else
		RPS_DEBUG("shard %u: worker %u gone at shard clock %llu", sh->p.idx, w,
			  (unsigned long long)sh->clock);
	shard_advance(sh);
	sh->redo = 1; /* its deferred pushes are no longer held back */
}

/* A worker took a dead worker's rank: wait for it again, from the shard's
 * clock on (its pushes for older clocks are applied, not counted). */
static void handle_revive(struct rps_shard *sh, uint32_t w, uint32_t pid)
{
	size_t base = (size_t)w * sh->win;

	if (w >= sh->p.nworkers || sh->live[w])
		return;
	sh->live[w] = 1;
	sh->wpid[w] = pid;
	sh->nwarn[w] = 0;
	if (sh->wclock[w] < sh->clock)
		sh->wclock[w] = sh->clock;
	for (uint32_t i = 0; i < sh->win; i++) {
		sh->applied[base + i] = 0;
		sh->expected[base + i] = RPS_CLOCK_NONE;
	}
	rps_store_set_worker_clock(&sh->store, w, sh->wclock[w]);
	sh->changed = 1;
	RPS_DEBUG("shard %u: worker %u back at clock %llu", sh->p.idx, w,
		  (unsigned long long)sh->wclock[w]);
}

/* A worker (re)connected and says it finished every clock before `clock`
 * (RPS_OP_SYNC): a worker that joined a running job, or one that reconnected
 * to this restarted server. Waited for (again) from max(what we had, clock). */
static void handle_sync(struct rps_shard *sh, uint32_t w, uint32_t clock, uint32_t pid)
{
	size_t base = (size_t)w * sh->win;
	int fresh; /* a new incarnation: what the old one counted is not its */

	if (w >= sh->p.nworkers)
		return;
	if (!sh->live[w])
		handle_revive(sh, w, pid);
	fresh = pid && sh->wpid[w] != pid;
	if (pid)
		sh->wpid[w] = pid;
	sh->nwarn[w] = 0;
	if (clock > sh->wclock[w] || (fresh && clock == sh->wclock[w])) {
		/* its counts for the clocks it skipped are of no use now */
		for (uint32_t i = 0; i < sh->win; i++) {
			sh->applied[base + i] = 0;
			sh->expected[base + i] = RPS_CLOCK_NONE;
		}
		RPS_DEBUG("shard %u: worker %u synced at clock %u (was %llu)", sh->p.idx, w, clock,
			  (unsigned long long)sh->wclock[w]);
		sh->wclock[w] = clock;
		rps_store_set_worker_clock(&sh->store, w, clock);
		sh->changed = 1;
	}
	shard_advance(sh);
	sh->redo = 1;
}

/* BSP: retry deferred pushes after the clock moved. */
static void retry_deferred(struct rps_shard *sh)
{
	while (sh->redo && sh->deferred) {
		struct rps_srv_req *r = sh->deferred;

		sh->redo = 0;
		sh->deferred = sh->deferred_tail = NULL;
		while (r) {
			struct rps_srv_req *n = r->next;

			handle_push(sh, r);
			r = n;
		}
	}
	sh->redo = 0;
}

void rps_shard_handle(struct rps_shard *sh, const struct rps_ring_entry *e)
{
	if (sh->fwd)
		sh->fwd(sh->fwd_arg, sh, e); /* to the backup first, in this order */
	switch (e->type) {
	case RPS_ENT_PUSH: {
		uint64_t stall = RPS_FAULT_STALL_NS();

		if (stall) { /* fault injection: a slow update thread */
			atomic_fetch_add_explicit(&sh->faults_stall, 1, memory_order_relaxed);
			rps_fault_sleep_ns(stall);
		}
		handle_push(sh, e->ptr);
		break;
	}
	case RPS_ENT_ASSIGN:
		handle_assign(sh, e->ptr);
		break;
	case RPS_ENT_DECLARE: {
		struct rps_srv_req *req = e->ptr;
		struct rps_declare_ack ack;
		char why[RPS_DECLARE_REASON_MAX];
		int rc = rps_shard_declare_opt(sh, &req->u.decl, req->u.decl_optim, &ack, why,
					       sizeof(why));

		if (!rc && (req->u.decl_flags & RPS_DECLARE_FLAG_LOWPREC)) {
			struct rps_slice_meta *m =
			    rps_srv_keytab_lookup(&sh->tab, ack.key, ack.slice);

			rc = m ? rps_lp_declare(sh, m, req->u.decl.reserved, why, sizeof(why))
			       : -ENOENT;
		}

		sh->io->declare_done(sh->io_arg, sh, req, rc, rc ? NULL : &ack,
				     rc && why[0] ? why : NULL);
		break;
	}
	case RPS_ENT_CLOCK:
		handle_clock(sh, e->info.worker, e->info.clock, e->u64);
		break;
	case RPS_ENT_DEAD:
		handle_dead(sh, e->info.worker, (uint32_t)e->u64);
		break;
	case RPS_ENT_REVIVE:
		handle_revive(sh, e->info.worker, (uint32_t)e->u64);
		break;
	case RPS_ENT_SYNC:
		handle_sync(sh, e->info.worker, e->info.clock, (uint32_t)e->u64);
		break;
	case RPS_ENT_CKPT:
		rps_shard_ckpt_write(sh);
		break;
	case RPS_ENT_RESTORE:
		rps_shard_restore_run(sh, e->ptr);
		break;
	case RPS_ENT_CTLREQ:
		rps_shard_creq_take(sh, e);
		break;
	case RPS_ENT_TABLE:
		rps_shard_table_handle(sh, e->ptr);
		break;
	case RPS_ENT_REPL:
		rps_repl_apply(sh, e); /* a backup: what its primary took */
		break;
	case RPS_ENT_REPL_COPY:
		rps_repl_copy_take(sh); /* a backup joins: the state at this entry */
		break;
	case RPS_ENT_REPL_LOAD:
		rps_repl_load_run(sh, e->ptr);
		break;
	default:
		RPS_ERR("shard %u: ring entry of unknown type %u dropped", sh->p.idx, e->type);
		break;
	}
	if (sh->redo)
		retry_deferred(sh);
	if (sh->tables)
		rps_shard_tables_after(sh);
	if (sh->changed) {
		sh->changed = 0;
		/* pairs with the fence in rps_shard_pull_park: either we see the
		 * parked pull, or the parker sees the new clocks */
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&sh->nparked, memory_order_relaxed))
			rps_shard_pull_release(sh);
	}
}

/* ---- the thread ------------------------------------------------------------------ */

static void *update_thread(void *arg)
{
	struct rps_shard *sh = arg;
	struct rps_ring_entry e;

	rps_fault_thread_seed(sh->p.idx); /* same decisions per shard, run after run */
	for (;;) {
		int rc = rps_ring_pop_wait(sh->ring, &e, 1000);

		if (rc == -ETIMEDOUT) {
			if (sh->tables) /* time-based eviction of table rows */
				rps_shard_tables_idle(sh);
			continue;
		}
		if (rc)
			break; /* closed and drained */
		rps_shard_handle(sh, &e);
	}
	return NULL;
}

int rps_shard_start(struct rps_shard *sh, int core)
{
	char name[16];
	int rc;

	if (sh->p.ckpt_dir && sh->p.ckpt_dir[0])
		rps_shard_ckpt_async_start(sh); /* failed: the update thread writes them */
	rc = pthread_create(&sh->thread, NULL, update_thread, sh);
	if (rc) {
		RPS_ERR("shard %u: update thread: %s", sh->p.idx, strerror(rc));
		return -rc;
	}
	sh->thread_ok = 1;
	snprintf(name, sizeof(name), "rps-upd-%u", sh->p.idx);
	pthread_setname_np(sh->thread, name);
	if (core >= CPU_SETSIZE) {
		RPS_WARN("shard %u: core %d beyond CPU_SETSIZE: update thread left unpinned",
			 sh->p.idx, core);
	} else if (core >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(core, &set);
		rc = pthread_setaffinity_np(sh->thread, sizeof(set), &set);
		if (rc) {
			RPS_WARN("shard %u: pin update thread to core %d: %s (left unpinned)",
				 sh->p.idx, core, strerror(rc));
		} else {
			sh->core = core;
			RPS_INFO("shard %u: update thread pinned to core %d", sh->p.idx, core);
		}
	}
	return 0;
}

void rps_shard_stop(struct rps_shard *sh)
{
	struct rps_srv_req *r;

	if (sh->ring)
		rps_ring_close(sh->ring);
	if (sh->thread_ok) {
		pthread_join(sh->thread, NULL);
		sh->thread_ok = 0;
	}
	rps_shard_ckpt_async_stop(sh); /* waits for a checkpoint being written */
	r = sh->deferred;
	sh->deferred = sh->deferred_tail = NULL;
	while (r) {
		struct rps_srv_req *n = r->next;

		sh->io->push_done(sh->io_arg, sh, r, -ECANCELED);
		r = n;
	}
	if (sh->tables)
		rps_shard_tables_stop(sh);
}
