/* The rdmaps wire protocol: sizes, names and the checks every receiver runs
 * before it trusts a frame (see src/proto.h and docs/protocol.md).
 *
 * Checks are strict: an op without data must have exactly its fixed length,
 * an op with data must have exactly the length its fixed part announces.
 *
 * Secrets: the hello carries RPS_SECRET_LEN (32) secret bytes. A secret of at
 * most 32 bytes is sent as is, zero padded; a longer one is replaced by its
 * SHA-256 digest (32 bytes), so that every byte of a long secret counts and
 * both ends derive the same bytes. A NULL secret is the empty secret.
 */
#include "src/proto.h"
#include "src/codec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "src/optim.h"

/* The structs travel as they lie in memory: the host must be little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "rdmaps sends structs as they lie in memory: little-endian hosts only");

/* len == fixed + elem * n, computed without overflow. */
static int len_is(uint32_t len, uint64_t fixed, uint64_t elem, uint64_t n)
{
	return (uint64_t)len == fixed + elem * n;
}

static int bad(const char **why_p, const char *why)
{
	*why_p = why;
	return -EPROTO;
}

/* ---- per-op payload checks (the descriptor's .check) ---- */

static int check_hello_ack(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_hello_ack a;

	memcpy(&a, payload, sizeof(a));
	if (a.num_shards > RPS_MAX_SHARDS)
		return bad(why_p, "hello ack: too many shards");
	if (!len_is(h->len, sizeof(a), sizeof(struct rps_shard_desc), a.num_shards))
		return bad(why_p, "hello ack: length does not match num_shards");
	return 0;
}

static int check_declare(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_declare d;

	if (h->flags & ~(RPS_DECLARE_FLAG_OPTIM | RPS_DECLARE_FLAG_LOWPREC))
		return bad(why_p, "declare: unknown flags");
	if (h->len !=
	    sizeof(d) + (h->flags & RPS_DECLARE_FLAG_OPTIM ? sizeof(struct rps_optim_wire) : 0))
		return bad(why_p, "declare: length does not match its flags");
	memcpy(&d, payload, sizeof(d));
	if (d.shard >= RPS_MAX_SHARDS)
		return bad(why_p, "declare: shard out of range");
	if (d.nelems > UINT64_MAX / 8)
		return bad(why_p, "declare: element count out of range");
	return 0;
}

static int check_push(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_push p;

	memcpy(&p, payload, sizeof(p));
	if (h->flags & RPS_CODEC_MASK) {
		/* compressed (src/codec.h): the receiver checks the data's exact
		 * size for the codec with the data in hand (rps_codec_check) */
		if (h->op != RPS_OP_PUSH)
			return bad(why_p, "assign: compressed data (only a PUSH may be)");
		if ((h->flags & RPS_CODEC_MASK) >= RPS_CODEC_COUNT)
			return bad(why_p, "push: unknown codec in flags");
		if (h->len < sizeof(p) + (h->flags & RPS_PUSH_FLAG_SEQ ? sizeof(uint64_t) : 0))
			return bad(why_p, "push: shorter than its header");
	} else if (!len_is(h->len, sizeof(p) + (h->flags & RPS_PUSH_FLAG_SEQ ? sizeof(uint64_t) : 0),
			   sizeof(float), p.count)) {
		return bad(why_p, "push: length does not match count");
	}
	if (p.shard >= RPS_MAX_SHARDS)
		return bad(why_p, "push: shard out of range");
	if (p.offset > UINT64_MAX - p.count)
		return bad(why_p, "push: offset + count overflows");
	return 0;
}

/* a reason only after a refusal */
static int check_declare_ack(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	(void)payload;
	if (!h->status && (h->flags & RPS_DECLARE_FLAG_LOWPREC)) {
		if (h->len != sizeof(struct rps_declare_ack) + sizeof(struct rps_declare_lp))
			return bad(why_p, "declare ack: low-precision copy of the wrong size");
		return 0;
	}
	if (h->len > sizeof(struct rps_declare_ack) && !h->status)
		return bad(why_p, "declare ack: a reason without an error");
	return 0;
}

