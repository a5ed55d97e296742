/* Wire protocol helpers: sizes, round trips, and every check rejecting what it must. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "src/auth.h"
#include "src/optim.h"
#include "src/proto.h"

static void test_fixed_lens(void **state)
{
	static const struct {
		uint8_t op;
		int len;
	} want[] = {
	    {RPS_OP_HELLO, 48},	      {RPS_OP_HELLO_ACK, 32},	{RPS_OP_DECLARE, 48},
	    {RPS_OP_DECLARE_ACK, 32}, {RPS_OP_PUSH, 48},	{RPS_OP_PUSH_ACK, 0},
	    {RPS_OP_PULL, 32},	      {RPS_OP_PULL_RESP, 32},	{RPS_OP_CLOCK, 8},
	    {RPS_OP_ERROR, 0},	      {RPS_OP_REGISTER, 80},	{RPS_OP_MAP, 24},
	    {RPS_OP_BARRIER, 0},      {RPS_OP_BARRIER_DONE, 0}, {RPS_OP_HEARTBEAT, 40},
	    {RPS_OP_NODE_DEAD, 80},   {RPS_OP_SHUTDOWN, 0},	{RPS_OP_STATUS, 0},
	    {RPS_OP_CHECKPOINT, 0},   {RPS_OP_EXPORT, 0},
	    {RPS_OP_SYNC, 8},	      {RPS_OP_ASSIGN, 48},
	    {RPS_OP_CHALLENGE, 64},   {RPS_OP_PROOF, 32},
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_int_equal(rps_proto_fixed_len(want[i].op), want[i].len);
		assert_string_not_equal(rps_proto_op_name(want[i].op), "UNKNOWN");
	}
	assert_int_equal(rps_proto_fixed_len(0), -1);
	/* 11 is SYNC, 12 ASSIGN, 13 CHALLENGE, 14 PROOF */
	assert_int_equal(rps_proto_fixed_len(15), -1);
	assert_int_equal(rps_proto_fixed_len(RPS_OP_MAX), -1);
	assert_int_equal(rps_proto_fixed_len(255), -1);
	assert_string_equal(rps_proto_op_name(RPS_OP_PUSH), "PUSH");
	assert_string_equal(rps_proto_op_name(200), "UNKNOWN");
}

/* Every op of enum rps_op has a descriptor with its own name, and nothing
 * else has one (the list is the enum, spelled out). */
static void test_every_op_has_descriptor(void **state)
{
#define OP(x) {RPS_OP_##x, #x}
	static const struct {
		uint8_t op;
		const char *name;
	} ops[] = {
	    OP(HELLO),	   OP(HELLO_ACK), OP(DECLARE),	 OP(DECLARE_ACK),  OP(PUSH),
	    OP(PUSH_ACK),  OP(PULL),	  OP(PULL_RESP), OP(CLOCK),	   OP(ERROR),
	    OP(SYNC),	   OP(REGISTER),  OP(MAP),	 OP(BARRIER),	   OP(BARRIER_DONE),
	    OP(HEARTBEAT), OP(NODE_DEAD), OP(SHUTDOWN),	 OP(STATUS),	   OP(CHECKPOINT),
	    OP(EXPORT), OP(ASSIGN), OP(REPORT), OP(CHALLENGE), OP(PROOF),
	    OP(RING_DATA), OP(RING_ABORT),
	    OP(TABLE_DECLARE), OP(TABLE_DECLARE_ACK), OP(ROWS_PULL), OP(ROWS_PULL_RESP),
	    OP(ROWS_PUSH), OP(ROWS_PUSH_ACK), OP(TABLE_MAP), OP(TABLE_MAP_RESP),
	    OP(REPL_FWD), OP(REPL_READY), OP(REPL_LAST), OP(REPL_MAP), OP(REPL_JOIN),
	    OP(REPL_COPY), OP(REPL_COPIED),
	    OP(PULL_LP), OP(PULL_LP_RESP), /* low-precision pulls */
	};
#undef OP
	size_t ndesc = 0;

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		const struct rps_op_desc *d = rps_proto_op(ops[i].op);

		assert_non_null(d);
		assert_string_equal(d->name, ops[i].name);
		assert_string_equal(rps_proto_op_name(ops[i].op), ops[i].name);
		assert_int_equal(rps_proto_fixed_len(ops[i].op), (int)d->fixed_len);
		assert_true(d->senders != 0); /* someone may send it */
		assert_true(d->max_len == 0 || d->max_len >= d->fixed_len);
		assert_true(d->has_data || d->max_len == 0);
		/* data ops are < 16, control ops from 16 on (src/proto.h); the
		 * feature ranges from 30 on are data ops */
		if (ops[i].op < 30)
			assert_int_equal(d->control, ops[i].op >= RPS_OP_REGISTER);
		else
			assert_int_equal(d->control, 0);
	}
	for (unsigned op = 0; op < 256; op++)
		ndesc += rps_proto_op((uint8_t)op) != NULL;
	assert_int_equal(ndesc, sizeof(ops) / sizeof(ops[0]));
	/* who sends what, for a few */
	assert_true(rps_proto_op(RPS_OP_PUSH)->senders == 1u << RPS_ROLE_WORKER);
	assert_true(rps_proto_op(RPS_OP_MAP)->senders == 1u << RPS_ROLE_SCHEDULER);
	assert_true(rps_proto_op(RPS_OP_ERROR)->senders & (1u << RPS_ROLE_SERVER));
}

