/* The shard priority ring: order under every policy, back-pressure, waiting,
 * close, and many producers at once. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "src/ring.h"
#include "src/util.h"

static const enum rps_priority_policy all_policies[] = {
    RPS_PRIO_FIFO, RPS_PRIO_FRESHEST, RPS_PRIO_STALENESS, RPS_PRIO_MAGNITUDE, RPS_PRIO_CALLBACK,
};

/* callback priority: the entry's key (cast), counting the calls */
static int cb_calls;

static double prio_by_key(const struct rps_push_info *p, void *arg)
{
	__atomic_fetch_add(&cb_calls, 1, __ATOMIC_RELAXED);
	return (double)(int64_t)p->key * *(double *)arg;
}

static double one = 1.0;

static struct rps_ring *mk(size_t cap, enum rps_priority_policy p)
{
	struct rps_ring *r = NULL;

	assert_int_equal(
	    rps_ring_create(cap, p, p == RPS_PRIO_CALLBACK ? prio_by_key : NULL, &one, &r), 0);
	assert_non_null(r);
	return r;
}

static struct rps_ring_entry ent(uint64_t id)
{
	struct rps_ring_entry e;

	memset(&e, 0, sizeof(e));
	e.u64 = id;
	e.type = (uint32_t)(id * 7 + 1);
	e.ptr = (void *)(uintptr_t)(id + 100);
	return e;
}

static void pop_expect(struct rps_ring *r, uint64_t id)
{
	struct rps_ring_entry e;

	assert_int_equal(rps_ring_pop(r, &e), 0);
	assert_int_equal(e.u64, id);
	/* copied whole, by value */
	assert_int_equal(e.type, (uint32_t)(id * 7 + 1));
	assert_ptr_equal(e.ptr, (void *)(uintptr_t)(id + 100));
}

/* Bound of the waits that must be ended by the other side: a lost wake-up
 * fails as a timeout instead of hanging (generous: 2 shared cores). */
#define WAIT_MS 3000

static double elapsed_ms(uint64_t t0)
{
	return (double)(rps_now_ns() - t0) / 1e6;
}

/* ---- creation, names ---- */

static void test_create_and_names(void **state)
{
	struct rps_ring *r = NULL;

	(void)state;
	assert_int_equal(rps_ring_create(0, RPS_PRIO_FIFO, NULL, NULL, &r), -EINVAL);
	assert_int_equal(rps_ring_create(4, RPS_PRIO_CALLBACK, NULL, NULL, &r), -EINVAL);
	assert_int_equal(rps_ring_create(4, (enum rps_priority_policy)42, NULL, NULL, &r), -EINVAL);
	assert_null(r);

	for (size_t i = 0; i < RPS_ARRAY_SIZE(all_policies); i++) {
		enum rps_priority_policy p = all_policies[i];
		const char *name = rps_ring_policy_name(p);

		r = mk(5, p);
		assert_int_equal(rps_ring_capacity(r), 5);
		assert_int_equal(rps_ring_depth(r), 0);
		rps_ring_destroy(r);
		if (p == RPS_PRIO_CALLBACK)
			assert_int_equal(rps_ring_policy_parse(name), -EINVAL);
		else
			assert_int_equal(rps_ring_policy_parse(name), p);
	}
	assert_string_equal(rps_ring_policy_name(RPS_PRIO_FIFO), "fifo");
	assert_string_equal(rps_ring_policy_name(RPS_PRIO_FRESHEST), "freshest");
	assert_string_equal(rps_ring_policy_name(RPS_PRIO_STALENESS), "staleness");
	assert_string_equal(rps_ring_policy_name(RPS_PRIO_MAGNITUDE), "magnitude");
	assert_string_equal(rps_ring_policy_name(RPS_PRIO_CALLBACK), "callback");
	assert_int_equal(rps_ring_policy_parse("bogus"), -EINVAL);
	assert_int_equal(rps_ring_policy_parse(""), -EINVAL);
}

