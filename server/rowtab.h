/* One table's rows on one shard (rowtab.c): a row arena designed for
 * one-sided READs, an index id -> slot, and the rows' optimizer state kept
 * apart. Written by the shard's update thread only.
 *
 * Arena: slots of slot_bytes = roundup(16 + dim * eb, 8) in chunks of
 * 2^chunk_shift slots (each chunk allocated once, 64-byte aligned; over RDMA
 * a chunk is a region of its own): rows never move.
 *   slot: u64 id | u32 begin version | data[dim] (eb bytes each: fp32, or
 *         fp16 / bf16, rps_rowtab_set_precision) | pad to 8 bytes | u32 end
 *         version (the slot's last 4 bytes)
 * The versions follow the store's seqlock (src/store.h), in 32 bits: a writer
 * makes both odd (begin, then end), writes, then makes both even (end, then
 * begin); a reader of the whole slot takes it iff begin == end, even, and id
 * is the id it looks for.
 *
 * Index: 2^k buckets of RPS_ROWTAB_BUCKET u32 entries (64 bytes, one READ):
 * entry = (tag & ~mask) | (slot + 1), 0 = empty, mask = the slot bits of an
 * array of 2^k buckets (rps_row_entry_mask: min(27, k + 4) bits), tag =
 * rps_row_entry_tag(row hash) (src/rowinit.h; docs/protocol.md).
 * A row goes to the first bucket from (hash & (nbuckets - 1)) on with a free
 * entry (linear probing over buckets); lookups stop at a bucket with a free
 * entry. At most RPS_ROWTAB_MAX_ROWS rows per table and shard. The index
 * doubles when it is 80% full: a new array is built and published; the old
 * one is kept (retired) until the table is freed, so a reader holding its
 * address never reads freed memory (docs/tables.md).
 */
#ifndef RPS_SERVER_ROWTAB_H
#define RPS_SERVER_ROWTAB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmaps/types.h>

#define RPS_ROWTAB_BUCKET   16u
#define RPS_ROWTAB_SLOTBITS 27u
#define RPS_ROWTAB_MAX_ROWS ((1u << RPS_ROWTAB_SLOTBITS) - 2u)
#define RPS_ROWTAB_HDR	    12u /* id + begin version: where the row's data starts */
/* Every entry of a retired index array is overwritten with this (never a
 * real entry: slot 2^27 - 2 does not exist): a one-sided reader holding the
 * old array's address sees it and fetches the new one (docs/protocol.md). */
#define RPS_ROWTAB_MOVED 0xffffffffu

struct rps_rowtab {
	uint32_t table;
	uint32_t dim;
	uint32_t init;
	float init_scale;
	uint64_t seed;
	int state_floats; /* 0, 1 (m) or 2 (m, v) per element */
	uint32_t prec;	   /* enum rps_table_precision of the stored rows */
	uint32_t eb;	   /* bytes per stored element: 4, or 2 (fp16, bf16) */
	float *wide;	   /* fp16 / bf16: one row of floats (initial values) */

	uint32_t slot_bytes;
	uint32_t chunk_shift; /* slots per chunk = 1 << chunk_shift */
	char **chunks;	      /* the arena */
	float **mstate;	      /* per chunk: m (state_floats >= 1) */
	float **vstate;	      /* per chunk: v (state_floats == 2) */
	uint32_t **steps;     /* per chunk: updates applied to each row */
	uint32_t nchunks, chunks_cap;
	uint64_t nrows;

	_Atomic(uint32_t *) index; /* nbuckets * RPS_ROWTAB_BUCKET entries */
	uint64_t nbuckets;
	uint32_t **retired; /* older index arrays (readers may still hold them) */
	uint32_t nretired;
	uint64_t rehashes;

