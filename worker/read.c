/* The read strategy (struct rps_wpull_ops rps_wpull_read): pulls by
 * one-sided reads of the servers' shard stores; see worker/read.h. This
 * file: set-up, the pull and clock-wait submissions, completions, clock
 * re-read timers and the store headers. */
#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/store.h"
#include "src/util.h"
#include "worker/lowprec.h"
#include "worker/read.h"

#define BACKOFF_MIN_US 5
#define BACKOFF_MAX_US 1000

static void seen_max(_Atomic uint32_t *a, uint64_t v64)
{
	uint32_t v = v64 > UINT32_MAX ? UINT32_MAX : (uint32_t)v64;
	uint32_t cur = atomic_load(a);

	while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

static void schedule_retry_locked(struct rps_worker *w, struct rps_piece *p)
{
	struct rps_rpull *rp = &p->u.rp;

	rp->backoff_us =
	    rp->backoff_us ? RPS_MIN(rp->backoff_us * 2, (uint32_t)BACKOFF_MAX_US) : BACKOFF_MIN_US;
	rp->retry_at = rps_now_ns() + (uint64_t)rp->backoff_us * 1000u;
	p->next = w->read->retry_head;
	w->read->retry_head = p;
	/* a caller reaping its own completions got here: the progress thread,
	 * which runs the retry timers, may be asleep for its next 10 ms */
	if (!rps_wcore_on_progress(&w->core))
		rps_worker_wake(w);
}

static int parse_hdr(struct rps_worker *w, struct rps_piece *p)
{
	struct rps_wserver *srv = &w->servers[p->server];
	struct rps_wshard *sh = &srv->shards[p->shard];
	struct rps_store_hdr h;

	memcpy(&h, p->u.rp.rd[0].lines, sizeof(h));
	if (h.magic != RPS_STORE_MAGIC || h.chunk_bytes != srv->chunk_bytes ||
	    h.chunk_stride != (uint64_t)h.chunk_bytes + 2 * RPS_STORE_LINE ||
	    h.data_off % RPS_STORE_LINE || h.data_off < RPS_STORE_WCLOCK_OFF ||
	    h.data_off >= sh->desc.size) {
		RPS_ERR("server %u shard %u: store header magic %#llx chunk %u stride %llu "
			"data at %llu: not a store this worker can read",
			srv->rank, p->shard, (unsigned long long)h.magic, h.chunk_bytes,
			(unsigned long long)h.chunk_stride, (unsigned long long)h.data_off);
		return -EPROTO;
	}
	sh->data_off = h.data_off;
	{
		uint64_t clock;

		memcpy(&clock, p->u.rp.rd[0].lines + RPS_STORE_CLOCK_OFF, sizeof(clock));
		seen_max(&sh->clock_seen, clock);
	}
	return 0;
}

static void read_done(struct rps_worker *w, const struct rps_tr_event *ev)
{
	struct rps_rposts out;
	struct rps_piece *p;
	struct rps_rpull *rp;
	uint8_t sub = rps_ctx_sub(ev->ctx);

	if (ev->ctx == RPS_TR_CTX_NOTIFY) { /* a direct request's sleeper */
		pthread_mutex_lock(&w->core.lock);
		if (w->core.cv_waiters)
			pthread_cond_broadcast(&w->core.cv);
		pthread_mutex_unlock(&w->core.lock);
		return;
	}
	out.n = 0;
	pthread_mutex_lock(&w->core.lock);
	p = rps_piece_by_ctx(&w->core, ev->ctx);
	if (!p || (p->kind != RPS_PK_RPULL && p->kind != RPS_PK_RHDR) ||
	    !(p->waits & RPS_PW_READ) || !p->u.rp.outstanding) {
		pthread_mutex_unlock(&w->core.lock);
		return;
	}
	/* before the piece's request can complete and its caller retry */
	if (rps_wread_conn_lost(ev->status)) {
		rps_wconn_mark_dead(w, p->conn, ev->status);
		/* and the request fails now, not when its other pieces (a BSP
		 * clock wait on another server) end */
		rps_piece_conn_lost_locked(&w->core, p, ev->status);
	}
	rp = &p->u.rp;
	rp->outstanding--;
	if (sub < RPS_RD_WINDOW)
		rp->rd[sub].busy = 0;
	if (ev->status) {
		if (!p->status)
			p->status = ev->status;
	} else if (sub == RPS_RD_SUB_HDR) {
		int rc = parse_hdr(w, p);

		if (rc)
			p->status = rc;
		rp->next = 1;
	} else if (sub == RPS_RD_SUB_CLOCK) {
		struct rps_wshard *sh = rps_wshard_get(w, p->server, p->shard);
		uint64_t v;

		memcpy(&v, rp->rd[0].lines, sizeof(v));
		seen_max(w->consistency == RPS_ASP ? &sh->wclock_seen : &sh->clock_seen,
				   v);
		if (!rps_wread_clock_ok(w, sh, rp->min_clock))
			schedule_retry_locked(w, p);
		else
			rp->backoff_us = 0;
	} else if (sub < RPS_RD_WINDOW) {
		struct rps_rd *rd = &rp->rd[sub];
		uint64_t run, torn;

		run = rd->run_n >= 64 ? ~0ull : ((1ull << rd->run_n) - 1);
		torn = rps_rplan_torn(rd->lines + rps_rplan_lines_off(&rp->plan, rd->run_lo),
				      rd->run_n, rp->plan.line);
		rd->torn = (rd->torn & ~(run << rd->run_lo)) | (torn << rd->run_lo);
		if (rp->bounce && !rd->torn && !p->status)
			rps_wread_bounce_out(rp, rd);
		if (!rd->torn && !rp->outstanding && rp->nslots == 1 && rp->next >= rp->nchunks &&
		    !p->status) {
			/* the last READ of a one-slot slice came back clean: done, as
			 * step_locked would find (no slot busy or torn, nothing left) */
			rps_piece_clear_locked(&w->core, p, RPS_PW_READ, 0);
			pthread_mutex_unlock(&w->core.lock);
			return;
		}
	}
	rps_wread_step_locked(w, p, &out);
	pthread_mutex_unlock(&w->core.lock);
	rps_wread_post_all(w, &out);
}

static int read_timers(struct rps_worker *w)
{
	struct rps_piece *due = NULL, **tail = &due;
	uint64_t now = rps_now_ns(), next = UINT64_MAX;

	pthread_mutex_lock(&w->core.lock);
	for (struct rps_piece **pp = &w->read->retry_head; *pp;) {
		struct rps_piece *p = *pp;

		if (p->u.rp.retry_at <= now) {
			*pp = p->next;
			p->u.rp.retry_at = 0;
			p->next = NULL;
			*tail = p;
			tail = &p->next;
		} else {
			next = RPS_MIN(next, p->u.rp.retry_at);
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&w->core.lock);
	while (due) {
		struct rps_rposts out;
		struct rps_piece *p = due;

		out.n = 0;
		due = p->next; /* before step: a finished piece's link is reused */
		pthread_mutex_lock(&w->core.lock);
		p->next = NULL;
		if (p->kind == RPS_PK_RPULL)
			rps_wread_step_locked(w, p, &out);
		pthread_mutex_unlock(&w->core.lock);
		rps_wread_post_all(w, &out);
	}
	if (next == UINT64_MAX)
		return -1;
	now = rps_now_ns();
	if (next <= now + 1000000u)
		return 0; /* under a millisecond: poll without sleeping */
	return (int)((next - now) / 1000000u);
}

static int read_headers(struct rps_worker *w, uint32_t server)
{
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);
	int rc;

	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	for (uint32_t i = 0; i < w->num_servers; i++) {
		for (uint32_t j = 0;
		     (server == UINT32_MAX || server == i) && j < w->servers[i].nshards; j++) {
			struct rps_wshard *sh = rps_wshard_get(w, i, j);
			struct rps_rposts out;
			struct rps_piece *p;

			out.n = 0;
			pthread_mutex_lock(&w->core.lock);
			p = rps_piece_alloc_locked(&w->core, req, RPS_PK_RHDR, RPS_PW_READ);
			if (!p) {
				rps_wreq_fail_locked(req, -ENOMEM);
				pthread_mutex_unlock(&w->core.lock);
				break;
			}
			p->conn = sh->conn;
			p->server = i;
			p->shard = j;
			memset(&p->u.rp, 0, sizeof(p->u.rp));
			p->u.rp.remote_key = sh->desc.remote_key;
			p->u.rp.phase = RPS_RP_HDR;
			p->u.rp.rd[0].lines =
			    rps_wread_scratch_get_locked(w, &p->u.rp.rd[0].lines_mrh);
			p->u.rp.nslots = 1;
			if (!p->u.rp.rd[0].lines)
				p->status = -ENOMEM;
			rps_wread_step_locked(w, p, &out);
			pthread_mutex_unlock(&w->core.lock);
			rps_wread_post_all(w, &out);
		}
	}
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	rc = rps_wreq_wait_internal(req, w->timeout_ms);
	if (rc)
		RPS_ERR("read pull: reading the shards' store headers: %s", rps_strerror(rc));
	return rc;
}

/* ---- the strategy's ops ---- */

static int read_submit(struct rps_worker *w, struct rps_req *req, const rps_key_t *keys,
		       float *vals, const size_t *lens, size_t n, uint32_t min_clock)
{
	const struct rps_wslice *sl;
	struct rps_wslices it;
	struct rps_wreg *reg;
	int rc = 0;

	reg = rps_wreg_get(w, vals, rps_wbatch_elems(lens, n) * sizeof(float));
	rps_wslices_init(&it, &w->keys, keys, lens, n);
	while (!rc && (rc = rps_wslices_next(&it, &sl)) > 0) {
		struct rps_wslice copy;

		atomic_fetch_add_explicit(&w->stat_pulls, 1, memory_order_relaxed);
		if (atomic_load(&it.k->pull_prec)) {
			/* its low-precision copy, through bounce blocks (worker/lowprec.h) */
			rc = rps_wlp_copy_slice(sl, &copy);
			if (!rc)
				rc = rps_wread_submit_slice(w, req, sl->server, sl->shard, &copy,
							    vals + it.base + sl->offset, NULL,
							    min_clock);
			continue;
		}
		rc = rps_wread_submit_slice(w, req, sl->server, sl->shard, sl,
					    vals + it.base + sl->offset, reg, min_clock);
	}
	rps_wreg_put(reg);
	if (rc) {
		pthread_mutex_lock(&w->core.lock);
		rps_wreq_fail_locked(req, rc);
		rps_wcore_unlock(&w->core);
	}
	return rc;
}

static int read_clock_wait(struct rps_worker *w, struct rps_req *req, rps_key_t key, uint32_t slice,
			   uint32_t server, uint32_t shard, uint32_t c)
{
	(void)key;
	(void)slice;
	return rps_wread_submit_slice(w, req, server, shard, NULL, NULL, NULL, c);
}

static void read_fini(struct rps_worker *w)
{
	if (!w->read)
		return;
	rps_wread_mem_fini(w);
	rps_free(w->read);
	w->read = NULL;
}

static int read_init(struct rps_worker *w)
{
	int rc;

	w->read = rps_calloc(1, sizeof(*w->read));
	if (!w->read)
		return -ENOMEM;
	/* one-chunk pulls as direct requests: their waiter reaps the READ, or
	 * sleeps until the progress thread did (RDMAPS_WAIT_SPIN_US=0) */
	w->read->direct = rps_tr_has(w->tr, RPS_TR_CAP_READ_NOTIFY);
	w->core.direct_step = rps_wread_direct_step;
	w->core.direct_fini_locked = rps_wread_direct_fini_locked;
	w->core.direct_arg = w;
	rc = rps_wread_mem_init(w);
	if (rc)
		read_fini(w);
	return rc;
}

const struct rps_wpull_ops rps_wpull_read = {
    .name = "read",
    .init = read_init,
    .fini = read_fini,
    .pull1 = rps_wread_pull1,
    .submit = read_submit,
    .clock_wait = read_clock_wait,
    .read_clocks = read_headers,
    .attach = read_headers,
    .read_done = read_done,
    .timers = read_timers,
    .piece_fini_locked = rps_wread_piece_fini_locked,
};
