/* The RDMA pull path: no PULL frame, no server CPU.
 *
 * Per slice (one piece, kind RPS_PK_RPULL):
 * 1. CLOCK: unless the shard's clock words last seen already satisfy the
 *    consistency condition for min_clock, READ the clock word (BSP/SSP: the
 *    shard clock at RPS_STORE_CLOCK_OFF; ASP: worker_clock[my rank]) and
 *    re-read it, with a growing delay (5 us .. 1 ms), until it holds.
 * 2. DATA: READ the slice's chunks, up to RPS_RD_WINDOW READs in flight,
 *    each covering as many consecutive chunks as max_read_sge allows
 *    (worker/plan.h), laid out as the DECLARE_ACK said (64-byte lines, or
 *    one compact chunk with 8-byte words): version lines into registered
 *    scratch, data straight into the caller's buffer, padding after the
 *    last element into junk. Only the bytes the slice occupies are read.
 * 3. On each READ_DONE check every chunk's lines (rps_store_image_clean);
 *    re-read runs of torn chunks only, until all are clean.
 * All state changes happen under core.lock; READs are posted after it is
 * dropped (read_remote may take its time).
 */
#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/store.h"
#include "src/util.h"
#include "worker/worker_int.h"

#define SUB_CLOCK 0xf0
#define SUB_HDR 0xf1
#define SCRATCH_REGIONS 64
#define SCRATCH_BLOCKS 256 /* blocks per region */
/* A direct pull of a chunk up to this long (lines included) reads it whole
 * into its scratch block with one sge and copies the data out: one local
 * page and one sge for the device, not two pages and build1's three or four
 * sges. Blocks are at least this long, so that they are pages (regions are
 * page-aligned). */
#define DIRECT_WHOLE_MAX 4096u
/* Scatter entries of one READ. The RDMA transport offers at most 30
 * (RDMA_MAX_SGE; devices' max_sge_rd is about that), so 15 chunks per READ;
 * a larger array would only spread the batch of READs to post (struct
 * rposts, on the stack of every pull and READ completion) over more pages. */
#define RPOST_MAX_SGE 32
#define BACKOFF_MIN_US 5
#define BACKOFF_MAX_US 1000

static _Atomic uint64_t torn_retries_total, direct_pulls_total;

uint64_t rps_worker_stat_torn_retries(void)
{
	return atomic_load(&torn_retries_total);
}

/* Tests: direct pulls posted, and their waits that slept / napped
 * (rps_wcore_stat_direct), in this process. */
void rps_worker_stat_direct(uint64_t *pulls_p, uint64_t *sleeps_p, uint64_t *naps_p)
{
	*pulls_p = atomic_load(&direct_pulls_total);
	rps_wcore_stat_direct(sleeps_p, naps_p);
}

/* ---- registered scratch ---- */

struct scratch_region {
	char *mem;
	size_t len;
	struct rps_tr_mr mr;
	int registered;
};

/* Pull destinations registered whole, once: the transport's MR cache would
 * otherwise register every chunk's sge span separately. */
#define PULLBUF_MAX 64

struct pullbuf {
	uintptr_t start, end;
	struct rps_tr_mr mr;
};

struct scratch_blk {
	char *mem;
	uint32_t lkey; /* 0: its region is not registered */
};

struct rps_scratch {
	pthread_mutex_t pb_lock; /* adding to pb[]; readers go lock-free */
	struct pullbuf pb[PULLBUF_MAX];
	_Atomic int npb;         /* pb[0..npb) complete, never change */
	int pb_full_warned;
	uint32_t per_read; /* chunks one READ slot may cover */
	size_t blk;        /* per_read * RPS_RPLAN_LINES */
	char *junk;
	size_t junk_len;
	struct rps_tr_mr junk_mr;
	int junk_registered;
	struct scratch_region reg[SCRATCH_REGIONS];
	int nreg;
	struct scratch_blk *free; /* free blocks, each with its region's lkey */
	size_t nfree, cap;
};