/* ---- order ---- */

static void test_fifo_order_and_wrap(void **state)
{
	/* capacity 5 (not a power of two), many laps with interleaving */
	struct rps_ring *r = mk(5, RPS_PRIO_FIFO);
	uint64_t next_in = 0, next_out = 0;
	struct rps_ring_entry e;

	(void)state;
	for (int round = 0; round < 50; round++) {
		int npush = 1 + round % 5, npop = 1 + (round * 3) % 5;

		for (int i = 0; i < npush; i++) {
			e = ent(next_in);
			if (rps_ring_depth(r) == 5) {
				assert_int_equal(rps_ring_push(r, &e), -EAGAIN);
				break;
			}
			assert_int_equal(rps_ring_push(r, &e), 0);
			next_in++;
		}
		assert_int_equal(rps_ring_depth(r), next_in - next_out);
		for (int i = 0; i < npop && next_out < next_in; i++)
			pop_expect(r, next_out++);
	}
	while (next_out < next_in)
		pop_expect(r, next_out++);
	assert_int_equal(rps_ring_pop(r, &e), -EAGAIN);
	assert_true(next_in > 100);
	rps_ring_destroy(r);
}

/* Push entries with the given field values, check pops follow `want` (ids). */
static void check_order(enum rps_priority_policy p, size_t n,
			void (*set)(struct rps_ring_entry *, size_t), const uint64_t *want)
{
	struct rps_ring *r = mk(n, p);
	struct rps_ring_entry e;

	for (size_t i = 0; i < n; i++) {
		e = ent(i);
		set(&e, i);
		assert_int_equal(rps_ring_push(r, &e), 0);
	}
	assert_int_equal(rps_ring_depth(r), n);
	for (size_t i = 0; i < n; i++)
		pop_expect(r, want[i]);
	assert_int_equal(rps_ring_pop(r, &e), -EAGAIN);
	assert_int_equal(rps_ring_depth(r), 0);
	rps_ring_destroy(r);
}

/* values with ties; the expected order: larger priority first, ties by index */
static const uint64_t ts_vals[] = {
    50, 10, 90, 30, 90, 10, 70, 1700000000000000001ull, 1700000000000000000ull, 50};
static void set_ts(struct rps_ring_entry *e, size_t i)
{
	e->info.timestamp_ns = ts_vals[i];
}

static void test_freshest_order(void **state)
{
	/* newest timestamp first; large realtime values differing by 1 ns stay ordered */
	static const uint64_t want[] = {7, 8, 2, 4, 6, 0, 9, 3, 1, 5};

	(void)state;
	check_order(RPS_PRIO_FRESHEST, RPS_ARRAY_SIZE(ts_vals), set_ts, want);
}

static const uint32_t st_vals[] = {3, 0, 2, 0, 7, 3, 1, 0, UINT32_MAX, 2};
static void set_staleness(struct rps_ring_entry *e, size_t i)
{
	e->info.staleness = st_vals[i];
}

static void test_staleness_order(void **state)
{
	static const uint64_t want[] = {1, 3, 7, 6, 2, 9, 0, 5, 4, 8};

	(void)state;
	check_order(RPS_PRIO_STALENESS, RPS_ARRAY_SIZE(st_vals), set_staleness, want);
}

static const float norm_vals[] = {0.5f, 2.0f, 0.0f, 2.0f, 1e-30f, 1e30f, 0.5f, NAN, 0.0f, 3.0f};
static void set_norm(struct rps_ring_entry *e, size_t i)
{
	e->info.norm = norm_vals[i];
}

static void test_magnitude_order(void **state)
{
	/* largest norm first; NaN never jumps the queue: it goes last */
	static const uint64_t want[] = {5, 9, 1, 3, 0, 6, 4, 2, 8, 7};

	(void)state;
	check_order(RPS_PRIO_MAGNITUDE, RPS_ARRAY_SIZE(norm_vals), set_norm, want);
}

