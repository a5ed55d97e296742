/* One table's rows on one shard: arena, index, optimizer state (rowtab.h). */
#include "server/rowtab.h"

#include <errno.h>
#include <string.h>

#include <rdmaps/table.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/optim.h"
#include "src/rowinit.h"
#include "src/rowprec.h"
#include "src/util.h"

#define CHUNK_TARGET (2u << 20) /* arena bytes per chunk, about */
#define LOAD_NUM     4		/* the index doubles past 4/5 full */
#define LOAD_DEN     5

static uint64_t pow2_at_least(uint64_t x)
{
	uint64_t p = 1;

	while (p < x)
		p <<= 1;
	return p;
}

/* slot_bytes and chunk_shift from dim and eb. */
static void slot_geometry(struct rps_rowtab *rt)
{
	rt->slot_bytes = (uint32_t)RPS_ALIGN_UP(16 + (uint64_t)rt->dim * rt->eb, 8);
	rt->chunk_shift = 6;
	while (((uint64_t)rt->slot_bytes << (rt->chunk_shift + 1)) <= CHUNK_TARGET &&
	       rt->chunk_shift < 20)
		rt->chunk_shift++;
}

int rps_rowtab_set_precision(struct rps_rowtab *rt, uint32_t prec)
{
	if (!rps_row_prec_valid(prec) || rt->nrows || rt->nchunks)
		return -EINVAL;
	if (prec != RPS_TABLE_FP32 && !rt->wide) {
		rt->wide = rps_aligned_alloc(64, (size_t)rt->dim * sizeof(float));
		if (!rt->wide)
			return -ENOMEM;
	}
	rt->prec = prec;
	rt->eb = rps_row_elem_bytes(prec);
	slot_geometry(rt);
	return 0;
}

void rps_rowtab_load(const struct rps_rowtab *rt, uint64_t s, float *out)
{
	rps_row_widen(rt->prec, rps_rowtab_raw(rt, s), out, rt->dim);
}

void rps_rowtab_store(struct rps_rowtab *rt, uint64_t s, const float *in)
{
	rps_row_narrow(rt->prec, in, rps_rowtab_raw(rt, s), rt->dim);
}

static uint32_t *index_alloc(uint64_t nbuckets)
{
	return rps_aligned_alloc(64, nbuckets * RPS_ROWTAB_BUCKET * sizeof(uint32_t));
}

int rps_rowtab_init(struct rps_rowtab *rt, uint32_t table, uint32_t dim, uint32_t init,
		    float init_scale, uint64_t seed, enum rps_optim_kind kind,
		    uint64_t capacity_hint)
{
	uint64_t want, nb;
	uint32_t *ix;

	memset(rt, 0, sizeof(*rt));
	if (!dim || dim > RPS_TABLE_MAX_DIM)
		return -EINVAL;
	rt->table = table;
	rt->dim = dim;
	rt->init = init;
	rt->init_scale = init_scale;
	rt->seed = seed;
	rt->state_floats = rps_optim_state_floats(kind);
	rt->prec = RPS_TABLE_FP32;
	rt->eb = 4;
	slot_geometry(rt);
	if (capacity_hint > RPS_ROWTAB_MAX_ROWS)
		capacity_hint = RPS_ROWTAB_MAX_ROWS;
	want = capacity_hint * LOAD_DEN / LOAD_NUM / RPS_ROWTAB_BUCKET + 1;
	nb = pow2_at_least(want < 4 ? 4 : want);
	ix = index_alloc(nb);
	if (!ix)
		return -ENOMEM;
	memset(ix, 0, nb * RPS_ROWTAB_BUCKET * sizeof(uint32_t));
	atomic_init(&rt->index, ix);
	rt->nbuckets = nb;
	return 0;
}

void rps_rowtab_fini(struct rps_rowtab *rt)
{
	for (uint32_t c = 0; c < rt->nchunks; c++) {
		rps_free(rt->chunks[c]);
		if (rt->mstate)
			rps_free(rt->mstate[c]);
		if (rt->vstate)
			rps_free(rt->vstate[c]);
		rps_free(rt->steps[c]);
	}
	rps_free(rt->chunks);
	rps_free(rt->mstate);
	rps_free(rt->vstate);
	rps_free(rt->steps);
	rps_free(atomic_load(&rt->index));
	for (uint32_t i = 0; i < rt->nretired; i++)
		rps_free(rt->retired[i]);
	rps_free(rt->retired);
	rps_free(rt->wide);
	for (uint32_t c = 0; rt->evict && c < rt->nchunks; c++) {
		rps_free(rt->touch[c]);
		rps_free(rt->meta[c]);
	}
	rps_free(rt->touch);
	rps_free(rt->meta);
	rps_free(rt->freel);
	memset(rt, 0, sizeof(*rt));
}

