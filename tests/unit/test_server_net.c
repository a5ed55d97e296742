/* The server's network side in-process: a real rps_server (TCP transport on
 * 127.0.0.1, no scheduler: rps_server_serve in a thread) and clients made
 * with the TCP transport. Also the options taken from the configuration. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "server/server_int.h"
#include "src/config.h"
#include "src/log.h"
#include "src/optim.h"
#include "src/proto.h"
#include "transport/transport.h"

#define SECRET	"net-secret"
#define WAIT_MS 5000

static struct rps_server *srv;
static pthread_t srv_th;
static uint16_t port;

static void *serve(void *arg)
{
	(void)arg;
	rps_server_serve(srv);
	return NULL;
}

/* ---- a client ---- */

struct client {
	struct rps_transport *t;
	struct rps_conn *c;
	uint8_t ack[RPS_TR_ACK_MAX];
	size_t ack_len;
	uint32_t next_id;
};

static struct rps_config client_cfg; /* the group set-up's environment */

static int client_open(struct client *cl, uint32_t rank, const char *secret)
{
	struct rps_tr_params p;
	struct rps_hello h;
	int rc;

	memset(cl, 0, sizeof(*cl));
	rps_tr_params_from_config(&client_cfg, &p);
	p.secret = secret;
	p.timeout_ms = WAIT_MS;
	rc = rps_transport_create("tcp", &p, &cl->t);
	assert_int_equal(rc, 0);
	rps_proto_hello_init(&h, RPS_ROLE_WORKER, rank);
	rc = rps_tr_connect(cl->t, "127.0.0.1", port, &h, cl->ack, sizeof(cl->ack), &cl->ack_len,
			    WAIT_MS, &cl->c);
	if (rc) {
		rps_transport_destroy(cl->t);
		cl->t = NULL;
	}
	cl->next_id = 1;
	return rc;
}

static void client_close(struct client *cl)
{
	if (cl->c)
		rps_tr_close(cl->c);
	/* a poll lets the transport free it */
	struct rps_tr_event ev[8];
	int n = rps_tr_poll(cl->t, ev, 8, 10);

	for (int i = 0; i < n; i++)
		if (ev[i].type == RPS_TR_EV_RECV)
			rps_tr_release(cl->t, ev[i].token);
	rps_transport_destroy(cl->t);
	memset(cl, 0, sizeof(*cl));
}

static uint32_t client_send(struct client *cl, uint8_t op, const void *fixed, size_t flen,
			    const void *data, size_t dlen)
{
	struct rps_frame_hdr h;
	struct iovec iov[2] = {{(void *)fixed, flen}, {(void *)data, dlen}};
	uint32_t id = cl->next_id++;

	rps_proto_hdr_init(&h, op, (uint32_t)(flen + dlen), id);
	assert_int_equal(rps_tr_post_send(cl->c, &h, iov, dlen ? 2 : 1, 0), 0);
	return id;
}

struct resp {
	struct rps_frame_hdr hdr;
	uint8_t fixed[64];
	float data[1024];
	size_t data_len;
	int closed;
};

/* Wait for the answer to req_id (or an ERROR / CLOSED). 0, or -ETIMEDOUT. */
static int client_wait(struct client *cl, uint32_t req_id, struct resp *r, int timeout_ms)
{
	struct timespec t0, t1;

	memset(r, 0, sizeof(*r));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct rps_tr_event ev[8];
		int n = rps_tr_poll(cl->t, ev, 8, 50);
		int found = 0;

		for (int i = 0; i < n; i++) {
			if (ev[i].type == RPS_TR_EV_CLOSED) {
				r->closed = 1;
				found = 1;
			} else if (ev[i].type == RPS_TR_EV_RECV) {
				if (!found &&
				    (ev[i].hdr.req_id == req_id || ev[i].hdr.op == RPS_OP_ERROR)) {
					int fl = rps_proto_fixed_len(ev[i].hdr.op);

					r->hdr = ev[i].hdr;
					if (fl > 0 && ev[i].fixed)
						memcpy(r->fixed, ev[i].fixed, (size_t)fl);
					r->data_len = ev[i].data_len;
					if (ev[i].data_len && ev[i].data_len <= sizeof(r->data))
						memcpy(r->data, ev[i].data, ev[i].data_len);
					found = 1;
				}
				rps_tr_release(cl->t, ev[i].token);
			}
		}
		if (found)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >
		    timeout_ms)
			return -ETIMEDOUT;
	}
}

