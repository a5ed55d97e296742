/* The scheduler and the control channel together, in one process on
 * 127.0.0.1: rendezvous and ranks, barriers, dead nodes (silence and a
 * dropped connection), rejoin, refusals, wrong secret, joining before the
 * scheduler starts, STATUS, the clean end of a job, control requests relayed
 * to the servers (answered, refused while one runs, timed out, failed, a
 * server gone).
 * Heartbeats every 50 ms; a silent node is dead after 500 ms: the whole file
 * takes about 3 s.
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
#include <unistd.h>

#include <cmocka.h>

#include "control/control.h"
#include <rdmaps/ctl.h>
#include <rdmaps/types.h>
#include "server/sched.h"
#include "src/config.h"
#include "src/log.h"
#include "src/npz.h"
#include "src/proto.h"
#include "src/util.h"
#include "transport/transport.h"

#define HB_MS		   50
#define HB_TIMEOUT_MS	   3000 /* tests that must not see a death, even on a loaded box */
#define HB_DEAD_TIMEOUT_MS 500	/* the test of a silent node */
#define JOIN_TIMEOUT_MS	   5000
#define SECRET		   "s3cret"

int rps_ctl_status(const struct rps_ctl *ctl); /* control.c; not in control.h yet */

/* ---- helpers ---- */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int wait_int(atomic_int *v, int want, int ms)
{
	for (int t = 0; t < ms; t += 5) {
		if (atomic_load(v) >= want)
			return 1;
		sleep_ms(5);
	}
	return atomic_load(v) >= want;
}

struct sched_run {
	struct rps_sched *s;
	pthread_t th;
	int rc;
	atomic_int done;
	char addr[64];
};

static void *sched_thread(void *arg)
{
	struct sched_run *r = arg;

	r->rc = rps_sched_run(r->s);
	atomic_store(&r->done, 1);
	return NULL;
}

static int sched_create(struct sched_run *r, int servers, int workers, uint16_t port,
			int hb_timeout_ms)
{
	struct rps_sched_opts o;
	int rc;

	memset(r, 0, sizeof(*r));
	rps_sched_opts_init(&o, NULL);
	o.host = "127.0.0.1";
	o.port = port;
	o.secret = SECRET;
	o.num_servers = servers;
	o.num_workers = workers;
	o.heartbeat_timeout_ms = hb_timeout_ms;
	o.shutdown_grace_ms = 2000;
	rc = rps_sched_create(&o, &r->s);
	if (rc)
		return rc;
	snprintf(r->addr, sizeof(r->addr), "127.0.0.1:%u", rps_sched_port(r->s));
	return 0;
}

static void sched_start(struct sched_run *r, int servers, int workers, uint16_t port,
			int hb_timeout_ms)
{
	assert_int_equal(sched_create(r, servers, workers, port, hb_timeout_ms), 0);
	assert_int_equal(pthread_create(&r->th, NULL, sched_thread, r), 0);
}

/* Wait for run() to return by itself (end of job) or, with stop, make it. */
static int sched_finish(struct sched_run *r, int stop, int ms)
{
	int ended;

	if (stop)
		rps_sched_stop(r->s);
	ended = wait_int(&r->done, 1, ms);
	if (!ended)
		rps_sched_stop(r->s);
	pthread_join(r->th, NULL);
	rps_sched_destroy(r->s);
	r->s = NULL;
	return ended ? r->rc : -ETIMEDOUT;
}

struct node {
	uint8_t role;
	uint32_t want_rank;
	const char *secret;
	const char *sched;
	int hb_ms;
	int timeout_ms;
	struct rps_ctl *ctl;
	int rc; /* join */
	int barrier_rc;
	uint32_t barrier_group;
	pthread_t th;
	atomic_int dead;
	atomic_int dead_id;
	atomic_int shutdown;
	atomic_int maps;
	atomic_int map_epoch;
	/* servers: control requests (CHECKPOINT / EXPORT) */
	atomic_int reqs;
	uint32_t req_id;
	uint8_t req_op;
	int answer_now; /* answer each at once (RESULT, status 0) */
	struct rps_ctlreq req;
	uint64_t export_clock; /* EXPORT: answer at max(this, the target) */
};

