/* Fault injection: spec parsing (good and bad), decision frequencies,
 * determinism with a seed, kill matching, and the hot-path macros. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "src/fault.h"
#include "src/log.h"

static int teardown(void **state)
{
	rps_fault_reset();
	return 0;
}

static void test_parse_good(void **state)
{
	struct rps_fault_spec f;
	char text[512];

	assert_int_equal(rps_fault_parse("drop=0.01,delay_ms=5,delay_p=0.1,stall_update_ms=200,"
					 "stall_p=0.01,kill_at_clock=7,kill_role=server,"
					 "kill_rank=1,seed=1",
					 &f),
			 0);
	assert_true(f.drop_p == 0.01);
	assert_int_equal(f.delay_ns, 5000000);
	assert_true(f.delay_p == 0.1);
	assert_int_equal(f.stall_ns, 200000000);
	assert_true(f.stall_p == 0.01);
	assert_int_equal(f.kill, 1);
	assert_int_equal(f.kill_clock, 7);
	assert_string_equal(f.kill_role, "server");
	assert_int_equal(f.kill_rank, 1);
	assert_int_equal(f.seed, 1);
	rps_fault_describe(&f, text, sizeof(text));
	assert_string_equal(text, "drop=0.01,delay_ms=5,delay_p=0.1,stall_update_ms=200,"
				  "stall_p=0.01,kill_at_clock=7,kill_role=server,kill_rank=1,"
				  "seed=1");

	/* defaults, spaces, fractions, hex seed, any */
	assert_int_equal(rps_fault_parse(" delay_ms = 0.5 , stall_update_ms=1,seed=0x10 ", &f), 0);
	assert_true(f.drop_p == 0);
	assert_int_equal(f.delay_ns, 500000);
	assert_true(f.delay_p == 1);
	assert_int_equal(f.stall_ns, 1000000);
	assert_true(f.stall_p == 1);
	assert_int_equal(f.kill, 0);
	assert_int_equal(f.kill_rank, -1);
	assert_int_equal(f.seed, 16);
	assert_int_equal(rps_fault_parse("kill_at_clock=0,kill_role=any,kill_rank=any", &f), 0);
	assert_int_equal(f.kill, 1);
	assert_string_equal(f.kill_role, "");
	assert_int_equal(f.kill_rank, -1);
	assert_int_equal(rps_fault_parse("kill_at_clock=3,kill_rank=-1", &f), 0);
	assert_int_equal(f.kill_rank, -1);

	/* empty: everything off */
	assert_int_equal(rps_fault_parse("", &f), 0);
	rps_fault_describe(&f, text, sizeof(text));
	assert_string_equal(text, "off");
	assert_int_equal(rps_fault_parse("   ", &f), 0);
	assert_int_equal(rps_fault_parse(NULL, &f), 0);
	assert_int_equal(rps_fault_init(""), 0);
	assert_int_equal(rps_fault_on, 0);
	/* on only when something can fire */
	assert_int_equal(rps_fault_init("drop=0,seed=3"), 0);
	assert_int_equal(rps_fault_on, 0);
	assert_int_equal(rps_fault_init("delay_ms=1,delay_p=0"), 0);
	assert_int_equal(rps_fault_on, 0);
	assert_int_equal(rps_fault_init("drop=0.5"), 0);
	assert_int_equal(rps_fault_on, 1);
}

static void test_parse_bad(void **state)
{
	static const char *const bad[] = {
	    "dorp=0.1",		 /* unknown */
	    "drop",		 /* no value */
	    "drop=",		 /* empty value */
	    "drop=1.5",		 /* out of range */
	    "drop=-0.1",	 /* negative */
	    "drop=0.1x",	 /* trailing junk */
	    "drop=nan",		 /* not finite */
	    "drop=0.1,,seed=1",	 /* empty item */
	    "drop=0.1,",	 /* trailing comma */
	    ",drop=0.1",	 /* leading comma */
	    "drop=0.1,drop=0.2", /* twice */
	    "delay_ms=-1",	 /* negative */
	    "delay_ms=99999999", /* too long */
	    "delay_p=0.5",	 /* without delay_ms */
	    "stall_p=0.5",	 /* without stall_update_ms */
	    "kill_role=server",	 /* without kill_at_clock */
	    "kill_rank=2",	 /* without kill_at_clock */
	    "kill_at_clock=-3",	 /* negative */
	    "kill_at_clock=7,kill_role=client",
	    "kill_at_clock=7,kill_rank=x",
	    "kill_at_clock=7,kill_rank=-2",
	    "seed=abc",
	    "seed=0x",
	    "seed=99999999999999999999999", /* overflow */
	};
	struct rps_fault_spec f, before;

	assert_int_equal(rps_fault_init("drop=0.25"), 0);
	memset(&f, 0x5a, sizeof(f));
	before = f;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (rps_fault_parse(bad[i], &f) != -EINVAL)
			fail_msg("accepted bad spec \"%s\"", bad[i]);
		assert_memory_equal(&f, &before, sizeof(f));
		assert_int_equal(rps_fault_init(bad[i]), -EINVAL);
	}
	/* a refused init leaves the previous setting */
	assert_int_equal(rps_fault_on, 1);
	assert_true(rps_fault_current()->drop_p == 0.25);
}

