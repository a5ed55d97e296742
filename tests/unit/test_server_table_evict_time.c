/* Time-based eviction of table rows (RDMAPS_TABLE_EVICT_SECONDS,
 * server/table_evict.c) on a shard without a network, on a fake clock:
 * rows idle for evict_secs are evicted, rows touched since are kept, rows
 * with updates not in a committed checkpoint are never evicted (and are once
 * the checkpoint commits, not if it failed); passes run at most every
 * evict_secs / 4, also from the idle hook; the clock setting is ignored. */
#include "server/table.h"
#include "tests/unit/test_server_util.h"

#include <rdmaps/table.h>

static uint64_t fake_ms;

static uint64_t fake_now(void)
{
	return fake_ms;
}

struct fixture {
	struct rps_shard sh;
	struct t_io io;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct rps_shard_params p;
	struct rps_table_decl d = {.table = 4, .dim = 4, .init = RPS_TABLE_INIT_UNIFORM,
				   .init_scale = 0.5f, .seed = 7, .capacity_hint = 100};
	struct rps_optim_opts o;
	char why[256];

	assert_non_null(f);
	t_params(&p, RPS_ASP);
	p.evict_secs = 2;
	assert_int_equal(rps_shard_init(&f->sh, &p, &t_io_ops, &f->io), 0);
	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_SGD;
	o.lr = 1.0f;
	assert_int_equal(rps_shard_table_declare(&f->sh, &d, &o, why, sizeof(why)), 0);
	fake_ms = 1000000;
	f->sh.tables->now_ms = fake_now;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rps_shard_stop(&f->sh);
	rps_shard_fini(&f->sh);
	free(f);
	return 0;
}

static struct rps_rowtab *rt_of(struct fixture *f)
{
	return &rps_shard_table_find(&f->sh, 4)->rt;
}

/* A frame touching row id now (what table.c does for a pull or a push). */
static int64_t touch(struct fixture *f, uint64_t id, int update)
{
	struct rps_rowtab *rt = rt_of(f);
	int64_t s;

	rt->now = rps_shard_tables_now(&f->sh);
	s = rps_rowtab_get(rt, id, NULL);
	assert_true(s >= 0);
	rps_rowtab_touch(rt, (uint64_t)s);
	if (update)
		rps_rowtab_updated(rt, (uint64_t)s);
	return s;
}

static int live(struct fixture *f, uint64_t id)
{
	int64_t s = rps_rowtab_find(rt_of(f), id);

	return s >= 0 && rps_rowtab_live(rt_of(f), (uint64_t)s);
}

/* Advance the fake clock by ms, then an entry's tick (a slice). */
static void later(struct fixture *f, uint64_t ms)
{
	fake_ms += ms;
	rps_shard_tables_evict_tick(&f->sh);
}

static void test_idle_rows_go(void **state)
{
	struct fixture *f = *state;

	for (uint64_t id = 1; id <= 10; id++)
		touch(f, id, 0);
	later(f, 1000); /* 1 s idle: kept */
	assert_int_equal(rps_rowtab_rows(rt_of(f)), 10);
	touch(f, 3, 0); /* rows 3 and 4 touched at 1 s */
	touch(f, 4, 0);
	later(f, 600); /* 1.6 s */
	later(f, 500); /* 2.1 s: rows 1, 2, 5..10 idle 2.1 s: gone; 3, 4 idle 1.1 s */
	assert_int_equal(rps_rowtab_rows(rt_of(f)), 2);
	assert_true(live(f, 3) && live(f, 4));
	assert_false(live(f, 1) || live(f, 10));
	/* a pass begins at most every evict_secs / 4 = 500 ms */
	later(f, 400); /* 2.5 s: no pass (0.4 s after the last) */
	later(f, 700); /* 3.2 s: a pass (the last began at 2.1 s): idle 2.2 s: gone */
	assert_int_equal(rps_rowtab_rows(rt_of(f)), 0);
	/* an evicted row pulled again comes back (in place) */
	touch(f, 1, 0);
	assert_true(live(f, 1));
	assert_int_equal(rps_rowtab_rows(rt_of(f)), 1);
}

static void test_pass_interval(void **state)
{
	struct fixture *f = *state;

	touch(f, 1, 0);
	later(f, 100);	/* a pass at 0.1 s: row 1 kept */
	later(f, 1950); /* 2.05 s: the next pass (>= 0.5 s later): row 1 idle 2.05 s: gone */
	assert_false(live(f, 1));
	touch(f, 2, 0); /* at 2.05 s */
	later(f, 2000); /* 4.05 s: idle 2.0 s: gone */
	assert_false(live(f, 2));
	touch(f, 3, 0);	  /* at 4.05 s */
	later(f, 100);	  /* 4.15 s: no pass (0.1 s after the last) */
	fake_ms += 1950; /* 6.1 s, no entry: only the idle hook */
	assert_true(live(f, 3));
	rps_shard_tables_idle(&f->sh);
	assert_false(live(f, 3));
}

static void test_unsaved_kept(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;

	touch(f, 1, 1); /* updated: no checkpoint holds it */
	touch(f, 2, 0);
	later(f, 3000);
	assert_true(live(f, 1));
	assert_false(live(f, 2));
	later(f, 60000); /* a minute: still kept */
	assert_true(live(f, 1));
	/* a checkpoint writes the tables, then fails: still unsaved */
	rps_shard_tables_ckpt_written(sh);
	atomic_fetch_add(&sh->ckpts_failed, 1);
	later(f, 3000);
	assert_true(live(f, 1));
	/* one that commits: saved, so evicted once idle */
	rps_shard_tables_ckpt_written(sh);
	touch(f, 5, 1); /* updated after the checkpoint's tables were written */
	atomic_fetch_add(&sh->ckpts_ok, 1);
	later(f, 3000);
	assert_false(live(f, 1));
	assert_true(live(f, 5));
	assert_int_equal(rps_rowtab_rows(rt_of(f)), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_idle_rows_go, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pass_interval, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unsaved_kept, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