static void cb_dead(void *arg, const struct rps_node *n)
{
	struct node *nd = arg;

	atomic_store(&nd->dead_id, (int)n->id);
	atomic_fetch_add(&nd->dead, 1);
}

static void cb_shutdown(void *arg)
{
	struct node *nd = arg;

	atomic_fetch_add(&nd->shutdown, 1);
}

static void cb_map(void *arg, const struct rps_map *m, const struct rps_node *nodes)
{
	struct node *nd = arg;

	(void)nodes;
	atomic_store(&nd->map_epoch, (int)m->epoch);
	atomic_fetch_add(&nd->maps, 1);
}

/* A server's RESULT for the last request: one shard at clock 5. */
static int answer(struct node *nd, int status)
{
	struct {
		struct rps_ctlres r;
		struct rps_ctlres_shard s;
	} a;

	memset(&a, 0, sizeof(a));
	a.r.server = rps_ctl_rank(nd->ctl);
	a.r.num_shards = 1;
	a.r.consistency = RPS_BSP;
	a.r.status = status;
	a.s.clock = 5;
	snprintf(a.s.text, sizeof(a.s.text), "/ckpt/server%u", a.r.server);
	return rps_ctl_send(nd->ctl, nd->req_op, nd->req_id, 0, RPS_CTLREQ_RESULT, &a, sizeof(a),
			    NULL, 0);
}

/* EXPORT: slice `rank` of key 1 (3 values: 10 * rank + 1, 2, 3) and a
 * RESULT, both at max(export_clock, the target). */
static void answer_export(struct node *nd)
{
	struct {
		struct rps_ctlres r;
		struct rps_ctlres_shard s;
	} a;
	struct rps_export_part part;
	uint32_t rank = rps_ctl_rank(nd->ctl);
	uint64_t c = nd->export_clock;
	float v[3];

	if (nd->req.flags & RPS_CTLREQ_CLOCK && nd->req.clock > c)
		c = nd->req.clock;
	for (int i = 0; i < 3; i++)
		v[i] = (float)(10 * rank + 1 + (uint32_t)i);
	memset(&part, 0, sizeof(part));
	part.key = 1;
	part.slice = rank;
	part.slice_elems = 3;
	part.count = 3;
	part.server = rank;
	part.clock = c;
	assert_int_equal(rps_ctl_send(nd->ctl, RPS_OP_EXPORT, nd->req_id, 0, RPS_CTLREQ_DATA,
				      &part, sizeof(part), v, sizeof(v)),
			 0);
	memset(&a, 0, sizeof(a));
	a.r.server = rank;
	a.r.num_shards = 1;
	a.r.consistency = RPS_BSP;
	a.s.clock = c;
	a.s.nslices = 1;
	a.s.nelems = 3;
	assert_int_equal(rps_ctl_send(nd->ctl, RPS_OP_EXPORT, nd->req_id, 0, RPS_CTLREQ_RESULT,
				      &a, sizeof(a), NULL, 0),
			 0);
}

static void cb_request(void *arg, const struct rps_frame_hdr *h, const void *data, size_t len)
{
	struct node *nd = arg;

	assert_int_equal(len, sizeof(struct rps_ctlreq));
	nd->req_id = h->req_id;
	nd->req_op = h->op;
	memcpy(&nd->req, data, sizeof(nd->req));
	if (nd->answer_now && h->op == RPS_OP_EXPORT)
		answer_export(nd);
	else if (nd->answer_now)
		answer(nd, 0);
	atomic_fetch_add(&nd->reqs, 1);
}

static void node_init(struct node *nd, uint8_t role, const char *sched)
{
	memset(nd, 0, sizeof(*nd));
	nd->role = role;
	nd->want_rank = UINT32_MAX;
	nd->secret = SECRET;
	nd->sched = sched;
	nd->hb_ms = HB_MS;
	nd->timeout_ms = JOIN_TIMEOUT_MS;
	atomic_init(&nd->dead_id, -1);
}

static const struct rps_ctl_events test_events = {
    .on_dead = cb_dead,
    .on_shutdown = cb_shutdown,
    .on_map = cb_map,
    .on_request = cb_request,
};

