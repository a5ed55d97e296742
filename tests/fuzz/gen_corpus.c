/* The seed corpora of the fuzz targets, made with the real encoders:
 * tests/fuzz/corpus/<target>/<name>. Run by hand when a format changes
 * (scripts/fuzz.sh --seeds), and commit what changed:
 *
 *	build-fuzz/fuzz/fuzz_gen_corpus tests/fuzz/corpus
 *
 * Each file is small and valid (or, where noted, the one refusal worth a
 * seed); the fuzzers mutate from there. Deterministic: the same build writes
 * the same bytes, but for the .npz archive (its members carry their time). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/auth.h"
#include "src/ckpt.h"
#include "src/ckpt_int.h"
#include "src/codec.h"
#include "src/config.h"
#include "src/npz.h"
#include "src/optim.h"
#include "src/proto.h"
#include "tests/fuzz/fuzz_util.h"

static const char *root;

struct buf {
	uint8_t b[1 << 16];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > sizeof(b->b)) {
		fprintf(stderr, "gen_corpus: seed too large\n");
		exit(1);
	}
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void save(const char *target, const char *name, const void *p, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
		fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* A frame: header (req_id 1, status, aux, flags), then a and b. */
static void frame(struct buf *b, uint8_t op, uint16_t flags, int32_t status, uint32_t aux,
		  const void *p1, size_t n1, const void *p2, size_t n2)
{
	struct rps_frame_hdr h;

	rps_proto_hdr_init(&h, op, (uint32_t)(n1 + n2), 1);
	h.flags = flags;
	h.status = status;
	h.aux = aux;
	put(b, &h, sizeof(h));
	if (n1)
		put(b, p1, n1);
	if (n2)
		put(b, p2, n2);
}

/* ---- data-path frames ---- */

static const float vals[16] = {1, -2, 0.5f, 4, 0, 3, -1, 2, 1, 1, 1, 1, 0.25f, -0.25f, 8, 9};

static void f_declare(struct buf *b, uint64_t key, uint32_t shard, uint64_t nelems, int optim)
{
	struct rps_declare d = {.key = key, .slice = 0, .shard = shard, .nelems = nelems,
				.init_kind = RPS_INIT_CONST, .init_a = 1.0f, .seed = 7};
	struct rps_optim_opts o;
	struct rps_optim_wire w;

	if (!optim) {
		frame(b, RPS_OP_DECLARE, 0, 0, 0, &d, sizeof(d), NULL, 0);
		return;
	}
	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_ADAM;
	o.lr = 0.01f;
	rps_optim_wire_encode(&o, &w);
	frame(b, RPS_OP_DECLARE, RPS_DECLARE_FLAG_OPTIM, 0, 0, &d, sizeof(d), &w, sizeof(w));
}

static void f_push(struct buf *b, uint8_t op, uint64_t key, uint32_t shard, uint32_t clock,
		   uint32_t count)
{
	struct rps_push p = {.key = key, .shard = shard, .count = count, .clock = clock,
			     .norm = 1.0f};

	frame(b, op, 0, 0, 0, &p, sizeof(p), vals, count * sizeof(float));
}

/* A compressed PUSH of vals[0..count) (src/codec.h) */
static void f_cpush(struct buf *b, enum rps_codec kind, uint64_t key, uint32_t shard,
		    uint32_t clock, uint32_t count)
{
	struct rps_push p = {.key = key, .shard = shard, .count = count, .clock = clock,
			     .norm = 1.0f};
	struct rps_compress_opts o;
	unsigned char data[16 * 8 + 8];
	size_t len = 0;

	rps_compress_opts_kind(&o, kind);
	o.ratio = 0.25f;
	o.block = 8; /* signb: two blocks of 16 elements */
	o.error_feedback = 0;
	rps_compress_encode(&o, vals, count, NULL, data, &len);
	frame(b, RPS_OP_PUSH, (uint16_t)kind, 0, 0, &p, sizeof(p), data, len);
}

static void f_pull(struct buf *b, uint64_t key, uint32_t shard, uint32_t count,
		   uint32_t min_clock)
{
	struct rps_pull p = {.key = key, .shard = shard, .count = count, .min_clock = min_clock};

	frame(b, RPS_OP_PULL, 0, 0, 0, &p, sizeof(p), NULL, 0);
}

/* Low-precision pulls (server/lowprec.h): a DECLARE with the pull precision
 * prec, a PULL_LP of it */
static void f_declare_lp(struct buf *b, uint64_t key, uint32_t shard, uint64_t nelems,
			 uint32_t prec)
{
	struct rps_declare d = {.key = key, .slice = 0, .shard = shard, .nelems = nelems,
				.init_kind = RPS_INIT_CONST, .init_a = 1.0f / 3.0f, .seed = 7,
				.reserved = prec};

	frame(b, RPS_OP_DECLARE, RPS_DECLARE_FLAG_LOWPREC, 0, 0, &d, sizeof(d), NULL, 0);
}

static void f_pull_lp(struct buf *b, uint64_t key, uint32_t shard, uint64_t off, uint32_t count,
		      uint32_t min_clock, uint16_t prec)
{
	struct rps_pull p = {.key = key, .shard = shard, .offset = off, .count = count,
			     .min_clock = min_clock};

	frame(b, RPS_OP_PULL_LP, prec, 0, 0, &p, sizeof(p), NULL, 0);
}

static void f_clock(struct buf *b, uint32_t clock, uint32_t p0, uint32_t p1)
{
	struct rps_clock c = {.clock = clock, .num_shards = 2};
	uint32_t pushes[2] = {p0, p1};

	frame(b, RPS_OP_CLOCK, 0, 0, 0, &c, sizeof(c), pushes, sizeof(pushes));
}

/* sparse tables (ops 30-37): a declaration, pulls (with slots), a push
 * with a duplicate id, a chunk map request */
