/* The read strategy's registered memory: scratch blocks for version lines
 * (and whole small chunks), bounce blocks that reads into unregistered pull
 * buffers land in (then copied out), junk for padding. All of it is the
 * worker's, registered once and kept until destroy. */
#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/read.h"

#define SCRATCH_BLOCKS	    256		 /* scratch blocks per region */
#define BOUNCE_READ_BYTES   (256u << 10) /* bounce block: one read's data at most */
#define BOUNCE_REGION_BYTES (4u << 20)	 /* bounce memory registered at a time */

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

static int pool_grow_locked(struct rps_worker *w, struct rps_wread_pool *pl)
{
	struct rps_wread_region *r;
	size_t need;

	if (pl->nreg == RPS_RD_REGIONS)
		return -ENOMEM;
	need = pl->nfree + pl->per_region;
	if (need > pl->cap) {
		struct rps_wread_blk *nf = rps_realloc(pl->free, need * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		pl->free = nf;
		pl->cap = need;
	}
	r = &pl->reg[pl->nreg];
	r->len = pl->blk * pl->per_region;
	r->mem = alloc_registered(w, r->len, &r->mr, &r->registered);
	if (!r->mem)
		return -ENOMEM;
	pl->nreg++;
	for (size_t i = 0; i < pl->per_region; i++)
		pl->free[pl->nfree++] = (struct rps_wread_blk){
		    .mem = r->mem + i * pl->blk, .handle = r->registered ? r->mr.handle : 0};
	return 0;
}

char *rps_wread_blk_get_locked(struct rps_worker *w, struct rps_wread_pool *pl, uint32_t *mrh_p)
{
	if (!pl->nfree && pool_grow_locked(w, pl)) {
		*mrh_p = 0;
		return NULL;
	}
	pl->nfree--;
	*mrh_p = pl->free[pl->nfree].handle;
	return pl->free[pl->nfree].mem;
}

void rps_wread_blk_put_locked(struct rps_wread_pool *pl, char *b, uint32_t handle)
{
	if (b && pl->nfree < pl->cap)
		pl->free[pl->nfree++] = (struct rps_wread_blk){.mem = b, .handle = handle};
}

static void pool_fini(struct rps_worker *w, struct rps_wread_pool *pl)
{
	for (int i = 0; i < pl->nreg; i++) {
		if (pl->reg[i].registered)
			rps_tr_dereg_mem(w->tr, &pl->reg[i].mr);
		rps_free(pl->reg[i].mem);
	}
	rps_free(pl->free);
}

int rps_wread_mem_init(struct rps_worker *w)
{
	struct rps_wread *rs = w->read;
	size_t chunk_max = 0;
	int rc;

	rs->max_sge = RPS_MIN(w->tr->max_read_sge, RPS_RD_MAX_SGE);
	/* n whole chunks take 1 + 2n sges (an end line and the next begin
	 * line share one); a partial last chunk one more */
	rs->per_read = (uint32_t)RPS_MAX(1, (rs->max_sge - 2) / 2);
	if (rs->per_read > RPS_RPLAN_MAX_CHUNKS)
		rs->per_read = RPS_RPLAN_MAX_CHUNKS;
	for (uint32_t i = 0; i < w->num_servers; i++)
		chunk_max = RPS_MAX(chunk_max, (size_t)w->servers[i].chunk_bytes);
	/* READs of at most RDMAPS_RDMA_READ_BYTES (whole chunks): on a lossy
	 * fabric a drop costs a retransmission within one READ, and a READ of
	 * fewer packets than the receiver's backlog is not dropped whole
	 * (docs/rdma.md, "Retransmission") */
	if (w->cfg && w->cfg->rdma_read_bytes && chunk_max) {
		uint64_t fit = w->cfg->rdma_read_bytes / chunk_max;

		if (!fit)
			RPS_WARN("pull: store chunks of %zu bytes exceed RDMAPS_RDMA_READ_BYTES=%llu: "
				 "one READ per chunk (set RDMAPS_CHUNK_BYTES on the servers to at "
				 "most the READ size)",
				 chunk_max, (unsigned long long)w->cfg->rdma_read_bytes);
		rs->per_read = (uint32_t)RPS_MAX(1, RPS_MIN((uint64_t)rs->per_read, fit));
	}
	rs->scratch.blk = RPS_MAX((size_t)rs->per_read * RPS_RPLAN_LINES, (size_t)RPS_RD_WHOLE_MAX);
	rs->scratch.per_region = SCRATCH_BLOCKS;
	/* bounce blocks: bper chunks of the largest size, grown on first use */
	rs->bper = (uint32_t)RPS_MAX(
	    (size_t)1,
	    RPS_MIN((size_t)rs->per_read, BOUNCE_READ_BYTES / RPS_MAX(chunk_max, (size_t)1)));
	rs->bounce.blk = (size_t)rs->bper * chunk_max;
	rs->bounce.per_region = RPS_MAX((size_t)1, BOUNCE_REGION_BYTES / rs->bounce.blk);
	rs->junk_len = chunk_max;
	rs->junk = alloc_registered(w, rs->junk_len, &rs->junk_mr, &rs->junk_registered);
	if (!rs->junk)
		return -ENOMEM;
	pthread_mutex_lock(&w->core.lock);
	rc = pool_grow_locked(w, &rs->scratch);
	pthread_mutex_unlock(&w->core.lock);
	return rc;
}

void rps_wread_mem_fini(struct rps_worker *w)
{
	struct rps_wread *rs = w->read;

	pool_fini(w, &rs->scratch);
	pool_fini(w, &rs->bounce);
	if (rs->junk_registered)
		rps_tr_dereg_mem(w->tr, &rs->junk_mr);
	rps_free(rs->junk);
}

static int within(const void *a, uint32_t len, uintptr_t lo, uintptr_t hi)
{
	uintptr_t s = (uintptr_t)a;

	return s >= lo && s + len <= hi;
}

/* The handles of the registrations that each sge lies in (dest: the pull
 * buffer's, or the bounce block's), so the transport looks none up; 0 (look
 * it up) for an sge that no single one covers, as when two adjacent
 * buffers' sges were merged. */
void rps_wread_set_handles(const struct rps_wread *sc, const struct rps_wdest *dest,
			   const char *lines, uint32_t lines_mrh, struct rps_tr_sge *sge, int nsge)
{
	uintptr_t jl = (uintptr_t)sc->junk, ll = (uintptr_t)lines;
	size_t blk = sc->scratch.blk;
	uint32_t jh = sc->junk_registered ? sc->junk_mr.handle : 0;

	for (int i = 0; i < nsge; i++) {
		struct rps_tr_sge *g = &sge[i];

		if (dest->handle && within(g->addr, g->len, dest->lo, dest->hi))
			g->handle = dest->handle;
		else if (within(g->addr, g->len, ll, ll + blk))
			g->handle = lines_mrh;
		else if (within(g->addr, g->len, jl, jl + sc->junk_len))
			g->handle = jh;
	}
}