static int node_join(struct node *nd)
{
	struct rps_ctl_join_opts o;

	memset(&o, 0, sizeof(o));
	o.scheduler = nd->sched;
	o.secret = nd->secret;
	o.role = nd->role;
	o.host = "127.0.0.1";
	o.port = nd->role == RPS_ROLE_SERVER ? 4000 : 0;
	o.want_rank = nd->want_rank;
	o.timeout_ms = nd->timeout_ms;
	o.heartbeat_ms = nd->hb_ms;
	o.events = &test_events;
	o.arg = nd;
	nd->rc = rps_ctl_join(&o, &nd->ctl);
	return nd->rc;
}

static void *join_thread(void *arg)
{
	node_join(arg);
	return NULL;
}

static void *barrier_thread(void *arg)
{
	struct node *nd = arg;

	nd->barrier_rc = rps_ctl_barrier(nd->ctl, nd->barrier_group, 5000);
	return NULL;
}

static void run_all(struct node **v, int n, void *(*fn)(void *))
{
	for (int i = 0; i < n; i++)
		assert_int_equal(pthread_create(&v[i]->th, NULL, fn, v[i]), 0);
	for (int i = 0; i < n; i++)
		pthread_join(v[i]->th, NULL);
}

static void barrier_all(struct node **v, int n, uint32_t group)
{
	for (int i = 0; i < n; i++) {
		v[i]->barrier_group = group;
		v[i]->barrier_rc = -1;
	}
	run_all(v, n, barrier_thread);
	for (int i = 0; i < n; i++)
		assert_int_equal(v[i]->barrier_rc, 0);
}

static void node_leave(struct node *nd)
{
	if (nd->ctl)
		rps_ctl_leave(nd->ctl);
	nd->ctl = NULL;
}

/* Every node has the same map; ranks are unique per role and match ids. */
static void check_maps(struct node **v, int n, int servers, int workers)
{
	struct rps_node ref[16], nodes[16];
	struct rps_map m0, m;
	int seen[2][16];

	memset(seen, 0, sizeof(seen));
	assert_int_equal(rps_ctl_map(v[0]->ctl, &m0, ref, 16), servers + workers);
	assert_int_equal(m0.num_servers, servers);
	assert_int_equal(m0.num_workers, workers);
	for (int i = 0; i < n; i++) {
		uint32_t id = rps_ctl_id(v[i]->ctl), rank = rps_ctl_rank(v[i]->ctl);

		assert_int_equal(rps_ctl_map(v[i]->ctl, &m, nodes, 16), servers + workers);
		assert_int_equal(m.epoch, m0.epoch);
		assert_memory_equal(nodes, ref,
				    sizeof(struct rps_node) * (size_t)(servers + workers));
		assert_int_equal(m.your_id, id);
		assert_int_equal(m.your_rank, rank);
		assert_true(id < (uint32_t)(servers + workers));
		assert_int_equal(nodes[id].role, v[i]->role);
		assert_int_equal(nodes[id].rank, rank);
		assert_int_equal(nodes[id].alive, 1);
		assert_int_equal(nodes[id].pid, (uint32_t)getpid());
		assert_true(rank < (uint32_t)(v[i]->role == RPS_ROLE_SERVER ? servers : workers));
		assert_int_equal(seen[v[i]->role - 1][rank], 0);
		seen[v[i]->role - 1][rank] = 1;
		if (v[i]->role == RPS_ROLE_SERVER) {
			assert_int_equal(nodes[id].port, 4000);
			assert_int_equal(id, rank);
		} else {
			assert_int_equal(id, (uint32_t)servers + rank);
		}
	}
}

/* The defaults and RDMAPS_* variables, for the test's own transports. */
static const struct rps_config *test_cfg(void)
{
	static struct rps_config cfg;
	static int done;

	if (!done) {
		assert_int_equal(rps_config_init(&cfg), 0);
		done = 1;
	}
	return &cfg;
}