static void f_table(struct buf *b, uint32_t table, uint32_t shard, uint32_t dim)
{
	struct rps_table_decl d = {.table = table, .shard = shard, .dim = dim, .init = 1,
				   .init_scale = 0.5f, .seed = 7, .capacity_hint = 100};
	struct rps_optim_opts o;
	struct rps_optim_wire w;

	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_ADAM;
	rps_optim_wire_encode(&o, &w);
	frame(b, RPS_OP_TABLE_DECLARE, 0, 0, 0, &d, sizeof(d), &w, sizeof(w));
}

static const uint64_t row_ids[4] = {7, 1ull << 63, 7, 123456789};

static void f_rows(struct buf *b, uint8_t op, uint32_t table, uint32_t shard, uint32_t dim,
		   uint32_t count, uint32_t clock, uint32_t flags)
{
	struct rps_rows r = {.table = table, .shard = shard, .count = count, .dim = dim,
			     .clock = clock, .flags = flags};
	uint8_t tail[4 * 8 + 4 * 4 * sizeof(float)];
	size_t n = (size_t)count * 8;

	memcpy(tail, row_ids, n);
	if (op == RPS_OP_ROWS_PUSH) {
		memcpy(tail + n, vals, (size_t)count * dim * sizeof(float));
		n += (size_t)count * dim * sizeof(float);
	}
	frame(b, op, 0, 0, 0, &r, sizeof(r), tail, n);
}

/* ---- control frames ---- */

static void f_register(struct buf *b, uint8_t role, uint16_t port)
{
	struct rps_register r = {.role = role, .port = port, .want_rank = UINT32_MAX, .pid = 42};

	snprintf(r.host, sizeof(r.host), "127.0.0.1");
	frame(b, RPS_OP_REGISTER, 0, 0, 0, &r, sizeof(r), NULL, 0);
}

static void f_heartbeat(struct buf *b, int server)
{
	struct rps_heartbeat hb = {.id = 0, .clock = 3, .counters = {10, 20, 300, 400}};
	struct {
		struct rps_heartbeat_srv t;
		struct rps_hb_shard s[2];
	} tail = {{.num_shards = 2, .ckpt_age_ms = -1, .ckpts = 1}, {{1, 3}, {0, 3}}};

	frame(b, RPS_OP_HEARTBEAT, 0, 0, 0, &hb, sizeof(hb), server ? &tail : NULL,
	      server ? sizeof(tail) : 0);
}

static void f_ctlreq(struct buf *b, uint8_t op, uint32_t flags, uint32_t clock)
{
	struct rps_ctlreq r = {.clock = clock, .flags = flags, .timeout_ms = 500};

	frame(b, op, 0, 0, RPS_CTLREQ_REQ, &r, sizeof(r), NULL, 0);
}

/* A server's RESULT for request id 1 (the first a new scheduler sends). */
static void f_result(struct buf *b, uint8_t op, int32_t status)
{
	struct {
		struct rps_ctlres r;
		struct rps_ctlres_shard s[1];
	} res;
	struct rps_frame_hdr h;

	memset(&res, 0, sizeof(res));
	res.r.num_shards = 1;
	res.r.status = status;
	if (status)
		snprintf(res.r.why, sizeof(res.r.why), "disk full");
	res.s[0].clock = 3;
	res.s[0].nslices = 1;
	snprintf(res.s[0].text, sizeof(res.s[0].text), "/tmp/ckpt/server0-shard0-clock3.ckpt");
	rps_proto_hdr_init(&h, op, sizeof(res), 1);
	h.aux = RPS_CTLREQ_RESULT;
	put(b, &h, sizeof(h));
	put(b, &res, sizeof(res));
}

static void f_export_data(struct buf *b)
{
	struct rps_export_part part = {.key = 5, .slice_elems = 4, .count = 4, .clock = 3};
	struct rps_frame_hdr h;

	rps_proto_hdr_init(&h, RPS_OP_EXPORT, sizeof(part) + 4 * sizeof(float), 1);
	h.aux = RPS_CTLREQ_DATA;
	put(b, &h, sizeof(h));
	put(b, &part, sizeof(part));
	put(b, vals, 4 * sizeof(float));
}

/* ---- targets ---- */