/* RING_DATA: count against the length, the piece inside the tensor. */
static void test_ring_data_check(void **state)
{
	uint8_t buf[sizeof(struct rps_ring_data) + 4 * sizeof(float)];
	struct rps_ring_data d = { .seq = 1, .total = 10, .offset = 6, .count = 4, .phase = 1 };
	struct rps_frame_hdr h;
	const char *why = NULL;

	(void)state;
	rps_proto_hdr_init(&h, RPS_OP_RING_DATA, sizeof(buf), 0);
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &d, sizeof(d));
	assert_int_equal(rps_proto_payload_check(&h, buf, &why), 0);
	d.offset = 7; /* 7 + 4 > 10 */
	memcpy(buf, &d, sizeof(d));
	assert_int_equal(rps_proto_payload_check(&h, buf, &why), -EPROTO);
	assert_non_null(strstr(why, "outside"));
	d.offset = 6;
	d.count = 3; /* the length says 4 */
	memcpy(buf, &d, sizeof(d));
	assert_int_equal(rps_proto_payload_check(&h, buf, &why), -EPROTO);
	d.count = 4;
	d.phase = 2;
	memcpy(buf, &d, sizeof(d));
	assert_int_equal(rps_proto_payload_check(&h, buf, &why), -EPROTO);
	d.phase = 0;
	d.offset = UINT64_MAX - 1; /* no wrap-around */
	memcpy(buf, &d, sizeof(d));
	assert_int_equal(rps_proto_payload_check(&h, buf, &why), -EPROTO);
}

static void test_hdr_round_trip(void **state)
{
	struct rps_frame_hdr h, back;
	uint8_t wire[sizeof(h)];
	const char *why = NULL;

	rps_proto_hdr_init(&h, RPS_OP_PUSH, 48 + 4 * 10, 77);
	memcpy(wire, &h, sizeof(h));
	/* little-endian on the wire: "RDPS" */
	assert_memory_equal(wire, "RDPS", 4);
	assert_int_equal(wire[4], RPS_PROTO_VERSION);
	assert_int_equal(wire[5], RPS_OP_PUSH);
	memcpy(&back, wire, sizeof(back));
	assert_int_equal(back.len, 88);
	assert_int_equal(back.req_id, 77);
	assert_int_equal(back.status, 0);
	assert_int_equal(back.aux, 0);
	assert_int_equal(back.flags, 0);
	assert_int_equal(rps_proto_hdr_check(&back, 1 << 20, &why), 0);
}