/* PULL and PULL_RESP */
static int check_pull(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_pull p;

	memcpy(&p, payload, sizeof(p));
	if (h->op == RPS_OP_PULL_RESP && !len_is(h->len, sizeof(p), sizeof(float), p.count))
		return bad(why_p, "pull response: length does not match count");
	if (h->op == RPS_OP_PULL_LP_RESP && !len_is(h->len, sizeof(p), sizeof(uint16_t), p.count))
		return bad(why_p, "low-precision pull response: length does not match count");
	if (h->op == RPS_OP_PULL_LP && h->flags != 1 && h->flags != 2)
		return bad(why_p, "low-precision pull: precision in flags not 1 (fp16) or 2 (bf16)");
	/* The response must be a representable frame. */
	if ((uint64_t)sizeof(p) + 4ull * p.count > UINT32_MAX)
		return bad(why_p, "pull: count out of range");
	if (p.shard >= RPS_MAX_SHARDS)
		return bad(why_p, "pull: shard out of range");
	if (p.offset > UINT64_MAX - p.count)
		return bad(why_p, "pull: offset + count overflows");
	return 0;
}

static int check_clock(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_clock c;

	memcpy(&c, payload, sizeof(c));
	if (c.num_shards > RPS_MAX_SHARDS)
		return bad(why_p, "clock: too many shards");
	if (!len_is(h->len, sizeof(c), sizeof(uint32_t), c.num_shards))
		return bad(why_p, "clock: length does not match num_shards");
	return 0;
}

static int check_register(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	const struct rps_register *r = payload;

	if (r->role > RPS_ROLE_CTL)
		return bad(why_p, "register: unknown role");
	if (!memchr(r->host, 0, sizeof(r->host)))
		return bad(why_p, "register: host not terminated");
	return 0;
}

static int check_map(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_map m;

	memcpy(&m, payload, sizeof(m));
	if (m.num_nodes > RPS_MAX_NODES)
		return bad(why_p, "map: too many nodes");
	if (!len_is(h->len, sizeof(m), sizeof(struct rps_node), m.num_nodes))
		return bad(why_p, "map: length does not match num_nodes");
	return 0;
}

int rps_proto_report_check(const struct rps_report *r, const char **why_p)
{
	size_t n = strnlen(r->name, sizeof(r->name));

	if (n == 0 || n > RPS_REPORT_NAME_MAX) {
		*why_p = "report name empty or longer than 23 characters";
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		char c = r->name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-')) {
			*why_p = "report name has a character outside [A-Za-z0-9_.-]";
			return -EINVAL;
		}
	}
	for (size_t i = n; i < sizeof(r->name); i++)
		if (r->name[i]) {
			*why_p = "report name not NUL padded";
			return -EINVAL;
		}
	return 0;
}

static int check_report(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_report r;

	(void)h;
	memcpy(&r, payload, sizeof(r));
	return rps_proto_report_check(&r, why_p) ? -EPROTO : 0;
}

static int check_ring(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_ring_data d;

	memcpy(&d, payload, sizeof(d));
	if (!len_is(h->len, sizeof(d), sizeof(float), d.count))
		return bad(why_p, "ring data: length does not match count");
	if (d.offset > d.total || d.count > d.total - d.offset)
		return bad(why_p, "ring data: piece outside the tensor");
	if (d.phase > 1)
		return bad(why_p, "ring data: unknown phase");
	return 0;
}

static int check_node(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	const struct rps_node *n = payload;

	if (!memchr(n->host, 0, sizeof(n->host)))
		return bad(why_p, "node: host not terminated");
	return 0;
}

static int check_table_decl(const struct rps_frame_hdr *h, const void *payload,
			    const char **why_p)
{
	struct rps_table_decl d;

	memcpy(&d, payload, sizeof(d));
	if (h->len != sizeof(d) + sizeof(struct rps_optim_wire))
		return bad(why_p, "table declare: length is not declaration + optimizer");
	if (d.shard >= RPS_MAX_SHARDS)
		return bad(why_p, "table declare: shard out of range");
	return 0;
}