static void gen_frame(void)
{
	static const struct {
		const char *name;
		uint8_t op;
	} simple[] = {
	    {"push_ack", RPS_OP_PUSH_ACK}, {"barrier", RPS_OP_BARRIER},
	    {"barrier_done", RPS_OP_BARRIER_DONE}, {"shutdown", RPS_OP_SHUTDOWN},
	    {"status", RPS_OP_STATUS},
	};
	struct buf b;

	for (size_t i = 0; i < sizeof(simple) / sizeof(simple[0]); i++) {
		b.n = 0;
		frame(&b, simple[i].op, 0, 0, 0, NULL, 0, NULL, 0);
		save("frame", simple[i].name, b.b, b.n);
	}
	b.n = 0;
	f_table(&b, 1, 0, 8);
	save("frame", "table_declare", b.b, b.n);
	b.n = 0;
	f_rows(&b, RPS_OP_ROWS_PUSH, 1, 0, 4, 4, 0, 0);
	save("frame", "rows_push", b.b, b.n);
	b.n = 0;
	f_rows(&b, RPS_OP_ROWS_PULL, 1, 0, 4, 4, 0, RPS_ROWS_FLAG_SLOTS);
	save("frame", "rows_pull", b.b, b.n);
	{
		struct rps_hello h;

		struct rps_auth_challenge ch;
		struct rps_auth_proof pr;

		b.n = 0;
		fuzz_auth_hello(&h);
		frame(&b, RPS_OP_HELLO, 0, 0, 0, &h, sizeof(h), NULL, 0);
		save("frame", "hello", b.b, b.n);
		fuzz_auth_challenge("s3cret", &h, &ch);
		b.n = 0;
		frame(&b, RPS_OP_CHALLENGE, 0, 0, 0, &ch, sizeof(ch), NULL, 0);
		save("frame", "challenge", b.b, b.n);
		rps_auth_mac("s3cret", 'C', &h, ch.nonce, pr.mac);
		b.n = 0;
		frame(&b, RPS_OP_PROOF, 0, 0, 0, &pr, sizeof(pr), NULL, 0);
		save("frame", "proof", b.b, b.n);
	}
	{
		struct rps_hello_ack a = {.num_shards = 2, .num_workers = 2, .chunk_bytes = 256,
					  .max_msg = 65536};
		struct rps_shard_desc d[2] = {{.size = 1 << 20}, {.size = 1 << 20}};

		b.n = 0;
		frame(&b, RPS_OP_HELLO_ACK, 0, 0, 0, &a, sizeof(a), d, sizeof(d));
		save("frame", "hello_ack", b.b, b.n);
	}
	b.n = 0;
	f_declare(&b, 1, 0, 16, 0);
	save("frame", "declare", b.b, b.n);
	b.n = 0;
	f_declare(&b, 1, 1, 16, 1);
	save("frame", "declare_optim", b.b, b.n);
	{
		struct rps_declare_ack a = {.key = 1, .nelems = 16};
		static const char why[] = "key 1 slice 0: declared with another optimizer";

		b.n = 0;
		frame(&b, RPS_OP_DECLARE_ACK, 0, -EINVAL, rps_proto_declare_ack_aux(256, 1), &a,
		      sizeof(a), why, sizeof(why) - 1);
		save("frame", "declare_ack_refused", b.b, b.n);
	}
	b.n = 0;
	f_push(&b, RPS_OP_PUSH, 1, 0, 0, 4);
	save("frame", "push", b.b, b.n);
	for (int k = RPS_CODEC_FP16; k < RPS_CODEC_COUNT; k++) {
		char name[32];

		b.n = 0;
		f_cpush(&b, (enum rps_codec)k, 1, 0, 0, 16);
		snprintf(name, sizeof(name), "push_%s", rps_compress_name((enum rps_codec)k));
		save("frame", name, b.b, b.n);
	}
	b.n = 0;
	f_push(&b, RPS_OP_ASSIGN, 1, 0, 0, 16);
	save("frame", "assign", b.b, b.n);
	b.n = 0;
	f_pull(&b, 1, 0, 16, 1);
	save("frame", "pull", b.b, b.n);
	{
		struct rps_pull p = {.key = 1, .count = 4};

		b.n = 0;
		frame(&b, RPS_OP_PULL_RESP, 0, 0, 0, &p, sizeof(p), vals, 4 * sizeof(float));
		save("frame", "pull_resp", b.b, b.n);
	}
	b.n = 0;
	f_declare_lp(&b, 1, 0, 16, 2);
	save("frame", "declare_lp", b.b, b.n);
	b.n = 0;
	f_pull_lp(&b, 1, 0, 3, 11, 1, 2);
	save("frame", "pull_lp", b.b, b.n);
	{
		struct rps_pull p = {.key = 1, .count = 4};
		uint16_t h[4] = {0x3f80, 0xc000, 0x3f00, 0x4080}; /* bf16 1, -2, 0.5, 4 */

		b.n = 0;
		frame(&b, RPS_OP_PULL_LP_RESP, 0, 0, 0, &p, sizeof(p), h, sizeof(h));
		save("frame", "pull_lp_resp", b.b, b.n);
	}
	b.n = 0;
	f_clock(&b, 0, 1, 0);
	save("frame", "clock", b.b, b.n);
	{
		/* ring all-reduce (worker/ring*.c) */
		struct rps_ring_data d = {.seq = 1, .total = 10, .offset = 6, .keysum = 7,
					  .count = 4, .phase = 1, .step = 0, .nkeys = 2};
		static const char why[] = "lost worker rank 2 (left ring neighbour)";

		b.n = 0;
		frame(&b, RPS_OP_RING_DATA, 0, 0, 0, &d, sizeof(d), vals, 4 * sizeof(float));
		save("frame", "ring_data", b.b, b.n);
		d.count = 0;
		b.n = 0;
		frame(&b, RPS_OP_RING_ABORT, 0, -EHOSTDOWN, 0, &d, sizeof(d), why, sizeof(why) - 1);
		save("frame", "ring_abort", b.b, b.n);
	}
	{
		static const char why[] = "giving up: timed out";

		b.n = 0;
		frame(&b, RPS_OP_ERROR, 0, -ETIMEDOUT, 0, why, sizeof(why) - 1, NULL, 0);
		save("frame", "error", b.b, b.n);
	}
	{
		struct rps_sync y = {.clock = 3};

		b.n = 0;
		frame(&b, RPS_OP_SYNC, 0, 0, 0, &y, sizeof(y), NULL, 0);
		save("frame", "sync", b.b, b.n);
	}
	b.n = 0;
	f_register(&b, RPS_ROLE_SERVER, 5000);
	save("frame", "register", b.b, b.n);
	{
		struct rps_map m = {.your_id = 0, .num_servers = 1, .num_workers = 1,
				    .num_nodes = 2, .epoch = 1};
		struct rps_node n[2] = {{.id = 0, .role = RPS_ROLE_SERVER, .alive = 1, .port = 5000},
					{.id = 1, .role = RPS_ROLE_WORKER, .alive = 1}};

		snprintf(n[0].host, sizeof(n[0].host), "127.0.0.1");
		snprintf(n[1].host, sizeof(n[1].host), "127.0.0.1");
		b.n = 0;
		frame(&b, RPS_OP_MAP, 0, 0, 0, &m, sizeof(m), n, sizeof(n));
		save("frame", "map", b.b, b.n);
		b.n = 0;
		frame(&b, RPS_OP_NODE_DEAD, 0, 0, 0, &n[1], sizeof(n[1]), NULL, 0);
		save("frame", "node_dead", b.b, b.n);
	}
	b.n = 0;
	f_heartbeat(&b, 1);
	save("frame", "heartbeat_server", b.b, b.n);
	b.n = 0;
	f_ctlreq(&b, RPS_OP_CHECKPOINT, 0, 0);
	save("frame", "checkpoint_req", b.b, b.n);
	b.n = 0;
	f_ctlreq(&b, RPS_OP_EXPORT, RPS_CTLREQ_CLOCK, 4);
	save("frame", "export_req", b.b, b.n);
	b.n = 0;
	f_result(&b, RPS_OP_CHECKPOINT, 0);
	save("frame", "checkpoint_result", b.b, b.n);
	b.n = 0;
	f_export_data(&b);
	save("frame", "export_data", b.b, b.n);
}