int64_t rps_rowtab_find(const struct rps_rowtab *rt, uint64_t id)
{
	const uint32_t *ix = atomic_load_explicit(&rt->index, memory_order_relaxed);
	uint64_t h = rps_row_hash(rt->table, id);
	uint64_t mask = rt->nbuckets - 1, b = h & mask;
	uint32_t smask = rps_row_entry_mask(rt->nbuckets);
	uint32_t tag = rps_row_entry_tag(h) & ~smask;

	for (uint64_t probes = 0; probes < rt->nbuckets; probes++, b = (b + 1) & mask) {
		const uint32_t *e = ix + b * RPS_ROWTAB_BUCKET;

		for (uint32_t i = 0; i < RPS_ROWTAB_BUCKET; i++) {
			uint32_t v = e[i];
			uint64_t s;

			if (!v)
				return -1;
			if ((v & ~smask) != tag)
				continue;
			s = (v & smask) - 1;
			if (rps_rowtab_slot_id(rt, s) == id)
				return (int64_t)s;
		}
	}
	return -1;
}

/* Put slot s (of hash h) into index ix of nb buckets. */
static void index_insert(uint32_t *ix, uint64_t nb, uint64_t h, uint64_t s)
{
	uint64_t mask = nb - 1, b = h & mask;
	uint32_t smask = rps_row_entry_mask(nb);
	uint32_t v = (rps_row_entry_tag(h) & ~smask) | (uint32_t)(s + 1);

	for (;; b = (b + 1) & mask) {
		uint32_t *e = ix + b * RPS_ROWTAB_BUCKET;

		for (uint32_t i = 0; i < RPS_ROWTAB_BUCKET; i++)
			if (!e[i]) {
				/* release: a reader that sees the entry sees the slot */
				atomic_store_explicit((_Atomic uint32_t *)&e[i], v,
						      memory_order_release);
				return;
			}
	}
}

/* Double the index: build the new array aside, publish it, retire the old. */
static int index_grow(struct rps_rowtab *rt)
{
	uint64_t nb = rt->nbuckets * 2;
	uint32_t *nix = index_alloc(nb), *old = atomic_load(&rt->index);
	uint32_t **r;

	if (!nix)
		return -ENOMEM;
	r = rps_realloc(rt->retired, (rt->nretired + 1) * sizeof(*r));
	if (!r) {
		rps_free(nix);
		return -ENOMEM;
	}
	rt->retired = r;
	memset(nix, 0, nb * RPS_ROWTAB_BUCKET * sizeof(uint32_t));
	for (uint64_t s = 0; s < rt->nrows; s++)
		index_insert(nix, nb, rps_row_hash(rt->table, rps_rowtab_slot_id(rt, s)), s);
	atomic_store_explicit(&rt->index, nix, memory_order_release);
	/* one-sided readers of the old array: every entry says "moved" (the
	 * rows it named are all in the new one; rows never move) */
	for (uint64_t i = 0; i < rt->nbuckets * RPS_ROWTAB_BUCKET; i++)
		atomic_store_explicit((_Atomic uint32_t *)&old[i], RPS_ROWTAB_MOVED,
				      memory_order_relaxed);
	rt->nbuckets = nb;
	rt->retired[rt->nretired++] = old;
	rt->rehashes++;
	return 0;
}