static void test_hdr_rejects(void **state)
{
	struct rps_frame_hdr h;
	const char *why;

	rps_proto_hdr_init(&h, RPS_OP_PULL, 32, 1);
	h.magic = 0x41414141;
	why = NULL;
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), -EPROTO);
	assert_non_null(why);

	rps_proto_hdr_init(&h, RPS_OP_PULL, 32, 1);
	h.version = 2;
	why = NULL;
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), -EPROTO);
	assert_non_null(why);

	rps_proto_hdr_init(&h, 99, 0, 1);
	why = NULL;
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), -EPROTO);
	assert_non_null(why);
	rps_proto_hdr_init(&h, 13, 0, 1);
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), -EPROTO);

	/* len < fixed */
	rps_proto_hdr_init(&h, RPS_OP_PUSH, 47, 1);
	why = NULL;
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), -EPROTO);
	assert_non_null(why);

	/* len > max */
	rps_proto_hdr_init(&h, RPS_OP_PUSH, 48 + 4 * 1000, 1);
	why = NULL;
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), -EMSGSIZE);
	assert_non_null(why);
	assert_int_equal(rps_proto_hdr_check(&h, 48 + 4 * 1000, &why), 0);

	/* data on an op that has none */
	rps_proto_hdr_init(&h, RPS_OP_PULL, 36, 1);
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), -EPROTO);
	rps_proto_hdr_init(&h, RPS_OP_BARRIER, 1, 1);
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), -EPROTO);

	/* text ops take any length up to the limit */
	rps_proto_hdr_init(&h, RPS_OP_ERROR, 17, 1);
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), 0);
	rps_proto_hdr_init(&h, RPS_OP_STATUS, 0, 1);
	assert_int_equal(rps_proto_hdr_check(&h, 1024, &why), 0);
}

static void test_push_payload(void **state)
{
	struct rps_frame_hdr h;
	struct rps_push p, back;
	const char *why;

	memset(&p, 0, sizeof(p));
	p.key = 0x1122334455667788ull;
	p.slice = 3;
	p.shard = 2;
	p.offset = 100;
	p.count = 10;
	p.clock = 5;
	p.timestamp_ns = 123456789;
	p.norm = 1.5f;
	memcpy(&back, &p, sizeof(p));
	assert_int_equal(back.key, 0x1122334455667788ull);
	assert_true(back.norm == 1.5f);

	rps_proto_hdr_init(&h, RPS_OP_PUSH, 48 + 40, 1);
	assert_int_equal(rps_proto_hdr_check(&h, 1 << 20, &why), 0);
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), 0);

	/* count mismatch both ways */
	h.len = 48 + 36;
	why = NULL;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
	assert_non_null(why);
	h.len = 48 + 44;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
	/* a count whose 4 * count wraps 32 bits must not match */
	p.count = 0x40000000u + 10;
	h.len = 48 + 40;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
	/* shard out of range */
	p.count = 10;
	p.shard = RPS_MAX_SHARDS;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
	/* offset + count overflow */
	p.shard = 0;
	p.offset = UINT64_MAX - 5;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);

	/* ASSIGN carries the same payload and gets the same checks */
	p.offset = 100;
	rps_proto_hdr_init(&h, RPS_OP_ASSIGN, 48 + 40, 1);
	assert_int_equal(rps_proto_hdr_check(&h, 1 << 20, &why), 0);
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), 0);
	h.len = 48 + 36;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
	assert_true(rps_proto_op(RPS_OP_ASSIGN)->senders == 1u << RPS_ROLE_WORKER);
}

static void test_pull_payload(void **state)
{
	struct rps_frame_hdr h;
	struct rps_pull p;
	const char *why;

	memset(&p, 0, sizeof(p));
	p.count = 16;
	rps_proto_hdr_init(&h, RPS_OP_PULL, 32, 1);
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), 0);
	p.count = 0; /* pure clock wait */
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), 0);
	p.count = UINT32_MAX; /* the answer could never be a frame */
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);

	p.count = 16;
	rps_proto_hdr_init(&h, RPS_OP_PULL_RESP, 32 + 64, 1);
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), 0);
	h.len = 32 + 60;
	assert_int_equal(rps_proto_payload_check(&h, &p, &why), -EPROTO);
}