static void gen_hello(void)
{
	/* [decoder][secret index] + the payload (fuzz_hello.c's decoders and
	 * secrets: 0 "", 1 "s3cret", 2 32 bytes, 3 longer, 4 the longest) */
	static const char *const secrets[] = {
	    "", "s3cret", "0123456789abcdef0123456789abcdef",
	    "a secret longer than thirty-two bytes, folded with SHA-256"};
	struct buf b;
	char name[32];

	/* hellos: each role, a rank, any rank, a channel; fresh-looking nonces */
	for (int i = 0; i < 4; i++) {
		struct rps_hello h;

		b.n = 0;
		put8(&b, 0);
		put8(&b, (uint8_t)i);
		rps_proto_hello_init(&h, (uint8_t)i, i == 2 ? UINT32_MAX : 1);
		h.channel = (uint32_t)i;
		for (int k = 0; k < RPS_NONCE_LEN; k++)
			h.nonce[k] = (uint8_t)(17 * k + i);
		put(&b, &h, sizeof(h));
		snprintf(name, sizeof(name), "hello_role%d", i);
		save("hello", name, b.b, b.n);
	}
	/* challenges to fuzz_auth_hello(): right for each secret, then one of
	 * another secret; proofs to fuzz_auth_challenge(): the same */
	for (int i = 0; i < 4; i++) {
		struct rps_hello h;
		struct rps_auth_challenge ch;
		struct rps_auth_proof pr;

		fuzz_auth_hello(&h);
		fuzz_auth_challenge(secrets[i], &h, &ch);
		b.n = 0;
		put8(&b, 1);
		put8(&b, (uint8_t)i);
		put(&b, &ch, sizeof(ch));
		snprintf(name, sizeof(name), "challenge_secret%d", i);
		save("hello", name, b.b, b.n);
		b.b[1] = (uint8_t)((i + 1) % 4);
		snprintf(name, sizeof(name), "challenge_wrong%d", i);
		save("hello", name, b.b, b.n);
		rps_auth_mac(secrets[i], 'C', &h, ch.nonce, pr.mac);
		b.n = 0;
		put8(&b, 2);
		put8(&b, (uint8_t)i);
		put(&b, &pr, sizeof(pr));
		snprintf(name, sizeof(name), "proof_secret%d", i);
		save("hello", name, b.b, b.n);
		b.b[1] = (uint8_t)((i + 1) % 4);
		snprintf(name, sizeof(name), "proof_wrong%d", i);
		save("hello", name, b.b, b.n);
	}
	/* a reflected mac_s as the proof */
	{
		struct rps_hello h;
		struct rps_auth_challenge ch;

		fuzz_auth_hello(&h);
		fuzz_auth_challenge("s3cret", &h, &ch);
		b.n = 0;
		put8(&b, 2);
		put8(&b, 1);
		put(&b, ch.mac, sizeof(ch.mac));
		save("hello", "proof_reflected", b.b, b.n);
	}
}

/* A hello as a client sends it, with a nonce of its own (fuzz_auth_hello's). */
static void f_hello(struct buf *b, uint8_t role, uint32_t rank, uint32_t channel)
{
	struct rps_hello h;

	fuzz_auth_hello(&h);
	h.role = role;
	h.rank = rank;
	h.channel = channel;
	frame(b, RPS_OP_HELLO, 0, 0, 0, &h, sizeof(h), NULL, 0);
}

/* A PROOF frame of len bytes (32: the right length) that cannot be right:
 * the fuzzer does not know the listener's nonce. */
static void f_proof(struct buf *b, uint32_t len)
{
	uint8_t mac[64];

	memset(mac, 0x5a, sizeof(mac));
	frame(b, RPS_OP_PROOF, 0, 0, 0, mac, len, NULL, 0);
}

/* A segment of a stream target: header byte, 16-bit length, bytes. */
static void seg(struct buf *out, uint8_t head, const struct buf *in)
{
	put8(out, head);
	put8(out, (uint8_t)(in->n & 0xff));
	put8(out, (uint8_t)(in->n >> 8));
	put(out, in->b, in->n);
}