#define DRAWS 100000

static void test_frequencies(void **state)
{
	int drops = 0, delays = 0, stalls = 0;

	assert_int_equal(rps_fault_init("drop=0.1,delay_ms=5,delay_p=0.25,stall_update_ms=2,"
					"stall_p=0.5,seed=12345"),
			 0);
	for (int i = 0; i < DRAWS; i++) {
		uint64_t d = rps_fault_delay_ns(), s = rps_fault_stall_ns();

		drops += rps_fault_drop();
		assert_true(d == 0 || d == 5000000);
		assert_true(s == 0 || s == 2000000);
		delays += d != 0;
		stalls += s != 0;
	}
	/* loose bounds: > 10 standard deviations */
	assert_in_range(drops, 9000, 11000);
	assert_in_range(delays, 23500, 26500);
	assert_in_range(stalls, 48000, 52000);

	/* p = 1 and p = 0 are exact */
	assert_int_equal(rps_fault_init("drop=1,delay_ms=1,delay_p=0"), 0);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(rps_fault_drop(), 1);
		assert_int_equal(rps_fault_delay_ns(), 0);
		assert_int_equal(rps_fault_stall_ns(), 0);
	}
}

static void draw_seq(int *out, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = rps_fault_drop();
}

static void *thread_seq(void *arg)
{
	rps_fault_thread_seed(5);
	draw_seq(arg, 1000);
	return NULL;
}

static void test_determinism(void **state)
{
	static int a[1000], b[1000], c[1000], t1[1000], t2[1000];
	pthread_t th;

	assert_int_equal(rps_fault_init("drop=0.5,seed=7"), 0);
	draw_seq(a, 1000);
	assert_int_equal(rps_fault_init("drop=0.5,seed=7"), 0);
	draw_seq(b, 1000);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(rps_fault_init("drop=0.5,seed=8"), 0);
	draw_seq(c, 1000);
	assert_memory_not_equal(a, c, sizeof(a));

	/* a pinned stream gives the same sequence on any thread */
	assert_int_equal(rps_fault_init("drop=0.5,seed=7"), 0);
	assert_int_equal(pthread_create(&th, NULL, thread_seq, t1), 0);
	pthread_join(th, NULL);
	assert_int_equal(pthread_create(&th, NULL, thread_seq, t2), 0);
	pthread_join(th, NULL);
	assert_memory_equal(t1, t2, sizeof(t1));
	assert_memory_not_equal(t1, a, sizeof(t1)); /* stream 5, not stream 0 */
}

static void test_kill(void **state)
{
	assert_int_equal(rps_fault_init("kill_at_clock=7,kill_role=server,kill_rank=1"), 0);
	assert_int_equal(rps_fault_on, 1);
	assert_int_equal(rps_fault_should_kill("server", 1, 6), 0);
	assert_int_equal(rps_fault_should_kill("worker", 1, 7), 0);
	assert_int_equal(rps_fault_should_kill("server", 0, 7), 0);
	assert_int_equal(rps_fault_should_kill(NULL, 1, 7), 0);
	assert_int_equal(rps_fault_should_kill("server", 1, 9), 1);  /* clock skipped past 7 */
	assert_int_equal(rps_fault_should_kill("server", 1, 10), 0); /* once */
	/* re-armed by init */
	assert_int_equal(rps_fault_init("kill_at_clock=7,kill_role=server,kill_rank=1"), 0);
	assert_int_equal(rps_fault_should_kill("server", 1, 7), 1);

	/* any role, any rank */
	assert_int_equal(rps_fault_init("kill_at_clock=2"), 0);
	assert_int_equal(rps_fault_should_kill("worker", 3, 1), 0);
	assert_int_equal(rps_fault_should_kill("worker", 3, 2), 1);
	assert_int_equal(rps_fault_init("kill_at_clock=2,kill_role=worker"), 0);
	assert_int_equal(rps_fault_should_kill("scheduler", -1, 5), 0);
	assert_int_equal(rps_fault_should_kill("worker", 0, 5), 1);

	/* the other switches draw nothing when only kill is on */
	assert_int_equal(rps_fault_drop(), 0);
	assert_int_equal(rps_fault_delay_ns(), 0);
	assert_int_equal(rps_fault_stall_ns(), 0);
}

