/* The shard key table: insert-only, one writer, lock-free readers. Also the
 * object pools (one owner takes, anyone gives back). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/server_int.h"

static struct rps_slice_meta *meta_new(uint64_t key, uint32_t slice)
{
	struct rps_slice_meta *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->key = key;
	m->slice = slice;
	m->nelems = key * 3 + slice; /* readers check this is set */
	return m;
}

static void meta_free(struct rps_slice_meta *m)
{
	free(m);
}

static void test_insert_lookup(void **state)
{
	struct rps_srv_keytab t;
	struct rps_slice_meta *a, *b, *c, *dup;

	(void)state;
	assert_int_equal(rps_srv_keytab_init(&t, 100), 0);
	assert_null(rps_srv_keytab_lookup(&t, 1, 0));
	a = meta_new(1, 0);
	b = meta_new(1, 1); /* same key, other slice */
	c = meta_new(2, 0);
	assert_int_equal(rps_srv_keytab_insert(&t, a), 0);
	assert_int_equal(rps_srv_keytab_insert(&t, b), 0);
	assert_int_equal(rps_srv_keytab_insert(&t, c), 0);
	assert_ptr_equal(rps_srv_keytab_lookup(&t, 1, 0), a);
	assert_ptr_equal(rps_srv_keytab_lookup(&t, 1, 1), b);
	assert_ptr_equal(rps_srv_keytab_lookup(&t, 2, 0), c);
	assert_null(rps_srv_keytab_lookup(&t, 2, 1));
	assert_null(rps_srv_keytab_lookup(&t, 3, 0));
	dup = meta_new(1, 1);
	assert_int_equal(rps_srv_keytab_insert(&t, dup), -EEXIST);
	free(dup);
	assert_int_equal(rps_srv_keytab_count(&t), 3);
	rps_srv_keytab_fini(&t, meta_free);
}

static void test_full(void **state)
{
	struct rps_srv_keytab t;
	uint64_t k = 0;
	int rc;

	(void)state;
	assert_int_equal(rps_srv_keytab_init(&t, 10), 0);
	for (;;) {
		struct rps_slice_meta *m = meta_new(k, 0);

		rc = rps_srv_keytab_insert(&t, m);
		if (rc) {
			free(m);
			break;
		}
		k++;
	}
	assert_int_equal(rc, -ENOSPC);
	assert_true(k >= 10);	      /* room for what was asked */
	assert_true(k <= t.mask + 1); /* and never a full table (probes end) */
	for (uint64_t i = 0; i < k; i++)
		assert_non_null(rps_srv_keytab_lookup(&t, i, 0));
	assert_null(rps_srv_keytab_lookup(&t, k + 1000, 0));
	rps_srv_keytab_fini(&t, meta_free);
}

#define NKEYS	 20000
#define NREADERS 2

struct race {
	struct rps_srv_keytab t;
	atomic_int done;
	atomic_ullong seen;
	atomic_int bad;
};

static void *reader(void *arg)
{
	struct race *r = arg;
	uint64_t x = 12345;
	uint64_t seen = 0;
	int finished = 0;

	while (!finished) {
		finished = atomic_load(&r->done);
		for (int i = 0; i < 1000; i++) {
			uint64_t k;
			struct rps_slice_meta *m;

			x = x * 6364136223846793005ull + 1442695040888963407ull;
			k = (x >> 33) % NKEYS;
			m = rps_srv_keytab_lookup(&r->t, k, (uint32_t)(k & 3));
			if (m) {
				if (m->key != k || m->slice != (k & 3) ||
				    m->nelems != k * 3 + (k & 3))
					atomic_store(&r->bad, 1);
				seen++;
			} else if (finished) {
				atomic_store(&r->bad, 2); /* all inserted by now */
			}
		}
	}
	atomic_fetch_add(&r->seen, seen);
	return NULL;
}