/* ROWS_PULL, ROWS_PULL_RESP, ROWS_PUSH */
static int check_rows(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	struct rps_rows r;
	uint64_t per;

	memcpy(&r, payload, sizeof(r));
	if (r.shard >= RPS_MAX_SHARDS)
		return bad(why_p, "rows: shard out of range");
	if (r.count > RPS_ROWS_FRAME_MAX || r.dim > 4096u)
		return bad(why_p, "rows: count or dim out of range");
	if (r.flags & ~(RPS_ROWS_FLAG_SLOTS | RPS_ROWS_FLAG_PREC_MASK) ||
	    RPS_ROWS_PREC_OF(r.flags) > 2u || (r.flags && h->op == RPS_OP_ROWS_PUSH))
		return bad(why_p, "rows: unknown flags");
	per = h->op == RPS_OP_ROWS_PULL	     ? 8u
	      : h->op == RPS_OP_ROWS_PUSH    ? 8u + 4ull * r.dim
	      : /* ROWS_PULL_RESP: rows in the precision of the flags */
		(h->status ? 0u
			   : (RPS_ROWS_PREC_OF(r.flags) ? 2ull : 4ull) * r.dim +
				 (r.flags & RPS_ROWS_FLAG_SLOTS ? 4u : 0u));
	if (!len_is(h->len, sizeof(r), per, r.count))
		return bad(why_p, "rows: length does not match count and dim");
	return 0;
}

static int check_table_map(const struct rps_frame_hdr *h, const void *payload,
			   const char **why_p)
{
	struct rps_table_map m;

	memcpy(&m, payload, sizeof(m));
	if (m.shard >= RPS_MAX_SHARDS)
		return bad(why_p, "table map: shard out of range");
	if (h->op == RPS_OP_TABLE_MAP_RESP && !h->status &&
	    (m.count > RPS_TABLE_MAP_MAX ||
	     !len_is(h->len, sizeof(m) + sizeof(struct rps_table_index),
		     sizeof(struct rps_table_chunk), m.count)))
		return bad(why_p, "table map: length does not match count");
	return 0;
}

/* ---- the op descriptors: every lookup by op goes through this table ---- */

#define BY(r) (1u << RPS_ROLE_##r)
#define NODES (BY(SERVER) | BY(WORKER))
#define ANY (BY(SCHEDULER) | BY(SERVER) | BY(WORKER) | BY(CTL))
/* An op with a variable tail after its fixed part */
#define TAIL .has_data = 1

/* A new op needs a descriptor here: adjust this count with it. */
_Static_assert(RPS_OP_MAX == 76, "a new op in enum rps_op needs a descriptor in rps_op_descs");