static uint32_t declare_aux; /* hdr.aux of the last DECLARE_ACK: the slice's geometry */

static int declare(struct client *cl, uint64_t key, uint32_t shard, uint64_t nelems,
		   struct rps_declare_ack *ack_p)
{
	struct rps_declare d = {.key = key,
				.shard = shard,
				.nelems = nelems,
				.init_kind = RPS_INIT_CONST,
				.init_a = 1.0f};
	struct resp r;
	uint32_t id = client_send(cl, RPS_OP_DECLARE, &d, sizeof(d), NULL, 0);

	assert_int_equal(client_wait(cl, id, &r, WAIT_MS), 0);
	assert_int_equal(r.hdr.op, RPS_OP_DECLARE_ACK);
	declare_aux = r.hdr.aux;
	if (ack_p)
		memcpy(ack_p, r.fixed, sizeof(*ack_p));
	return r.hdr.status;
}

static uint32_t push(struct client *cl, uint64_t key, uint32_t shard, uint64_t off, uint32_t count,
		     uint32_t clock, const float *g)
{
	struct rps_push p = {
	    .key = key, .shard = shard, .offset = off, .count = count, .clock = clock};

	return client_send(cl, RPS_OP_PUSH, &p, sizeof(p), g, count * sizeof(float));
}

static int push_wait(struct client *cl, uint64_t key, uint32_t shard, uint64_t off, uint32_t count,
		     uint32_t clock, const float *g)
{
	struct resp r;
	uint32_t id = push(cl, key, shard, off, count, clock, g);

	assert_int_equal(client_wait(cl, id, &r, WAIT_MS), 0);
	assert_int_equal(r.hdr.op, RPS_OP_PUSH_ACK);
	return r.hdr.status;
}

static uint32_t pull(struct client *cl, uint64_t key, uint32_t shard, uint64_t off, uint32_t count,
		     uint32_t min_clock)
{
	struct rps_pull p = {
	    .key = key, .shard = shard, .offset = off, .count = count, .min_clock = min_clock};

	return client_send(cl, RPS_OP_PULL, &p, sizeof(p), NULL, 0);
}

static void clock_end(struct client *cl, uint32_t clock, uint32_t p0, uint32_t p1)
{
	struct rps_clock c = {.clock = clock, .num_shards = 2};
	uint32_t pushes[2] = {p0, p1};

	client_send(cl, RPS_OP_CLOCK, &c, sizeof(c), pushes, sizeof(pushes));
}

/* ---- set-up ---- */

static int group_setup(void **state)
{
	struct rps_server_opts o;

	(void)state;
	setenv("RDMAPS_NUM_WORKERS", "2", 1);
	setenv("RDMAPS_SHARDS", "2", 1);
	setenv("RDMAPS_SHARD_BYTES", "1M", 1);
	setenv("RDMAPS_CHUNK_BYTES", "256", 1);
	setenv("RDMAPS_CONSISTENCY", "bsp", 1);
	setenv("RDMAPS_OPTIMIZER", "sgd", 1);
	setenv("RDMAPS_LR", "0.5", 1);
	setenv("RDMAPS_SECRET", SECRET, 1);
	setenv("RDMAPS_HOST", "127.0.0.1", 1);
	setenv("RDMAPS_PORT", "0", 1);
	setenv("RDMAPS_MAX_MSG", "64K", 1);
	setenv("RDMAPS_RING_SIZE", "16", 1);
	setenv("RDMAPS_LOG_LEVEL", "warn", 1);
	rps_log_set_level(RPS_LOG_WARN);
	assert_int_equal(rps_config_init(&client_cfg), 0);
	rps_server_opts_init(&o);
	o.ncores = 1;
	o.cores[0] = 0;
	assert_int_equal(rps_server_create(&o, &srv), 0);
	port = rps_server_port(srv);
	assert_true(port > 0);
	assert_int_equal(pthread_create(&srv_th, NULL, serve, NULL), 0);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	rps_server_stop(srv);
	pthread_join(srv_th, NULL);
	rps_server_destroy(srv);
	return 0;
}

