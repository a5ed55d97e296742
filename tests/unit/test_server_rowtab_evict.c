/* Eviction in a shard's row table (server/rowtab_evict.c): idle rows not
 * updated since the saved epoch are evicted to their initial value (versions
 * moved on), found and revived in place, their slots reused for new ids with
 * the versions moved on again (a one-sided reader racing with either sees
 * unequal versions, or another id); the index keeps every row reachable
 * after any removal (backward shift), rows updated after the saved epoch
 * are kept. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/table.h>

#include "server/rowtab.h"
#include "src/rowinit.h"

#define DIM 6

static uint32_t ver_begin(const struct rps_rowtab *rt, uint64_t s)
{
	uint32_t v;

	memcpy(&v, rps_rowtab_slot(rt, s) + 8, 4);
	return v;
}
static uint32_t ver_end(const struct rps_rowtab *rt, uint64_t s)
{
	uint32_t v;

	memcpy(&v, rps_rowtab_slot(rt, s) + rt->slot_bytes - 4, 4);
	return v;
}

/* What a one-sided reader accepts (worker/table_read.c): id, versions equal
 * and even. */
static int reader_takes(const char *img, uint32_t slot_bytes, uint64_t want)
{
	uint64_t id;
	uint32_t b, e;

	memcpy(&id, img, 8);
	memcpy(&b, img + 8, 4);
	memcpy(&e, img + slot_bytes - 4, 4);
	return id == want && b == e && !(b & 1);
}

static void mk(struct rps_rowtab *rt, uint64_t hint)
{
	assert_int_equal(rps_rowtab_init(rt, 9, DIM, RPS_TABLE_INIT_UNIFORM, 0.5f, 11, RPS_OPT_ADAM,
					 hint),
			 0);
	assert_int_equal(rps_rowtab_evict_enable(rt), 0);
}

static void test_evict_revive_reuse(void **state)
{
	struct rps_rowtab rt;
	float init[DIM], row[DIM], ones[DIM];
	uint32_t b0;
	int created;
	int64_t s, s2;
	char before[64], after[64], torn[64];

	(void)state;
	mk(&rt, 0);
	assert_int_equal(rps_rowtab_evict_enable(&rt), 0);
	rt.now = 10;
	s = rps_rowtab_get(&rt, 100, &created);
	assert_true(s >= 0 && created);
	for (int e = 0; e < DIM; e++)
		ones[e] = 1;
	/* a trained row (updated in epoch 1): kept while epoch 1 is not saved */
	rps_rowtab_write_begin(&rt, (uint64_t)s);
	rps_rowtab_store(&rt, (uint64_t)s, ones);
	rps_rowtab_write_end(&rt, (uint64_t)s);
	rps_rowtab_updated(&rt, (uint64_t)s);
	*rps_rowtab_step(&rt, (uint64_t)s) = 3;
	rps_rowtab_m(&rt, (uint64_t)s)[0] = 0.25f;
	rt.now = 20;
	assert_int_equal(rps_rowtab_evict_scan(&rt, 5, 0, 100, NULL), 0); /* unsaved */
	rt.now = 12;
	assert_int_equal(rps_rowtab_evict_scan(&rt, 5, 1, 100, NULL), 0); /* touched 2 ago */
	assert_int_equal(rps_rowtab_rows(&rt), 1);
	rt.now = 20;
	b0 = ver_begin(&rt, (uint64_t)s);
	assert_int_equal(rps_rowtab_evict_scan(&rt, 5, 1, 100, NULL), 1); /* saved, idle 10 */
	assert_int_equal(rps_rowtab_rows(&rt), 0);
	assert_false(rps_rowtab_live(&rt, (uint64_t)s));
	/* the slot: same id, its initial value, versions moved on, state zeroed */
	assert_int_equal(rps_rowtab_slot_id(&rt, (uint64_t)s), 100);
	assert_int_equal(ver_begin(&rt, (uint64_t)s), b0 + 2);
	assert_int_equal(ver_end(&rt, (uint64_t)s), b0 + 2);
	rps_row_init(RPS_TABLE_INIT_UNIFORM, 0.5f, 11, 100, DIM, init);
	rps_rowtab_load(&rt, (uint64_t)s, row);
	assert_memory_equal(row, init, sizeof(row));
	assert_int_equal(*rps_rowtab_step(&rt, (uint64_t)s), 0);
	assert_true(rps_rowtab_m(&rt, (uint64_t)s)[0] == 0.0f);
	/* a pull of it revives it in place, "created" with its initial value */
	assert_int_equal(rps_rowtab_find(&rt, 100), s);
	assert_int_equal(rps_rowtab_get(&rt, 100, &created), s);
	assert_true(created);
	assert_true(rps_rowtab_live(&rt, (uint64_t)s));
	assert_int_equal(rps_rowtab_rows(&rt), 1);
	assert_int_equal(rt.revived, 1);
	/* evicted again (never updated since: epoch 0), then its slot goes to a
	 * new id: the old id's entry leaves the index, versions move on */
	rt.now = 40;
	assert_int_equal(rps_rowtab_evict_scan(&rt, 5, 0, 100, NULL), 1);
	memcpy(before, rps_rowtab_slot(&rt, (uint64_t)s), rt.slot_bytes);
	s2 = rps_rowtab_get(&rt, 200, &created);
	assert_int_equal(s2, s); /* reused */
	assert_true(created);
	assert_int_equal(rt.reused, 1);
	assert_int_equal(rt.nrows, 1);
	assert_int_equal(rps_rowtab_find(&rt, 100), -1);
	assert_int_equal(rps_rowtab_find(&rt, 200), s);
	memcpy(after, rps_rowtab_slot(&rt, (uint64_t)s), rt.slot_bytes);
	assert_true(reader_takes(before, rt.slot_bytes, 100));
	assert_true(reader_takes(after, rt.slot_bytes, 200));
	assert_false(reader_takes(after, rt.slot_bytes, 100)); /* another id: to the server */
	/* a READ that spans the reuse: begin from before, end from after */
	memcpy(torn, before, rt.slot_bytes);
	memcpy(torn + rt.slot_bytes - 4, after + rt.slot_bytes - 4, 4);
	assert_false(reader_takes(torn, rt.slot_bytes, 100));
	assert_int_equal(ver_begin(&rt, (uint64_t)s), b0 + 6);
	rps_row_init(RPS_TABLE_INIT_UNIFORM, 0.5f, 11, 200, DIM, init);
	rps_rowtab_load(&rt, (uint64_t)s, row);
	assert_memory_equal(row, init, sizeof(row));
	rps_rowtab_fini(&rt);
}

