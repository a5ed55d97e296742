/* Worker key table: lock-free lookups, growth, duplicates, slice placement,
 * local validation of batched calls. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/alloc.h"
#include "src/keymap.h"
#include "worker/keytab.h"

static struct rps_keymap km;

static int setup(void **state)
{
	(void)state;
	/* 3 servers x 2 shards, slices of 1000 elements */
	return rps_keymap_init(&km, RPS_KEYMAP_HASH, 3, 2, 0, 1000);
}

static void test_slices_follow_the_keymap(void **state)
{
	struct rps_wkey *k = rps_wkey_new(&km, 77, 2500);
	uint64_t sum = 0;

	(void)state;
	assert_non_null(k);
	assert_int_equal(k->key, 77);
	assert_int_equal(k->nelems, 2500);
	assert_int_equal(k->nslices, 3);
	for (uint32_t i = 0; i < k->nslices; i++) {
		struct rps_slice_loc loc;

		rps_keymap_locate(&km, 77, 2500, i, &loc);
		assert_int_equal(k->slices[i].server, loc.server);
		assert_int_equal(k->slices[i].shard, loc.shard);
		assert_int_equal(k->slices[i].offset, sum);
		assert_int_equal(k->slices[i].nelems, loc.nelems);
		sum += k->slices[i].nelems;
	}
	assert_int_equal(sum, 2500);
	/* consecutive slices go to consecutive servers */
	assert_int_equal(k->slices[1].server, (k->slices[0].server + 1) % 3);
	rps_free(k);
}

static void test_insert_find_grow(void **state)
{
	struct rps_keytab t;
	const struct rps_wkey *old = NULL;

	(void)state;
	assert_int_equal(rps_keytab_init(&t), 0);
	assert_null(rps_keytab_find(&t, 1));
	for (uint64_t key = 0; key < 5000; key++) {
		struct rps_wkey *k = rps_wkey_new(&km, key * 7919, 1 + key % 3000);

		assert_non_null(k);
		assert_int_equal(rps_keytab_insert(&t, k, NULL), 0);
	}
	assert_int_equal(rps_keytab_count(&t), 5000);
	for (uint64_t key = 0; key < 5000; key++) {
		const struct rps_wkey *k = rps_keytab_find(&t, key * 7919);

		assert_non_null(k);
		assert_int_equal(k->nelems, 1 + key % 3000);
	}
	assert_null(rps_keytab_find(&t, 3));
	/* a second insert of a key is refused and tells what is there */
	struct rps_wkey *dup = rps_wkey_new(&km, 7919, 5);
	assert_int_equal(rps_keytab_insert(&t, dup, &old), -EEXIST);
	assert_non_null(old);
	assert_int_equal(old->nelems, 2);
	rps_free(dup);
	rps_keytab_fini(&t);
}

static struct rps_keytab shared;
static _Atomic int stop_readers;
static _Atomic long misses;

static void *reader(void *arg)
{
	(void)arg;
	while (!stop_readers) {
		/* key 0 is always there; lookups must never fail while the table grows */
		const struct rps_wkey *k = rps_keytab_find(&shared, 0);

		if (!k || k->nelems != 10)
			misses++;
	}
	return NULL;
}

static void test_lookups_during_growth(void **state)
{
	pthread_t th[2];

	(void)state;
	assert_int_equal(rps_keytab_init(&shared), 0);
	assert_int_equal(rps_keytab_insert(&shared, rps_wkey_new(&km, 0, 10), NULL), 0);
	stop_readers = 0;
	misses = 0;
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	for (uint64_t key = 1; key < 20000; key++)
		assert_int_equal(rps_keytab_insert(&shared, rps_wkey_new(&km, key, 1), NULL), 0);
	stop_readers = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(misses, 0);
	rps_keytab_fini(&shared);
}

static void test_check(void **state)
{
	struct rps_keytab t;
	rps_key_t keys[3] = { 10, 20, 30 };
	size_t lens[3] = { 5, 3000, 1 };
	float buf[3006];
	size_t bad = 99;

	(void)state;
	assert_int_equal(rps_keytab_init(&t), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rps_keytab_insert(&t, rps_wkey_new(&km, keys[i], lens[i]), NULL), 0);
	assert_int_equal(rps_keytab_check(&t, keys, lens, 3, buf, &bad), 0);
	/* nothing to do: pointers may be NULL */
	assert_int_equal(rps_keytab_check(&t, NULL, NULL, 0, NULL, NULL), 0);
	/* NULL arrays or buffer */
	assert_int_equal(rps_keytab_check(&t, NULL, lens, 3, buf, NULL), -EINVAL);
	assert_int_equal(rps_keytab_check(&t, keys, NULL, 3, buf, NULL), -EINVAL);
	assert_int_equal(rps_keytab_check(&t, keys, lens, 3, NULL, NULL), -EINVAL);
	/* wrong length */
	lens[1] = 2999;
	assert_int_equal(rps_keytab_check(&t, keys, lens, 3, buf, &bad), -EINVAL);
	assert_int_equal(bad, 1);
	lens[1] = 3000;
	/* unknown key, reported with its index */
	keys[2] = 31;
	assert_int_equal(rps_keytab_check(&t, keys, lens, 3, buf, &bad), -ENOENT);
	assert_int_equal(bad, 2);
	rps_keytab_fini(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slices_follow_the_keymap),
		cmocka_unit_test(test_insert_find_grow),
		cmocka_unit_test(test_lookups_during_growth),
		cmocka_unit_test(test_check),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