static const int64_t cb_keys[] = {4, -2, 9, 4, 0, -7, 9, 1, -2, 100};
static void set_cbkey(struct rps_ring_entry *e, size_t i)
{
	e->info.key = (rps_key_t)cb_keys[i];
}

static void test_callback_order(void **state)
{
	/* largest fn() first; fn runs once per push, never on pop */
	static const uint64_t want[] = {9, 2, 6, 0, 3, 7, 4, 1, 8, 5};

	(void)state;
	cb_calls = 0;
	check_order(RPS_PRIO_CALLBACK, RPS_ARRAY_SIZE(cb_keys), set_cbkey, want);
	assert_int_equal(cb_calls, RPS_ARRAY_SIZE(cb_keys));
}

static void set_nothing(struct rps_ring_entry *e, size_t i)
{
	(void)e;
	(void)i;
}

static void test_ties_fifo(void **state)
{
	/* all priorities equal: every policy degenerates to fifo, even over many
	 * interleaved pushes and pops (the heap reorders internally) */
	(void)state;
	for (size_t k = 0; k < RPS_ARRAY_SIZE(all_policies); k++) {
		struct rps_ring *r = mk(16, all_policies[k]);
		uint64_t in = 0, out = 0;
		uint64_t want[16];
		struct rps_ring_entry e;

		for (int i = 0; i < 16; i++)
			want[i] = (uint64_t)i;
		check_order(all_policies[k], 16, set_nothing, want);

		for (int round = 0; round < 40; round++) {
			for (int i = 0; i < 1 + round % 7 && rps_ring_depth(r) < 16; i++) {
				e = ent(in++);
				assert_int_equal(rps_ring_push(r, &e), 0);
			}
			for (int i = 0; i < 1 + round % 5 && out < in; i++)
				pop_expect(r, out++);
		}
		while (out < in)
			pop_expect(r, out++);
		rps_ring_destroy(r);
	}
}

/* ---- back-pressure ---- */

static void test_full_eagain_nothing_lost(void **state)
{
	(void)state;
	/* capacity 1 too: the smallest ring must still tell full from free */
	for (size_t k = 0; k < 2 * RPS_ARRAY_SIZE(all_policies); k++) {
		const size_t cap = k % 2 ? 1 : 7;
		struct rps_ring *r = mk(cap, all_policies[k / 2]);
		struct rps_ring_entry e;
		int seen[7] = {0};

		for (size_t i = 0; i < cap; i++) {
			e = ent(i);
			e.info.timestamp_ns = i * 13 % 5;
			e.info.staleness = (uint32_t)(i * 3 % 4);
			e.info.norm = (float)(i % 3);
			e.info.key = i % 2;
			assert_int_equal(rps_ring_push(r, &e), 0);
		}
		for (int i = 0; i < 3; i++) {
			e = ent(1000 + (uint64_t)i);
			e.info.norm = 1e9f; /* would be first, if it got in */
			e.info.timestamp_ns = UINT64_MAX;
			e.info.key = 1000;
			assert_int_equal(rps_ring_push(r, &e), -EAGAIN);
			assert_int_equal(rps_ring_push_wait(r, &e, 0), -ETIMEDOUT);
			assert_int_equal(rps_ring_depth(r), cap);
		}
		for (size_t i = 0; i < cap; i++) {
			assert_int_equal(rps_ring_pop(r, &e), 0);
			assert_true(e.u64 < cap);
			seen[e.u64]++;
		}
		assert_int_equal(rps_ring_pop(r, &e), -EAGAIN);
		for (size_t i = 0; i < cap; i++)
			assert_int_equal(seen[i], 1);
		/* room again, lap after lap */
		for (uint64_t lap = 0; lap < 3 * cap; lap++) {
			e = ent(lap);
			assert_int_equal(rps_ring_push(r, &e), 0);
			if (cap == 1) {
				assert_int_equal(rps_ring_push(r, &e), -EAGAIN);
			}
			pop_expect(r, lap);
		}
		rps_ring_destroy(r);
	}
}

