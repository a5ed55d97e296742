/* Eviction of idle rows from a table's arena (rowtab.h; policy: table_evict.c,
 * docs/tables.md "Eviction").
 *
 * An evicted slot keeps its id and gets its id's initial value (a seqlock
 * write, so the versions move on and a racing one-sided reader re-reads); its
 * optimizer state and step count are zeroed. So a slot holding id X with even,
 * equal versions always holds X's current value: the live row, or the
 * initial value X has again once evicted. The slot's index entry stays, so a
 * pull or push of X finds it and revives it in place (no copy). The slot is
 * listed for reuse; only when a new id takes it is X's entry removed from the
 * index (backward shift, keeping the probing invariants: every bucket's
 * entries packed at its front, every entry reachable from its home bucket
 * over full buckets) and the slot rewritten under the seqlock with the new
 * id: a reader holding X -> slot then finds another id and falls back to the
 * server, which re-creates X with its initial value. An id is in at most one
 * slot at any time. Update thread only.
 */
#include "server/rowtab.h"

#include <errno.h>
#include <string.h>

#include <rdmaps/table.h>

#include "src/alloc.h"
#include "src/rowinit.h"
#include "src/rowprec.h"

int rps_rowtab_evict_enable(struct rps_rowtab *rt)
{
	if (rt->nrows || rt->nchunks)
		return -EINVAL;
	rt->evict = 1;
	if (!rt->epoch)
		rt->epoch = 1;
	return 0;
}

/* The initial value of slot s's id into the slot (the caller holds the
 * seqlock), as row_new makes it. */
static void init_value(struct rps_rowtab *rt, uint64_t s)
{
	uint64_t id = rps_rowtab_slot_id(rt, s);

	if (rt->prec == RPS_TABLE_FP32) {
		rps_row_init(rt->init, rt->init_scale, rt->seed, id, rt->dim,
			     rps_rowtab_data(rt, s));
	} else {
		rps_row_init(rt->init, rt->init_scale, rt->seed, id, rt->dim, rt->wide);
		rps_row_narrow(rt->prec, rt->wide, rps_rowtab_raw(rt, s), rt->dim);
	}
}

void rps_rowtab_evict_slot(struct rps_rowtab *rt, uint64_t s)
{
	uint32_t *m = rps_rowtab_meta(rt, s);

	rps_rowtab_write_begin(rt, s);
	init_value(rt, s);
	rps_rowtab_write_end(rt, s);
	if (rt->state_floats >= 1)
		memset(rps_rowtab_m(rt, s), 0, (size_t)rt->dim * sizeof(float));
	if (rt->state_floats >= 2)
		memset(rps_rowtab_v(rt, s), 0, (size_t)rt->dim * sizeof(float));
	*rps_rowtab_step(rt, s) = 0;
	*m = RPS_ROW_FREED | (*m & RPS_ROW_LISTED);
	rt->nfreed++;
	rt->evicted++;
	if (*m & RPS_ROW_LISTED)
		return; /* still listed from an earlier eviction (revived since) */
	if (rt->nfreel == rt->freel_cap) {
		uint64_t cap = rt->freel_cap ? 2 * rt->freel_cap : 1024;
		uint32_t *f = rps_realloc(rt->freel, cap * sizeof(*f));

		if (!f)
			return; /* not reusable, still revivable: no harm */
		rt->freel = f;
		rt->freel_cap = cap;
	}
	rt->freel[rt->nfreel++] = (uint32_t)s;
	*m |= RPS_ROW_LISTED;
}

void rps_rowtab_revive(struct rps_rowtab *rt, uint64_t s)
{
	uint32_t *m = rps_rowtab_meta(rt, s);

	*m &= RPS_ROW_LISTED; /* live, never updated (its initial value) */
	*rps_rowtab_touchp(rt, s) = rt->now;
	rt->nfreed--;
	rt->revived++;
}

