/* Unit tests: key -> (server, shard) map and slicing (src/keymap.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/keys.h>

#include "src/config.h"
#include "src/keymap.h"
#include "src/log.h"
#include "src/util.h"

/* The formulas of src/keymap.h, written out independently. */
static uint32_t ref_server(const struct rps_keymap *m, uint64_t k, uint32_t i)
{
	if (m->mode == RPS_KEYMAP_HASH)
		return (uint32_t)(((unsigned __int128)rps_hash64(k) + i) % m->num_servers);
	if (k >= m->key_range)
		k = m->key_range - 1;
	return (uint32_t)(((unsigned __int128)k * m->num_servers / m->key_range + i) %
			  m->num_servers);
}

static uint32_t ref_shard(const struct rps_keymap *m, uint64_t k, uint32_t i)
{
	return (uint32_t)(rps_hash64(k ^ rps_hash64((uint64_t)i + 1)) % m->shards_per_server);
}

static void test_invalid_init(void **state)
{
	struct rps_keymap m;

	memset(&m, 0xa5, sizeof(m));
	rps_log_level_cur = -1; /* expected errors */
	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_HASH, 0, 2, 0, 1024), -EINVAL);
	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_HASH, 2, 0, 0, 1024), -EINVAL);
	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_HASH, 2, 2, 0, 0), -EINVAL);
	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_RANGE, 2, 2, 0, 1024), -EINVAL);
	assert_int_equal(rps_keymap_init(&m, (enum rps_keymap_mode)7, 2, 2, 10, 1024), -EINVAL);
	rps_log_level_cur = RPS_LOG_INFO;
	/* hash mode does not need a key range */
	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_HASH, 2, 2, 0, 1024), 0);
	assert_int_equal(m.num_servers, 2);
	assert_int_equal(rps_keymap_mode_parse("hash"), RPS_KEYMAP_HASH);
	assert_int_equal(rps_keymap_mode_parse("range"), RPS_KEYMAP_RANGE);
	assert_int_equal(rps_keymap_mode_parse("tree"), -EINVAL);
	assert_int_equal(rps_keymap_mode_parse(""), -EINVAL);
}

static void test_num_slices(void **state)
{
	struct rps_keymap m;

	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_HASH, 3, 2, 0, 1000), 0);
	assert_int_equal(rps_keymap_num_slices(&m, 0), 1);
	assert_int_equal(rps_keymap_num_slices(&m, 1), 1);
	assert_int_equal(rps_keymap_num_slices(&m, 1000), 1);
	assert_int_equal(rps_keymap_num_slices(&m, 1001), 2);
	assert_int_equal(rps_keymap_num_slices(&m, 3000), 3);
	assert_int_equal(rps_keymap_num_slices(&m, 3001), 4);
}

/* Every slice is in range, slices tile the tensor, and the mapping follows
 * the header's formula, in both modes. */
static void test_slices_in_range_and_formula(void **state)
{
	static const uint64_t sizes[] = {0, 1, 7, 1023, 1024, 1025, 4096, 10000, 65537};
	struct rps_keymap maps[4];
	uint64_t rng = 12345;

	assert_int_equal(rps_keymap_init(&maps[0], RPS_KEYMAP_HASH, 3, 4, 0, 1024), 0);
	assert_int_equal(rps_keymap_init(&maps[1], RPS_KEYMAP_RANGE, 3, 4, 1000, 1024), 0);
	assert_int_equal(rps_keymap_init(&maps[2], RPS_KEYMAP_HASH, 1, 1, 0, 1), 0);
	assert_int_equal(rps_keymap_init(&maps[3], RPS_KEYMAP_RANGE, 7, 5, UINT64_MAX, 333), 0);
	for (int mi = 0; mi < 4; mi++) {
		const struct rps_keymap *m = &maps[mi];

		for (int t = 0; t < 200; t++) {
			uint64_t key = rps_hash64(rng++) >> (t % 64);
			uint64_t n =
			    mi == 2 ? (uint64_t)(t % 50) : sizes[t % RPS_ARRAY_SIZE(sizes)];
			uint32_t ns = rps_keymap_num_slices(m, n);
			uint64_t next = 0;

			for (uint32_t i = 0; i < ns; i++) {
				struct rps_slice_loc loc;

				rps_keymap_locate(m, key, n, i, &loc);
				assert_int_equal(loc.slice, i);
				assert_true(loc.server < m->num_servers);
				assert_true(loc.shard < m->shards_per_server);
				assert_int_equal(loc.server, ref_server(m, key, i));
				assert_int_equal(loc.shard, ref_shard(m, key, i));
				assert_true(loc.offset == next);
				assert_true(loc.nelems <= m->slice_elems);
				assert_true(n == 0 || loc.nelems > 0);
				next += loc.nelems;
			}
			assert_true(next == n);
		}
	}
}

static int loc_equal(const struct rps_slice_loc *a, const struct rps_slice_loc *b)
{
	return a->slice == b->slice && a->server == b->server && a->shard == b->shard &&
	       a->offset == b->offset && a->nelems == b->nelems;
}