/* STATUS over a raw ctl connection, as rdmaps-ctl does it. */
static int query_status(const char *addr, char *out, size_t len)
{
	struct rps_transport *tr;
	struct rps_tr_params tp;
	struct rps_conn *c;
	struct rps_frame_hdr h;
	struct rps_hello hello;
	char host[64], ack[64];
	size_t ack_len;
	uint16_t port;
	int rc = -ETIMEDOUT;

	if (rps_config_parse_hostport(addr, host, sizeof(host), &port))
		return -EINVAL;
	rps_tr_params_from_config(test_cfg(), &tp);
	tp.secret = SECRET;
	tp.max_msg = 1 << 20;
	tp.timeout_ms = 2000;
	if (rps_transport_create("tcp", &tp, &tr))
		return -ENOMEM;
	rps_proto_hello_init(&hello, RPS_ROLE_CTL, UINT32_MAX);
	if (rps_tr_connect(tr, host, port, &hello, ack, sizeof(ack), &ack_len, 2000, &c)) {
		rps_transport_destroy(tr);
		return -ECONNREFUSED;
	}
	rps_proto_hdr_init(&h, RPS_OP_STATUS, 0, 7);
	rps_tr_post_send(c, &h, NULL, 0, 0);
	for (int k = 0; k < 100 && rc == -ETIMEDOUT; k++) {
		struct rps_tr_event ev[4];
		int n = rps_tr_poll(tr, ev, 4, 20);

		for (int i = 0; i < n; i++) {
			if (ev[i].type == RPS_TR_EV_RECV) {
				if (ev[i].hdr.op == RPS_OP_STATUS && ev[i].hdr.req_id == 7) {
					size_t k2 = RPS_MIN(ev[i].data_len, len - 1);

					memcpy(out, ev[i].data, k2);
					out[k2] = '\0';
					rc = ev[i].hdr.status;
				}
				rps_tr_release(tr, ev[i].token);
			} else if (ev[i].type == RPS_TR_EV_CLOSED) {
				rc = -ECONNRESET;
			}
		}
	}
	rps_tr_close(c);
	rps_transport_destroy(tr);
	return rc;
}

/* ---- tests ---- */

/* 2 servers + 2 workers: one consistent map, unique ranks, barriers of both
 * groups, and the clean end: workers leave -> servers get SHUTDOWN ->
 * servers leave -> the scheduler returns 0. */
static void test_rendezvous_barrier_end(void **state)
{
	struct sched_run r;
	struct node nd[4], extra;
	struct node *all[4] = {&nd[0], &nd[1], &nd[2], &nd[3]};
	struct node *workers[2] = {&nd[2], &nd[3]};
	char text[4096];

	(void)state;
	sched_start(&r, 2, 2, 0, HB_TIMEOUT_MS);
	for (int i = 0; i < 4; i++)
		node_init(&nd[i], i < 2 ? RPS_ROLE_SERVER : RPS_ROLE_WORKER, r.addr);
	run_all(all, 4, join_thread);
	for (int i = 0; i < 4; i++)
		assert_int_equal(nd[i].rc, 0);
	check_maps(all, 4, 2, 2);

	barrier_all(all, 4, 1);
	barrier_all(workers, 2, 0);
	barrier_all(all, 4, 1);						/* barriers are reusable */
	assert_int_equal(rps_ctl_barrier(nd[0].ctl, 0, 1000), -EINVAL); /* servers not in group 0 */

	/* the cluster is complete: an extra server is refused, at once */
	node_init(&extra, RPS_ROLE_SERVER, r.addr);
	assert_int_equal(node_join(&extra), -EBUSY);

	/* heartbeats carry figures into STATUS */
	uint64_t counters[4] = {11, 22, 33, 44};
	rps_ctl_set_heartbeat(nd[2].ctl, 7, counters);
	sleep_ms(3 * HB_MS);
	assert_int_equal(query_status(r.addr, text, sizeof(text)), 0);
	assert_non_null(strstr(text, "running"));
	assert_non_null(strstr(text, "11 22 33 44"));
	assert_non_null(strstr(text, "server"));

	node_leave(&nd[2]);
	node_leave(&nd[3]);
	assert_true(wait_int(&nd[0].shutdown, 1, 2000));
	assert_true(wait_int(&nd[1].shutdown, 1, 2000));
	assert_int_equal(atomic_load(&nd[0].dead), 2); /* told that both workers left */
	assert_int_equal(rps_ctl_barrier(nd[0].ctl, 1, 1000), -EHOSTDOWN);
	assert_int_equal(rps_ctl_status(nd[0].ctl), -ESHUTDOWN);
	node_leave(&nd[0]);
	node_leave(&nd[1]);
	assert_int_equal(sched_finish(&r, 0, 3000), 0);
}