static void gen_server(void)
{
	static struct buf b, w0, w1;

	/* one worker: declare, push, clock, pull */
	w0.n = 0;
	f_declare(&w0, 1, 0, 16, 0);
	f_push(&w0, RPS_OP_PUSH, 1, 0, 0, 16);
	f_clock(&w0, 0, 1, 0);
	f_pull(&w0, 1, 0, 16, 0);
	b.n = 0;
	seg(&b, 0, &w0);
	save("server", "declare_push_clock_pull", b.b, b.n);
	/* compressed pushes of every codec (src/codec.h), then a pull */
	w0.n = 0;
	f_declare(&w0, 1, 0, 16, 0);
	for (int k = RPS_CODEC_FP16; k < RPS_CODEC_COUNT; k++)
		f_cpush(&w0, (enum rps_codec)k, 1, 0, 0, 16);
	f_clock(&w0, 0, RPS_CODEC_COUNT - 1, 0);
	f_pull(&w0, 1, 0, 16, 0);
	b.n = 0;
	seg(&b, 0, &w0);
	save("server", "compressed_pushes", b.b, b.n);
	/* low-precision pulls: a bf16 copy, pushed, pulled whole and from an
	 * odd offset, an fp16 pull of it refused */
	w0.n = 0;
	f_declare_lp(&w0, 1, 0, 16, 2);
	f_push(&w0, RPS_OP_PUSH, 1, 0, 0, 16);
	f_clock(&w0, 0, 1, 0);
	f_pull_lp(&w0, 1, 0, 0, 16, 1, 2);
	f_pull_lp(&w0, 1, 0, 5, 9, 1, 2);
	f_pull_lp(&w0, 1, 0, 0, 16, 1, 1);
	b.n = 0;
	seg(&b, 0, &w0);
	save("server", "lowprec_pulls", b.b, b.n);
	/* a table: declared, rows pushed (a duplicate id), pulled with slots,
	 * its chunk map asked for, then the next clock */
	w0.n = 0;
	f_table(&w0, 3, 0, 4);
	f_rows(&w0, RPS_OP_ROWS_PUSH, 3, 0, 4, 4, 0, 0);
	f_clock(&w0, 0, 1, 0);
	f_rows(&w0, RPS_OP_ROWS_PULL, 3, 0, 4, 4, 1, RPS_ROWS_FLAG_SLOTS);
	{
		struct rps_table_map m = {.table = 3, .shard = 0};

		frame(&w0, RPS_OP_TABLE_MAP, 0, 0, 0, &m, sizeof(m), NULL, 0);
	}
	b.n = 0;
	seg(&b, 0, &w0);
	save("server", "table_push_pull_map", b.b, b.n);
	/* a key with its own optimizer on shard 1, assigned, then pulled */
	w0.n = 0;
	f_declare(&w0, 2, 1, 8, 1);
	f_push(&w0, RPS_OP_ASSIGN, 2, 1, 0, 8);
	f_pull(&w0, 2, 1, 8, 0);
	b.n = 0;
	seg(&b, 1, &w0);
	save("server", "declare_optim_assign", b.b, b.n);
	/* two workers through two BSP clocks */
	w0.n = 0;
	w1.n = 0;
	f_declare(&w0, 3, 0, 4, 0);
	f_declare(&w1, 3, 0, 4, 0);
	for (uint32_t c = 0; c < 2; c++) {
		f_push(&w0, RPS_OP_PUSH, 3, 0, c, 4);
		f_clock(&w0, c, 1, 0);
		f_push(&w1, RPS_OP_PUSH, 3, 0, c, 4);
		f_clock(&w1, c, 1, 0);
	}
	f_pull(&w0, 3, 0, 4, 2);
	f_pull(&w1, 3, 0, 4, 2);
	b.n = 0;
	seg(&b, 0, &w0);
	seg(&b, 1, &w1);
	save("server", "two_workers_bsp", b.b, b.n);
	/* a worker that rejoined: sync, then a pull that waits (parked) */
	w0.n = 0;
	{
		struct rps_sync y = {.clock = 5};

		frame(&w0, RPS_OP_SYNC, 0, 0, 0, &y, sizeof(y), NULL, 0);
	}
	f_declare(&w0, 4, 0, 4, 0);
	f_pull(&w0, 4, 0, 4, 9);
	b.n = 0;
	seg(&b, 1, &w0);
	save("server", "sync_parked_pull", b.b, b.n);
	/* no handshake by the harness (head 0x20): the hello is in the bytes, a
	 * channel of its own, then a pull */
	w0.n = 0;
	f_hello(&w0, RPS_ROLE_WORKER, 1, 1);
	f_proof(&w0, 32);
	f_declare(&w0, 6, 1, 4, 0);
	f_pull(&w0, 6, 1, 4, 0);
	b.n = 0;
	seg(&b, 0x20, &w0);
	save("server", "raw_hello", b.b, b.n);
	/* a real hello and the server's CHALLENGE by the harness (head 0x10),
	 * then the proof phase from the bytes: a proof that cannot be right, one
	 * of the wrong length, a client's refusal (an empty ERROR), a frame that
	 * is not a proof, a second hello */
	w0.n = 0;
	f_proof(&w0, 32);
	f_declare(&w0, 6, 1, 4, 0);
	b.n = 0;
	seg(&b, 0x10, &w0);
	save("server", "proof_wrong", b.b, b.n);
	w0.n = 0;
	f_proof(&w0, 16);
	b.n = 0;
	seg(&b, 0x11, &w0);
	save("server", "proof_short", b.b, b.n);
	w0.n = 0;
	frame(&w0, RPS_OP_ERROR, 0, -EACCES, 0, NULL, 0, NULL, 0);
	b.n = 0;
	seg(&b, 0x10, &w0);
	save("server", "proof_refused", b.b, b.n);
	w0.n = 0;
	f_declare(&w0, 6, 1, 4, 0);
	b.n = 0;
	seg(&b, 0x11, &w0);
	save("server", "proof_missing", b.b, b.n);
	w0.n = 0;
	f_hello(&w0, RPS_ROLE_WORKER, 0, 0);
	b.n = 0;
	seg(&b, 0x10, &w0);
	save("server", "proof_second_hello", b.b, b.n);
	/* an ERROR from the worker */
	w0.n = 0;
	{
		static const char why[] = "worker gives up\n\x1b[31m";

		frame(&w0, RPS_OP_ERROR, 0, -EIO, 0, why, sizeof(why) - 1, NULL, 0);
	}
	b.n = 0;
	seg(&b, 0, &w0);
	save("server", "error", b.b, b.n);
}

