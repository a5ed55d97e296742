/* The row index as one-sided readers see it (docs/protocol.md, Tables; the
 * worker's lookup: worker/table_index.c): a row is found by the published
 * layout alone (hash -> bucket pair -> entries with its tag -> slot holding
 * its id) in the current array; a rehash leaves every entry of the retired
 * arrays "moved"; rows not in the table are not found. Prints how many rows
 * sit beyond the two buckets a reader reads and how many candidate slots a
 * lookup reads on average. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/table.h>

#include "server/rowtab.h"
#include "src/proto.h"
#include "src/rowinit.h"

_Static_assert(RPS_ROWTAB_BUCKET == RPS_TABLE_BUCKET_ENTRIES, "bucket as published");
_Static_assert(RPS_ROWTAB_SLOTBITS == RPS_TABLE_ENTRY_SLOTBITS, "entry as published");
_Static_assert(RPS_ROWTAB_MOVED == RPS_TABLE_ENTRY_MOVED, "moved as published");

/* The reader's lookup over array ix of nb buckets: 1 found, 0 not in the
 * two buckets, -1 moved; *cands the candidate slots it would read. */
static int lookup(const struct rps_rowtab *rt, const uint32_t *ix, uint64_t nb, uint64_t id,
		  uint64_t *slot_p, unsigned *cands)
{
	uint64_t h = rps_row_hash(rt->table, id), b = h & (nb - 1);
	uint32_t smask = rps_row_entry_mask(nb), tag = rps_row_entry_tag(h) & ~smask;
	uint32_t n = (b + 1 < nb ? 2 : 1) * 16;
	const uint32_t *e = ix + b * 16;
	int found = 0;

	for (uint32_t i = 0; i < n; i++)
		if (e[i] == RPS_TABLE_ENTRY_MOVED)
			return -1;
	for (uint32_t i = 0; i < n && e[i]; i++) {
		uint64_t s;

		if ((e[i] & ~smask) != tag)
			continue;
		(*cands)++;
		s = (e[i] & smask) - 1;
		if (s < rt->nrows && rps_rowtab_slot_id(rt, s) == id && !found) {
			*slot_p = s;
			found = 1;
		}
	}
	return found;
}

static void test_reader_view(void **state)
{
	struct rps_rowtab rt;
	const uint64_t n = 300000;
	uint64_t beyond = 0;
	unsigned cands = 0;

	(void)state;
	assert_int_equal(rps_rowtab_init(&rt, 7, 4, RPS_TABLE_INIT_ZERO, 0, 1, RPS_OPT_SGD, 0), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_true(rps_rowtab_get(&rt, rps_mix64(i), NULL) >= 0);
	assert_true(rt.nretired > 5);
	for (uint32_t r = 0; r < rt.nretired; r++) {
		uint64_t nb = rt.nbuckets >> (rt.nretired - r);

		for (uint64_t k = 0; k < nb * 16; k++)
			assert_int_equal(rt.retired[r][k], RPS_ROWTAB_MOVED);
		{
			uint64_t s = 0;
			unsigned c = 0;

			assert_int_equal(lookup(&rt, rt.retired[r], nb, rps_mix64(1), &s, &c), -1);
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t s = UINT64_MAX;
		int f = lookup(&rt, atomic_load(&rt.index), rt.nbuckets, rps_mix64(i), &s, &cands);

		assert_true(f >= 0);
		if (f)
			assert_int_equal(s, i);
		else
			beyond++;
	}
	for (uint64_t i = n; i < n + 10000; i++) {
		uint64_t s;
		unsigned c = 0;

		assert_int_equal(lookup(&rt, atomic_load(&rt.index), rt.nbuckets, rps_mix64(i), &s,
					&c),
				 0);
	}
	printf("rowtab index: %llu rows, %llu buckets (load %.2f): %llu rows beyond the two "
	       "buckets read (%.3f%%), %.3f candidate slots per lookup\n",
	       (unsigned long long)n, (unsigned long long)rt.nbuckets,
	       (double)n / (double)(rt.nbuckets * 16), (unsigned long long)beyond,
	       100.0 * (double)beyond / (double)n, (double)cands / (double)n);
	assert_true(beyond * 100 < n); /* under 1%: they go by frames */
	rps_rowtab_fini(&rt);
}

/* A TABLE_MAP_RESP carries its chunks, then the index descriptor. */
static void test_map_resp(void **state)
{
	char buf[sizeof(struct rps_table_map) + 2 * sizeof(struct rps_table_chunk) +
		 sizeof(struct rps_table_index)] = {0};
	struct rps_table_map m = {.table = 1, .shard = 0, .count = 2};
	struct rps_frame_hdr h;
	const char *why = NULL;

	(void)state;
	memcpy(buf, &m, sizeof(m));
	rps_proto_hdr_init(&h, RPS_OP_TABLE_MAP_RESP, sizeof(buf), 1);
	assert_int_equal(rps_proto_payload_check(&h, buf, &why), 0);
	h.len = sizeof(buf) - sizeof(struct rps_table_index); /* no index: refused */
	assert_int_equal(rps_proto_payload_check(&h, buf, &why), -EPROTO);
	assert_non_null(why);
	h.len = sizeof(buf);
	h.status = -ENOENT; /* a refusal carries the map only */
	assert_int_equal(rps_proto_payload_check(&h, buf, &why), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reader_view),
	    cmocka_unit_test(test_map_resp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
