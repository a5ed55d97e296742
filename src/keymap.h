/* Key -> (server, shard) mapping, and slicing of large tensors.
 *
 * A tensor of n elements is cut into slices of at most slice_elems elements
 * (RDMAPS_SLICE_BYTES / 4). Slice i of key k lives on one shard of one server:
 *   hash mode:  server = (h(k) + i) % num_servers, h = rps_hash64
 *   range mode: server = (k * num_servers / key_range + i) % num_servers
 *               (keys >= key_range count as key_range - 1)
 *   shard = rps_hash64(k ^ rps_hash64(i + 1)) % shards_per_server
 * so consecutive slices of one big tensor go to consecutive servers.
 * Every node computes the same mapping from the same settings; nothing is
 * looked up over the network.
 */
#ifndef RPS_KEYMAP_H
#define RPS_KEYMAP_H

#include <stddef.h>
#include <stdint.h>

enum rps_keymap_mode { RPS_KEYMAP_HASH = 0, RPS_KEYMAP_RANGE = 1 };

struct rps_keymap {
	enum rps_keymap_mode mode;
	uint32_t num_servers;
	uint32_t shards_per_server;
	uint64_t key_range;
	uint64_t slice_elems;
};

struct rps_slice_loc {
	uint32_t slice;
	uint32_t server;
	uint32_t shard;
	uint64_t offset;  /* first element of the slice within the tensor */
	uint64_t nelems;
};

/* -EINVAL for zero servers/shards/slice size, or range mode with key_range 0. */
int rps_keymap_init(struct rps_keymap *m, enum rps_keymap_mode mode, uint32_t num_servers,
		    uint32_t shards_per_server, uint64_t key_range, uint64_t slice_elems);
/* "hash" | "range" -> mode, or -EINVAL */
int rps_keymap_mode_parse(const char *s);
/* Number of slices of a tensor of nelems elements (>= 1; 1 for nelems == 0). */
uint32_t rps_keymap_num_slices(const struct rps_keymap *m, uint64_t nelems);
/* Where slice `slice` of a tensor lives. */
void rps_keymap_locate(const struct rps_keymap *m, uint64_t key, uint64_t nelems, uint32_t slice,
		       struct rps_slice_loc *loc_p);

#endif