static void test_concurrent_readers(void **state)
{
	static struct race r;
	pthread_t th[NREADERS];

	(void)state;
	assert_int_equal(rps_srv_keytab_init(&r.t, NKEYS), 0);
	atomic_init(&r.done, 0);
	atomic_init(&r.seen, 0);
	atomic_init(&r.bad, 0);
	for (int i = 0; i < NREADERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader, &r), 0);
	for (uint64_t k = 0; k < NKEYS; k++)
		assert_int_equal(rps_srv_keytab_insert(&r.t, meta_new(k, (uint32_t)(k & 3))), 0);
	atomic_store(&r.done, 1);
	for (int i = 0; i < NREADERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&r.bad), 0);
	assert_true(atomic_load(&r.seen) > 0);
	for (uint64_t k = 0; k < NKEYS; k++)
		assert_non_null(rps_srv_keytab_lookup(&r.t, k, (uint32_t)(k & 3)));
	rps_srv_keytab_fini(&r.t, meta_free);
}

/* ---- pools ---- */

static void test_pool_reuse(void **state)
{
	struct rps_srv_pool p;
	void *a, *b, *c;

	(void)state;
	rps_srv_pool_init(&p, 100);
	a = rps_srv_pool_get(&p);
	b = rps_srv_pool_get(&p);
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_not_equal(a, b);
	assert_int_equal((uintptr_t)a % 64, 0);
	memset(a, 0xab, 100);
	rps_srv_pool_put(a);
	c = rps_srv_pool_get(&p); /* comes back from the return stack */
	assert_ptr_equal(c, a);
	assert_int_equal(p.nobjs, 2);
	rps_srv_pool_put(b);
	rps_srv_pool_put(c);
	rps_srv_pool_fini(&p);
}

struct pool_race {
	struct rps_srv_pool p;
	void *objs[4096];
	atomic_int head;
	atomic_int tail;
	atomic_int done;
};

/* Gives back, from another thread, what the owner handed over. */
static void *returner(void *arg)
{
	struct pool_race *r = arg;

	for (;;) {
		int t = atomic_load(&r->tail);

		if (t < atomic_load(&r->head)) {
			rps_srv_pool_put(r->objs[t % 4096]);
			atomic_store(&r->tail, t + 1);
		} else if (atomic_load(&r->done)) {
			break;
		}
	}
	return NULL;
}

static void test_pool_cross_thread(void **state)
{
	static struct pool_race r;
	pthread_t th;
	const int n = 200000;

	(void)state;
	rps_srv_pool_init(&r.p, 64);
	atomic_init(&r.head, 0);
	atomic_init(&r.tail, 0);
	atomic_init(&r.done, 0);
	assert_int_equal(pthread_create(&th, NULL, returner, &r), 0);
	for (int i = 0; i < n; i++) {
		uint64_t *o;

		while (atomic_load(&r.head) - atomic_load(&r.tail) >= 4000)
			;
		o = rps_srv_pool_get(&r.p);
		assert_non_null(o);
		*o = (uint64_t)i; /* the object is ours alone */
		r.objs[i % 4096] = o;
		atomic_store(&r.head, i + 1);
	}
	atomic_store(&r.done, 1);
	pthread_join(th, NULL);
	/* bounded by what was in flight, not by the number of gets */
	assert_true(r.p.nobjs <= 4001);
	rps_srv_pool_fini(&r.p);
}

static void test_bufpool_classes(void **state)
{
	struct rps_srv_bufpool bp;
	void *a, *b;

	(void)state;
	rps_srv_bufpool_init(&bp, 100000);
	a = rps_srv_bufpool_get(&bp, 10);
	b = rps_srv_bufpool_get(&bp, 100000);
	assert_non_null(a);
	assert_non_null(b);
	memset(b, 1, 100000);
	assert_null(rps_srv_bufpool_get(&bp, 100001));
	rps_srv_pool_put(a);
	rps_srv_pool_put(b);
	assert_ptr_equal(rps_srv_bufpool_get(&bp, 4096), a);  /* same 4 KiB class */
	assert_ptr_equal(rps_srv_bufpool_get(&bp, 70000), b); /* same 128 KiB class */
	assert_ptr_not_equal(rps_srv_bufpool_get(&bp, 5000), a);
	rps_srv_bufpool_fini(&bp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_insert_lookup),      cmocka_unit_test(test_full),
	    cmocka_unit_test(test_concurrent_readers), cmocka_unit_test(test_pool_reuse),
	    cmocka_unit_test(test_pool_cross_thread),  cmocka_unit_test(test_bufpool_classes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