	/* eviction (rowtab_evict.c; only with rps_rowtab_evict_enable) */
	int evict;
	uint32_t now;	  /* the shard's clock: what a touch records (set by the caller) */
	uint32_t epoch;	  /* what an update records (checkpoint epochs, table_evict.c) */
	uint32_t **touch; /* per chunk, per slot: clock of the last touch */
	uint32_t **meta;  /* per chunk, per slot: RPS_ROW_FREED | RPS_ROW_LISTED | epoch */
	uint32_t *freel;  /* slots listed for reuse (RPS_ROW_LISTED; some revived since) */
	uint64_t nfreel, freel_cap;
	uint64_t nfreed;  /* slots freed now (not live) */
	uint64_t evicted, reused, revived; /* counts */
	uint64_t cursor;  /* next slot an eviction slice looks at */
};

#define RPS_ROW_FREED  0x80000000u /* meta: evicted (the slot holds its id's initial value) */
#define RPS_ROW_LISTED 0x40000000u /* meta: on the free list */
#define RPS_ROW_EPOCH  0x3fffffffu /* meta: epoch of the last update; 0 = never updated */

/* dim 1..4096; capacity_hint rows expected (0: small). -EINVAL, -ENOMEM. */
int rps_rowtab_init(struct rps_rowtab *rt, uint32_t table, uint32_t dim, uint32_t init,
		    float init_scale, uint64_t seed, enum rps_optim_kind kind,
		    uint64_t capacity_hint);
void rps_rowtab_fini(struct rps_rowtab *rt);
/* Store rows as prec (enum rps_table_precision) instead of fp32: right after
 * init, before any row. 0, or -EINVAL (unknown prec, rows exist). The
 * optimizer state stays fp32. -ENOMEM. */
int rps_rowtab_set_precision(struct rps_rowtab *rt, uint32_t prec);

/* The slot of row id, or -1. */
int64_t rps_rowtab_find(const struct rps_rowtab *rt, uint64_t id);
/* The slot of row id, created (with its initial value) if it does not
 * exist; *created_p (may be NULL) says so. -ENOSPC (table full), -ENOMEM. */
int64_t rps_rowtab_get(struct rps_rowtab *rt, uint64_t id, int *created_p);
/* Create row id with the given values (restore; rounded to the table's
 * precision): its slot, or < 0. */
int64_t rps_rowtab_put(struct rps_rowtab *rt, uint64_t id, const float *vals);

static inline char *rps_rowtab_slot(const struct rps_rowtab *rt, uint64_t s)
{
	return rt->chunks[s >> rt->chunk_shift] +
	       (size_t)(s & ((1ull << rt->chunk_shift) - 1)) * rt->slot_bytes;
}
static inline uint64_t rps_rowtab_slot_id(const struct rps_rowtab *rt, uint64_t s)
{
	return *(const uint64_t *)rps_rowtab_slot(rt, s);
}
/* The stored row of slot s (rt->eb bytes an element). rps_rowtab_data: the
 * same as floats, for fp32 tables only (rt->prec == 0); any precision reads
 * and writes through rps_rowtab_load / rps_rowtab_store. */
static inline void *rps_rowtab_raw(const struct rps_rowtab *rt, uint64_t s)
{
	return rps_rowtab_slot(rt, s) + RPS_ROWTAB_HDR;
}
static inline float *rps_rowtab_data(const struct rps_rowtab *rt, uint64_t s)
{
	return (float *)(rps_rowtab_slot(rt, s) + RPS_ROWTAB_HDR);
}
/* Slot s's row as dim floats (widened: exact) / from dim floats (rounded to
 * nearest even; the caller holds the write seqlock). */
void rps_rowtab_load(const struct rps_rowtab *rt, uint64_t s, float *out);
void rps_rowtab_store(struct rps_rowtab *rt, uint64_t s, const float *in);
/* The optimizer state of slot s: m and v (NULL when the optimizer keeps
 * none), its update count. */