/* ---- tests ---- */

static void test_opts_from_config(void **state)
{
	struct rps_config cfg;
	struct rps_server_opts o, from;

	(void)state;
	assert_int_equal(rps_config_init(&cfg), 0);
	assert_int_equal(rps_config_set(&cfg, "optimizer", "adam"), 0);
	assert_int_equal(rps_config_set(&cfg, "lr", "0.001"), 0);
	assert_int_equal(rps_config_set(&cfg, "beta2", "0.99"), 0);
	assert_int_equal(rps_config_set(&cfg, "lr_schedule", "cosine"), 0);
	assert_int_equal(rps_config_set(&cfg, "lr_total", "1000"), 0);
	assert_int_equal(rps_config_set(&cfg, "consistency", "ssp"), 0);
	assert_int_equal(rps_config_set(&cfg, "staleness", "3"), 0);
	assert_int_equal(rps_config_set(&cfg, "init", "uniform:-1,2"), 0);
	assert_int_equal(rps_config_set(&cfg, "seed", "99"), 0);
	assert_int_equal(rps_config_set(&cfg, "priority", "magnitude"), 0);
	assert_int_equal(rps_config_set(&cfg, "update_cores", "2-3,5"), 0);
	assert_int_equal(rps_config_set(&cfg, "shards", "3"), 0);
	assert_int_equal(rps_config_set(&cfg, "ring_size", "128"), 0);
	rps_srv_opts_from_config(&o, &cfg);

	assert_int_equal(o.optim.kind, RPS_OPT_ADAM);
	assert_float_equal(o.optim.lr, 0.001f, 1e-9);
	assert_float_equal(o.optim.beta2, 0.99f, 1e-7);
	assert_int_equal(o.optim.schedule, RPS_LR_COSINE);
	assert_int_equal(o.optim.total_steps, 1000);
	assert_int_equal(o.consistency, RPS_SSP);
	assert_int_equal(o.staleness, 3);
	assert_int_equal(o.init.kind, RPS_INIT_UNIFORM);
	assert_true(o.init.a == -1.0f && o.init.b == 2.0f);
	assert_int_equal(o.init.seed, 99);
	assert_int_equal(o.priority, RPS_PRIO_MAGNITUDE);
	assert_int_equal(o.ncores, 3);
	assert_int_equal(o.cores[0], 2);
	assert_int_equal(o.cores[2], 5);
	assert_int_equal(o.shards, 3);
	assert_int_equal(o.ring_size, 128);
	assert_string_equal(o.secret, SECRET);
	assert_int_equal(o.port, 0);

	/* field_mask: only the members it names are taken from the caller */
	memset(&from, 0xff, sizeof(from));
	from.field_mask = RPS_SERVER_OPT_SHARDS | RPS_SERVER_OPT_HOST | RPS_SERVER_OPT_CONFIG;
	from.shards = 5;
	from.host = "10.0.0.1";
	rps_srv_opts_merge(&o, &from);
	assert_int_equal(o.shards, 5);
	assert_string_equal(o.host, "10.0.0.1");
	assert_int_equal(o.ring_size, 128);
	assert_int_equal(o.optim.kind, RPS_OPT_ADAM);
	assert_int_equal(o.consistency, RPS_SSP);
	assert_string_equal(o.secret, SECRET);
	assert_int_equal(o.ncores, 3);
	/* rps_server_opts_init: every member set, strings from the configuration at create */
	rps_server_opts_init(&o);
	assert_true(o.field_mask == RPS_SERVER_OPT_ALL);
	assert_null(o.host);
	assert_null(o.config);
	assert_int_equal(o.shards, 2); /* RDMAPS_SHARDS of the group set-up */
}