static void test_deterministic(void **state)
{
	struct rps_keymap a, b;

	assert_int_equal(rps_keymap_init(&a, RPS_KEYMAP_HASH, 5, 3, 0, 256), 0);
	assert_int_equal(rps_keymap_init(&b, RPS_KEYMAP_HASH, 5, 3, 0, 256), 0);
	for (uint64_t key = 0; key < 500; key++) {
		uint64_t n = key * 37;
		uint32_t ns = rps_keymap_num_slices(&a, n);

		assert_int_equal(ns, rps_keymap_num_slices(&b, n));
		for (uint32_t i = 0; i < ns; i++) {
			struct rps_slice_loc la, lb, la2;

			rps_keymap_locate(&a, key, n, i, &la);
			rps_keymap_locate(&b, key, n, i, &lb);
			rps_keymap_locate(&a, key, n, i, &la2);
			assert_true(loc_equal(&la, &lb));
			assert_true(loc_equal(&la, &la2));
		}
	}
	/* a known value: the mapping must not change between builds */
	struct rps_slice_loc loc;

	rps_keymap_locate(&a, 42, 10, 0, &loc);
	assert_int_equal(loc.server, rps_hash64(42) % 5);
	assert_int_equal(loc.shard, rps_hash64(42 ^ rps_hash64(1)) % 3);
}

/* A big tensor's slices go to consecutive servers: none is a hot spot. */
static void test_big_tensor_spreads(void **state)
{
	for (int mode = 0; mode < 2; mode++) {
		struct rps_keymap m;
		uint32_t per_server[4] = {0}, per_shard[4][4] = {{0}};
		const uint64_t n = 4 * 16 * 1024 + 5; /* 65 slices */
		struct rps_slice_loc prev;
		uint32_t ns;

		assert_int_equal(
		    rps_keymap_init(&m, (enum rps_keymap_mode)mode, 4, 4, 1 << 20, 1024), 0);
		ns = rps_keymap_num_slices(&m, n);
		assert_int_equal(ns, 65);
		for (uint32_t i = 0; i < ns; i++) {
			struct rps_slice_loc loc;

			rps_keymap_locate(&m, 777, n, i, &loc);
			per_server[loc.server]++;
			per_shard[loc.server][loc.shard]++;
			if (i)
				assert_int_equal(loc.server, (prev.server + 1) % 4);
			prev = loc;
		}
		for (int s = 0; s < 4; s++) {
			int shards_used = 0;

			assert_in_range(per_server[s], 16, 17);
			for (int h = 0; h < 4; h++)
				shards_used += per_shard[s][h] > 0;
			assert_true(shards_used >= 2); /* slices spread over shards, too */
		}
	}
}

static void test_hash_balance(void **state)
{
	struct rps_keymap m;
	uint32_t count[4] = {0};

	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_HASH, 4, 2, 0, 1024), 0);
	for (uint64_t key = 0; key < 10000; key++) {
		struct rps_slice_loc loc;

		rps_keymap_locate(&m, key, 100, 0, &loc);
		count[loc.server]++;
	}
	for (int s = 0; s < 4; s++)
		assert_in_range(count[s], 2200, 2800);
}

static uint32_t server_of(const struct rps_keymap *m, uint64_t key)
{
	struct rps_slice_loc loc;

	rps_keymap_locate(m, key, 1, 0, &loc);
	return loc.server;
}

static void test_range_boundaries(void **state)
{
	struct rps_keymap m;

	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_RANGE, 4, 2, 100, 1024), 0);
	assert_int_equal(server_of(&m, 0), 0);
	assert_int_equal(server_of(&m, 24), 0);
	assert_int_equal(server_of(&m, 25), 1);
	assert_int_equal(server_of(&m, 49), 1);
	assert_int_equal(server_of(&m, 50), 2);
	assert_int_equal(server_of(&m, 74), 2);
	assert_int_equal(server_of(&m, 75), 3);
	assert_int_equal(server_of(&m, 99), 3);
	/* keys >= key_range count as key_range - 1 */
	assert_int_equal(server_of(&m, 100), 3);
	assert_int_equal(server_of(&m, UINT64_MAX), 3);

	/* uneven split: 3 servers over 10 keys -> floor(k * 3 / 10) */
	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_RANGE, 3, 1, 10, 1024), 0);
	for (uint64_t k = 0; k < 10; k++)
		assert_int_equal(server_of(&m, k), k * 3 / 10);

	/* no overflow in k * num_servers for huge key ranges */
	assert_int_equal(rps_keymap_init(&m, RPS_KEYMAP_RANGE, 1000, 1, UINT64_MAX, 1024), 0);
	assert_int_equal(server_of(&m, 0), 0);
	assert_int_equal(server_of(&m, UINT64_MAX - 1), 999);
	assert_int_equal(server_of(&m, UINT64_MAX / 2), 499);
}

/* The public rps_key_server is the map a cluster builds from its settings. */
static void test_public_key_server(void **state)
{
	struct rps_config cfg;
	struct rps_keymap m;
	uint32_t server;

	assert_int_equal(rps_config_init(&cfg), 0);
	for (int mode = 0; mode < 2; mode++) {
		assert_int_equal(rps_config_set(&cfg, "key_map", mode ? "range" : "hash"), 0);
		assert_int_equal(rps_config_set(&cfg, "key_range", "1000"), 0);
		assert_int_equal(rps_keymap_init(&m, (enum rps_keymap_mode)mode, 5, 3, 1000,
						 cfg.slice_bytes / 4), 0);
		for (uint64_t k = 0; k < 2000; k += 7) {
			struct rps_slice_loc loc;

			rps_keymap_locate(&m, k, 10, 0, &loc);
			assert_int_equal(rps_key_server(&cfg, 5, k, &server), 0);
			assert_int_equal(server, loc.server);
		}
	}
	assert_int_equal(rps_key_server(&cfg, 0, 1, &server), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_invalid_init),
	    cmocka_unit_test(test_public_key_server),
	    cmocka_unit_test(test_num_slices),
	    cmocka_unit_test(test_slices_in_range_and_formula),
	    cmocka_unit_test(test_deterministic),
	    cmocka_unit_test(test_big_tensor_spreads),
	    cmocka_unit_test(test_hash_balance),
	    cmocka_unit_test(test_range_boundaries),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