/* ---- waiting ---- */

static void test_wait_timeouts(void **state)
{
	(void)state;
	for (size_t k = 0; k < RPS_ARRAY_SIZE(all_policies); k++) {
		struct rps_ring *r = mk(2, all_policies[k]);
		struct rps_ring_entry e = ent(1);
		uint64_t t0;
		double ms;

		t0 = rps_now_ns();
		assert_int_equal(rps_ring_pop_wait(r, &e, 40), -ETIMEDOUT);
		ms = elapsed_ms(t0);
		assert_true(ms >= 39.0);
		assert_true(ms < 2000.0);
		assert_int_equal(rps_ring_pop_wait(r, &e, 0), -ETIMEDOUT);

		e = ent(1);
		assert_int_equal(rps_ring_push_wait(r, &e, 10), 0);
		e = ent(2);
		assert_int_equal(rps_ring_push_wait(r, &e, 10), 0);
		e = ent(3);
		t0 = rps_now_ns();
		assert_int_equal(rps_ring_push_wait(r, &e, 40), -ETIMEDOUT);
		ms = elapsed_ms(t0);
		assert_true(ms >= 39.0);
		assert_true(ms < 2000.0);
		assert_int_equal(rps_ring_depth(r), 2);
		pop_expect(r, 1);
		pop_expect(r, 2);
		rps_ring_destroy(r);
	}
}

struct waiter {
	struct rps_ring *r;
	int timeout_ms;
	int rc;
	struct rps_ring_entry e;
	uint64_t woke_ns;
};

static void *popper(void *arg)
{
	struct waiter *w = arg;

	w->rc = rps_ring_pop_wait(w->r, &w->e, w->timeout_ms);
	w->woke_ns = rps_now_ns();
	return NULL;
}