static void test_clock_payload(void **state)
{
	struct rps_frame_hdr h;
	struct rps_clock c = {.clock = 3, .num_shards = 4};
	const char *why;

	rps_proto_hdr_init(&h, RPS_OP_CLOCK, 8 + 16, 1);
	assert_int_equal(rps_proto_payload_check(&h, &c, &why), 0);
	h.len = 8 + 12;
	why = NULL;
	assert_int_equal(rps_proto_payload_check(&h, &c, &why), -EPROTO);
	assert_non_null(why);
	c.num_shards = RPS_MAX_SHARDS + 1;
	h.len = 8 + 4 * (RPS_MAX_SHARDS + 1);
	assert_int_equal(rps_proto_payload_check(&h, &c, &why), -EPROTO);
	c.num_shards = RPS_MAX_SHARDS;
	h.len = 8 + 4 * RPS_MAX_SHARDS;
	assert_int_equal(rps_proto_payload_check(&h, &c, &why), 0);
}

static void test_ack_map_payload(void **state)
{
	struct rps_frame_hdr h;
	struct rps_hello_ack a = {.num_shards = 3};
	struct rps_map m = {.num_nodes = 2};
	struct rps_declare d = {.nelems = 100, .shard = 1};
	struct rps_register r;
	struct rps_node n;
	const char *why;

	rps_proto_hdr_init(&h, RPS_OP_HELLO_ACK, 32 + 3 * 24, 0);
	assert_int_equal(rps_proto_payload_check(&h, &a, &why), 0);
	h.len = 32 + 2 * 24;
	assert_int_equal(rps_proto_payload_check(&h, &a, &why), -EPROTO);
	a.num_shards = RPS_MAX_SHARDS + 1;
	h.len = 32 + (RPS_MAX_SHARDS + 1) * 24;
	assert_int_equal(rps_proto_payload_check(&h, &a, &why), -EPROTO);

	rps_proto_hdr_init(&h, RPS_OP_MAP, 24 + 2 * 80, 0);
	assert_int_equal(rps_proto_payload_check(&h, &m, &why), 0);
	h.len = 24 + 80;
	assert_int_equal(rps_proto_payload_check(&h, &m, &why), -EPROTO);
	m.num_nodes = RPS_MAX_NODES + 1;
	h.len = 24 + (RPS_MAX_NODES + 1) * 80;
	assert_int_equal(rps_proto_payload_check(&h, &m, &why), -EPROTO);

	rps_proto_hdr_init(&h, RPS_OP_DECLARE, 48, 0);
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), 0);
	d.shard = RPS_MAX_SHARDS;
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), -EPROTO);
	d.shard = 0;
	d.nelems = UINT64_MAX;
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), -EPROTO);

	memset(&r, 'x', sizeof(r));
	r.role = RPS_ROLE_SERVER;
	rps_proto_hdr_init(&h, RPS_OP_REGISTER, 80, 0);
	assert_int_equal(rps_proto_payload_check(&h, &r, &why), -EPROTO); /* host unterminated */
	strcpy(r.host, "10.0.0.1");
	assert_int_equal(rps_proto_payload_check(&h, &r, &why), 0);
	r.role = 9;
	assert_int_equal(rps_proto_payload_check(&h, &r, &why), -EPROTO);

	memset(&n, 'y', sizeof(n));
	rps_proto_hdr_init(&h, RPS_OP_NODE_DEAD, 80, 0);
	assert_int_equal(rps_proto_payload_check(&h, &n, &why), -EPROTO);
	n.host[5] = 0;
	assert_int_equal(rps_proto_payload_check(&h, &n, &why), 0);
}