/* clang-format off */
static const struct rps_op_desc rps_op_descs[RPS_OP_MAX] = {
	[RPS_OP_HELLO] = { "HELLO", sizeof(struct rps_hello), .senders = NODES | BY(CTL) },
	[RPS_OP_HELLO_ACK] = { "HELLO_ACK", sizeof(struct rps_hello_ack), TAIL,
			       .senders = BY(SERVER), .check = check_hello_ack },
	/* an optimizer spec may follow (RPS_DECLARE_FLAG_OPTIM) */
	[RPS_OP_DECLARE] = { "DECLARE", sizeof(struct rps_declare), TAIL, .senders = BY(WORKER),
			     .max_len = sizeof(struct rps_declare) + sizeof(struct rps_optim_wire),
			     .check = check_declare },
	/* a refusal may end in a reason */
	[RPS_OP_DECLARE_ACK] = { "DECLARE_ACK", sizeof(struct rps_declare_ack), TAIL,
				 .senders = BY(SERVER),
				 .max_len = sizeof(struct rps_declare_ack) + RPS_DECLARE_REASON_MAX,
				 .check = check_declare_ack },
	[RPS_OP_PUSH] = { "PUSH", sizeof(struct rps_push), TAIL, .senders = BY(WORKER),
			  .check = check_push },
	[RPS_OP_PUSH_ACK] = { "PUSH_ACK", 0, .senders = BY(SERVER) },
	[RPS_OP_PULL] = { "PULL", sizeof(struct rps_pull), .senders = BY(WORKER),
			  .check = check_pull },
	[RPS_OP_PULL_RESP] = { "PULL_RESP", sizeof(struct rps_pull), TAIL,
			       .senders = BY(SERVER), .check = check_pull },
	[RPS_OP_CLOCK] = { "CLOCK", sizeof(struct rps_clock), TAIL, .senders = BY(WORKER),
			   .check = check_clock },
	[RPS_OP_ERROR] = { "ERROR", 0, TAIL, .senders = ANY },
	[RPS_OP_SYNC] = { "SYNC", sizeof(struct rps_sync), .senders = BY(WORKER) },
	[RPS_OP_ASSIGN] = { "ASSIGN", sizeof(struct rps_push), TAIL, .senders = BY(WORKER),
			    .check = check_push },
	[RPS_OP_CHALLENGE] = { "CHALLENGE", 2 * 32, .senders = ANY },
	[RPS_OP_PROOF] = { "PROOF", 32, .senders = ANY },
	[RPS_OP_REGISTER] = { "REGISTER", sizeof(struct rps_register), .control = 1,
			      .senders = NODES | BY(CTL), .check = check_register },
	[RPS_OP_MAP] = { "MAP", sizeof(struct rps_map), TAIL, .control = 1,
			 .senders = BY(SCHEDULER), .check = check_map },
	[RPS_OP_BARRIER] = { "BARRIER", 0, .control = 1, .senders = NODES },
	[RPS_OP_BARRIER_DONE] = { "BARRIER_DONE", 0, .control = 1, .senders = BY(SCHEDULER) },
	/* servers: rps_heartbeat_srv + rps_hb_shard[]; the receiver checks the
	 * tail's own num_shards against its length */
	[RPS_OP_HEARTBEAT] = { "HEARTBEAT", sizeof(struct rps_heartbeat), TAIL, .control = 1,
			       .senders = NODES,
			       .max_len = sizeof(struct rps_heartbeat) +
					  sizeof(struct rps_heartbeat_srv) +
					  RPS_MAX_SHARDS * sizeof(struct rps_hb_shard_ext) },
	[RPS_OP_NODE_DEAD] = { "NODE_DEAD", sizeof(struct rps_node), .control = 1,
			       .senders = BY(SCHEDULER), .check = check_node },
	[RPS_OP_SHUTDOWN] = { "SHUTDOWN", 0, .control = 1, .senders = BY(SCHEDULER) | NODES },
	[RPS_OP_STATUS] = { "STATUS", 0, TAIL, .control = 1, .senders = BY(CTL) | BY(SCHEDULER) },
	/* the parts (hdr.aux, enum rps_ctlreq_aux) are checked by their receivers */
	[RPS_OP_CHECKPOINT] = { "CHECKPOINT", 0, TAIL, .control = 1, .senders = ANY },
	[RPS_OP_EXPORT] = { "EXPORT", 0, TAIL, .control = 1, .senders = ANY },
	[RPS_OP_REPORT] = { "REPORT", sizeof(struct rps_report), .control = 1,
			    .senders = BY(WORKER), .check = check_report },
	[RPS_OP_TABLE_DECLARE] = { "TABLE_DECLARE", sizeof(struct rps_table_decl), TAIL,
				   .senders = BY(WORKER),
				   .max_len = sizeof(struct rps_table_decl) +
					      sizeof(struct rps_optim_wire),
				   .check = check_table_decl },
	[RPS_OP_TABLE_DECLARE_ACK] = { "TABLE_DECLARE_ACK", sizeof(struct rps_table_ack), TAIL,
				       .senders = BY(SERVER),
				       .max_len = sizeof(struct rps_table_ack) +
						  RPS_DECLARE_REASON_MAX },
	[RPS_OP_ROWS_PULL] = { "ROWS_PULL", sizeof(struct rps_rows), TAIL, .senders = BY(WORKER),
			       .check = check_rows },
	[RPS_OP_ROWS_PULL_RESP] = { "ROWS_PULL_RESP", sizeof(struct rps_rows), TAIL,
				    .senders = BY(SERVER), .check = check_rows },
	[RPS_OP_ROWS_PUSH] = { "ROWS_PUSH", sizeof(struct rps_rows), TAIL, .senders = BY(WORKER),
			       .check = check_rows },
	[RPS_OP_ROWS_PUSH_ACK] = { "ROWS_PUSH_ACK", 0, .senders = BY(SERVER) },
	[RPS_OP_TABLE_MAP] = { "TABLE_MAP", sizeof(struct rps_table_map), .senders = BY(WORKER),
			       .check = check_table_map },
	[RPS_OP_TABLE_MAP_RESP] = { "TABLE_MAP_RESP", sizeof(struct rps_table_map), TAIL,
				    .senders = BY(SERVER), .check = check_table_map },
	/* ring all-reduce between workers */
	[RPS_OP_RING_DATA] = { "RING_DATA", sizeof(struct rps_ring_data), TAIL,
			       .senders = BY(WORKER), .check = check_ring },
	[RPS_OP_RING_ABORT] = { "RING_ABORT", sizeof(struct rps_ring_data), TAIL,
				.senders = BY(WORKER), .max_len = sizeof(struct rps_ring_data) + 256 },
	/* the entry's data is checked by the backup (server/repl.c) */
	[RPS_OP_REPL_FWD] = { "REPL_FWD", sizeof(struct rps_repl_fwd), TAIL,
			      .senders = BY(SERVER) },
	[RPS_OP_REPL_READY] = { "REPL_READY", 0, TAIL, .senders = BY(SERVER),
				.max_len = sizeof(struct rps_repl_addr) +
					   RPS_MAX_SHARDS * sizeof(uint64_t) },
	[RPS_OP_REPL_LAST] = { "REPL_LAST", 0, .senders = BY(SERVER) },
	[RPS_OP_REPL_MAP] = { "REPL_MAP", 0, TAIL, .senders = BY(CTL) | BY(SCHEDULER) },
	[RPS_OP_REPL_JOIN] = { "REPL_JOIN", sizeof(struct rps_repl_addr), .senders = BY(SERVER) },
	[RPS_OP_REPL_COPY] = { "REPL_COPY", sizeof(struct rps_repl_copy_piece), TAIL,
			       .senders = BY(SERVER) },
	[RPS_OP_REPL_COPIED] = { "REPL_COPIED", 0, .senders = BY(SERVER) },
	[RPS_OP_PULL_LP] = { "PULL_LP", sizeof(struct rps_pull), .senders = BY(WORKER),
			     .check = check_pull },
	[RPS_OP_PULL_LP_RESP] = { "PULL_LP_RESP", sizeof(struct rps_pull), TAIL,
				  .senders = BY(SERVER), .check = check_pull },
};
/* clang-format on */

