/* The read strategy's registered memory: scratch blocks for version lines
 * (and whole small chunks), junk for padding, pinned pull destinations. */
#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/read.h"

#define SCRATCH_BLOCKS 256 /* blocks per region */

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
		RPS_WARN("read pull: registering %zu bytes of scratch failed", len);
	return mem;
}

static int scratch_grow_locked(struct rps_worker *w)
{
	struct rps_wread *rs = w->read;
	struct rps_wread_region *r;
	size_t need;

	if (rs->nreg == RPS_RD_REGIONS)
		return -ENOMEM;
	need = rs->nfree + SCRATCH_BLOCKS;
	if (need > rs->cap) {
		struct rps_wread_blk *nf = rps_realloc(rs->free, need * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		rs->free = nf;
		rs->cap = need;
	}
	r = &rs->reg[rs->nreg];
	r->len = rs->blk * SCRATCH_BLOCKS;
	r->mem = alloc_registered(w, r->len, &r->mr, &r->registered);
	if (!r->mem)
		return -ENOMEM;
	rs->nreg++;
	for (size_t i = 0; i < SCRATCH_BLOCKS; i++)
		rs->free[rs->nfree++] = (struct rps_wread_blk){
		    .mem = r->mem + i * rs->blk, .handle = r->registered ? r->mr.handle : 0};
	return 0;
}

char *rps_wread_scratch_get_locked(struct rps_worker *w, uint32_t *mrh_p)
{
	struct rps_wread *rs = w->read;

	if (!rs->nfree && scratch_grow_locked(w)) {
		*mrh_p = 0;
		return NULL;
	}
	rs->nfree--;
	*mrh_p = rs->free[rs->nfree].handle;
	return rs->free[rs->nfree].mem;
}

void rps_wread_scratch_put_locked(struct rps_worker *w, char *b, uint32_t handle)
{
	struct rps_wread *rs = w->read;

	if (b && rs->nfree < rs->cap)
		rs->free[rs->nfree++] = (struct rps_wread_blk){.mem = b, .handle = handle};
}

int rps_wread_mem_init(struct rps_worker *w)
{
	struct rps_wread *rs = w->read;
	int rc;

	pthread_mutex_init(&rs->pb_lock, NULL);
	atomic_init(&rs->npb, 0);
	rs->max_sge = RPS_MIN(w->tr->max_read_sge, RPS_RD_MAX_SGE);
	/* n whole chunks take 1 + 2n sges (an end line and the next begin
	 * line share one); a partial last chunk one more */
	rs->per_read = (uint32_t)RPS_MAX(1, (rs->max_sge - 2) / 2);
	if (rs->per_read > RPS_RPLAN_MAX_CHUNKS)
		rs->per_read = RPS_RPLAN_MAX_CHUNKS;
	rs->blk = RPS_MAX((size_t)rs->per_read * RPS_RPLAN_LINES, (size_t)RPS_RD_WHOLE_MAX);
	for (uint32_t i = 0; i < w->num_servers; i++)
		rs->junk_len = RPS_MAX(rs->junk_len, (size_t)w->servers[i].chunk_bytes);
	rs->junk = alloc_registered(w, rs->junk_len, &rs->junk_mr, &rs->junk_registered);
	if (!rs->junk)
		return -ENOMEM;
	pthread_mutex_lock(&w->core.lock);
	rc = scratch_grow_locked(w);
	pthread_mutex_unlock(&w->core.lock);
	return rc;
}

void rps_wread_mem_fini(struct rps_worker *w)
{
	struct rps_wread *rs = w->read;

	for (int i = 0; i < atomic_load(&rs->npb); i++)
		rps_tr_dereg_mem(w->tr, &rs->pb[i].mr);
	pthread_mutex_destroy(&rs->pb_lock);
	for (int i = 0; i < rs->nreg; i++) {
		if (rs->reg[i].registered)
			rps_tr_dereg_mem(w->tr, &rs->reg[i].mr);
		rps_free(rs->reg[i].mem);
	}
	if (rs->junk_registered)
		rps_tr_dereg_mem(w->tr, &rs->junk_mr);
	rps_free(rs->junk);
	rps_free(rs->free);
}
static int pullbuf_find(struct rps_wread *sc, uintptr_t s, uintptr_t e, int from,
			struct rps_wdest *d)
{
	int n = atomic_load_explicit(&sc->npb, memory_order_acquire);

	for (int i = from; i < n; i++) {
		if (s >= sc->pb[i].start && e <= sc->pb[i].end) {
			d->lo = sc->pb[i].start;
			d->hi = sc->pb[i].end;
			d->handle = sc->pb[i].mr.handle;
			return 1;
		}
	}
	return 0;
}

void rps_wread_pin_dest(struct rps_worker *w, void *addr, size_t len, struct rps_wdest *d)
{
	struct rps_wread *sc = w->read;
	uintptr_t ps = 4096, s, e;
	struct rps_wread_pullbuf *b;
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
	if (pullbuf_find(sc, s, e, 0, d) || n == RPS_RD_PULLBUF_MAX) {
		if (n == RPS_RD_PULLBUF_MAX && !d->handle && !sc->pb_full_warned++)
			RPS_WARN("read pull: %d pull buffers registered already; pulls into new "
				 "buffers register per chunk (reuse pull buffers)",
				 RPS_RD_PULLBUF_MAX);
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

static int within(const void *a, uint32_t len, uintptr_t lo, uintptr_t hi)
{
	uintptr_t s = (uintptr_t)a;

	return s >= lo && s + len <= hi;
}

/* The handles of the worker's own registrations that each sge lies in, so
 * the transport looks none up; 0 (look it up) for an sge that no single
 * one covers, as when two adjacent buffers' sges were merged. */
void rps_wread_set_handles(const struct rps_wread *sc, const struct rps_wdest *dest,
			 const char *lines, uint32_t lines_mrh, struct rps_tr_sge *sge, int nsge)
{
	uintptr_t jl = (uintptr_t)sc->junk, ll = (uintptr_t)lines;
	uint32_t jh = sc->junk_registered ? sc->junk_mr.handle : 0;

	for (int i = 0; i < nsge; i++) {
		struct rps_tr_sge *g = &sge[i];

		if (dest->handle && within(g->addr, g->len, dest->lo, dest->hi))
			g->handle = dest->handle;
		else if (within(g->addr, g->len, ll, ll + sc->blk))
			g->handle = lines_mrh;
		else if (within(g->addr, g->len, jl, jl + sc->junk_len))
			g->handle = jh;
	}
}