static inline float *rps_rowtab_m(const struct rps_rowtab *rt, uint64_t s)
{
	uint64_t mask = (1ull << rt->chunk_shift) - 1;

	return rt->state_floats >= 1 ? rt->mstate[s >> rt->chunk_shift] + (s & mask) * rt->dim
				     : NULL;
}
static inline float *rps_rowtab_v(const struct rps_rowtab *rt, uint64_t s)
{
	uint64_t mask = (1ull << rt->chunk_shift) - 1;

	return rt->state_floats >= 2 ? rt->vstate[s >> rt->chunk_shift] + (s & mask) * rt->dim
				     : NULL;
}
static inline uint32_t *rps_rowtab_step(const struct rps_rowtab *rt, uint64_t s)
{
	return &rt->steps[s >> rt->chunk_shift][s & ((1ull << rt->chunk_shift) - 1)];
}
/* Eviction's per-slot words (rt->evict only). */
static inline uint32_t *rps_rowtab_meta(const struct rps_rowtab *rt, uint64_t s)
{
	return &rt->meta[s >> rt->chunk_shift][s & ((1ull << rt->chunk_shift) - 1)];
}
static inline uint32_t *rps_rowtab_touchp(const struct rps_rowtab *rt, uint64_t s)
{
	return &rt->touch[s >> rt->chunk_shift][s & ((1ull << rt->chunk_shift) - 1)];
}
/* Slot s (< nrows) holds a row (not freed by eviction). */
static inline int rps_rowtab_live(const struct rps_rowtab *rt, uint64_t s)
{
	return !rt->evict || !(*rps_rowtab_meta(rt, s) & RPS_ROW_FREED);
}
/* Rows that exist (slots used minus slots freed). */
static inline uint64_t rps_rowtab_rows(const struct rps_rowtab *rt)
{
	return rt->nrows - rt->nfreed;
}
/* Row s was pushed or pulled by frame now (rt->now); rps_rowtab_updated: its
 * value changed (rt->epoch). No-ops without eviction. */
static inline void rps_rowtab_touch(struct rps_rowtab *rt, uint64_t s)
{
	if (rt->evict)
		*rps_rowtab_touchp(rt, s) = rt->now;
}
static inline void rps_rowtab_updated(struct rps_rowtab *rt, uint64_t s)
{
	if (rt->evict) {
		uint32_t *m = rps_rowtab_meta(rt, s);

		*m = (*m & ~RPS_ROW_EPOCH) | (rt->epoch & RPS_ROW_EPOCH);
		*rps_rowtab_touchp(rt, s) = rt->now;
	}
}

/* Eviction (rowtab_evict.c). Enable right after init, before any row: the
 * per-slot words (8 bytes a slot) are kept from then on. 0, -EINVAL. */
int rps_rowtab_evict_enable(struct rps_rowtab *rt);
/* Look at up to `scan` slots from rt->cursor on (wrapping at nrows) and
 * evict every live row not touched for `idle` clocks (rt->now - touch >=
 * idle) whose last update is in epoch <= saved (0: never updated). Returns
 * the rows evicted; *wrapped_p (may be NULL) says the cursor went past the
 * last slot. */
uint64_t rps_rowtab_evict_scan(struct rps_rowtab *rt, uint32_t idle, uint32_t saved,
			       uint64_t scan, int *wrapped_p);
/* Evict row s now: its slot holds its id's initial value (seqlock write:
 * versions move on), its optimizer state and step count are zeroed, it is
 * listed for reuse; its index entry stays until the slot is reused, so that
 * a pull of the id finds and revives it in place. */
void rps_rowtab_evict_slot(struct rps_rowtab *rt, uint64_t s);
/* rowtab.c's hooks: a freed slot found for its id comes back (*revived);
 * a listed slot for a new id (its old id's index entry removed), or -1. */
void rps_rowtab_revive(struct rps_rowtab *rt, uint64_t s);
int64_t rps_rowtab_take_free(struct rps_rowtab *rt);
/* Remove slot s's entry (for id) from the current index, keeping the
 * probing invariant (backward shift over buckets). */
void rps_rowtab_index_remove(struct rps_rowtab *rt, uint64_t id, uint64_t s);
/* Seqlock around a write of slot s's data (update thread). */
void rps_rowtab_write_begin(struct rps_rowtab *rt, uint64_t s);
void rps_rowtab_write_end(struct rps_rowtab *rt, uint64_t s);

/* Bytes the table holds: arena, optimizer state, index (current and
 * retired). */
uint64_t rps_rowtab_bytes(const struct rps_rowtab *rt);

#endif
