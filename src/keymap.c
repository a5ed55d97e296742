/* Key -> (server, shard) map; the formulas are the contract in src/keymap.h. */
#include "src/keymap.h"

#include <rdmaps/keys.h>

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "src/config.h"
#include "src/log.h"
#include "src/util.h"

int rps_keymap_init(struct rps_keymap *m, enum rps_keymap_mode mode, uint32_t num_servers,
		    uint32_t shards_per_server, uint64_t key_range, uint64_t slice_elems)
{
	if (mode != RPS_KEYMAP_HASH && mode != RPS_KEYMAP_RANGE) {
		RPS_ERR("keymap: unknown mode %d", (int)mode);
		return -EINVAL;
	}
	if (!num_servers || !shards_per_server || !slice_elems) {
		RPS_ERR("keymap: need servers, shards and slice size > 0 (got %u, %u, %llu)",
			num_servers, shards_per_server, (unsigned long long)slice_elems);
		return -EINVAL;
	}
	if (mode == RPS_KEYMAP_RANGE && !key_range) {
		RPS_ERR("keymap: range mode needs key_range > 0");
		return -EINVAL;
	}
	m->mode = mode;
	m->num_servers = num_servers;
	m->shards_per_server = shards_per_server;
	m->key_range = key_range;
	m->slice_elems = slice_elems;
	return 0;
}

int rps_keymap_mode_parse(const char *s)
{
	if (!strcmp(s, "hash"))
		return RPS_KEYMAP_HASH;
	if (!strcmp(s, "range"))
		return RPS_KEYMAP_RANGE;
	return -EINVAL;
}

uint32_t rps_keymap_num_slices(const struct rps_keymap *m, uint64_t nelems)
{
	uint64_t n;

	if (nelems == 0)
		return 1;
	n = nelems / m->slice_elems + (nelems % m->slice_elems != 0);
	assert(n <= UINT32_MAX);
	return (uint32_t)n;
}

/* Server of slice 0 of key. Exact integer arithmetic (no wrap-around):
 *   hash:  h(k) mod S
 *   range: floor(min(k, R - 1) * S / R) */
static uint32_t base_server(const struct rps_keymap *m, uint64_t key)
{
	if (m->mode == RPS_KEYMAP_HASH)
		return (uint32_t)(rps_hash64(key) % m->num_servers);
	if (key >= m->key_range)
		key = m->key_range - 1;
	return (uint32_t)((unsigned __int128)key * m->num_servers / m->key_range);
}

void rps_keymap_locate(const struct rps_keymap *m, uint64_t key, uint64_t nelems, uint32_t slice,
		       struct rps_slice_loc *loc_p)
{
	uint64_t off = (uint64_t)slice * m->slice_elems;

	assert(slice < rps_keymap_num_slices(m, nelems));
	loc_p->slice = slice;
	loc_p->server =
	    (uint32_t)((base_server(m, key) + (uint64_t)(slice % m->num_servers)) % m->num_servers);
	loc_p->shard =
	    (uint32_t)(rps_hash64(key ^ rps_hash64((uint64_t)slice + 1)) % m->shards_per_server);
	loc_p->offset = off < nelems ? off : nelems;
	loc_p->nelems = off < nelems ? RPS_MIN(m->slice_elems, nelems - off) : 0;
}

/* include/rdmaps/keys.h: the map a cluster of num_servers builds from cfg. */
int rps_key_server(const struct rps_config *cfg, uint32_t num_servers, rps_key_t key,
		   uint32_t *server_p)
{
	struct rps_keymap m;
	struct rps_slice_loc loc;
	int mode = rps_keymap_mode_parse(cfg->key_map);
	int rc;

	if (mode < 0 || !num_servers)
		return -EINVAL;
	rc = rps_keymap_init(&m, (enum rps_keymap_mode)mode, num_servers, 1, cfg->key_range,
			     RPS_MAX(cfg->slice_bytes / 4, (uint64_t)1));
	if (rc)
		return rc;
	rps_keymap_locate(&m, key, 1, 0, &loc);
	*server_p = loc.server;
	return 0;
}