static void test_hello(void **state)
{
	struct client cl;
	const struct rps_hello_ack *a;
	const struct rps_shard_desc *d;

	(void)state;
	assert_int_equal(client_open(&cl, 1, SECRET), 0);
	assert_int_equal(cl.ack_len, sizeof(*a) + 2 * sizeof(*d));
	a = (const struct rps_hello_ack *)cl.ack;
	d = (const struct rps_shard_desc *)(a + 1);
	assert_int_equal(a->num_shards, 2);
	assert_int_equal(a->num_workers, 2);
	assert_int_equal(a->consistency, RPS_BSP);
	assert_int_equal(a->chunk_bytes, 256);
	assert_int_equal(a->max_msg, 64 * 1024);
	assert_int_equal(d[0].addr, 0); /* TCP: no one-sided reads */
	assert_int_equal(d[1].remote_key, 0);
	client_close(&cl);

	/* refused: rank beyond the workers, wrong secret */
	assert_int_not_equal(client_open(&cl, 2, SECRET), 0);
	assert_int_equal(client_open(&cl, 0, "wrong"), -EACCES);
}

static void test_bsp_round(void **state)
{
	struct client w0, w1;
	struct rps_declare_ack ack, ack2;
	struct resp r;
	float g0[10], g1[10];
	uint32_t id;

	(void)state;
	assert_int_equal(client_open(&w0, 0, SECRET), 0);
	assert_int_equal(client_open(&w1, 1, SECRET), 0);
	assert_int_equal(declare(&w0, 100, 1, 10, &ack), 0);
	assert_int_equal(ack.key, 100);
	assert_int_equal(ack.shard, 1);
	assert_int_equal(ack.nelems, 10);
	/* 40 bytes fit a 256-byte chunk: one compact chunk, 8-byte words */
	assert_int_equal(declare_aux, RPS_DECLARE_ACK_COMPACT | 40);
	assert_int_equal(ack.offset % 8, 0);
	assert_int_equal(declare(&w1, 100, 1, 10, &ack2), 0); /* idempotent */
	assert_int_equal(ack2.offset, ack.offset);
	assert_int_equal(declare_aux, RPS_DECLARE_ACK_COMPACT | 40);
	assert_int_equal(declare(&w1, 100, 1, 11, NULL), -EEXIST);
	assert_int_equal(declare_aux, 0);			   /* no geometry with an error */
	assert_int_equal(declare(&w1, 100, 7, 11, NULL), -EINVAL); /* no shard 7 */
	assert_int_equal(declare_aux, 0);
	/* 65 floats do not: chunks of 256 bytes, 64-byte lines */
	assert_int_equal(declare(&w1, 101, 1, 65, &ack2), 0);
	assert_int_equal(declare_aux, 256);
	assert_int_equal(ack2.offset % 64, 0);
	assert_true(ack2.offset >= ack.offset + 40 + 8 + 64);

	/* clock 0 is there: a pull at 0 answers at once, with the initial values */
	id = pull(&w0, 100, 1, 2, 5, 0);
	assert_int_equal(client_wait(&w0, id, &r, WAIT_MS), 0);
	assert_int_equal(r.hdr.op, RPS_OP_PULL_RESP);
	assert_int_equal(r.hdr.status, 0);
	assert_int_equal(r.hdr.aux, 0);
	assert_int_equal(r.data_len, 5 * sizeof(float));
	assert_int_equal(((struct rps_pull *)r.fixed)->offset, 2); /* fixed part echoed */
	for (int i = 0; i < 5; i++)
		assert_true(r.data[i] == 1.0f);

	for (int i = 0; i < 10; i++) {
		g0[i] = (float)i;
		g1[i] = 1.0f;
	}
	assert_int_equal(push_wait(&w0, 100, 1, 0, 10, 0, g0), 0);
	/* a pull at clock 1 waits for the barrier */
	id = pull(&w0, 100, 1, 0, 10, 1);
	assert_int_equal(client_wait(&w0, id, &r, 300), -ETIMEDOUT);
	assert_int_equal(push_wait(&w1, 100, 1, 0, 4, 0, g1), 0);
	assert_int_equal(push_wait(&w1, 100, 1, 4, 6, 0, g1 + 4), 0);
	clock_end(&w0, 0, 0, 1);
	assert_int_equal(client_wait(&w0, id, &r, 300), -ETIMEDOUT); /* w1 not done */
	clock_end(&w1, 0, 0, 2);
	assert_int_equal(client_wait(&w0, id, &r, WAIT_MS), 0);
	assert_int_equal(r.hdr.op, RPS_OP_PULL_RESP);
	assert_int_equal(r.hdr.status, 0);
	assert_int_equal(r.hdr.aux, 1);
	for (int i = 0; i < 10; i++)
		assert_float_equal(r.data[i], 1.0f - 0.5f * ((float)i + 1.0f), 1e-6);
	/* a pure clock wait */
	id = pull(&w1, 0, 0, 0, 0, 1);
	assert_int_equal(client_wait(&w1, id, &r, WAIT_MS), 0);
	assert_int_equal(r.hdr.status, 0);
	assert_int_equal(r.data_len, 0);
	assert_int_equal(r.hdr.aux, 1);
	client_close(&w0);
	client_close(&w1);
}