/* DECLARE with an optimizer spec (flag + 80 bytes), DECLARE_ACK with a reason. */
static void test_declare_optim(void **state)
{
	struct rps_frame_hdr h;
	struct rps_declare d;
	struct rps_declare_ack a;
	const char *why = NULL;

	(void)state;
	memset(&d, 0, sizeof(d));
	memset(&a, 0, sizeof(a));
	rps_proto_hdr_init(&h, RPS_OP_DECLARE, 48 + 80, 0);
	h.flags = RPS_DECLARE_FLAG_OPTIM;
	assert_int_equal(rps_proto_hdr_check(&h, 1 << 20, &why), 0);
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), 0);
	h.len = 48 + 79; /* short spec */
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), -EPROTO);
	h.len = 48; /* flag without the spec */
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), -EPROTO);
	h.flags = 0;
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), 0);
	h.len = 48 + 80; /* a spec without the flag */
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), -EPROTO);
	h.flags = RPS_DECLARE_FLAG_OPTIM | 0x8000; /* unknown flag */
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), -EPROTO);
	h.flags = RPS_DECLARE_FLAG_OPTIM;
	h.len = 48 + 80 + 8; /* beyond the op's maximum */
	assert_int_equal(rps_proto_payload_check(&h, &d, &why), -EPROTO);

	rps_proto_hdr_init(&h, RPS_OP_DECLARE_ACK, 32 + 10, 0);
	h.status = -EINVAL;
	assert_int_equal(rps_proto_payload_check(&h, &a, &why), 0);
	h.status = 0; /* a reason without an error */
	assert_int_equal(rps_proto_payload_check(&h, &a, &why), -EPROTO);
	h.status = -EINVAL;
	h.len = 32 + RPS_DECLARE_REASON_MAX + 1;
	assert_int_equal(rps_proto_payload_check(&h, &a, &why), -EPROTO);
	h.len = 32;
	h.status = 0;
	assert_int_equal(rps_proto_payload_check(&h, &a, &why), 0);
}

/* Every field survives the wire; malformed specs are refused with a reason. */
static void test_optim_wire(void **state)
{
	struct rps_optim_opts o, back;
	struct rps_optim_wire w, w2;
	char why[160];

	(void)state;
	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_ADAMW;
	o.lr = 0.003f;
	o.momentum = 0.5f;
	o.beta1 = 0.8f;
	o.beta2 = 0.99f;
	o.eps = 1e-6f;
	o.weight_decay = 0.01f;
	o.clip_norm = 5.0f;
	o.schedule = RPS_LR_LINEAR;
	o.step_size = 77;
	o.gamma = 0.25f;
	o.total_steps = 1000;
	o.lr_min = 0.0001f;
	o.staleness_lr = 1;
	o.warmup_steps = 50;
	rps_optim_wire_encode(&o, &w);
	assert_int_equal(rps_optim_wire_decode(&w, &back, why, sizeof(why)), 0);
	assert_true(rps_optim_opts_same(&o, &back));
	assert_int_equal(back.warmup_steps, 50);
	assert_true(back.lr_min == 0.0001f && back.clip_norm == 5.0f && back.staleness_lr == 1);
	rps_optim_wire_encode(&back, &w2);
	assert_memory_equal(&w, &w2, sizeof(w));
	/* little-endian, in order: kind first, warmup_steps at byte 64 */
	assert_int_equal(((const uint8_t *)&w)[0], RPS_OPT_ADAMW);
	assert_int_equal(((const uint8_t *)&w)[64], 50);

	memset(&back, 0x77, sizeof(back));
	w2 = w;
	w2.lr = 0;
	assert_int_equal(rps_optim_wire_decode(&w2, &back, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "lr 0 must be > 0"));
	assert_int_equal(((const uint8_t *)&back)[0], 0x77); /* untouched */
	w2 = w;
	w2.kind = 42;
	assert_int_equal(rps_optim_wire_decode(&w2, &back, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "unknown optimizer kind 42"));
	w2 = w;
	w2.kind = 0x80000000u;
	assert_int_equal(rps_optim_wire_decode(&w2, &back, why, sizeof(why)), -EINVAL);
	w2 = w;
	w2.schedule = 9;
	assert_int_equal(rps_optim_wire_decode(&w2, &back, why, sizeof(why)), -EINVAL);
	w2 = w;
	w2.warmup_steps = 1000; /* not below total_steps */
	assert_int_equal(rps_optim_wire_decode(&w2, &back, why, sizeof(why)), -EINVAL);
	w2 = w;
	w2.reserved = 1;
	assert_int_equal(rps_optim_wire_decode(&w2, &back, why, sizeof(why)), -EINVAL);
	w2 = w;
	w2.staleness_lr = 2;
	assert_int_equal(rps_optim_wire_decode(&w2, &back, why, sizeof(why)), -EINVAL);
	w2 = w;
	w2.beta2 = NAN;
	assert_int_equal(rps_optim_wire_decode(&w2, &back, why, sizeof(why)), -EINVAL);
}