static int chunk_add(struct rps_rowtab *rt)
{
	size_t per = (size_t)1 << rt->chunk_shift;
	uint32_t c = rt->nchunks;

	if (c == rt->chunks_cap) {
		uint32_t cap = c ? c * 2 : 8;
		char **a = rps_realloc(rt->chunks, cap * sizeof(*a));
		uint32_t **st;

		if (!a)
			return -ENOMEM;
		rt->chunks = a;
		st = rps_realloc(rt->steps, cap * sizeof(*st));
		if (!st)
			return -ENOMEM;
		rt->steps = st;
		if (rt->state_floats >= 1) {
			float **m = rps_realloc(rt->mstate, cap * sizeof(*m));

			if (!m)
				return -ENOMEM;
			rt->mstate = m;
		}
		if (rt->state_floats >= 2) {
			float **v = rps_realloc(rt->vstate, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			rt->vstate = v;
		}
		if (rt->evict) {
			uint32_t **tp = rps_realloc(rt->touch, cap * sizeof(*tp)), **mp;

			if (!tp)
				return -ENOMEM;
			rt->touch = tp;
			mp = rps_realloc(rt->meta, cap * sizeof(*mp));
			if (!mp)
				return -ENOMEM;
			rt->meta = mp;
		}
		rt->chunks_cap = cap;
	}
	if (rt->evict) {
		rt->touch[c] = rps_calloc(per, sizeof(uint32_t));
		rt->meta[c] = rps_calloc(per, sizeof(uint32_t));
		if (!rt->touch[c] || !rt->meta[c]) {
			rps_free(rt->touch[c]);
			rps_free(rt->meta[c]);
			return -ENOMEM;
		}
	}
	rt->chunks[c] = rps_aligned_alloc(64, per * rt->slot_bytes);
	rt->steps[c] = rps_calloc(per, sizeof(uint32_t));
	if (rt->state_floats >= 1)
		rt->mstate[c] = rps_calloc(per * rt->dim, sizeof(float));
	if (rt->state_floats >= 2)
		rt->vstate[c] = rps_calloc(per * rt->dim, sizeof(float));
	if (!rt->chunks[c] || !rt->steps[c] || (rt->state_floats >= 1 && !rt->mstate[c]) ||
	    (rt->state_floats >= 2 && !rt->vstate[c])) {
		rps_free(rt->chunks[c]);
		rps_free(rt->steps[c]);
		if (rt->state_floats >= 1)
			rps_free(rt->mstate[c]);
		if (rt->state_floats >= 2)
			rps_free(rt->vstate[c]);
		if (rt->evict) {
			rps_free(rt->touch[c]);
			rps_free(rt->meta[c]);
		}
		return -ENOMEM;
	}
	rt->nchunks++;
	return 0;
}

/* The row's values into its slot: vals, or id's initial value. */
static void fill_row(struct rps_rowtab *rt, char *slot, uint64_t id, const float *vals)
{
	if (vals) {
		rps_row_narrow(rt->prec, vals, slot + RPS_ROWTAB_HDR, rt->dim);
	} else if (rt->prec == RPS_TABLE_FP32) {
		rps_row_init(rt->init, rt->init_scale, rt->seed, id, rt->dim,
			     (float *)(slot + RPS_ROWTAB_HDR));
	} else { /* the fp32 initial row, rounded (rps_table_initial_row) */
		rps_row_init(rt->init, rt->init_scale, rt->seed, id, rt->dim, rt->wide);
		rps_row_narrow(rt->prec, rt->wide, slot + RPS_ROWTAB_HDR, rt->dim);
	}
}

/* Eviction: a freed slot taken for id (rowtab_evict.c removed its old id's
 * entry). Written under the seqlock: the versions move on, so a reader
 * racing with it re-reads, and then sees the new id. */
static int64_t row_reuse(struct rps_rowtab *rt, uint64_t s, uint64_t id, const float *vals)
{
	char *slot = rps_rowtab_slot(rt, s);

	rps_rowtab_write_begin(rt, s);
	memcpy(slot, &id, 8);
	fill_row(rt, slot, id, vals);
	rps_rowtab_write_end(rt, s);
	if (rt->state_floats >= 1)
		memset(rps_rowtab_m(rt, s), 0, (size_t)rt->dim * sizeof(float));
	if (rt->state_floats >= 2)
		memset(rps_rowtab_v(rt, s), 0, (size_t)rt->dim * sizeof(float));
	*rps_rowtab_step(rt, s) = 0;
	*rps_rowtab_touchp(rt, s) = rt->now;
	index_insert(atomic_load_explicit(&rt->index, memory_order_relaxed), rt->nbuckets,
		     rps_row_hash(rt->table, id), s);
	return (int64_t)s;
}

/* A new slot for id holding vals (NULL: the initial value). */
static int64_t row_new(struct rps_rowtab *rt, uint64_t id, const float *vals)
{
	uint64_t s = rt->nrows;
	char *slot;
	uint32_t zero = 0;
	int rc;

	if (rt->evict && rt->nfreel) {
		int64_t f = rps_rowtab_take_free(rt);

		if (f >= 0)
			return row_reuse(rt, (uint64_t)f, id, vals);
	}
	if (s >= RPS_ROWTAB_MAX_ROWS)
		return -ENOSPC;
	if ((s + 1) * LOAD_DEN > rt->nbuckets * RPS_ROWTAB_BUCKET * LOAD_NUM) {
		rc = index_grow(rt);
		if (rc)
			return rc;
	}
	if ((s >> rt->chunk_shift) >= rt->nchunks) {
		rc = chunk_add(rt);
		if (rc)
			return rc;
	}
	slot = rps_rowtab_slot(rt, s);
	memcpy(slot, &id, 8);
	memcpy(slot + 8, &zero, 4);
	fill_row(rt, slot, id, vals);
	memset(slot + RPS_ROWTAB_HDR + (size_t)rt->dim * rt->eb, 0,
	       rt->slot_bytes - RPS_ROWTAB_HDR - (size_t)rt->dim * rt->eb);
	rt->nrows = s + 1;
	if (rt->evict)
		*rps_rowtab_touchp(rt, s) = rt->now; /* meta: 0 (calloc) */
	index_insert(atomic_load_explicit(&rt->index, memory_order_relaxed), rt->nbuckets,
		     rps_row_hash(rt->table, id), s);
	return (int64_t)s;
}

int64_t rps_rowtab_get(struct rps_rowtab *rt, uint64_t id, int *created_p)
{
	int64_t s = rps_rowtab_find(rt, id);

	if (s >= 0 && !rps_rowtab_live(rt, (uint64_t)s)) {
		rps_rowtab_revive(rt, (uint64_t)s); /* evicted: its initial value already */
		if (created_p)
			*created_p = 1;
		return s;
	}
	if (created_p)
		*created_p = s < 0;
	if (s >= 0)
		return s;
	return row_new(rt, id, NULL);
}

int64_t rps_rowtab_put(struct rps_rowtab *rt, uint64_t id, const float *vals)
{
	int64_t s = rps_rowtab_find(rt, id);

	if (s >= 0) {
		if (!rps_rowtab_live(rt, (uint64_t)s))
			rps_rowtab_revive(rt, (uint64_t)s);
		rps_rowtab_write_begin(rt, (uint64_t)s);
		rps_rowtab_store(rt, (uint64_t)s, vals);
		rps_rowtab_write_end(rt, (uint64_t)s);
		return s;
	}
	return row_new(rt, id, vals);
}

static inline _Atomic uint32_t *ver_begin(struct rps_rowtab *rt, uint64_t s)
{
	return (_Atomic uint32_t *)(rps_rowtab_slot(rt, s) + 8);
}
static inline _Atomic uint32_t *ver_end(struct rps_rowtab *rt, uint64_t s)
{
	return (_Atomic uint32_t *)(rps_rowtab_slot(rt, s) + rt->slot_bytes - 4);
}

void rps_rowtab_write_begin(struct rps_rowtab *rt, uint64_t s)
{
	uint32_t v = atomic_load_explicit(ver_begin(rt, s), memory_order_relaxed) + 1;

	atomic_store_explicit(ver_begin(rt, s), v, memory_order_relaxed);
	atomic_store_explicit(ver_end(rt, s), v, memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* odd before the data changes */
}

void rps_rowtab_write_end(struct rps_rowtab *rt, uint64_t s)
{
	uint32_t v = atomic_load_explicit(ver_begin(rt, s), memory_order_relaxed) + 1;

	atomic_store_explicit(ver_end(rt, s), v, memory_order_release);
	atomic_store_explicit(ver_begin(rt, s), v, memory_order_release);
}

uint64_t rps_rowtab_bytes(const struct rps_rowtab *rt)
{
	uint64_t per = 1ull << rt->chunk_shift, b;

	b = (uint64_t)rt->nchunks * per *
	    (rt->slot_bytes + 4ull + (rt->evict ? 8ull : 0) + 4ull * rt->dim * rt->state_floats);
	b += rt->freel_cap * 4;
	b += rt->nbuckets * RPS_ROWTAB_BUCKET * 4;
	for (uint32_t i = 0; i < rt->nretired; i++)
		b += (rt->nbuckets >> (rt->nretired - i)) * RPS_ROWTAB_BUCKET * 4;
	return b;
}