static void gen_sched(void)
{
	static struct buf b, s, w, c, more;

	/* a server and a worker: the job forms; heartbeats, a barrier, leave */
	s.n = 0;
	w.n = 0;
	f_register(&s, RPS_ROLE_SERVER, 5000);
	f_register(&w, RPS_ROLE_WORKER, 0);
	b.n = 0;
	/* both hellos claim any rank, as their REGISTERs do (a hello proving
	 * rank 0 and a REGISTER for any rank is refused: no job, no job end) */
	seg(&b, 1 | 0x80, &s);
	seg(&b, 2 | 0x80, &w);
	s.n = 0;
	f_heartbeat(&s, 1);
	frame(&s, RPS_OP_BARRIER, 0, 0, 1, NULL, 0, NULL, 0);
	seg(&b, 0x40 | 0, &s);
	w.n = 0;
	f_heartbeat(&w, 0);
	frame(&w, RPS_OP_BARRIER, 0, 0, 1, NULL, 0, NULL, 0);
	frame(&w, RPS_OP_SHUTDOWN, 0, 0, 0, NULL, 0, NULL, 0);
	seg(&b, 0x40 | 1, &w);
	save("sched", "job_barrier_leave", b.b, b.n);
	/* rdmaps-ctl's own hello (head 0x20: sent as bytes), then STATUS */
	c.n = 0;
	f_hello(&c, RPS_ROLE_CTL, UINT32_MAX, 0);
	f_proof(&c, 32);
	frame(&c, RPS_OP_STATUS, 0, 0, 0, NULL, 0, NULL, 0);
	b.n = 0;
	seg(&b, 0x20 | 3, &c);
	save("sched", "raw_hello_status", b.b, b.n);
	/* the harness's hello and the scheduler's CHALLENGE (head 0x10), then
	 * the proof phase from the bytes: a server's wrong proof, rdmaps-ctl's
	 * proof of the wrong length, a worker that sends REGISTER instead */
	s.n = 0;
	f_proof(&s, 32);
	f_register(&s, RPS_ROLE_SERVER, 5000);
	b.n = 0;
	seg(&b, 0x10 | 1, &s);
	save("sched", "proof_wrong", b.b, b.n);
	c.n = 0;
	f_proof(&c, 40);
	b.n = 0;
	seg(&b, 0x10 | 3 | 0x80, &c);
	save("sched", "proof_long", b.b, b.n);
	w.n = 0;
	f_register(&w, RPS_ROLE_WORKER, 0);
	b.n = 0;
	seg(&b, 0x10 | 2 | 0x80, &w);
	save("sched", "proof_missing", b.b, b.n);
	/* rdmaps-ctl asks for the status */
	c.n = 0;
	frame(&c, RPS_OP_STATUS, 0, 0, 0, NULL, 0, NULL, 0);
	b.n = 0;
	seg(&b, 3, &c);
	save("sched", "ctl_status", b.b, b.n);
	/* a job, then rdmaps-ctl asks for a checkpoint and the server answers */
	s.n = 0;
	w.n = 0;
	c.n = 0;
	more.n = 0;
	f_register(&s, RPS_ROLE_SERVER, 5000);
	f_register(&w, RPS_ROLE_WORKER, 0);
	f_ctlreq(&c, RPS_OP_CHECKPOINT, 0, 0);
	f_result(&more, RPS_OP_CHECKPOINT, 0);
	b.n = 0;
	seg(&b, 1, &s);
	seg(&b, 2, &w);
	seg(&b, 3, &c);
	seg(&b, 0x40 | 0, &more);
	save("sched", "ctl_checkpoint", b.b, b.n);
	/* the same with an export: data, then a failed result */
	c.n = 0;
	more.n = 0;
	f_ctlreq(&c, RPS_OP_EXPORT, 0, 0);
	f_export_data(&more);
	f_result(&more, RPS_OP_EXPORT, -ENOSPC);
	b.n = 0;
	seg(&b, 1, &s);
	seg(&b, 2, &w);
	seg(&b, 3, &c);
	seg(&b, 0x40 | 0, &more);
	save("sched", "ctl_export", b.b, b.n);
	/* a worker asks for a checkpoint before the job formed */
	w.n = 0;
	f_register(&w, RPS_ROLE_WORKER, 0);
	f_ctlreq(&w, RPS_OP_CHECKPOINT, RPS_CTLREQ_CLOCK, 2);
	b.n = 0;
	seg(&b, 2, &w);
	save("sched", "worker_checkpoint_early", b.b, b.n);
}

/* The scheduler's answers to the control clients: [mode] + frames. */
static void gen_ctl(void)
{
	static struct buf b;
	struct rps_frame_hdr h;

	/* 0: status */
	b.n = 0;
	put8(&b, 0);
	{
		static const char text[] = "job running: 1 server(s), 1 worker(s)\nnode 0 server ...\n";

		rps_proto_hdr_init(&h, RPS_OP_STATUS, sizeof(text) - 1, 1);
		put(&b, &h, sizeof(h));
		put(&b, text, sizeof(text) - 1);
	}
	save("ctl", "status", b.b, b.n);
	/* 1: checkpoint: a result, then DONE */
	b.n = 0;
	put8(&b, 1);
	f_result(&b, RPS_OP_CHECKPOINT, 0);
	frame(&b, RPS_OP_CHECKPOINT, 0, 0, RPS_CTLREQ_DONE, NULL, 0, NULL, 0);
	save("ctl", "checkpoint", b.b, b.n);
	/* 1: a refusal: busy, with a reason */
	b.n = 0;
	put8(&b, 1);
	{
		static const char why[] = "another checkpoint or export is running";

		frame(&b, RPS_OP_CHECKPOINT, 0, -EBUSY, RPS_CTLREQ_DONE, why, sizeof(why) - 1,
		      NULL, 0);
	}
	save("ctl", "checkpoint_busy", b.b, b.n);
	/* 2: export: a slice in one piece, a result, DONE */
	b.n = 0;
	put8(&b, 2);
	f_export_data(&b);
	{
		struct {
			struct rps_ctlres r;
			struct rps_ctlres_shard s[1];
		} res;

		memset(&res, 0, sizeof(res));
		res.r.num_shards = 1;
		res.r.consistency = RPS_BSP;
		res.s[0].clock = 3;
		res.s[0].nslices = 1;
		res.s[0].nelems = 4;
		frame(&b, RPS_OP_EXPORT, 0, 0, RPS_CTLREQ_RESULT, &res, sizeof(res), NULL, 0);
	}
	frame(&b, RPS_OP_EXPORT, 0, 0, RPS_CTLREQ_DONE, NULL, 0, NULL, 0);
	save("ctl", "export", b.b, b.n);
	/* 3: a node joins: the map, then a barrier, a dead node, an error */
	b.n = 0;
	put8(&b, 3);
	{
		struct rps_map m = {.your_id = 1, .your_rank = 0, .num_servers = 1, .num_workers = 1,
				    .num_nodes = 2, .epoch = 1};
		struct rps_node n[2] = {{.id = 0, .role = RPS_ROLE_SERVER, .alive = 1, .port = 5000},
					{.id = 1, .role = RPS_ROLE_WORKER, .alive = 1}};
		static const char why[] = "scheduler going away";

		snprintf(n[0].host, sizeof(n[0].host), "127.0.0.1");
		snprintf(n[1].host, sizeof(n[1].host), "127.0.0.1");
		frame(&b, RPS_OP_MAP, 0, 0, 0, &m, sizeof(m), n, sizeof(n));
		frame(&b, RPS_OP_BARRIER_DONE, 0, 0, 1, NULL, 0, NULL, 0);
		n[0].alive = 0;
		frame(&b, RPS_OP_NODE_DEAD, 0, 0, 0, &n[0], sizeof(n[0]), NULL, 0);
		frame(&b, RPS_OP_ERROR, 0, -EPROTO, 0, why, sizeof(why) - 1, NULL, 0);
		frame(&b, RPS_OP_SHUTDOWN, 0, 0, 0, NULL, 0, NULL, 0);
	}
	save("ctl", "join_map", b.b, b.n);
}

