/* Sparse tables: where a row lives and what it holds when it is created.
 *
 * Both are pure functions of their arguments, shared by the workers (routing)
 * and the servers (placement, initial values), and by tests that check them.
 */
#ifndef RPS_ROWINIT_H
#define RPS_ROWINIT_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64's finaliser: a bijective mix of 64 bits. */
static inline uint64_t rps_mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The 64-bit hash of (table, id): routing uses its high half, a shard's
 * index its low bits (rps_row_index_hash). */
static inline uint64_t rps_row_hash(uint32_t table, uint64_t id)
{
	return rps_mix64(id ^ rps_mix64(0x7461626c65000000ull | table));
}

/* A table index entry (docs/protocol.md, Tables): mask of its slot bits for
 * an array of nbuckets (min(27, log2(16 nbuckets)) bits), and the tag word
 * of row hash h (entry = (tag & ~mask) | (slot + 1)). */
static inline uint32_t rps_row_entry_mask(uint64_t nbuckets)
{
	uint32_t bits = 4;

	while (bits < 27 && (1ull << bits) < nbuckets * 16u)
		bits++;
	return (uint32_t)((1ull << bits) - 1);
}
static inline uint32_t rps_row_entry_tag(uint64_t h)
{
	return (uint32_t)(rps_mix64(h) >> 32);
}

/* Which server (of nservers) and shard (of nshards) hold row id of table. */
static inline void rps_row_route(uint32_t table, uint64_t id, uint32_t nservers, uint32_t nshards,
				 uint32_t *server_p, uint32_t *shard_p)
{
	uint64_t h = rps_row_hash(table, id) >> 32;

	*server_p = (uint32_t)(h % nservers);
	*shard_p = (uint32_t)((h / nservers) % nshards);
}

/* The row's value at creation: dim floats into out, a function of (init,
 * scale, seed, id) only. init: enum rps_table_init (zero, uniform in
 * [-scale, scale], normal(0, scale)); element e uses the counter
 * rps_mix64(seed ^ rps_mix64(id)) + e of splitmix64. */
void rps_row_init(uint32_t init, float scale, uint64_t seed, uint64_t id, uint32_t dim, float *out);

#endif