/* A worker that stops heartbeating is declared dead: the others get on_dead,
 * a barrier completes with the survivors, the silent node sees -EHOSTDOWN,
 * a new worker takes its rank (map update), STATUS shows it. */
static void test_dead_silent_node_and_rejoin(void **state)
{
	struct sched_run r;
	struct node nd[4], re;
	struct node *all[4] = {&nd[0], &nd[1], &nd[2], &nd[3]};
	struct node *live[3] = {&nd[0], &nd[1], &nd[2]};
	struct node *after[4] = {&nd[0], &nd[1], &nd[2], &re};
	struct rps_node nodes[8];
	char text[4096];
	uint32_t dead_id, dead_rank;

	(void)state;
	sched_start(&r, 2, 2, 0, HB_DEAD_TIMEOUT_MS);
	for (int i = 0; i < 4; i++)
		node_init(&nd[i], i < 2 ? RPS_ROLE_SERVER : RPS_ROLE_WORKER, r.addr);
	nd[3].hb_ms = 60000; /* one heartbeat at start, then silence */
	run_all(all, 4, join_thread);
	for (int i = 0; i < 4; i++)
		assert_int_equal(nd[i].rc, 0);
	dead_id = rps_ctl_id(nd[3].ctl);
	dead_rank = rps_ctl_rank(nd[3].ctl);

	for (int i = 0; i < 3; i++) {
		assert_true(wait_int(&nd[i].dead, 1, 5000));
		assert_int_equal(atomic_load(&nd[i].dead_id), (int)dead_id);
	}
	assert_int_equal(rps_ctl_map(nd[0].ctl, NULL, nodes, 8), 4);
	assert_int_equal(nodes[dead_id].alive, 0);
	assert_int_equal(nodes[0].alive, 1);
	/* the scheduler dropped the silent node's connection */
	for (int t = 0; t < 300 && rps_ctl_status(nd[3].ctl) != -EHOSTDOWN; t++)
		sleep_ms(10);
	assert_int_equal(rps_ctl_status(nd[3].ctl), -EHOSTDOWN);
	assert_int_equal(rps_ctl_barrier(nd[3].ctl, 1, 1000), -EHOSTDOWN);

	barrier_all(live, 3, 1);     /* shrinks: the dead node is not waited for */
	barrier_all(&live[2], 1, 0); /* group 0 = the one live worker */

	assert_int_equal(query_status(r.addr, text, sizeof(text)), 0);
	assert_non_null(strstr(text, "dead"));

	/* a replacement worker asks for the dead rank and gets it */
	node_init(&re, RPS_ROLE_WORKER, r.addr);
	re.want_rank = dead_rank;
	assert_int_equal(node_join(&re), 0);
	assert_int_equal(rps_ctl_rank(re.ctl), dead_rank);
	assert_int_equal(rps_ctl_id(re.ctl), dead_id);
	for (int i = 0; i < 3; i++)
		assert_true(wait_int(&nd[i].maps, 1, 2000));
	check_maps(after, 4, 2, 2);
	/* its barriers count from the job's first: #1 of group 1, which the job
	 * released before it joined, returns at once (a restarted program's
	 * start-up barrier); its next one is the others' next one */
	assert_int_equal(rps_ctl_barrier(re.ctl, 1, 1000), 0);
	barrier_all(after, 4, 1);

	/* stop: everyone is told to shut down */
	rps_sched_stop(r.s);
	for (int i = 0; i < 3; i++)
		assert_true(wait_int(&after[i]->shutdown, 1, 2000));
	assert_true(wait_int(&re.shutdown, 1, 2000));
	for (int i = 0; i < 4; i++)
		node_leave(after[i]);
	node_leave(&nd[3]);
	assert_int_equal(sched_finish(&r, 0, 3000), 0);
}

