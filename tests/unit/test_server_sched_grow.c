/* The scheduler lets workers join a running job beyond the initial count
 * (issue 24, RDMAPS_MAX_WORKERS, server/sched_grow.c): in one process on
 * 127.0.0.1, a scheduler with 1 server and 2 workers, room for 4. A worker
 * that registers while the job runs gets rank 2, then 3; every node gets the
 * map with the new count; a worker that asks for a live rank or comes when
 * the job is full is refused (-EBUSY); without RDMAPS_MAX_WORKERS an extra
 * worker is refused; a RDMAPS_MAX_WORKERS below RDMAPS_NUM_WORKERS is refused
 * at create. A few hundred milliseconds.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "control/control.h"
#include "server/sched.h"
#include "src/config.h"
#include "src/log.h"
#include "src/proto.h"

#define SECRET "grow-s3cret"

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

struct run {
	struct rps_sched *s;
	pthread_t th;
	atomic_int done;
	char addr[64];
};

static void *sched_thread(void *arg)
{
	struct run *r = arg;

	rps_sched_run(r->s);
	atomic_store(&r->done, 1);
	return NULL;
}

static int sched_make(struct run *r, int workers, int max_workers)
{
	struct rps_sched_opts o;
	struct rps_config cfg;
	int rc;

	memset(r, 0, sizeof(*r));
	rps_config_init(&cfg);
	rps_log_set_level(RPS_LOG_ERROR); /* after the RDMAPS_LOG_LEVEL of the config */
	cfg.max_workers = max_workers;
	rps_sched_opts_init(&o, &cfg);
	o.host = "127.0.0.1";
	o.port = 0;
	o.secret = SECRET;
	o.num_servers = 1;
	o.num_workers = workers;
	o.heartbeat_timeout_ms = 3000;
	o.shutdown_grace_ms = 1000;
	rc = rps_sched_create(&o, &r->s);
	if (rc)
		return rc;
	snprintf(r->addr, sizeof(r->addr), "127.0.0.1:%u", rps_sched_port(r->s));
	return pthread_create(&r->th, NULL, sched_thread, r) ? -EAGAIN : 0;
}

static void sched_end(struct run *r)
{
	rps_sched_stop(r->s);
	pthread_join(r->th, NULL);
	rps_sched_destroy(r->s);
}

struct node {
	uint8_t role;
	uint32_t want_rank;
	const char *sched;
	struct rps_ctl *ctl;
	int rc;
	pthread_t th;
	atomic_int map_workers; /* num_workers of the last map (on_map) */
};

static void cb_map(void *arg, const struct rps_map *m, const struct rps_node *nodes)
{
	struct node *nd = arg;

	(void)nodes;
	atomic_store(&nd->map_workers, (int)m->num_workers);
}

static void cb_dead(void *arg, const struct rps_node *n)
{
	(void)arg;
	(void)n;
}

static const struct rps_ctl_events events = {
	.on_dead = cb_dead,
	.on_map = cb_map,
};

static void *join_thread(void *arg)
{
	struct node *nd = arg;
	struct rps_ctl_join_opts o;

	memset(&o, 0, sizeof(o));
	o.scheduler = nd->sched;
	o.secret = SECRET;
	o.role = nd->role;
	o.host = "127.0.0.1";
	o.port = nd->role == RPS_ROLE_SERVER ? 4000 : 0;
	o.want_rank = nd->want_rank;
	o.timeout_ms = 5000;
	o.heartbeat_ms = 50;
	o.events = &events;
	o.arg = nd;
	nd->rc = rps_ctl_join(&o, &nd->ctl);
	return NULL;
}

static void node_init(struct node *nd, uint8_t role, const char *sched)
{
	memset(nd, 0, sizeof(*nd));
	nd->role = role;
	nd->want_rank = UINT32_MAX;
	nd->sched = sched;
}

static int join(struct node *nd)
{
	join_thread(nd);
	return nd->rc;
}

static void leave(struct node *nd)
{
	if (nd->ctl)
		rps_ctl_leave(nd->ctl);
	nd->ctl = NULL;
}

static int wait_map(struct node *nd, int workers)
{
	for (int t = 0; t < 5000; t += 5) {
		if (atomic_load(&nd->map_workers) == workers)
			return 1;
		sleep_ms(5);
	}
	return 0;
}