static void test_caller_errors(void **state)
{
	struct client cl;
	struct resp r;
	float g[4] = {9, 9, 9, 9};
	uint32_t id;

	(void)state;
	assert_int_equal(client_open(&cl, 0, SECRET), 0);
	assert_int_equal(declare(&cl, 200, 0, 4, NULL), 0);
	assert_int_equal(push_wait(&cl, 201, 0, 0, 4, 1, g), -ENOENT);
	assert_int_equal(push_wait(&cl, 200, 0, 2, 4, 1, g), -EINVAL);
	assert_int_equal(push_wait(&cl, 200, 5, 0, 4, 1, g), -EINVAL);
	id = pull(&cl, 201, 0, 0, 4, 0);
	assert_int_equal(client_wait(&cl, id, &r, WAIT_MS), 0);
	assert_int_equal(r.hdr.status, -ENOENT);
	id = pull(&cl, 200, 0, 1, 4, 0);
	assert_int_equal(client_wait(&cl, id, &r, WAIT_MS), 0);
	assert_int_equal(r.hdr.status, -EINVAL);
	/* the connection stays, nothing changed */
	id = pull(&cl, 200, 0, 0, 4, 0);
	assert_int_equal(client_wait(&cl, id, &r, WAIT_MS), 0);
	assert_int_equal(r.hdr.status, 0);
	for (int i = 0; i < 4; i++)
		assert_true(r.data[i] == 1.0f);
	client_close(&cl);
}

/* A DECLARE with an optimizer spec, sent raw: the status; the reason of a
 * refusal (text after the ack) into why. */