/* A node whose connection drops without SHUTDOWN is dead at once (long
 * heartbeat timeout: the close, not the silence, must be what counts). */
static void test_dead_on_close(void **state)
{
	struct sched_run r;
	struct node nd[2];
	struct node *all[2] = {&nd[0], &nd[1]};
	struct rps_transport *tr;
	struct rps_tr_params tp;
	struct rps_conn *c;
	struct rps_frame_hdr h;
	struct rps_hello hello;
	struct rps_register reg;
	struct iovec iov = {&reg, sizeof(reg)};
	char host[64], ack[64];
	size_t ack_len;
	uint16_t port;
	uint64_t t0;

	(void)state;
	sched_start(&r, 1, 2, 0, 10000);
	assert_int_equal(rps_config_parse_hostport(r.addr, host, sizeof(host), &port), 0);
	rps_tr_params_from_config(test_cfg(), &tp);
	tp.secret = SECRET;
	tp.max_msg = 1 << 20;
	tp.timeout_ms = 2000;
	assert_int_equal(rps_transport_create("tcp", &tp, &tr), 0);
	rps_proto_hello_init(&hello, RPS_ROLE_WORKER, UINT32_MAX);
	assert_int_equal(
	    rps_tr_connect(tr, host, port, &hello, ack, sizeof(ack), &ack_len, 2000, &c), 0);
	memset(&reg, 0, sizeof(reg));
	reg.role = RPS_ROLE_WORKER;
	reg.want_rank = UINT32_MAX;
	strcpy(reg.host, "raw");
	rps_proto_hdr_init(&h, RPS_OP_REGISTER, sizeof(reg), 1);
	assert_int_equal(rps_tr_post_send(c, &h, &iov, 1, 0), 0);

	node_init(&nd[0], RPS_ROLE_SERVER, r.addr);
	node_init(&nd[1], RPS_ROLE_WORKER, r.addr);
	run_all(all, 2, join_thread);
	assert_int_equal(nd[0].rc, 0);
	assert_int_equal(nd[1].rc, 0);

	/* the raw node got its map too (and gives every buffer back) */
	int got_map = 0;
	for (int k = 0; k < 100 && !got_map; k++) {
		struct rps_tr_event ev[8];
		int n = rps_tr_poll(tr, ev, 8, 20);

		for (int i = 0; i < n; i++) {
			if (ev[i].type != RPS_TR_EV_RECV)
				continue;
			got_map |= ev[i].hdr.op == RPS_OP_MAP;
			rps_tr_release(tr, ev[i].token);
		}
	}
	assert_true(got_map);

	t0 = rps_now_ns();
	rps_tr_close(c);
	rps_transport_destroy(tr);
	assert_true(wait_int(&nd[0].dead, 1, 2000));
	assert_true(wait_int(&nd[1].dead, 1, 2000));
	assert_true(rps_now_ns() - t0 < 2000000000ull);
	barrier_all(all, 2, 1);

	/* the last worker leaves: the job ends by itself */
	node_leave(&nd[1]);
	assert_true(wait_int(&nd[0].shutdown, 1, 2000));
	node_leave(&nd[0]);
	assert_int_equal(sched_finish(&r, 0, 3000), 0);
}

static void test_wrong_secret(void **state)
{
	struct sched_run r;
	struct node nd;
	uint64_t t0;

	(void)state;
	sched_start(&r, 1, 1, 0, HB_TIMEOUT_MS);
	node_init(&nd, RPS_ROLE_WORKER, r.addr);
	nd.secret = "not-the-secret";
	t0 = rps_now_ns();
	assert_int_equal(node_join(&nd), -EACCES);
	assert_true(rps_now_ns() - t0 < 2000000000ull); /* refused, not retried */
	assert_null(nd.ctl);
	assert_int_equal(sched_finish(&r, 1, 3000), 0);
}