static int map_of(struct node *nd, struct rps_map *m, struct rps_node *nodes)
{
	return rps_ctl_map(nd->ctl, m, nodes, 16);
}

static void test_grow(void **state)
{
	struct node srv, w[2], x, y, live, full;
	struct rps_node nodes[16];
	struct rps_map m;
	struct run r;
	int n;

	(void)state;
	assert_int_equal(sched_make(&r, 2, 4), 0);
	node_init(&srv, RPS_ROLE_SERVER, r.addr);
	node_init(&w[0], RPS_ROLE_WORKER, r.addr);
	node_init(&w[1], RPS_ROLE_WORKER, r.addr);
	pthread_create(&srv.th, NULL, join_thread, &srv);
	pthread_create(&w[0].th, NULL, join_thread, &w[0]);
	pthread_create(&w[1].th, NULL, join_thread, &w[1]);
	pthread_join(srv.th, NULL);
	pthread_join(w[0].th, NULL);
	pthread_join(w[1].th, NULL);
	assert_int_equal(srv.rc, 0);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, 0);
	assert_int_equal(map_of(&srv, &m, nodes), 3);
	assert_int_equal(m.num_workers, 2);

	/* a third worker: rank 2, node id 1 + 2, everyone told */
	node_init(&x, RPS_ROLE_WORKER, r.addr);
	assert_int_equal(join(&x), 0);
	assert_int_equal(rps_ctl_rank(x.ctl), 2);
	n = map_of(&x, &m, nodes);
	assert_int_equal(n, 4);
	assert_int_equal(m.num_workers, 3);
	assert_int_equal(m.your_id, 3);
	assert_int_equal(nodes[3].role, RPS_ROLE_WORKER);
	assert_int_equal(nodes[3].rank, 2);
	assert_true(nodes[3].alive);
	assert_true(wait_map(&srv, 3));
	assert_true(wait_map(&w[0], 3));
	assert_true(wait_map(&w[1], 3));

	/* one asking for a live rank is not a new worker: refused */
	node_init(&live, RPS_ROLE_WORKER, r.addr);
	live.want_rank = 1;
	assert_int_equal(join(&live), -EBUSY);

	/* asking for the next rank is fine */
	node_init(&y, RPS_ROLE_WORKER, r.addr);
	y.want_rank = 3;
	assert_int_equal(join(&y), 0);
	assert_int_equal(rps_ctl_rank(y.ctl), 3);
	assert_true(wait_map(&srv, 4));
	assert_true(wait_map(&x, 4));

	/* full: RDMAPS_MAX_WORKERS=4 */
	node_init(&full, RPS_ROLE_WORKER, r.addr);
	assert_int_equal(join(&full), -EBUSY);

	/* a grown worker that leaves keeps its rank taken: the count stays */
	leave(&y);
	assert_int_equal(map_of(&x, &m, nodes), 5);
	assert_int_equal(m.num_workers, 4);

	leave(&x);
	leave(&w[0]);
	leave(&w[1]);
	leave(&srv);
	sched_end(&r);
}

static void test_no_growth(void **state)
{
	struct node srv, w, extra;
	struct run r;

	(void)state;
	assert_int_equal(sched_make(&r, 1, 0), 0);
	node_init(&srv, RPS_ROLE_SERVER, r.addr);
	node_init(&w, RPS_ROLE_WORKER, r.addr);
	pthread_create(&srv.th, NULL, join_thread, &srv);
	pthread_create(&w.th, NULL, join_thread, &w);
	pthread_join(srv.th, NULL);
	pthread_join(w.th, NULL);
	assert_int_equal(srv.rc, 0);
	assert_int_equal(w.rc, 0);
	node_init(&extra, RPS_ROLE_WORKER, r.addr);
	assert_int_equal(join(&extra), -EBUSY);
	leave(&w);
	leave(&srv);
	sched_end(&r);
}

static void test_max_below(void **state)
{
	struct run r;

	(void)state;
	assert_int_equal(sched_make(&r, 3, 2), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow),
		cmocka_unit_test(test_no_growth),
		cmocka_unit_test(test_max_below),
	};

	rps_log_set_level(RPS_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