static int declare_spec(struct client *cl, uint64_t key, const struct rps_optim_wire *spec,
			char *why, size_t len)
{
	struct rps_declare d = {
	    .key = key, .nelems = 4, .init_kind = RPS_INIT_CONST, .init_a = 1.0f};
	struct iovec iov[2] = {{&d, sizeof(d)}, {(void *)spec, sizeof(*spec)}};
	struct rps_frame_hdr h;
	struct resp r;
	uint32_t id = cl->next_id++;

	rps_proto_hdr_init(&h, RPS_OP_DECLARE, sizeof(d) + sizeof(*spec), id);
	h.flags = RPS_DECLARE_FLAG_OPTIM;
	assert_int_equal(rps_tr_post_send(cl->c, &h, iov, 2, 0), 0);
	assert_int_equal(client_wait(cl, id, &r, WAIT_MS), 0);
	assert_false(r.closed);
	assert_int_equal(r.hdr.op, RPS_OP_DECLARE_ACK);
	snprintf(why, len, "%.*s", (int)r.data_len, (const char *)r.data);
	return r.hdr.status;
}

/* Malformed specs sent raw are refused with -EINVAL and a reason; the
 * connection stays. A key keeps its first spec: another is refused naming
 * the key and both, the same is fine. */
static void test_declare_spec_raw(void **state)
{
	struct rps_optim_opts o;
	struct rps_optim_wire wire, bad;
	struct client cl;
	char why[RPS_DECLARE_REASON_MAX + 1];

	(void)state;
	assert_int_equal(client_open(&cl, 0, SECRET), 0);
	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_ADAM;
	o.lr = 0.001f;
	rps_optim_wire_encode(&o, &wire);
	bad = wire;
	bad.lr = 0;
	assert_int_equal(declare_spec(&cl, 400, &bad, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "key 400 slice 0: bad optimizer spec: lr 0 must be > 0"));
	bad = wire;
	bad.kind = 17;
	assert_int_equal(declare_spec(&cl, 400, &bad, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "unknown optimizer kind 17"));
	/* nothing was created: the key is unknown */
	assert_int_equal(push_wait(&cl, 400, 0, 0, 4, 0, (const float[4]){0}), -ENOENT);

	assert_int_equal(declare_spec(&cl, 400, &wire, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_int_equal(declare_spec(&cl, 400, &wire, why, sizeof(why)), 0);
	o.kind = RPS_OPT_MOMENTUM;
	o.lr = 0.1f;
	rps_optim_wire_encode(&o, &bad);
	assert_int_equal(declare_spec(&cl, 400, &bad, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "key 400 slice 0: optimizer momentum lr 0.1 refused, the key "
				 "already has adam lr 0.001 (given earlier, by this or another "
				 "worker)");
	/* a plain DECLARE of it is fine (keeps the spec), the connection works */
	assert_int_equal(declare(&cl, 400, 0, 4, NULL), 0);
	client_close(&cl);
}

static void test_protocol_error_closes(void **state)
{
	struct client bad, good;
	struct rps_clock c = {.clock = 0, .num_shards = 3}; /* the server has 2 */
	uint32_t pushes[3] = {0, 0, 0};
	struct resp r;
	uint32_t id;

	(void)state;
	assert_int_equal(client_open(&bad, 0, SECRET), 0);
	assert_int_equal(client_open(&good, 1, SECRET), 0);
	/* a parked pull on the connection that goes away */
	id = pull(&bad, 0, 0, 0, 0, 50);
	client_send(&bad, RPS_OP_CLOCK, &c, sizeof(c), pushes, sizeof(pushes));
	assert_int_equal(client_wait(&bad, 0xffffffff, &r, WAIT_MS), 0);
	assert_true(r.hdr.op == RPS_OP_ERROR || r.closed);
	if (!r.closed) {
		assert_int_equal(client_wait(&bad, 0xffffffff, &r, WAIT_MS), 0);
		assert_true(r.closed);
	}
	(void)id;
	client_close(&bad);
	/* the server keeps serving the others */
	assert_int_equal(declare(&good, 300, 0, 3, NULL), 0);
	client_close(&good);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_opts_from_config), cmocka_unit_test(test_hello),
	    cmocka_unit_test(test_bsp_round),	     cmocka_unit_test(test_caller_errors),
	    cmocka_unit_test(test_declare_spec_raw), cmocka_unit_test(test_protocol_error_closes),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