/* Ids whose home bucket (of nb) is `home`. */
static uint64_t id_at(uint32_t table, uint64_t nb, uint64_t home, uint64_t *next)
{
	for (;;) {
		uint64_t id = rps_mix64((*next)++);

		if ((rps_row_hash(table, id) & (nb - 1)) == home)
			return id;
	}
}

/* Every bucket packed at its front, every entry found from its home. */
static void check_index(const struct rps_rowtab *rt, const uint64_t *ids, const int *in, int n)
{
	const uint32_t *ix = atomic_load(&rt->index);

	for (uint64_t b = 0; b < rt->nbuckets; b++) {
		int gap = 0;

		for (uint32_t i = 0; i < RPS_ROWTAB_BUCKET; i++) {
			if (!ix[b * RPS_ROWTAB_BUCKET + i])
				gap = 1;
			else
				assert_false(gap);
		}
	}
	for (int i = 0; i < n; i++) {
		int64_t s = rps_rowtab_find(rt, ids[i]);

		if (in[i])
			assert_true(s >= 0 && rps_rowtab_slot_id(rt, (uint64_t)s) == ids[i]);
		else
			assert_int_equal(s, -1);
	}
}

static void test_index_remove(void **state)
{
	enum { N = 40 + 12 + 6 };
	struct rps_rowtab rt;
	uint64_t ids[N], next = 1;
	int in[N], order[N];
	int64_t slot[N];

	(void)state;
	mk(&rt, 600); /* 64 buckets */
	assert_int_equal(rt.nbuckets, 64);
	/* 40 ids of home 62 (buckets 62, 63 full, 8 wrap into 0), 12 of home 63
	 * (into bucket 0, then 1), 6 of home 1 */
	for (int i = 0; i < N; i++)
		ids[i] = id_at(9, 64, i < 40 ? 62 : i < 52 ? 63 : 1, &next);
	for (int i = 0; i < N; i++) {
		slot[i] = rps_rowtab_get(&rt, ids[i], NULL);
		assert_true(slot[i] >= 0);
		in[i] = 1;
		order[i] = i;
	}
	check_index(&rt, ids, in, N);
	srand(7);
	for (int i = N - 1; i > 0; i--) {
		int j = rand() % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (int k = 0; k < N; k++) {
		int i = order[k];

		rps_rowtab_index_remove(&rt, ids[i], (uint64_t)slot[i]);
		in[i] = 0;
		check_index(&rt, ids, in, N);
		if (k == N / 2) { /* removed ids stay unfindable */
			for (int m = 0; m <= k; m += 3) {
				int r = order[m];
				int64_t s = rps_rowtab_find(&rt, ids[r]);

				assert_int_equal(s, -1);
			}
		}
	}
	rps_rowtab_fini(&rt);
}

/* Many rows through evict / revive / reuse: every live row findable, rows()
 * right, slots never more than the peak. */
static void test_churn(void **state)
{
	enum { N = 3000 };
	struct rps_rowtab rt;
	uint64_t peak;

	(void)state;
	mk(&rt, 0);
	for (uint32_t round = 0; round < 6; round++) {
		rt.now = round * 10;
		for (uint64_t i = 0; i < N; i++) /* this round's ids: half new, half old */
			assert_true(rps_rowtab_get(&rt, rps_mix64(round * N / 2 + i), NULL) >= 0);
		assert_int_equal(rps_rowtab_rows(&rt), N);
		peak = rt.nrows;
		for (uint64_t i = 0; i < N; i++) {
			int64_t s = rps_rowtab_find(&rt, rps_mix64(round * N / 2 + i));

			assert_true(s >= 0 && rps_rowtab_live(&rt, (uint64_t)s));
		}
		rt.now = round * 10 + 5;
		/* idle 5: all of this round's rows; the rest were evicted before */
		while (rps_rowtab_evict_scan(&rt, 5, 0, 1000, NULL))
			;
		assert_int_equal(rps_rowtab_rows(&rt), 0);
		assert_true(rt.nrows <= peak);
	}
	assert_true(rt.reused > 0);
	assert_true(rt.revived > 0);
	assert_true(rt.nrows <= 2 * N);
	rps_rowtab_fini(&rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_evict_revive_reuse),
	    cmocka_unit_test(test_index_remove),
	    cmocka_unit_test(test_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