const struct rps_op_desc *rps_proto_op(uint8_t op)
{
	if (op >= RPS_OP_MAX || !rps_op_descs[op].name)
		return NULL;
	return &rps_op_descs[op];
}

int rps_proto_fixed_len(uint8_t op)
{
	const struct rps_op_desc *d = rps_proto_op(op);

	return d ? (int)d->fixed_len : -1;
}

const char *rps_proto_op_name(uint8_t op)
{
	const struct rps_op_desc *d = rps_proto_op(op);

	return d ? d->name : "UNKNOWN";
}

const char *rps_proto_claim_text(uint32_t role, uint32_t rank, char *buf, size_t len)
{
	static const char *const roles[] = { "the scheduler", "a server", "a worker" };

	if (role == RPS_ROLE_CTL)
		snprintf(buf, len, "rdmaps-ctl");
	else if (role == RPS_ROLE_SCHEDULER)
		snprintf(buf, len, "%s", roles[role]);
	else if (role > RPS_ROLE_CTL)
		snprintf(buf, len, "an unknown role %u (rank %u)", role, rank);
	else if (rank == UINT32_MAX)
		snprintf(buf, len, "%s asking for any rank", roles[role]);
	else
		snprintf(buf, len, "%s claiming rank %u", roles[role], rank);
	return buf;
}

void rps_proto_hdr_init(struct rps_frame_hdr *h, uint8_t op, uint32_t len, uint32_t req_id)
{
	memset(h, 0, sizeof(*h));
	h->magic = RPS_PROTO_MAGIC;
	h->version = RPS_PROTO_VERSION;
	h->op = op;
	h->len = len;
	h->req_id = req_id;
}

int rps_proto_hdr_check(const struct rps_frame_hdr *h, uint64_t max_len, const char **why_p)
{
	const struct rps_op_desc *d;

	if (h->magic != RPS_PROTO_MAGIC) {
		*why_p = "bad magic";
		return -EPROTO;
	}
	if (h->version != RPS_PROTO_VERSION) {
		*why_p = "unsupported protocol version";
		return -EPROTO;
	}
	d = rps_proto_op(h->op);
	if (!d) {
		*why_p = "unknown op";
		return -EPROTO;
	}
	if (h->len < d->fixed_len) {
		*why_p = "frame shorter than its op's fixed part";
		return -EPROTO;
	}
	if (h->len > max_len) {
		*why_p = "frame larger than the limit";
		return -EMSGSIZE;
	}
	if (!d->has_data && h->len != d->fixed_len) {
		*why_p = "frame longer than its op's fixed part";
		return -EPROTO;
	}
	return 0;
}