/* Nodes may start first: they retry until the scheduler listens. */
static void test_join_before_scheduler(void **state)
{
	struct sched_run r;
	struct node nd[2];
	struct node *all[2] = {&nd[0], &nd[1]};
	char addr[64];
	uint16_t port = 0;

	(void)state;
	/* a port that is free now (outside the usual ephemeral range) */
	srand((unsigned)(getpid() ^ time(NULL)));
	for (int k = 0; k < 50 && !port; k++) {
		uint16_t p = (uint16_t)(20000 + rand() % 12000);

		if (sched_create(&r, 1, 1, p, HB_TIMEOUT_MS) == 0) {
			rps_sched_destroy(r.s);
			port = p;
		}
	}
	assert_int_not_equal(port, 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	for (int i = 0; i < 2; i++) {
		node_init(&nd[i], i ? RPS_ROLE_WORKER : RPS_ROLE_SERVER, addr);
		assert_int_equal(pthread_create(&nd[i].th, NULL, join_thread, &nd[i]), 0);
	}
	sleep_ms(500);
	sched_start(&r, 1, 1, port, HB_TIMEOUT_MS);
	for (int i = 0; i < 2; i++)
		pthread_join(nd[i].th, NULL);
	for (int i = 0; i < 2; i++)
		assert_int_equal(nd[i].rc, 0);
	check_maps(all, 2, 1, 1);
	node_leave(&nd[1]);
	assert_true(wait_int(&nd[0].shutdown, 1, 2000));
	node_leave(&nd[0]);
	assert_int_equal(sched_finish(&r, 0, 3000), 0);
}

/* No scheduler at all: -ECONNREFUSED after the timeout. An incomplete
 * cluster: -ETIMEDOUT (the scheduler's progress text is logged). */
static void test_timeouts(void **state)
{
	struct sched_run r;
	struct node nd;
	uint64_t t0;

	(void)state;
	sched_start(&r, 1, 2, 0, HB_TIMEOUT_MS);
	node_init(&nd, RPS_ROLE_WORKER, r.addr);
	nd.timeout_ms = 400;
	t0 = rps_now_ns();
	assert_int_equal(node_join(&nd), -ETIMEDOUT);
	assert_true(rps_now_ns() - t0 >= 380000000ull);
	assert_int_equal(sched_finish(&r, 1, 3000), 0);

	node_init(&nd, RPS_ROLE_WORKER, "127.0.0.1:1");
	nd.timeout_ms = 400;
	t0 = rps_now_ns();
	assert_int_equal(node_join(&nd), -ECONNREFUSED);
	assert_true(rps_now_ns() - t0 >= 300000000ull);
}

struct req_run {
	struct node *nd;
	struct rps_ctlreq r;
	int rc;
	pthread_t th;
};

static void *request_thread(void *arg)
{
	struct req_run *q = arg;

	q->rc = rps_ctl_request(q->nd->ctl, RPS_OP_CHECKPOINT, &q->r);
	return NULL;
}

/* A worker's CHECKPOINT through the scheduler to 2 servers: server 0
 * answers at once, server 1 when the test says (or never). */
static void test_ctl_requests(void **state)
{
	struct sched_run r;
	struct node nd[3];
	struct node *all[3] = {&nd[0], &nd[1], &nd[2]};
	struct req_run q = {.nd = &nd[2], .r = {.clock = 5, .flags = RPS_CTLREQ_CLOCK}};
	struct rps_ctl_opts o;
	FILE *null = fopen("/dev/null", "w");
	uint64_t t0;

	(void)state;
	assert_non_null(null);
	sched_start(&r, 2, 1, 0, HB_TIMEOUT_MS);
	node_init(&nd[0], RPS_ROLE_SERVER, r.addr);
	node_init(&nd[1], RPS_ROLE_SERVER, r.addr);
	node_init(&nd[2], RPS_ROLE_WORKER, r.addr);
	nd[0].answer_now = 1;
	run_all(all, 3, join_thread);
	for (int i = 0; i < 3; i++)
		assert_int_equal(nd[i].rc, 0);

	/* 1. both answer; meanwhile rdmaps-ctl's request is refused (-EBUSY) */
	q.r.timeout_ms = 3000;
	assert_int_equal(pthread_create(&q.th, NULL, request_thread, &q), 0);
	assert_true(wait_int(&nd[1].reqs, 1, 2000));
	assert_int_equal(nd[1].req_op, RPS_OP_CHECKPOINT);
	memset(&o, 0, sizeof(o));
	o.field_mask = RPS_CTL_OPT_SCHEDULER | RPS_CTL_OPT_SECRET | RPS_CTL_OPT_TIMEOUT_MS;
	snprintf(o.scheduler, sizeof(o.scheduler), "%s", r.addr);
	snprintf(o.secret, sizeof(o.secret), "%s", SECRET);
	o.timeout_ms = 2000;
	assert_int_equal(rps_ctl_checkpoint(&o, null), -EBUSY);
	assert_int_equal(answer(&nd[1], 0), 0);
	pthread_join(q.th, NULL);
	assert_int_equal(q.rc, 0);
	assert_int_equal(atomic_load(&nd[0].reqs), 1);

	/* 1b. rdmaps-ctl export: the servers answer at clocks 5 and 6 (BSP):
	 * asked again for clock 6, both answer at 6; the .npz holds key 1 as
	 * server 0's slice 0, then server 1's slice 1 */
	{
		char path[64];
		struct rps_npz_entry *e = NULL;
		size_t ne = 0;
		int fd;

		nd[0].export_clock = 5;
		nd[1].export_clock = 6;
		nd[1].answer_now = 1;
		snprintf(path, sizeof(path), "/tmp/rps-export-XXXXXX");
		fd = mkstemp(path);
		assert_true(fd >= 0);
		close(fd);
		assert_int_equal(rps_ctl_export(&o, path, null), 0);
		assert_true(nd[1].req.flags & RPS_CTLREQ_CLOCK);
		assert_int_equal(nd[1].req.clock, 6); /* the second request */
		assert_int_equal(atomic_load(&nd[1].reqs), 3);
		assert_int_equal(rps_npz_read(path, &e, &ne), 0);
		assert_int_equal(ne, 1);
		assert_string_equal(e[0].name, "1");
		assert_int_equal(e[0].nelems, 6);
		for (int i = 0; i < 6; i++)
			assert_true(e[0].data[i] == (float)(10 * (i / 3) + 1 + i % 3));
		rps_npz_free(e, ne);
		unlink(path);
		nd[1].answer_now = 0;
	}

	/* 2. server 1 stays silent: the scheduler gives up after the timeout */
	q.r.timeout_ms = 300;
	t0 = rps_now_ns();
	assert_int_equal(pthread_create(&q.th, NULL, request_thread, &q), 0);
	pthread_join(q.th, NULL);
	assert_int_equal(q.rc, -ETIMEDOUT);
	assert_true(rps_now_ns() - t0 >= 280000000ull);
	assert_true(rps_now_ns() - t0 < 3000000000ull);

	/* 3. server 1's failure is the request's */
	q.r.timeout_ms = 3000;
	assert_int_equal(pthread_create(&q.th, NULL, request_thread, &q), 0);
	assert_true(wait_int(&nd[1].reqs, 5, 2000));
	assert_int_equal(answer(&nd[1], -ENOSPC), 0);
	pthread_join(q.th, NULL);
	assert_int_equal(q.rc, -ENOSPC);

	/* 4. server 1 leaves while asked: at once, not after the timeout */
	assert_int_equal(pthread_create(&q.th, NULL, request_thread, &q), 0);
	assert_true(wait_int(&nd[1].reqs, 6, 2000));
	t0 = rps_now_ns();
	node_leave(&nd[1]);
	pthread_join(q.th, NULL);
	assert_int_equal(q.rc, -EHOSTDOWN);
	assert_true(rps_now_ns() - t0 < 2000000000ull);

	node_leave(&nd[2]);
	assert_true(wait_int(&nd[0].shutdown, 1, 2000));
	node_leave(&nd[0]);
	assert_int_equal(sched_finish(&r, 0, 3000), 0);
	fclose(null);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rendezvous_barrier_end),
	    cmocka_unit_test(test_dead_silent_node_and_rejoin),
	    cmocka_unit_test(test_dead_on_close),
	    cmocka_unit_test(test_wrong_secret),
	    cmocka_unit_test(test_join_before_scheduler),
	    cmocka_unit_test(test_timeouts),
	    cmocka_unit_test(test_ctl_requests),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