uint64_t rps_rowtab_evict_scan(struct rps_rowtab *rt, uint32_t idle, uint32_t saved,
			       uint64_t scan, int *wrapped_p)
{
	uint64_t n = 0;

	if (wrapped_p)
		*wrapped_p = 0;
	if (!rt->evict || !rt->nrows)
		return 0;
	for (uint64_t k = 0; k < scan; k++) {
		uint64_t s;
		uint32_t m, ep;

		if (rt->cursor >= rt->nrows) {
			rt->cursor = 0;
			if (wrapped_p)
				*wrapped_p = 1;
		}
		s = rt->cursor++;
		m = *rps_rowtab_meta(rt, s);
		ep = m & RPS_ROW_EPOCH;
		if ((m & RPS_ROW_FREED) || (ep && ep > saved) ||
		    (uint32_t)(rt->now - *rps_rowtab_touchp(rt, s)) < idle)
			continue;
		rps_rowtab_evict_slot(rt, s);
		n++;
	}
	return n;
}

/* Bucket b of ix: the number of filled entries (packed at the front). */
static uint32_t filled(const uint32_t *e)
{
	uint32_t n = 0;

	while (n < RPS_ROWTAB_BUCKET && e[n])
		n++;
	return n;
}

static void put_entry(uint32_t *p, uint32_t v)
{
	atomic_store_explicit((_Atomic uint32_t *)p, v, memory_order_release);
}

void rps_rowtab_index_remove(struct rps_rowtab *rt, uint64_t id, uint64_t s)
{
	uint32_t *ix = atomic_load_explicit(&rt->index, memory_order_relaxed);
	uint64_t nb = rt->nbuckets, mask = nb - 1;
	uint32_t smask = rps_row_entry_mask(nb);
	uint64_t hb = rps_row_hash(rt->table, id) & mask, probes;
	uint32_t hi = 0;
	int found = 0;

	/* the entry of slot s, from id's home bucket on */
	for (probes = 0; probes < nb && !found; probes++) {
		uint32_t *e = ix + hb * RPS_ROWTAB_BUCKET;

		for (hi = 0; hi < RPS_ROWTAB_BUCKET; hi++) {
			if (!e[hi])
				return; /* probing ends: not in the index (cannot happen) */
			if ((e[hi] & smask) == (uint32_t)(s + 1)) {
				found = 1;
				break;
			}
		}
		if (!found)
			hb = (hb + 1) & mask;
	}
	if (!found)
		return;
	for (;;) {
		uint32_t *e = ix + hb * RPS_ROWTAB_BUCKET;
		uint32_t last = filled(e) - 1;
		uint64_t j = (hb + 1) & mask;
		int moved = 0;

		/* keep the bucket packed: its last entry into the hole */
		if (hi != last)
			put_entry(&e[hi], e[last]);
		put_entry(&e[last], 0);
		hi = last;
		/* an entry further on whose home is at or before hb comes back here */
		for (probes = 1; probes < nb && !moved; probes++, j = (j + 1) & mask) {
			uint32_t *f = ix + j * RPS_ROWTAB_BUCKET;
			uint32_t nf = filled(f);

			for (uint32_t i = 0; i < nf; i++) {
				uint64_t slot = (f[i] & smask) - 1;
				uint64_t home =
				    rps_row_hash(rt->table, rps_rowtab_slot_id(rt, slot)) & mask;

				if (((j - home) & mask) >= ((j - hb) & mask)) {
					put_entry(&e[hi], f[i]);
					hb = j;
					hi = i;
					moved = 1;
					break;
				}
			}
			if (!moved && nf < RPS_ROWTAB_BUCKET)
				return; /* probing stops at this bucket: nothing beyond needs hb */
		}
		if (!moved)
			return;
	}
}

int64_t rps_rowtab_take_free(struct rps_rowtab *rt)
{
	while (rt->nfreel) {
		uint64_t s = rt->freel[--rt->nfreel];
		uint32_t *m = rps_rowtab_meta(rt, s);

		*m &= ~RPS_ROW_LISTED;
		if (!(*m & RPS_ROW_FREED))
			continue; /* revived since it was listed */
		rps_rowtab_index_remove(rt, rps_rowtab_slot_id(rt, s), s);
		*m = 0;
		rt->nfreed--;
		rt->reused++;
		return (int64_t)s;
	}
	return -1;
}