static void test_macros_on(void **state)
{
	int n = 0;

	rps_fault_reset();
	assert_int_equal(rps_fault_on, 0);
	assert_int_equal(RPS_FAULT_DROP(), 0);
	assert_int_equal(RPS_FAULT_DELAY_NS(), 0);
	assert_int_equal(RPS_FAULT_SHOULD_KILL("server", 0, 100), 0);
	assert_int_equal(rps_fault_init("drop=1,delay_ms=3,stall_update_ms=4,kill_at_clock=1"), 0);
	for (int i = 0; i < 10; i++)
		n += RPS_FAULT_DROP();
	assert_int_equal(n, 10);
	assert_int_equal(RPS_FAULT_DELAY_NS(), 3000000);
	assert_int_equal(RPS_FAULT_STALL_NS(), 4000000);
	assert_int_equal(RPS_FAULT_SHOULD_KILL("server", 0, 1), 1);
}

/* The same macros in a file compiled with RPS_NO_FAULTS: constant 0. */
#define RPS_NO_FAULTS
#include "src/fault.h"

static void test_macros_compiled_out(void **state)
{
	int rank = 0;
	uint64_t clock = 9;

	assert_int_equal(rps_fault_init("drop=1,delay_ms=3,stall_update_ms=4,kill_at_clock=1"), 0);
	assert_int_equal(rps_fault_on, 1);
	assert_int_equal(RPS_FAULT_DROP(), 0);
	assert_int_equal(RPS_FAULT_DELAY_NS(), 0);
	assert_int_equal(RPS_FAULT_STALL_NS(), 0);
	assert_int_equal(RPS_FAULT_SHOULD_KILL("server", rank, clock), 0);
	/* and nothing was consumed: the kill is still armed */
	assert_int_equal(rps_fault_should_kill("server", rank, clock), 1);
}

/* slow_rank/slow_factor: parsed, refused alone or out of range, and the
 * straggler really sleeps (factor - 1) x the time between its clocks while
 * another rank or role does not. */
static void test_slow(void **state)
{
	struct rps_fault_spec f;
	char text[256];
	uint64_t t0, t1;

	(void)state;
	assert_int_equal(rps_fault_parse("slow_rank=2,slow_factor=5", &f), 0);
	assert_int_equal(f.slow_rank, 2);
	assert_true(f.slow_factor == 5);
	rps_fault_describe(&f, text, sizeof(text));
	assert_string_equal(text, "slow_rank=2,slow_factor=5,seed=1");
	assert_int_equal(rps_fault_parse("slow_rank=2", &f), -EINVAL);
	assert_int_equal(rps_fault_parse("slow_factor=2", &f), -EINVAL);
	assert_int_equal(rps_fault_parse("slow_rank=1,slow_factor=0.5", &f), -EINVAL);
	assert_int_equal(rps_fault_parse("slow_rank=1,slow_factor=101", &f), -EINVAL);
	assert_int_equal(rps_fault_parse("slow_rank=-1,slow_factor=2", &f), -EINVAL);

	assert_int_equal(rps_fault_init("slow_rank=1,slow_factor=3"), 0);
	assert_int_equal(rps_fault_on, 1);
	rps_fault_slow_down("worker", 1); /* the first clock: nothing to scale */
	rps_fault_sleep_ns(20000000);	  /* a 20 ms "step" */
	t0 = rps_now_ns();
	rps_fault_slow_down("worker", 1); /* sleeps ~2 x 20 ms */
	t1 = rps_now_ns();
	assert_true(t1 - t0 >= 38000000);
	assert_true(t1 - t0 < 2000000000);
	t0 = rps_now_ns();
	rps_fault_slow_down("worker", 0);
	rps_fault_slow_down("server", 1);
	t1 = rps_now_ns();
	assert_true(t1 - t0 < 5000000);
}

static void test_sleep(void **state)
{
	uint64_t t0 = rps_now_ns();

	rps_fault_sleep_ns(2000000);
	assert_true(rps_now_ns() - t0 >= 2000000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_parse_good, teardown),
	    cmocka_unit_test_teardown(test_parse_bad, teardown),
	    cmocka_unit_test_teardown(test_frequencies, teardown),
	    cmocka_unit_test_teardown(test_determinism, teardown),
	    cmocka_unit_test_teardown(test_kill, teardown),
	    cmocka_unit_test_teardown(test_macros_on, teardown),
	    cmocka_unit_test_teardown(test_macros_compiled_out, teardown),
	    cmocka_unit_test_teardown(test_slow, teardown),
	    cmocka_unit_test(test_sleep),
	};

	const char *lvl = getenv("RDMAPS_LOG_LEVEL");

	rps_log_set_level(lvl ? rps_log_level_parse(lvl) : RPS_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
