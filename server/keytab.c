/* The (key, slice) -> slice meta table of a shard: insert-only open
 * addressing with linear probing. One writer (the update thread) inserts;
 * readers on any thread look up without locks. A slot, once set, never
 * changes, so a reader that sees a pointer sees a complete meta (release /
 * acquire), and a reader that sees NULL at the end of a probe knows the slice
 * was not there when it looked. */
#include "server/keytab.h"

#include <errno.h>

#include "src/alloc.h"
#include "src/util.h"

static inline uint64_t keytab_hash(uint64_t key, uint32_t slice)
{
	return rps_hash64(key ^ rps_hash64((uint64_t)slice + 0x51ce));
}

int rps_srv_keytab_init(struct rps_srv_keytab *t, uint64_t max_entries)
{
	uint64_t cap = 16;

	if (max_entries < 1)
		max_entries = 1;
	while (cap < 2 * max_entries)
		cap <<= 1;
	t->slots = rps_calloc(cap, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	for (uint64_t i = 0; i < cap; i++)
		atomic_init(&t->slots[i], NULL);
	t->mask = cap - 1;
	t->count = 0;
	t->max = cap / 2;
	return 0;
}

void rps_srv_keytab_fini(struct rps_srv_keytab *t, void (*free_fn)(struct rps_slice_meta *m))
{
	if (!t->slots)
		return;
	for (uint64_t i = 0; i <= t->mask; i++) {
		struct rps_slice_meta *m = atomic_load_explicit(&t->slots[i], memory_order_relaxed);

		if (m && free_fn)
			free_fn(m);
	}
	rps_free(t->slots);
	t->slots = NULL;
}

struct rps_slice_meta *rps_srv_keytab_lookup(const struct rps_srv_keytab *t, uint64_t key,
					     uint32_t slice)
{
	uint64_t i = keytab_hash(key, slice) & t->mask;

	for (;;) {
		struct rps_slice_meta *m = atomic_load_explicit(&t->slots[i], memory_order_acquire);

		if (!m)
			return NULL;
		if (m->key == key && m->slice == slice)
			return m;
		i = (i + 1) & t->mask;
	}
}

int rps_srv_keytab_insert(struct rps_srv_keytab *t, struct rps_slice_meta *m)
{
	uint64_t i = keytab_hash(m->key, m->slice) & t->mask;

	if (t->count >= t->max)
		return -ENOSPC;
	for (;;) {
		struct rps_slice_meta *o = atomic_load_explicit(&t->slots[i], memory_order_relaxed);

		if (!o) {
			atomic_store_explicit(&t->slots[i], m, memory_order_release);
			t->count++;
			return 0;
		}
		if (o->key == m->key && o->slice == m->slice)
			return -EEXIST;
		i = (i + 1) & t->mask;
	}
}

uint64_t rps_srv_keytab_count(const struct rps_srv_keytab *t)
{
	return t->count;
}