static void test_hello(void **state)
{
	struct rps_hello h, back;
	const char *why;
	uint8_t zero[RPS_NONCE_LEN] = {0};

	(void)state;
	rps_proto_hello_init(&h, RPS_ROLE_WORKER, 7);
	assert_int_equal(h.magic, RPS_PROTO_MAGIC);
	assert_int_equal(h.version, RPS_PROTO_VERSION);
	assert_int_equal(h.role, RPS_ROLE_WORKER);
	assert_int_equal(h.rank, 7);
	assert_int_equal(h.channel, 0);
	assert_memory_equal(h.nonce, zero, RPS_NONCE_LEN); /* drawn by the transport */

	why = NULL;
	assert_int_equal(rps_proto_hello_decode(&h, sizeof(h), &back, &why), 0);
	assert_memory_equal(&back, &h, sizeof(h));
	assert_int_equal(rps_proto_hello_decode(&h, sizeof(h) - 1, &back, &why), -EPROTO);
	assert_int_equal(rps_proto_hello_decode(NULL, sizeof(h), &back, &why), -EPROTO);

	memcpy(&back, &h, sizeof(h));
	back.magic = 0x41414141;
	assert_int_equal(rps_proto_hello_decode(&back, sizeof(back), &back, &why), -EPROTO);
	memcpy(&back, &h, sizeof(h));
	back.version = 9;
	assert_int_equal(rps_proto_hello_decode(&back, sizeof(back), &back, &why), -EPROTO);
	memcpy(&back, &h, sizeof(h));
	back.role = 42;
	assert_int_equal(rps_proto_hello_decode(&back, sizeof(back), &back, &why), -EPROTO);
	memcpy(&back, &h, sizeof(h));
	back.flags = 1;
	assert_int_equal(rps_proto_hello_decode(&back, sizeof(back), &back, &why), -EPROTO);
	assert_non_null(why);
}