/* A server's answers to a worker's pieces (fuzz_worker.c): req_id 0
 * DECLARE, 1 PULL, 2 PUSH. */
static void gen_worker(void)
{
	static struct buf b;
	struct rps_declare_ack a = {.key = 5, .nelems = 16, .offset = 4096};
	struct rps_pull p = {.key = 5, .count = 4};
	struct rps_frame_hdr h;

	b.n = 0;
	rps_proto_hdr_init(&h, RPS_OP_DECLARE_ACK, sizeof(a), 0);
	h.aux = rps_proto_declare_ack_aux(64, 1);
	put(&b, &h, sizeof(h));
	put(&b, &a, sizeof(a));
	rps_proto_hdr_init(&h, RPS_OP_PULL_RESP, sizeof(p) + 4 * sizeof(float), 1);
	h.aux = 1; /* the shard's clock */
	put(&b, &h, sizeof(h));
	put(&b, &p, sizeof(p));
	put(&b, vals, 4 * sizeof(float));
	rps_proto_hdr_init(&h, RPS_OP_PUSH_ACK, 0, 2);
	h.aux = 8; /* credits */
	put(&b, &h, sizeof(h));
	save("worker", "answers", b.b, b.n);
	/* a refused declare (a reason follows), an error for the pull */
	b.n = 0;
	{
		static const char why[] = "key 5 slice 0: declared with another optimizer\n";

		rps_proto_hdr_init(&h, RPS_OP_DECLARE_ACK, sizeof(a) + sizeof(why) - 1, 0);
		h.status = -EINVAL;
		put(&b, &h, sizeof(h));
		put(&b, &a, sizeof(a));
		put(&b, why, sizeof(why) - 1);
	}
	{
		static const char why[] = "shard 0: out of memory";

		rps_proto_hdr_init(&h, RPS_OP_ERROR, sizeof(why) - 1, 1);
		h.status = -ENOMEM;
		put(&b, &h, sizeof(h));
		put(&b, why, sizeof(why) - 1);
	}
	save("worker", "refusals", b.b, b.n);
	/* a chunked slice's geometry, an older server's aux 0 */
	b.n = 0;
	rps_proto_hdr_init(&h, RPS_OP_DECLARE_ACK, sizeof(a), 0);
	h.aux = rps_proto_declare_ack_aux(4096, 0);
	put(&b, &h, sizeof(h));
	put(&b, &a, sizeof(a));
	save("worker", "declare_chunked", b.b, b.n);
}

static void gen_http(void)
{
	static const struct {
		const char *name, *req;
	} reqs[] = {
	    {"get_metrics", "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
	    {"head_metrics", "HEAD /metrics HTTP/1.0\r\n\r\n"},
	    {"get_query", "GET /metrics?x=1&y HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n"},
	    {"not_found", "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"},
	    {"post", "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"},
	    {"chunked",
	     "PUT /metrics HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
	    {"http09", "GET /metrics\r\n\r\n"},
	    {"keepalive_two",
	     "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"},
	};

	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++)
		save("http", reqs[i].name, reqs[i].req, strlen(reqs[i].req));
}

/* The index of setting name in rps_config_table. */
static uint8_t entry_index(const char *name)
{
	for (size_t i = 0; rps_config_table[i].name; i++)
		if (!strcmp(rps_config_table[i].name, name))
			return (uint8_t)i;
	fprintf(stderr, "gen_corpus: no setting %s\n", name);
	exit(1);
}

static void gen_config(void)
{
	/* mode 0: [0][entry index][value]; others: [mode][text] */
	static const struct {
		const char *name;
		uint8_t mode;
		const char *entry, *text;
	} seeds[] = {
	    {"size", 0, "shard_bytes", "64KiB"},
	    {"size_hex", 0, "chunk_bytes", "0x1000"},
	    {"int", 0, "timeout_ms", "250"},
	    {"double", 0, "lr", "0.001"},
	    {"enum", 0, "consistency", "bsp"},
	    {"enum_priority", 0, "priority", "Magnitude"},
	    {"hostport_value", 0, "scheduler", "127.0.0.1:9090"},
	    {"secret", 0, "secret", "s3cret"},
	    {"cores_value", 0, "update_cores", "0-1"},
	    {"init_value", 0, "init", "normal:0,0.1"},
	    {"string_quotes", 0, "checkpoint_dir", "\"\""}, /* shown as an empty one is */
	    {"flags", 1, NULL, "--port=5000\0--shards\0" "2\0--ring-size=64K\0--\0rest\0"},
	    {"cores", 2, NULL, "0,2-3"},
	    {"hostport", 3, NULL, "node-1.example:65535"},
	    {"init", 4, NULL, "uniform:-1,2"},
	    {"name", 5, NULL, "shard-bytes"},
	};
	struct buf b;

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		size_t n = strlen(seeds[i].text);

		if (seeds[i].mode == 1) /* NUL-separated: up to the double NUL */
			for (n = 0; seeds[i].text[n] || seeds[i].text[n + 1]; n++)
				;
		b.n = 0;
		put8(&b, seeds[i].mode);
		if (seeds[i].mode == 0)
			put8(&b, entry_index(seeds[i].entry));
		put(&b, seeds[i].text, n);
		save("config", seeds[i].name, b.b, b.n);
	}
}