static void *pusher(void *arg)
{
	struct waiter *w = arg;

	w->rc = rps_ring_push_wait(w->r, &w->e, w->timeout_ms);
	w->woke_ns = rps_now_ns();
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void test_wait_is_woken(void **state)
{
	/* a blocked popper gets a later push; a blocked pusher gets room */
	(void)state;
	for (size_t k = 0; k < RPS_ARRAY_SIZE(all_policies); k++) {
		struct rps_ring *r = mk(1, all_policies[k]);
		struct waiter w = {.r = r, .timeout_ms = WAIT_MS};
		struct rps_ring_entry e = ent(9);
		pthread_t th;
		uint64_t t_wake;

		assert_int_equal(pthread_create(&th, NULL, popper, &w), 0);
		sleep_ms(20);
		t_wake = rps_now_ns();
		assert_int_equal(rps_ring_push(r, &e), 0);
		pthread_join(th, NULL);
		assert_int_equal(w.rc, 0);
		assert_int_equal(w.e.u64, 9);
		/* woken by the push, not by its own timeout */
		assert_true(w.woke_ns - t_wake < (uint64_t)WAIT_MS * 1000000 / 2);

		e = ent(1);
		assert_int_equal(rps_ring_push(r, &e), 0);
		w.e = ent(2);
		w.rc = 1;
		assert_int_equal(pthread_create(&th, NULL, pusher, &w), 0);
		sleep_ms(20);
		t_wake = rps_now_ns();
		pop_expect(r, 1);
		pthread_join(th, NULL);
		assert_int_equal(w.rc, 0);
		assert_true(w.woke_ns - t_wake < (uint64_t)WAIT_MS * 1000000 / 2);
		pop_expect(r, 2);
		rps_ring_destroy(r);
	}
}

static void test_close(void **state)
{
	(void)state;
	for (size_t k = 0; k < RPS_ARRAY_SIZE(all_policies); k++) {
		struct rps_ring *r = mk(2, all_policies[k]);
		struct waiter w = {.r = r, .timeout_ms = -1}; /* forever: only close can end it */
		struct rps_ring_entry e;
		pthread_t th;
		uint64_t t_close;

		/* close wakes a popper waiting forever on an empty ring */
		assert_int_equal(pthread_create(&th, NULL, popper, &w), 0);
		sleep_ms(30);
		t_close = rps_now_ns();
		rps_ring_close(r);
		pthread_join(th, NULL);
		assert_int_equal(w.rc, -EPIPE);
		assert_true(w.woke_ns >= t_close);
		e = ent(1);
		assert_int_equal(rps_ring_push(r, &e), -EPIPE);
		assert_int_equal(rps_ring_push_wait(r, &e, 10), -EPIPE);
		rps_ring_destroy(r);

		/* close wakes a pusher waiting forever on a full ring; pops drain */
		r = mk(2, all_policies[k]);
		for (uint64_t i = 0; i < 2; i++) {
			e = ent(i);
			assert_int_equal(rps_ring_push(r, &e), 0);
		}
		w.r = r;
		w.e = ent(2);
		w.rc = 1;
		assert_int_equal(pthread_create(&th, NULL, pusher, &w), 0);
		sleep_ms(30);
		rps_ring_close(r);
		pthread_join(th, NULL);
		assert_int_equal(w.rc, -EPIPE);
		assert_int_equal(rps_ring_depth(r), 2);
		pop_expect(r, 0);
		assert_int_equal(rps_ring_pop_wait(r, &e, -1), 0);
		assert_int_equal(e.u64, 1);
		assert_int_equal(rps_ring_pop_wait(r, &e, -1), -EPIPE);
		assert_int_equal(rps_ring_pop(r, &e), -EAGAIN);
		rps_ring_destroy(r);
	}
}

/* ---- many producers ---- */

#define NPROD	 4
#define PER_PROD 10000

struct producer {
	struct rps_ring *r;
	uint32_t id;
	unsigned eagain;
};

static void *produce(void *arg)
{
	struct producer *p = arg;

	for (uint32_t i = 0; i < PER_PROD; i++) {
		struct rps_ring_entry e;
		int rc;

		memset(&e, 0, sizeof(e));
		e.info.worker = p->id;
		e.u64 = i;
		e.info.norm = (float)((i * 2654435761u) % 97); /* scrambled priorities */
		e.info.timestamp_ns = (i * 40503u) % 1000;
		if (i % 2) {
			rc = rps_ring_push_wait(p->r, &e, WAIT_MS);
		} else {
			while ((rc = rps_ring_push(p->r, &e)) == -EAGAIN) {
				p->eagain++;
				sched_yield();
			}
		}
		if (rc != 0)
			return (void *)(intptr_t)rc;
	}
	return NULL;
}

static void many_producers(enum rps_priority_policy policy)
{
	struct rps_ring *r = mk(64, policy);
	struct producer prod[NPROD];
	pthread_t th[NPROD];
	uint8_t *seen = calloc((size_t)NPROD * PER_PROD, 1);
	int64_t last[NPROD];
	size_t got = 0;
	struct rps_ring_entry e;

	assert_non_null(seen);
	for (int i = 0; i < NPROD; i++) {
		last[i] = -1;
		prod[i] = (struct producer){.r = r, .id = (uint32_t)i};
		assert_int_equal(pthread_create(&th[i], NULL, produce, &prod[i]), 0);
	}
	while (got < (size_t)NPROD * PER_PROD) {
		int rc = rps_ring_pop_wait(r, &e, WAIT_MS);

		assert_int_equal(rc, 0);
		assert_true(e.info.worker < NPROD);
		assert_true(e.u64 < PER_PROD);
		assert_int_equal(seen[e.info.worker * PER_PROD + e.u64], 0);
		seen[e.info.worker * PER_PROD + e.u64] = 1;
		if (policy == RPS_PRIO_FIFO)
			assert_true((int64_t)e.u64 > last[e.info.worker]);
		last[e.info.worker] = (int64_t)e.u64;
		got++;
		if (got % 4096 == 0)
			sched_yield(); /* let the ring fill now and then */
	}
	for (int i = 0; i < NPROD; i++) {
		void *ret;

		pthread_join(th[i], &ret);
		assert_null(ret);
	}
	assert_int_equal(rps_ring_pop(r, &e), -EAGAIN);
	for (size_t i = 0; i < (size_t)NPROD * PER_PROD; i++)
		assert_int_equal(seen[i], 1);
	rps_ring_close(r);
	assert_int_equal(rps_ring_pop_wait(r, &e, -1), -EPIPE);
	free(seen);
	rps_ring_destroy(r);
}

static void test_many_producers_fifo(void **state)
{
	(void)state;
	many_producers(RPS_PRIO_FIFO);
}

static void test_many_producers_heap(void **state)
{
	(void)state;
	many_producers(RPS_PRIO_MAGNITUDE);
}

/* close while producers are pushing: every push that returned 0 is popped */
struct closer_prod {
	struct rps_ring *r;
	uint32_t id;
	uint32_t accepted;
};

static void *produce_until_closed(void *arg)
{
	struct closer_prod *p = arg;

	for (uint32_t i = 0;; i++) {
		struct rps_ring_entry e;
		int rc;

		memset(&e, 0, sizeof(e));
		e.info.worker = p->id;
		e.u64 = i;
		rc = rps_ring_push_wait(p->r, &e, WAIT_MS);
		if (rc == -EPIPE)
			break;
		if (rc != 0)
			return (void *)(intptr_t)rc;
		p->accepted++;
	}
	return NULL;
}

static void test_close_under_load(void **state)
{
	(void)state;
	for (size_t k = 0; k < 2; k++) {
		enum rps_priority_policy policy = k ? RPS_PRIO_STALENESS : RPS_PRIO_FIFO;
		struct rps_ring *r = mk(32, policy);
		struct closer_prod prod[NPROD];
		pthread_t th[NPROD];
		uint64_t popped[NPROD] = {0};
		struct rps_ring_entry e;
		int rc;

		for (int i = 0; i < NPROD; i++) {
			prod[i] = (struct closer_prod){.r = r, .id = (uint32_t)i};
			assert_int_equal(
			    pthread_create(&th[i], NULL, produce_until_closed, &prod[i]), 0);
		}
		for (int i = 0; i < 3000; i++) {
			assert_int_equal(rps_ring_pop_wait(r, &e, WAIT_MS), 0);
			popped[e.info.worker]++;
		}
		rps_ring_close(r);
		while ((rc = rps_ring_pop_wait(r, &e, WAIT_MS)) == 0)
			popped[e.info.worker]++;
		assert_int_equal(rc, -EPIPE);
		for (int i = 0; i < NPROD; i++) {
			void *ret;

			pthread_join(th[i], &ret);
			assert_null(ret);
			assert_int_equal(popped[i], prod[i].accepted);
		}
		rps_ring_destroy(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_and_names),
	    cmocka_unit_test(test_fifo_order_and_wrap),
	    cmocka_unit_test(test_freshest_order),
	    cmocka_unit_test(test_staleness_order),
	    cmocka_unit_test(test_magnitude_order),
	    cmocka_unit_test(test_callback_order),
	    cmocka_unit_test(test_ties_fifo),
	    cmocka_unit_test(test_full_eagain_nothing_lost),
	    cmocka_unit_test(test_wait_timeouts),
	    cmocka_unit_test(test_wait_is_woken),
	    cmocka_unit_test(test_close),
	    cmocka_unit_test(test_many_producers_fifo),
	    cmocka_unit_test(test_many_producers_heap),
	    cmocka_unit_test(test_close_under_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