/* The challenge-response (src/auth.h): mutual, fresh, bound to the claim. */
static void test_auth(void **state)
{
	const char *sec = "s3cret";
	char longsec[RPS_SECRET_MAX + 1];
	struct rps_hello h, h2;
	struct rps_auth_challenge ch, ch2, refl;
	struct rps_auth_proof pf, pf2, bad;
	const char *why = NULL;

	(void)state;
	rps_proto_hello_init(&h, RPS_ROLE_WORKER, 3);
	assert_int_equal(rps_auth_nonce(&h), 0);
	h2 = h;
	assert_int_equal(rps_auth_nonce(&h2), 0);
	assert_memory_not_equal(h.nonce, h2.nonce, RPS_NONCE_LEN); /* fresh */

	/* the good path */
	assert_int_equal(rps_auth_challenge_make(sec, &h, &ch), 0);
	assert_int_equal(rps_auth_challenge_answer(sec, &h, &ch, &pf), 0);
	assert_int_equal(rps_auth_proof_check(sec, &h, &ch, &pf), 0);
	/* the secret is in neither message */
	assert_null(memmem(&ch, sizeof(ch), sec, strlen(sec)));
	assert_null(memmem(&pf, sizeof(pf), sec, strlen(sec)));

	/* a client with another secret refuses the server's challenge; a
	 * server with another secret refuses the client's proof */
	assert_int_equal(rps_auth_challenge_answer("other", &h, &ch, &bad), -EACCES);
	assert_int_equal(rps_auth_proof_check("other", &h, &ch, &pf), -EACCES);
	assert_int_equal(rps_auth_proof_check("", &h, &ch, &pf), -EACCES);

	/* replay: the same hello and proof against a fresh challenge */
	assert_int_equal(rps_auth_challenge_make(sec, &h, &ch2), 0);
	assert_memory_not_equal(ch.nonce, ch2.nonce, RPS_NONCE_LEN);
	assert_int_equal(rps_auth_proof_check(sec, &h, &ch2, &pf), -EACCES);

	/* another claim (rank, role, channel) with the same proof */
	h2 = h;
	h2.rank = 4;
	assert_int_equal(rps_auth_proof_check(sec, &h2, &ch, &pf), -EACCES);
	h2 = h;
	h2.role = RPS_ROLE_SERVER;
	assert_int_equal(rps_auth_proof_check(sec, &h2, &ch, &pf), -EACCES);
	h2 = h;
	h2.channel = 1;
	assert_int_equal(rps_auth_proof_check(sec, &h2, &ch, &pf), -EACCES);

	/* reflection: the server's own MAC is no proof, the client's no challenge */
	memcpy(bad.mac, ch.mac, sizeof(bad.mac));
	assert_int_equal(rps_auth_proof_check(sec, &h, &ch, &bad), -EACCES);
	refl = ch;
	memcpy(refl.mac, pf.mac, sizeof(refl.mac));
	assert_int_equal(rps_auth_challenge_answer(sec, &h, &refl, &pf2), -EACCES);

	/* a long secret (up to 255 characters) works, and all of it counts */
	memset(longsec, 'a', sizeof(longsec) - 1);
	longsec[sizeof(longsec) - 1] = 0;
	assert_int_equal(rps_auth_challenge_make(longsec, &h, &ch), 0);
	assert_int_equal(rps_auth_challenge_answer(longsec, &h, &ch, &pf), 0);
	longsec[RPS_SECRET_MAX - 1] = 'b';
	assert_int_equal(rps_auth_proof_check(longsec, &h, &ch, &pf), -EACCES);

	/* decoders */
	assert_int_equal(rps_auth_challenge_decode(&ch, sizeof(ch), &ch2, &why), 0);
	assert_int_equal(rps_auth_challenge_decode(&ch, sizeof(ch) - 1, &ch2, &why), -EPROTO);
	assert_int_equal(rps_auth_proof_decode(&pf, sizeof(pf), &pf2, &why), 0);
	assert_int_equal(rps_auth_proof_decode(&pf, sizeof(pf) + 1, &pf2, &why), -EPROTO);

	/* no secret: refused unless insecure; too long: refused */
	assert_int_equal(rps_auth_secret_ok("", 0), -EACCES);
	assert_int_equal(rps_auth_secret_ok(NULL, 0), -EACCES);
	assert_int_equal(rps_auth_secret_ok("", 1), 0);
	assert_int_equal(rps_auth_secret_ok("x", 0), 0);
}

/* A refused hello is logged with what it claimed, in words. */
static void test_claim_text(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(rps_proto_claim_text(RPS_ROLE_WORKER, UINT32_MAX, buf, sizeof(buf)),
			    "a worker asking for any rank");
	assert_string_equal(rps_proto_claim_text(RPS_ROLE_WORKER, 3, buf, sizeof(buf)),
			    "a worker claiming rank 3");
	assert_string_equal(rps_proto_claim_text(RPS_ROLE_SERVER, 0, buf, sizeof(buf)),
			    "a server claiming rank 0");
	assert_string_equal(rps_proto_claim_text(RPS_ROLE_SERVER, UINT32_MAX, buf, sizeof(buf)),
			    "a server asking for any rank");
	assert_string_equal(rps_proto_claim_text(RPS_ROLE_SCHEDULER, 0, buf, sizeof(buf)),
			    "the scheduler");
	assert_string_equal(rps_proto_claim_text(RPS_ROLE_CTL, UINT32_MAX, buf, sizeof(buf)),
			    "rdmaps-ctl");
	assert_string_equal(rps_proto_claim_text(9, 2, buf, sizeof(buf)),
			    "an unknown role 9 (rank 2)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_op_has_descriptor),
	    cmocka_unit_test(test_fixed_lens),	      cmocka_unit_test(test_hdr_round_trip),
	    cmocka_unit_test(test_ring_data_check),
	    cmocka_unit_test(test_hdr_rejects),	      cmocka_unit_test(test_push_payload),
	    cmocka_unit_test(test_pull_payload),      cmocka_unit_test(test_clock_payload),
	    cmocka_unit_test(test_ack_map_payload),   cmocka_unit_test(test_hello),
	    cmocka_unit_test(test_auth), cmocka_unit_test(test_declare_optim),
	    cmocka_unit_test(test_optim_wire),	      cmocka_unit_test(test_claim_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