int rps_proto_payload_check(const struct rps_frame_hdr *h, const void *payload, const char **why_p)
{
	const struct rps_op_desc *d = rps_proto_op(h->op);

	if (!d)
		return 0; /* rps_proto_hdr_check refuses it */
	if (d->max_len && h->len > d->max_len) {
		*why_p = "frame longer than its op allows";
		return -EPROTO;
	}
	return d->check ? d->check(h, payload, why_p) : 0;
}

/* ---- optimizer specs ---- */

void rps_optim_wire_encode(const struct rps_optim_opts *o, struct rps_optim_wire *w)
{
	memset(w, 0, sizeof(*w));
	w->kind = (uint32_t)o->kind;
	w->schedule = (uint32_t)o->schedule;
	w->lr = o->lr;
	w->momentum = o->momentum;
	w->beta1 = o->beta1;
	w->beta2 = o->beta2;
	w->eps = o->eps;
	w->weight_decay = o->weight_decay;
	w->clip_norm = o->clip_norm;
	w->gamma = o->gamma;
	w->lr_min = o->lr_min;
	w->staleness_lr = o->staleness_lr ? 1 : 0;
	w->step_size = o->step_size;
	w->total_steps = o->total_steps;
	w->warmup_steps = o->warmup_steps;
}

int rps_optim_wire_decode(const struct rps_optim_wire *w, struct rps_optim_opts *o_p, char *why,
			  size_t len)
{
	struct rps_optim_opts o;
	int rc;

	if (w->reserved || w->staleness_lr > 1) {
		snprintf(why, len, "optimizer spec: reserved bits set");
		return -EINVAL;
	}
	/* out-of-range enums are checked below, before anything uses them */
	memset(&o, 0, sizeof(o));
	o.kind = (enum rps_optim_kind)w->kind;
	o.schedule = (enum rps_lr_schedule)w->schedule;
	if (w->kind > 0xffff || w->schedule > 0xffff) {
		snprintf(why, len, "optimizer spec: unknown kind %u or schedule %u", w->kind,
			 w->schedule);
		return -EINVAL;
	}
	o.lr = w->lr;
	o.momentum = w->momentum;
	o.beta1 = w->beta1;
	o.beta2 = w->beta2;
	o.eps = w->eps;
	o.weight_decay = w->weight_decay;
	o.clip_norm = w->clip_norm;
	o.gamma = w->gamma;
	o.lr_min = w->lr_min;
	o.staleness_lr = (int)w->staleness_lr;
	o.step_size = w->step_size;
	o.total_steps = w->total_steps;
	o.warmup_steps = w->warmup_steps;
	rc = rps_optim_opts_why(&o, why, len);
	if (rc)
		return rc;
	*o_p = o;
	return 0;
}

void rps_proto_hello_init(struct rps_hello *h, uint8_t role, uint32_t rank)
{
	memset(h, 0, sizeof(*h));
	h->magic = RPS_PROTO_MAGIC;
	h->version = RPS_PROTO_VERSION;
	h->role = role;
	h->rank = rank;
}

int rps_proto_hello_decode(const void *buf, size_t len, struct rps_hello *h_p,
			   const char **why_p)
{
	struct rps_hello h;

	if (!buf || len != sizeof(h)) {
		*why_p = "hello: wrong length";
		return -EPROTO;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != RPS_PROTO_MAGIC) {
		*why_p = "hello: bad magic";
		return -EPROTO;
	}
	if (h.version != RPS_PROTO_VERSION) {
		*why_p = "hello: unsupported protocol version";
		return -EPROTO;
	}
	if (h.role > RPS_ROLE_CTL) {
		*why_p = "hello: unknown role";
		return -EPROTO;
	}
	if (h.flags) {
		*why_p = "hello: unknown flags";
		return -EPROTO;
	}
	*h_p = h;
	return 0;
}