static void *alloc_registered(struct rps_worker *w, size_t len, struct rps_tr_mr *mr,
			      int *registered_p)
{
	void *mem = rps_aligned_alloc(4096, len);

	*registered_p = 0;
	if (!mem)
		return NULL;
	memset(mem, 0, len);
	/* registered once; if that fails the transport's own cache registers it */
	if (rps_tr_reg_mem(w->tr, mem, len, RPS_TR_ACCESS_LOCAL, mr) == 0)
		*registered_p = 1;
	else
		RPS_WARN("rdma pull: registering %zu bytes of scratch failed", len);
	return mem;
}

static int scratch_grow_locked(struct rps_worker *w)
{
	struct rps_scratch *sc = w->scratch;
	struct scratch_region *r;
	size_t need;

	if (sc->nreg == SCRATCH_REGIONS)
		return -ENOMEM;
	need = sc->nfree + SCRATCH_BLOCKS;
	if (need > sc->cap) {
		struct scratch_blk *nf = rps_realloc(sc->free, need * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		sc->free = nf;
		sc->cap = need;
	}
	r = &sc->reg[sc->nreg];
	r->len = sc->blk * SCRATCH_BLOCKS;
	r->mem = alloc_registered(w, r->len, &r->mr, &r->registered);
	if (!r->mem)
		return -ENOMEM;
	sc->nreg++;
	for (size_t i = 0; i < SCRATCH_BLOCKS; i++)
		sc->free[sc->nfree++] = (struct scratch_blk){
		    .mem = r->mem + i * sc->blk, .lkey = r->registered ? r->mr.lkey : 0};
	return 0;
}

/* A scratch block, and its region's lkey (0 if not registered). */
static char *scratch_get_locked(struct rps_worker *w, uint32_t *lkey_p)
{
	struct rps_scratch *sc = w->scratch;

	if (!sc->nfree && scratch_grow_locked(w)) {
		*lkey_p = 0;
		return NULL;
	}
	sc->nfree--;
	*lkey_p = sc->free[sc->nfree].lkey;
	return sc->free[sc->nfree].mem;
}

static void scratch_put_locked(struct rps_worker *w, char *b, uint32_t lkey)
{
	struct rps_scratch *sc = w->scratch;

	if (b && sc->nfree < sc->cap)
		sc->free[sc->nfree++] = (struct scratch_blk){.mem = b, .lkey = lkey};
}

static int direct_step(void *arg, struct rps_req *req, int arm);
static void direct_fini_locked(void *arg, struct rps_req *req);

int rps_wrdma_init(struct rps_worker *w)
{
	struct rps_scratch *sc = rps_calloc(1, sizeof(*sc));
	int max_sge = RPS_MIN(w->tr->max_read_sge, RPOST_MAX_SGE);
	int rc;

	if (!sc)
		return -ENOMEM;
	pthread_mutex_init(&sc->pb_lock, NULL);
	/* n whole chunks take 1 + 2n sges (an end line and the next begin
	 * line share one); a partial last chunk one more */
	sc->per_read = (uint32_t)RPS_MAX(1, (max_sge - 2) / 2);
	if (sc->per_read > RPS_RPLAN_MAX_CHUNKS)
		sc->per_read = RPS_RPLAN_MAX_CHUNKS;
	sc->blk = RPS_MAX((size_t)sc->per_read * RPS_RPLAN_LINES, (size_t)DIRECT_WHOLE_MAX);
	for (uint32_t i = 0; i < w->num_servers; i++)
		sc->junk_len = RPS_MAX(sc->junk_len, (size_t)w->servers[i].chunk_bytes);
	w->scratch = sc;
	w->core.direct_step = direct_step;
	w->core.direct_fini_locked = direct_fini_locked;
	w->core.direct_arg = w;
	sc->junk = alloc_registered(w, sc->junk_len, &sc->junk_mr, &sc->junk_registered);
	if (!sc->junk) {
		rc = -ENOMEM;
		goto err;
	}
	pthread_mutex_lock(&w->core.lock);
	rc = scratch_grow_locked(w);
	pthread_mutex_unlock(&w->core.lock);
	atomic_init(&sc->npb, 0);
	if (rc)
		goto err;
	return 0;
err:
	rps_wrdma_fini(w);
	return rc;
}

void rps_wrdma_fini(struct rps_worker *w)
{
	struct rps_scratch *sc = w->scratch;

	if (!sc)
		return;
	for (int i = 0; i < atomic_load(&sc->npb); i++)
		rps_tr_dereg_mem(w->tr, &sc->pb[i].mr);
	pthread_mutex_destroy(&sc->pb_lock);
	for (int i = 0; i < sc->nreg; i++) {
		if (sc->reg[i].registered)
			rps_tr_dereg_mem(w->tr, &sc->reg[i].mr);
		rps_free(sc->reg[i].mem);
	}
	if (sc->junk_registered)
		rps_tr_dereg_mem(w->tr, &sc->junk_mr);
	rps_free(sc->junk);
	rps_free(sc->free);
	rps_free(sc);
	w->scratch = NULL;
}

static int pullbuf_find(struct rps_scratch *sc, uintptr_t s, uintptr_t e, int from,
			struct rps_wdest *d)
{
	int n = atomic_load_explicit(&sc->npb, memory_order_acquire);

	for (int i = from; i < n; i++) {
		if (s >= sc->pb[i].start && e <= sc->pb[i].end) {
			d->lo = sc->pb[i].start;
			d->hi = sc->pb[i].end;
			d->lkey = sc->pb[i].mr.lkey;
			return 1;
		}
	}
	return 0;
}

void rps_wrdma_pin_dest(struct rps_worker *w, void *addr, size_t len, struct rps_wdest *d)
{
	struct rps_scratch *sc = w->scratch;
	uintptr_t ps = 4096, s, e;
	struct pullbuf *b;
	int n;

	memset(d, 0, sizeof(*d));
	if (!sc || !addr || !len)
		return;
	s = (uintptr_t)addr & ~(ps - 1);
	e = ((uintptr_t)addr + len + ps - 1) & ~(ps - 1);
	if (pullbuf_find(sc, s, e, 0, d)) /* the steady state: no lock */
		return;
	pthread_mutex_lock(&sc->pb_lock);
	n = atomic_load_explicit(&sc->npb, memory_order_relaxed);
	if (pullbuf_find(sc, s, e, 0, d) || n == PULLBUF_MAX) {
		if (n == PULLBUF_MAX && !d->lkey && !sc->pb_full_warned++)
			RPS_WARN("rdma pull: %d pull buffers registered already; pulls into new "
				 "buffers register per chunk (reuse pull buffers)",
				 PULLBUF_MAX);
		pthread_mutex_unlock(&sc->pb_lock);
		return;
	}
	b = &sc->pb[n];
	if (rps_tr_reg_mem(w->tr, (void *)s, e - s, RPS_TR_ACCESS_LOCAL, &b->mr) == 0) {
		b->start = s;
		b->end = e;
		atomic_store_explicit(&sc->npb, n + 1, memory_order_release);
		pullbuf_find(sc, s, e, n, d);
	}
	pthread_mutex_unlock(&sc->pb_lock);
}

/* ---- consistency ---- */

int rps_wclock_ok(struct rps_worker *w, struct rps_wshard *sh, uint32_t min_clock)
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

static void seen_max(_Atomic uint32_t *a, uint64_t v64)
{
	uint32_t v = v64 > UINT32_MAX ? UINT32_MAX : (uint32_t)v64;
	uint32_t cur = atomic_load(a);

	while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

/* ---- posting ---- */

struct rpost {
	struct rps_wconn *wc;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t ctx;
	int nsge;
	struct rps_tr_sge sge[RPOST_MAX_SGE];
};

/* READs to post once the lock is dropped. About 10 KB: start one by setting
 * n = 0, never by zeroing it (= { 0 }), which clears all of it on every pull
 * and READ completion; under an emulator that cost more than the rest of the
 * pull. Only p[0..n) is ever read, each written whole by rpost_new and its
 * caller. */
struct rposts {
	int n;
	struct rpost p[RPS_RD_WINDOW + 1];
};

static struct rpost *rpost_new(struct rposts *out, struct rps_piece *p, uint8_t sub)
{
	struct rpost *r = &out->p[out->n++];

	r->wc = p->conn;
	r->rkey = p->u.rp.rkey;
	r->ctx = rps_piece_ctx(p, sub);
	r->nsge = 0;
	return r;
}

static void step_locked(struct rps_worker *w, struct rps_piece *p, struct rposts *out);

/* A READ could not be posted: account it as done with an error. */
static void post_failed(struct rps_worker *w, uint64_t ctx, int rc, struct rposts *out)
{
	struct rps_piece *p;
	uint8_t sub = rps_ctx_sub(ctx);

	pthread_mutex_lock(&w->core.lock);
	p = rps_piece_by_ctx(&w->core, ctx);
	if (p && (p->kind == RPS_PK_RPULL || p->kind == RPS_PK_RHDR) && p->u.rp.outstanding) {
		p->u.rp.outstanding--;
		if (sub < RPS_RD_WINDOW)
			p->u.rp.rd[sub].busy = 0;
		if (!p->status)
			p->status = rc;
		step_locked(w, p, out); /* failed: posts nothing, finishes when idle */
	}
	rps_wcore_unlock(&w->core);
}

/* The transport saw the connection die before the worker's progress thread
 * did (its CLOSED event is still queued). Mark it dead now: a caller that
 * retries at once then waits for the reconnection (rps_wready) instead of
 * failing on the same dead connection again. */
static int conn_lost(int rc)
{
	return rc == -ECONNRESET || rc == -EHOSTDOWN;
}

static void do_posts(struct rps_worker *w, struct rposts *out)
{
	for (int i = 0; i < out->n; i++) {
		struct rpost *r = &out->p[i];
		int marked = rps_wconn_dead(r->wc), rc = marked;

		if (!rc)
			rc = rps_tr_read_remote(r->wc->c, r->sge, r->nsge, r->raddr, r->rkey,
						     r->ctx);
		if (rc) {
			struct rposts none;

			none.n = 0;
			if (conn_lost(rc)) {
				if (!marked) /* once, not per READ of a batch */
					rps_wconn_mark_dead(w, r->wc, rc);
			} else {
				RPS_ERR("server %u channel %u: rdma read: %s", r->wc->srv->rank,
					r->wc->channel, rps_strerror(rc));
			}
			post_failed(w, r->ctx, rc, &none);
		}
	}
	out->n = 0;
}

static int max_sge(const struct rps_worker *w)
{
	return RPS_MIN(w->tr->max_read_sge, RPOST_MAX_SGE);
}

static int within(const void *a, uint32_t len, uintptr_t lo, uintptr_t hi)
{
	uintptr_t s = (uintptr_t)a;

	return s >= lo && s + len <= hi;
}

/* The lkeys of the worker's own registrations that each sge lies in, so
 * the transport looks none up; 0 (look it up) for an sge that no single
 * one covers, as when two adjacent buffers' sges were merged. */
static void set_lkeys(const struct rps_scratch *sc, const struct rps_wdest *dest,
		      const char *lines, uint32_t lines_lkey, struct rps_tr_sge *sge, int nsge)
{
	uintptr_t jl = (uintptr_t)sc->junk, ll = (uintptr_t)lines;
	uint32_t jk = sc->junk_registered ? sc->junk_mr.lkey : 0;

	for (int i = 0; i < nsge; i++) {
		struct rps_tr_sge *g = &sge[i];

		if (dest->lkey && within(g->addr, g->len, dest->lo, dest->hi))
			g->lkey = dest->lkey;
		else if (within(g->addr, g->len, ll, ll + sc->blk))
			g->lkey = lines_lkey;
		else if (within(g->addr, g->len, jl, jl + sc->junk_len))
			g->lkey = jk;
	}
}

/* Post the next READ of slot i, if it has one. 0 or -errno (build failed). */
static int slot_step(struct rps_worker *w, struct rps_piece *p, int i, struct rposts *out)
{
	struct rps_rpull *rp = &p->u.rp;
	struct rps_rd *rd = &rp->rd[i];
	struct rpost *r;
	uint64_t lo, maxc;
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
		maxc = w->scratch->per_read;
		lines = rd->lines;
		rd->lo = lo;
		rd->run_lo = 0;
	} else {
		return 0;
	}
	r = rpost_new(out, p, (uint8_t)i);
	n = -EINVAL;
	if (rp->nchunks == 1 && max_sge(w) >= RPS_RPLAN_MIN_SGE) {
		/* most small keys: the scatter list straight from the geometry */
		r->nsge = rps_rplan_build1(&rp->plan, rp->dest, lines, w->scratch->junk, r->sge,
					   &r->raddr);
		if (r->nsge)
			n = 1;
	}
	if (n < 0)
		n = rps_rplan_build(&rp->plan, lo, maxc, rp->dest, lines, w->scratch->junk,
				    r->sge, max_sge(w), &r->nsge, &r->raddr);
	if (n < 0) {
		out->n--;
		return n;
	}
	{
		const struct rps_wdest dd = {.lo = rp->dest_lo, .hi = rp->dest_hi, .lkey = rp->dest_lkey};

		set_lkeys(w->scratch, &dd, rd->lines, rd->lines_lkey, r->sge, r->nsge);
	}
	if (rd->torn) {
		rp->torn_retries += (uint64_t)n;
		atomic_fetch_add_explicit(&torn_retries_total, (uint64_t)n, memory_order_relaxed);
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
static int slot_step_or_fail(struct rps_worker *w, struct rps_piece *p, int i,
			     struct rposts *out)
{
	int rc = slot_step(w, p, i, out);

	if (rc) {
		RPS_ERR("rdma pull: no read plan for server %u shard %u: %s", p->server, p->shard,
			rps_strerror(rc));
		p->status = rc;
	}
	return rc;
}

static void step_locked(struct rps_worker *w, struct rps_piece *p, struct rposts *out)
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
		struct rpost *r;

		if (rp->outstanding)
			return;
		if (rp->next) { /* header read and checked */
			rps_piece_clear_locked(&w->core, p, RPS_PW_READ, 0);
			return;
		}
		r = rpost_new(out, p, SUB_HDR);
		r->sge[0].addr = rp->rd[0].lines;
		/* the header line and the clock line after it */
		r->sge[0].len = RPS_STORE_WCLOCK_OFF;
		r->sge[0].lkey = rp->rd[0].lines_lkey;
		r->nsge = 1;
		r->raddr = sh->desc.addr;
		rp->outstanding++;
		return;
	}
	if (rp->phase == RPS_RP_CLOCK) {
		if (!rps_wclock_ok(w, sh, rp->min_clock)) {
			if (!rp->outstanding && !rp->retry_at) {
				struct rpost *r = rpost_new(out, p, SUB_CLOCK);

				r->sge[0].addr = rp->rd[0].lines;
				r->sge[0].len = sizeof(uint64_t);
				r->sge[0].lkey = rp->rd[0].lines_lkey;
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
		if (slot_step_or_fail(w, p, i, out))
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

void rps_wrdma_piece_release_locked(struct rps_worker *w, struct rps_piece *p)
{
	struct rps_rpull *rp = &p->u.rp;

	if (rp->retry_at) {
		for (struct rps_piece **pp = &w->retry_head; *pp; pp = &(*pp)->next) {
			if (*pp == p) {
				*pp = p->next;
				break;
			}
		}
		rp->retry_at = 0;
	}
	for (int i = 0; i < RPS_RD_WINDOW; i++) {
		if (rp->rd[i].lines && w->scratch)
			scratch_put_locked(w, rp->rd[i].lines, rp->rd[i].lines_lkey);
		rp->rd[i].lines = NULL;
	}
}

/* The READ plan of a slice: its place and geometry (DECLARE_ACK) checked
 * against the shard's store: its chunks lie after the store's data_off,
 * 8-aligned, wholly inside the registered region. 0 or -EPROTO. */
static int slice_plan(struct rps_worker *w, const struct rps_wslice *sl, struct rps_rplan *plan)
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
static struct rps_piece *rpull_new_locked(struct rps_worker *w, struct rps_req *req,
					  uint32_t server, uint32_t shard,
					  const struct rps_wslice *sl, float *dest,
					  const struct rps_wdest *dd, uint32_t min_clock)
{
	struct rps_wshard *sh = rps_wshard_get(w, server, shard);
	struct rps_piece *p = rps_piece_alloc_locked(&w->core, req, RPS_PK_RPULL, RPS_PW_READ);
	struct rps_rpull *rp;
	uint64_t slots;
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
	if (dd && dd->lkey) {
		rp->dest_lo = dd->lo;
		rp->dest_hi = dd->hi;
		rp->dest_lkey = dd->lkey;
	}
	rp->rkey = sh->desc.rkey;
	rp->min_clock = min_clock;
	rp->phase = RPS_RP_CLOCK;
	if (w->consistency == RPS_ASP)
		rp->clock_raddr = sh->desc.addr + RPS_STORE_WCLOCK_OFF + 8ull * w->rank;
	else
		rp->clock_raddr = sh->desc.addr + RPS_STORE_CLOCK_OFF;
	if (dest && sl) {
		rc = slice_plan(w, sl, &rp->plan);
		if (!rc)
			rp->nchunks = rps_rplan_nchunks(&rp->plan);
		if (rc) {
			RPS_ERR("rdma pull: slice at store offset %llu does not fit shard %u/%u",
				(unsigned long long)sl->store_off, server, shard);
			p->status = rc;
			return p;
		}
	}
	slots = rp->nchunks <= w->scratch->per_read
		    ? 1
		    : (rp->nchunks + w->scratch->per_read - 1) / w->scratch->per_read;
	slots = RPS_MIN(slots, (uint64_t)RPS_RD_WINDOW);
	for (uint64_t i = 0; i < slots; i++) {
		rp->rd[i].lines = scratch_get_locked(w, &rp->rd[i].lines_lkey);
		if (!rp->rd[i].lines) {
			p->status = -ENOMEM;
			break;
		}
		rp->nslots++;
	}
	return p;
}

int rps_wrdma_submit(struct rps_worker *w, struct rps_req *req, uint32_t server, uint32_t shard,
		     const struct rps_wslice *sl, float *dest, const struct rps_wdest *dd,
		     uint32_t min_clock)
{
	struct rposts out;
	struct rps_piece *p;
	int rc;

	out.n = 0;
	pthread_mutex_lock(&w->core.lock);
	p = rpull_new_locked(w, req, server, shard, sl, dest, dd, min_clock);
	if (!p) {
		pthread_mutex_unlock(&w->core.lock);
		return -ENOMEM;
	}
	rc = p->status;
	step_locked(w, p, &out);
	pthread_mutex_unlock(&w->core.lock);
	do_posts(w, &out);
	return rc;
}

/* ---- direct pulls: one READ, no piece, no event ---- */

static void direct_fini_locked(void *arg, struct rps_req *req)
{
	scratch_put_locked(arg, req->dr.lines, req->dr.lines_lkey);
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
		    : rps_tr_read_notify(dr->conn->c, dr->sge, dr->nsge, dr->raddr, dr->rkey,
					      &dr->done);
	rps_wsubmit_leave(w);
	if (rc) {
		if (!conn_lost(rc))
			RPS_ERR("server %u channel %u: rdma read: %s", dr->conn->srv->rank,
				dr->conn->channel, rps_strerror(rc));
		else if (!marked)
			rps_wconn_mark_dead(w, dr->conn, rc);
		dr->done.status = rc;
		atomic_store_explicit(&dr->done.state, RPS_TR_DONE, memory_order_release);
	}
	return rc;
}

/* rps_wcore.direct_step: is req's READ back, clean? Torn: read it again. */
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
		if (conn_lost(dr->done.status))
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
	atomic_fetch_add_explicit(&torn_retries_total, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&w->stat_torn, 1, memory_order_relaxed);
	if (direct_post(w, dr)) {
		req->status = dr->done.status;
		return 1;
	}
	return 0;
}

/* dr's READ as build1's scatter list: begin line and end line into scratch,
 * the data straight into dest (its tensor's buffer: vals, len bytes). 0 if
 * the plan is not for build1. */
static int direct_scatter(struct rps_worker *w, struct rps_rdirect *dr, const struct rps_rplan *plan,
			  float *dest, float *vals, size_t len)
{
	struct rps_scratch *sc = w->scratch;
	struct rps_wdest dd;

	dr->nsge = rps_rplan_build1(plan, dest, dr->lines, sc->junk, dr->sge, &dr->raddr);
	if (!dr->nsge)
		return 0;
	rps_wrdma_pin_dest(w, vals, len, &dd);
	set_lkeys(sc, &dd, dr->lines, dr->lines_lkey, dr->sge, dr->nsge);
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

	if (slice_plan(w, sl, &plan))
		return -EAGAIN;
	req = rps_wreq_new_direct(&w->core);
	if (!req)
		return -EAGAIN;
	dr = &req->dr;
	if (!dr->lines) {
		pthread_mutex_lock(&w->core.lock);
		dr->lines = scratch_get_locked(w, &dr->lines_lkey);
		pthread_mutex_unlock(&w->core.lock);
		if (!dr->lines)
			goto err;
	}
	dr->conn = sh->conn;
	dr->rkey = sh->desc.rkey;
	dr->line = plan.line;
	whole = rps_rplan_whole1(&plan);
	if (whole && whole <= w->scratch->blk) {
		dr->sge[0] = (struct rps_tr_sge){.addr = dr->lines, .len = whole, .lkey = dr->lines_lkey};
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
	atomic_fetch_add_explicit(&direct_pulls_total, 1, memory_order_relaxed);
	*req_p = req;
	return 0;
err:
	rps_wreq_free_direct(req);
	return -EAGAIN;
}

int rps_wrdma_pull1(struct rps_worker *w, const struct rps_wkey *k, float *vals,
		    uint32_t min_clock, struct rps_req **req_p)
{
	const struct rps_wslice *sl;
	struct rps_wshard *sh;
	struct rps_wdest dd;
	uint64_t nch;
	struct rposts out;
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
	    !rps_wclock_ok(w, sh, min_clock) || nch > w->scratch->per_read)
		return -EAGAIN;
	/* one chunk: a direct request, unless the caller is the progress thread
	 * (a callback; it must not wait) */
	if (w->direct && nch == 1 &&
	    !rps_wcore_on_progress(&w->core) &&
	    direct_pull(w, sl, sh, vals, k->nelems * sizeof(float), min_clock, req_p) == 0)
		return 0;
	rps_wrdma_pin_dest(w, vals, k->nelems * sizeof(float), &dd);
	out.n = 0;
	rps_wsubmit_enter(w);
	pthread_mutex_lock(&w->core.lock);
	req = rps_wreq_new_locked(&w->core, NULL, NULL);
	if (!req) {
		pthread_mutex_unlock(&w->core.lock);
		rps_wsubmit_leave(w);
		return -ENOMEM;
	}
	p = rpull_new_locked(w, req, sl->server, sl->shard, sl, vals + sl->offset, &dd, min_clock);
	if (p && !p->status) {
		/* the clock condition holds: to the data at once, as step_locked's
		 * CLOCK phase would go */
		if (w->consistency != RPS_ASP)
			rps_wstat_staleness(w, min_clock, atomic_load(&sh->clock_seen));
		p->u.rp.phase = RPS_RP_DATA;
		slot_step_or_fail(w, p, 0, &out);
	}
	if (p && p->status)
		step_locked(w, p, &out); /* failed: finishes the piece */
	rps_wreq_seal_locked(req);
	pthread_mutex_unlock(&w->core.lock);
	do_posts(w, &out);
	rps_wsubmit_leave(w);
	atomic_fetch_add_explicit(&w->stat_pulls, 1, memory_order_relaxed);
	*req_p = req;
	return 0;
}

static void schedule_retry_locked(struct rps_worker *w, struct rps_piece *p)
{
	struct rps_rpull *rp = &p->u.rp;

	rp->backoff_us = rp->backoff_us ? RPS_MIN(rp->backoff_us * 2, (uint32_t)BACKOFF_MAX_US)
					: BACKOFF_MIN_US;
	rp->retry_at = rps_now_ns() + (uint64_t)rp->backoff_us * 1000u;
	p->next = w->retry_head;
	w->retry_head = p;
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

void rps_wrdma_read_done(struct rps_worker *w, const struct rps_tr_event *ev)
{
	struct rposts out;
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
	if (conn_lost(ev->status))
		rps_wconn_mark_dead(w, p->conn, ev->status);
	rp = &p->u.rp;
	rp->outstanding--;
	if (sub < RPS_RD_WINDOW)
		rp->rd[sub].busy = 0;
	if (ev->status) {
		if (!p->status)
			p->status = ev->status;
	} else if (sub == SUB_HDR) {
		int rc = parse_hdr(w, p);

		if (rc)
			p->status = rc;
		rp->next = 1;
	} else if (sub == SUB_CLOCK) {
		struct rps_wshard *sh = rps_wshard_get(w, p->server, p->shard);
		uint64_t v;

		memcpy(&v, rp->rd[0].lines, sizeof(v));
		seen_max(w->consistency == RPS_ASP ? &sh->wclock_seen : &sh->clock_seen, v);
		if (!rps_wclock_ok(w, sh, rp->min_clock))
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
		if (!rd->torn && !rp->outstanding && rp->nslots == 1 && rp->next >= rp->nchunks &&
		    !p->status) {
			/* the last READ of a one-slot slice came back clean: done, as
			 * step_locked would find (no slot busy or torn, nothing left) */
			rps_piece_clear_locked(&w->core, p, RPS_PW_READ, 0);
			pthread_mutex_unlock(&w->core.lock);
			return;
		}
	}
	step_locked(w, p, &out);
	pthread_mutex_unlock(&w->core.lock);
	do_posts(w, &out);
}

int rps_wrdma_timers(struct rps_worker *w)
{
	struct rps_piece *due = NULL, **tail = &due;
	uint64_t now = rps_now_ns(), next = UINT64_MAX;

	pthread_mutex_lock(&w->core.lock);
	for (struct rps_piece **pp = &w->retry_head; *pp;) {
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
		struct rposts out;
		struct rps_piece *p = due;

		out.n = 0;
		due = p->next; /* before step: a finished piece's link is reused */
		pthread_mutex_lock(&w->core.lock);
		p->next = NULL;
		if (p->kind == RPS_PK_RPULL)
			step_locked(w, p, &out);
		pthread_mutex_unlock(&w->core.lock);
		do_posts(w, &out);
	}
	if (next == UINT64_MAX)
		return -1;
	now = rps_now_ns();
	if (next <= now + 1000000u)
		return 0; /* under a millisecond: poll without sleeping */
	return (int)((next - now) / 1000000u);
}

int rps_wrdma_read_headers(struct rps_worker *w, uint32_t server)
{
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);
	int rc;

	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	for (uint32_t i = 0; i < w->num_servers; i++) {
		for (uint32_t j = 0; (server == UINT32_MAX || server == i) && j < w->servers[i].nshards;
		     j++) {
			struct rps_wshard *sh = rps_wshard_get(w, i, j);
			struct rposts out;
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
			p->u.rp.rkey = sh->desc.rkey;
			p->u.rp.phase = RPS_RP_HDR;
			p->u.rp.rd[0].lines = scratch_get_locked(w, &p->u.rp.rd[0].lines_lkey);
			p->u.rp.nslots = 1;
			if (!p->u.rp.rd[0].lines)
				p->status = -ENOMEM;
			step_locked(w, p, &out);
			pthread_mutex_unlock(&w->core.lock);
			do_posts(w, &out);
		}
	}
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	rc = rps_wreq_wait_internal(req, w->timeout_ms);
	if (rc)
		RPS_ERR("rdma pull: reading the shards' store headers: %s", rps_strerror(rc));
	return rc;
}