static void read_file(const char *path, struct buf *b)
{
	FILE *f = fopen(path, "rb");

	if (!f) {
		fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	b->n = fread(b->b, 1, sizeof(b->b), f);
	fclose(f);
}

static void gen_ckpt(const char *tmp)
{
	static struct buf b, file;
	struct rps_ckpt_writer *w;
	struct rps_ckpt_info info;
	struct rps_optim_opts o;
	float state[2][4] = {{0.1f, 0.2f, 0.3f, 0.4f}, {1, 1, 1, 1}};
	struct rps_ckpt_slice s1 = {.key = 7, .kind = RPS_OPT_SGD, .nelems = 4, .params = vals};
	struct rps_ckpt_slice s2 = {.key = 9, .slice = 1, .kind = RPS_OPT_ADAM, .nelems = 4,
				    .step = 3, .nstate = 2, .params = vals,
				    .state = {state[0], state[1]}};

	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_ADAM;
	o.lr = 0.01f;
	s2.optim = &o;
	if (rps_ckpt_writer_open(tmp, 1, 0, 2, 3, &w) || rps_ckpt_writer_add(w, &s1) ||
	    rps_ckpt_writer_add(w, &s2) || rps_ckpt_writer_commit(w, 0, &info)) {
		fprintf(stderr, "gen_corpus: cannot write a checkpoint in %s\n", tmp);
		exit(1);
	}
	read_file(info.path, &file);
	unlink(info.path);
	/* created_ns: zero, for a deterministic seed; then its checksum again */
	{
		struct rps_ckpt_hdr h;

		memcpy(&h, file.b, sizeof(h));
		h.created_ns = 0;
		h.hdr_crc = rps_crc32c(0, &h, CKPT_HDR_CRC_OFF);
		memcpy(file.b, &h, sizeof(h));
	}
	/* mode 0: as it is; 7: checksums fixed, read with the callback */
	b.n = 0;
	put8(&b, 0);
	put(&b, file.b, file.n);
	save("ckpt", "two_slices", b.b, b.n);
	b.n = 0;
	put8(&b, 7);
	put(&b, file.b, file.n);
	save("ckpt", "two_slices_read", b.b, b.n);
	b.n = 0;
	put8(&b, 8);
	put(&b, "server1-shard0-clock3.ckpt", strlen("server1-shard0-clock3.ckpt"));
	save("ckpt", "name", b.b, b.n);
}

static void gen_npz(const char *tmp)
{
	static struct buf b, file;
	float w[6] = {1, 2, 3, 4, 5, 6}, bias[2] = {0.5f, -0.5f}, scalar = 3;
	struct rps_npz_entry e[3];
	char path[512];

	memset(e, 0, sizeof(e));
	strcpy(e[0].name, "fc.weight");
	e[0].ndim = 2;
	e[0].shape[0] = 2;
	e[0].shape[1] = 3;
	e[0].nelems = 6;
	e[0].data = w;
	strcpy(e[1].name, "fc.bias");
	e[1].ndim = 1;
	e[1].shape[0] = 2;
	e[1].nelems = 2;
	e[1].data = bias;
	strcpy(e[2].name, "scale");
	e[2].ndim = 0;
	e[2].nelems = 1;
	e[2].data = &scalar;
	snprintf(path, sizeof(path), "%s/model.npz", tmp);
	if (rps_npz_write(path, e, 3)) {
		fprintf(stderr, "gen_corpus: cannot write %s\n", path);
		exit(1);
	}
	read_file(path, &file);
	unlink(path);
	b.n = 0;
	put8(&b, 0);
	put(&b, file.b, file.n);
	save("npz", "model", b.b, b.n);
}

/* .npy images: what numpy writes (version 1.0 and 2.0 headers), and the
 * npz target's member list of them. */
static void gen_npy(void)
{
	static const struct {
		const char *name, *dict;
		int version, count;
	} imgs[] = {
	    {"matrix", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 6},
	    {"vector", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 1, 4},
	    {"scalar", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 1, 1},
	    {"v2_empty", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", 2, 0},
	};
	static struct buf b, list;

	list.n = 0;
	put8(&list, 3); /* npz mode: pack, deflate */
	for (size_t i = 0; i < sizeof(imgs) / sizeof(imgs[0]); i++) {
		size_t hl = strlen(imgs[i].dict), pre = imgs[i].version == 1 ? 10 : 12;
		size_t total = (pre + hl + 1 + 63) / 64 * 64, pad = total - pre - hl - 1;
		char nm[64];

		b.n = 0;
		put(&b, "\x93NUMPY", 6);
		put8(&b, (uint8_t)imgs[i].version);
		put8(&b, 0);
		put8(&b, (uint8_t)((total - pre) & 0xff));
		put8(&b, (uint8_t)((total - pre) >> 8));
		if (imgs[i].version == 2) {
			put8(&b, 0);
			put8(&b, 0);
		}
		put(&b, imgs[i].dict, hl);
		for (size_t k = 0; k < pad; k++)
			put8(&b, ' ');
		put8(&b, '\n');
		put(&b, vals, (size_t)imgs[i].count * sizeof(float));
		save("npy", imgs[i].name, b.b, b.n);
		snprintf(nm, sizeof(nm), "%s.npy", imgs[i].name);
		put8(&list, (uint8_t)strlen(nm));
		put(&list, nm, strlen(nm));
		put8(&list, (uint8_t)(b.n & 0xff));
		put8(&list, (uint8_t)(b.n >> 8));
		put(&list, b.b, b.n);
	}
	save("npz", "members_deflated", list.b, list.n);
	list.b[0] = 1; /* stored */
	save("npz", "members_stored", list.b, list.n);
}

int main(int argc, char **argv)
{
	char tmp[] = "/tmp/rps-gen-corpus-XXXXXX";

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
		return 2;
	}
	root = argv[1];
	mkdir(root, 0755);
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	gen_frame();
	gen_hello();
	gen_server();
	gen_sched();
	gen_http();
	gen_ctl();
	gen_worker();
	gen_config();
	gen_ckpt(tmp);
	gen_npy();
	gen_npz(tmp);
	rmdir(tmp);
	return 0;
}
