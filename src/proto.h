/* The rdmaps wire protocol, version 1.
 *
 * Little-endian, fixed-width fields. Every frame starts with struct rps_frame_hdr
 * (magic, version, op, payload length); the payload is the op's fixed part
 * followed by its data (float32 elements for PUSH and PULL_RESP).
 * A receiver checks magic, version, op and length against its limit BEFORE it
 * allocates or reads the payload; any violation closes that one connection with
 * a logged reason (and an ERROR frame where the transport can still send one).
 *
 * The same frames travel over TCP (a byte stream) and RDMA (one frame per SEND,
 * never larger than the receive buffer). One-sided RDMA READs bypass frames.
 *
 * Version history:
 *   1  first version.
 *   1, later: DECLARE_ACK hdr.aux carries the slice's chunk geometry
 *      (RPS_DECLARE_ACK_*); 0 from an older server.
 *   1, later: DECLARE may carry the key's optimizer (hdr.flags
 *      RPS_DECLARE_FLAG_OPTIM, struct rps_optim_wire after struct
 *      rps_declare); a refused DECLARE that carried one is answered with a
 *      DECLARE_ACK whose payload ends in a text reason. Only a worker that
 *      sends a spec gets either, so older workers and servers never see them
 *      (an older server closes the connection of a DECLARE with a spec).
 *   1, later: CHECKPOINT and EXPORT, control requests of rdmaps-ctl and
 *      workers relayed by the scheduler to every live server (an older
 *      scheduler logs them as unexpected and never answers).
 *   1, later: ASSIGN (rps_worker_load_model). An older server does not know
 *      the op and closes the connection: the load fails, nothing is applied
 *      as a gradient.
 *   1, later: low-precision pulls: DECLARE hdr.flags RPS_DECLARE_FLAG_LOWPREC
 *      (the pull precision in rps_declare.reserved), answered by a
 *      DECLARE_ACK with the same flag and a struct rps_declare_lp; PULL_LP /
 *      PULL_LP_RESP (2-byte elements). Only a worker that sets a pull
 *      precision sends them (an older server closes the connection).
 *   1, later: REPORT (rps_worker_report: a figure for the dashboard's
 *      curves; an older scheduler logs it as unexpected). HEARTBEAT hdr.aux
 *      carries the node's CPU use (0: not known; older nodes send 0), and a
 *      server's rps_heartbeat_srv.shard_len says the size of its shard entries
 *      (0: 8 bytes, struct rps_hb_shard; 32: struct rps_hb_shard_ext).
 *   1, later: the handshake is a challenge-response (src/auth.h): the hello
 *      carries a nonce where it carried the secret, CHALLENGE and PROOF
 *      follow it before HELLO_ACK. An older peer fails it ("wrong secret").
 */
#ifndef RPS_PROTO_H
#define RPS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <rdmaps/types.h>

#define RPS_PROTO_MAGIC 0x53504452u /* bytes "RDPS" on the wire */
#define RPS_PROTO_VERSION 1
#define RPS_NONCE_LEN 32 /* the handshake's nonces (src/auth.h) */
#define RPS_MAC_LEN 32   /* HMAC-SHA256 */
#define RPS_MAX_SHARDS 64      /* per server */
#define RPS_MAX_WORKERS 1024
#define RPS_MAX_NODES 1024
/* BARRIER hdr.aux: bits 0-7 the group, bits 8-31 the sender's count of the
 * group's barriers it entered (1 = its first; 0 = not counted) */
#define RPS_BARRIER_SEQ_SHIFT 8
#define RPS_BARRIER_SEQ_MAX 0xffffffu

enum rps_op {
	RPS_OP_HELLO = 1,        /* client -> server/sched: struct rps_hello */
	RPS_OP_HELLO_ACK = 2,    /* server -> worker: rps_hello_ack + rps_shard_desc[num_shards] */
	RPS_OP_DECLARE = 3,      /* worker -> server: rps_declare */
	RPS_OP_DECLARE_ACK = 4,  /* server -> worker: rps_declare_ack */
	RPS_OP_PUSH = 5,         /* worker -> server: rps_push + float[count] */
	RPS_OP_PUSH_ACK = 6,     /* server -> worker: no payload; hdr.status, credits in hdr.aux */
	RPS_OP_PULL = 7,         /* worker -> server: rps_pull */
	RPS_OP_PULL_RESP = 8,    /* server -> worker: rps_pull + float[count] */
	RPS_OP_CLOCK = 9,        /* worker -> server: rps_clock + uint32 pushes[nshards] */
	RPS_OP_ERROR = 10,       /* either way: char reason[] (not NUL-terminated); hdr.status */
	RPS_OP_SYNC = 11,        /* worker -> server: rps_sync; no answer (added in version 1) */
	RPS_OP_ASSIGN = 12,      /* worker -> server: rps_push + float[count]: the values become
				  * the parameters (no clock); answered by PUSH_ACK (version 1,
				  * later) */
	RPS_OP_CHALLENGE = 13,   /* listener -> client, TCP handshake: rps_auth_challenge */
	RPS_OP_PROOF = 14,       /* client -> listener, handshake: rps_auth_proof (TCP, and
				  * the first frame of an RDMA connection) */
	/* control path (scheduler) */
	RPS_OP_REGISTER = 16,    /* node -> sched: rps_register */
	RPS_OP_MAP = 17,         /* sched -> node: rps_map + rps_node[num_nodes] */
	RPS_OP_BARRIER = 18,     /* node -> sched: hdr.aux = barrier group (0 = workers, 1 = all) */
	RPS_OP_BARRIER_DONE = 19,/* sched -> node */
	RPS_OP_HEARTBEAT = 20,   /* node -> sched: rps_heartbeat [+ rps_heartbeat_srv tail] */
	RPS_OP_NODE_DEAD = 21,   /* sched -> node: rps_node of the dead node */
	RPS_OP_SHUTDOWN = 22,    /* sched -> node: leave now; node -> sched: I am leaving */
	RPS_OP_STATUS = 23,      /* ctl -> sched: request; sched -> ctl: text */
	RPS_OP_CHECKPOINT = 24,  /* control request (struct rps_ctlreq), see below */
	RPS_OP_EXPORT = 25,      /* control request (struct rps_ctlreq), see below */
	RPS_OP_REPORT = 26,      /* worker -> sched: struct rps_report; no answer */
	/* sparse tables (docs/protocol.md, Tables), ops 30-37 */
	RPS_OP_TABLE_DECLARE = 30,     /* worker -> server: rps_table_decl + rps_optim_wire */
	RPS_OP_TABLE_DECLARE_ACK = 31, /* server -> worker: rps_table_ack [+ reason on refusal] */
	RPS_OP_ROWS_PULL = 32,         /* worker -> server: rps_rows + u64 ids[count] */
	RPS_OP_ROWS_PULL_RESP = 33,    /* server -> worker: rps_rows + float[count * dim] */
	RPS_OP_ROWS_PUSH = 34,         /* worker -> server: rps_rows + u64 ids[count] +
					* float[count * dim] */
	RPS_OP_ROWS_PUSH_ACK = 35,     /* server -> worker: no payload; hdr.status */
	RPS_OP_TABLE_MAP = 36,	       /* worker -> server: rps_table_map (RDMA reads) */
	RPS_OP_TABLE_MAP_RESP = 37,    /* server -> worker: rps_table_map + rps_table_chunk[count] */
	/* ring all-reduce, worker -> worker (its right neighbour) */
	RPS_OP_RING_DATA = 42,   /* rps_ring_data + float[count] */
	RPS_OP_RING_ABORT = 43,  /* rps_ring_data (count 0) + char reason[]; hdr.status */
	/* replicated shards (server/repl.c, docs/replication.md): 50-57 */
	RPS_OP_REPL_FWD = 50,    /* primary -> backup: rps_repl_fwd + the entry's data; a
				  * forwarded push is answered by PUSH_ACK (same req_id) */
	RPS_OP_REPL_READY = 51,  /* backup -> primary: the link is set up, forward from now;
				  * [struct rps_repl_addr: where the backup listens,
				  * uint64 entries held per shard (server/repl_log.h)] */
	RPS_OP_REPL_LAST = 52,   /* first backup -> primary (RDMAPS_REPLICAS=3): the second
				  * is gone, this one is the last: no chain to close */
	/* a replacement server joining as a backup (server/repl_join.c) */
	RPS_OP_REPL_MAP = 53,    /* ctl -> sched: the map, please; sched -> ctl: rps_map +
				  * rps_node[num_nodes] (hdr.status -EAGAIN: not formed yet) */
	RPS_OP_REPL_JOIN = 54,   /* joining backup -> primary without one: copy your shards
				  * here, then forward (rps_repl_addr: where it listens) */
	RPS_OP_REPL_COPY = 55,   /* primary -> joining backup: rps_repl_copy_piece + a piece
				  * of one shard's state (server/repl_copy.c) */
	RPS_OP_REPL_COPIED = 56, /* joining backup -> primary: hdr.aux = the shard loaded,
				  * hdr.status */
	/* low-precision pulls (docs/compression.md "Low-precision pulls") */
	RPS_OP_PULL_LP = 74,      /* worker -> server: rps_pull; hdr.flags = the precision
				   * asked for (1 fp16, 2 bf16): answered from the key's copy */
	RPS_OP_PULL_LP_RESP = 75, /* server -> worker: rps_pull + count 2-byte elements */
	RPS_OP_MAX
};

enum rps_role {
	RPS_ROLE_SCHEDULER = 0,
	RPS_ROLE_SERVER = 1,
	RPS_ROLE_WORKER = 2,
	RPS_ROLE_CTL = 3,
};

/* Every frame. */
struct rps_frame_hdr {
	uint32_t magic;   /* RPS_PROTO_MAGIC */
	uint8_t version;  /* RPS_PROTO_VERSION */
	uint8_t op;       /* enum rps_op */
	uint16_t flags;
	uint32_t len;     /* payload bytes after this header */
	uint32_t req_id;  /* echoed in the response */
	int32_t status;   /* responses: 0 or -errno */
	uint32_t aux;     /* op-specific small value (credits, barrier group) */
};
_Static_assert(sizeof(struct rps_frame_hdr) == 24, "rps_frame_hdr is 24 bytes");

/* First frame of a connection (TCP) or rdma_cm private data (RDMA). */
struct rps_hello {
	uint32_t magic;
	uint8_t version;
	uint8_t role;     /* enum rps_role */
	uint16_t flags;
	uint32_t rank;    /* node rank within its role, or UINT32_MAX if none yet */
	uint32_t channel; /* RDMA: the shard whose receive queue this connection feeds */
	uint8_t nonce[RPS_NONCE_LEN]; /* the client's fresh nonce (src/auth.h) */
};
_Static_assert(sizeof(struct rps_hello) == 48, "rps_hello is 48 bytes");

/* One shard as a worker sees it. With remote reads, addr/remote_key locate the shard's
 * readable store (src/store.h); for TCP they are 0. */
struct rps_shard_desc {
	uint64_t addr;
	uint64_t size;
	uint32_t remote_key;
	uint32_t reserved;
};
_Static_assert(sizeof(struct rps_shard_desc) == 24, "rps_shard_desc is 24 bytes");

struct rps_hello_ack {
	uint32_t server_rank;
	uint32_t num_shards;
	uint32_t num_workers;
	uint32_t consistency;  /* enum rps_consistency */
	uint32_t staleness;
	uint32_t chunk_bytes;  /* store chunk size (seqlock granularity) */
	uint64_t max_msg;      /* largest frame this server accepts */
	/* followed by struct rps_shard_desc[num_shards] */
};
_Static_assert(sizeof(struct rps_hello_ack) == 32, "rps_hello_ack is 32 bytes");

/* A piece of a tensor: slice `slice` of `key`, elements [offset, offset + count)
 * of that slice. A slice lives wholly in one shard. */
struct rps_declare {
	uint64_t key;
	uint32_t slice;
	uint32_t shard;
	uint64_t nelems;   /* elements of this slice */
	uint32_t init_kind;/* enum rps_init_kind */
	float init_a;
	float init_b;
	uint32_t reserved;
	uint64_t seed;
};
_Static_assert(sizeof(struct rps_declare) == 48, "rps_declare is 48 bytes");

/* hdr.flags of a DECLARE: a struct rps_optim_wire follows the struct
 * rps_declare (len = 48 + 80); the slice's optimizer (docs/protocol.md, Keys).
 * Other bits: 0. */
#define RPS_DECLARE_FLAG_OPTIM 0x0001u
/* hdr.flags of a DECLARE: rps_declare.reserved is the key's pull precision
 * (1 fp16, 2 bf16, the values of enum rps_pull_precision): the server keeps
 * a 2-byte copy of the slice beside the float32 master and answers the
 * DECLARE_ACK with the same flag and a struct rps_declare_lp after the
 * rps_declare_ack (docs/protocol.md, "Low-precision pulls"). */
#define RPS_DECLARE_FLAG_LOWPREC 0x0002u

/* An optimizer spec on the wire (and in checkpoint files, src/ckpt.h): every
 * field of struct rps_optim_opts, fixed width. Enums as uint32, floats as
 * IEEE binary32, staleness_lr 0 or 1, reserved 0. */
struct rps_optim_wire {
	uint32_t kind;	   /* enum rps_optim_kind */
	uint32_t schedule; /* enum rps_lr_schedule */
	float lr;
	float momentum;
	float beta1;
	float beta2;
	float eps;
	float weight_decay;
	float clip_norm;
	float gamma;
	float lr_min;
	uint32_t staleness_lr;
	uint64_t step_size;
	uint64_t total_steps;
	uint64_t warmup_steps;
	uint64_t reserved;
};
_Static_assert(sizeof(struct rps_optim_wire) == 80, "rps_optim_wire is 80 bytes");

/* o into w (every byte written). */
void rps_optim_wire_encode(const struct rps_optim_opts *o, struct rps_optim_wire *w);
/* w into *o_p, checked as rps_optim_opts_check does (kind, schedule, ranges)
 * and reserved 0: 0, or -EINVAL with the reason in why[len] (not logged). */
int rps_optim_wire_decode(const struct rps_optim_wire *w, struct rps_optim_opts *o_p, char *why,
			  size_t len);

/* A refused DECLARE_ACK's reason (after struct rps_declare_ack): at most this
 * many bytes of text, not NUL-terminated. */
#define RPS_DECLARE_REASON_MAX 256u

struct rps_declare_ack {
	uint64_t key;
	uint32_t slice;
	uint32_t shard;
	uint64_t offset; /* byte offset of the slice's data (chunk 0's) in the shard store */
	uint64_t nelems;
};
_Static_assert(sizeof(struct rps_declare_ack) == 32, "rps_declare_ack is 32 bytes");

/* After a DECLARE_ACK with RPS_DECLARE_FLAG_LOWPREC (status 0): where the
 * slice's low-precision copy lies in the shard store. The copy is laid out
 * as a slice of ceil(nelems / 2) 4-byte words (two 2-byte elements a word,
 * element e at byte 2e of the data), with its own chunks and versions. */
struct rps_declare_lp {
	uint64_t offset; /* byte offset of the copy's data (chunk 0's) in the shard store */
	uint32_t aux;	 /* its geometry, as DECLARE_ACK hdr.aux */
	uint32_t prec;	 /* 1 fp16, 2 bf16 */
};
_Static_assert(sizeof(struct rps_declare_lp) == 16, "rps_declare_lp is 16 bytes");

/* DECLARE_ACK hdr.aux (version 1, later): the slice's chunk geometry in the
 * shard store (src/store.h). Bits 0..30: data bytes of a full chunk of the
 * slice; bit 31 set: its version lines are 8-byte words (a compact, one-chunk
 * slice), clear: 64-byte lines. The last chunk holds its data rounded up to
 * the line size. aux 0 (an older server): the server's chunk_bytes with
 * 64-byte lines, the last chunk whole. */
#define RPS_DECLARE_ACK_BYTES	0x7fffffffu
#define RPS_DECLARE_ACK_COMPACT 0x80000000u
static inline uint32_t rps_proto_declare_ack_aux(uint32_t chunk_bytes, int compact)
{
	return (chunk_bytes & RPS_DECLARE_ACK_BYTES) | (compact ? RPS_DECLARE_ACK_COMPACT : 0u);
}

struct rps_push {
	uint64_t key;
	uint32_t slice;
	uint32_t shard;
	uint64_t offset;      /* first element within the slice */
	uint32_t count;       /* elements that follow */
	uint32_t clock;       /* worker's clock */
	uint64_t timestamp_ns;/* worker's CLOCK_REALTIME */
	float norm;           /* L2 norm of the elements (priority 'magnitude') */
	float tensor_norm;    /* L2 norm of the whole pushed tensor (clipping); 0: not given */
};
_Static_assert(sizeof(struct rps_push) == 48, "rps_push is 48 bytes");

/* PUSH hdr.flags: a uint64 sequence number (per worker and shard, never
 * reused by a rank) follows the struct rps_push, before the floats; a server
 * applies a push of a sequence number it has seen once only (replicated
 * shards, docs/replication.md). */
#define RPS_PUSH_FLAG_SEQ 0x0100u
/* CLOCK hdr.flags: sent again to a promoted backup (replicated shards): a
 * server ignores it silently if the worker finished that clock already. */
#define RPS_CLOCK_FLAG_RESENT 0x0100u

/* ASSIGN carries a struct rps_push too: elements [offset, offset + count) of
 * the slice become the values that follow, that slice's optimizer state and
 * step count start afresh; clock, timestamp_ns and the norms are ignored, and
 * the frame is not counted in any CLOCK's pushes. */

struct rps_pull {
	uint64_t key;
	uint32_t slice;
	uint32_t shard;
	uint64_t offset;
	uint32_t count;
	uint32_t min_clock;   /* answer when the pull's consistency condition holds at this clock */
};
_Static_assert(sizeof(struct rps_pull) == 32, "rps_pull is 32 bytes");

/* End of a worker's clock on one server: how many PUSH frames it sent to each
 * shard of that server during the clock, so the server knows when all arrived
 * whatever order its priority rings apply them in. */
struct rps_clock {
	uint32_t clock;       /* the clock that ends */
	uint32_t num_shards;
	/* followed by uint32_t pushes[num_shards] */
};
_Static_assert(sizeof(struct rps_clock) == 8, "rps_clock is 8 bytes");

/* A worker (re)connected to a server: "my clock is `clock`, I have finished
 * every clock before it". Sent right after the hello, before any other frame:
 * by a worker that joined a running job (it starts at the shards' clock), and
 * after reconnecting to a restarted server (its clock went on meanwhile). The
 * shard takes the worker's clock to max(its record, clock) and waits for it
 * again if it was marked dead. Over TCP it applies to every shard of the
 * server; with channels (RDMA) to the shard of the connection. */
struct rps_sync {
	uint32_t clock;
	uint32_t pid;         /* the worker's process id (its node's pid in the map); 0 unknown */
};
_Static_assert(sizeof(struct rps_sync) == 8, "rps_sync is 8 bytes");

/* ---- sparse tables (ops 30-35) ----
 * A table's rows live on the shard (server, shard) chosen by
 * rps_row_route(table, id) (src/rowinit.h); every frame carries the rows of
 * one shard. */

/* TABLE_DECLARE: create table `table` on shard `shard` (idempotent), followed
 * by the table's optimizer (struct rps_optim_wire, always present). */
struct rps_table_decl {
	uint32_t table;
	uint32_t shard;
	uint32_t dim;	    /* 1..RPS_TABLE_MAX_DIM */
	uint32_t precision; /* enum rps_table_precision; only fp32 (0) is served */
	uint32_t init;	    /* enum rps_table_init */
	float init_scale;
	uint64_t seed;
	uint64_t capacity_hint; /* rows expected on this shard */
};
_Static_assert(sizeof(struct rps_table_decl) == 40, "rps_table_decl is 40 bytes");

/* TABLE_DECLARE_ACK; a refusal may end in a text reason (at most
 * RPS_DECLARE_REASON_MAX bytes, not NUL-terminated). */
struct rps_table_ack {
	uint32_t table;
	uint32_t shard;
	uint64_t rows; /* rows the shard holds of the table now */
};
_Static_assert(sizeof(struct rps_table_ack) == 16, "rps_table_ack is 16 bytes");

/* ROWS_PULL, ROWS_PULL_RESP (echoed, data = the rows in the order of the
 * ids asked, hdr.aux = the shard's clock), ROWS_PUSH. */
struct rps_rows {
	uint32_t table;
	uint32_t shard;
	uint32_t count;	      /* ids that follow */
	uint32_t dim;	      /* floats per row (the table's, checked by the server) */
	uint32_t clock;	      /* PULL: min_clock (as rps_pull); PUSH: the worker's clock */
	uint32_t flags;	      /* 0 */
	uint64_t timestamp_ns; /* PUSH: the worker's CLOCK_REALTIME; PULL: 0 */
};
_Static_assert(sizeof(struct rps_rows) == 32, "rps_rows is 32 bytes");
/* Largest count of one frame (the batch is split by the worker). */
#define RPS_ROWS_FRAME_MAX (1u << 20)
/* rps_rows.flags of a ROWS_PULL (and its answer): after the rows the answer
 * carries u32 slot[count], each row's slot in the shard's arena (one-sided
 * readers cache it). */
#define RPS_ROWS_FLAG_SLOTS 0x1u
/* Bits 1-2 of a ROWS_PULL's flags (and its answer): the table's storage
 * precision (enum rps_table_precision) as the worker declared it; the
 * answer's rows are in it (4 bytes an element for fp32, 2 for fp16 / bf16;
 * the worker widens). The server refuses a pull whose precision is not the
 * table's (-EINVAL). Pushes carry fp32 gradients and flags 0. */
#define RPS_ROWS_FLAG_PREC_SHIFT 1
#define RPS_ROWS_FLAG_PREC_MASK	 0x6u
#define RPS_ROWS_FLAG_PREC(p)	 (((uint32_t)(p) << RPS_ROWS_FLAG_PREC_SHIFT) & RPS_ROWS_FLAG_PREC_MASK)
#define RPS_ROWS_PREC_OF(flags)	 (((flags) & RPS_ROWS_FLAG_PREC_MASK) >> RPS_ROWS_FLAG_PREC_SHIFT)

/* TABLE_MAP: where a table's arena chunks are registered, from chunk `first`
 * on. The answer echoes it with count, geometry and count chunk entries. */
struct rps_table_map {
	uint32_t table;
	uint32_t shard;
	uint32_t first;	      /* first chunk wanted / given */
	uint32_t count;	      /* answer: entries that follow */
	uint32_t nchunks;     /* answer: chunks registered in all */
	uint32_t chunk_shift; /* answer: slots per chunk = 1 << chunk_shift */
	uint32_t slot_bytes;  /* answer */
	uint32_t dim;	      /* answer */
};
_Static_assert(sizeof(struct rps_table_map) == 32, "rps_table_map is 32 bytes");
struct rps_table_chunk {
	uint64_t addr; /* remote address of the chunk's slot 0 */
	uint32_t remote_key;
	uint32_t reserved;
};
_Static_assert(sizeof(struct rps_table_chunk) == 16, "rps_table_chunk is 16 bytes");
#define RPS_TABLE_MAP_MAX 4096u /* entries per answer */
/* A TABLE_MAP_RESP ends (after its chunk entries) with where the shard's row
 * index is registered for remote READ (docs/protocol.md, Tables): nbuckets
 * buckets of bucket_bytes (64: 16 u32 entries) from addr. generation counts
 * the index's rehashes; flags RPS_TABLE_INDEX_READABLE when it can be read
 * (0: not registered, look rows up by frames). */
struct rps_table_index {
	uint64_t addr;
	uint32_t remote_key;
	uint32_t bucket_bytes;
	uint64_t nbuckets;
	uint32_t generation;
	uint32_t flags;
};
_Static_assert(sizeof(struct rps_table_index) == 32, "rps_table_index is 32 bytes");
#define RPS_TABLE_INDEX_READABLE 0x1u
/* A bucket: 16 u32 entries. With h = rps_row_hash(table, id) (src/rowinit.h)
 * and an array of nbuckets: entry = (tag & ~mask) | (slot + 1), 0 empty,
 * mask = 2^slot_bits - 1, slot_bits = min(27, log2(16 nbuckets)) (the array
 * is replaced before its rows reach 80% of 16 nbuckets, so slot + 1 fits),
 * tag = the high 32 bits of rps_mix64(h) (both: src/rowinit.h): the smaller the array the more of
 * the tag an entry keeps (fewer other rows' slots read). Row id's first
 * bucket is h & (nbuckets - 1), then the next ones (linear probing over
 * buckets; a bucket with an empty entry ends a lookup).
 * RPS_TABLE_ENTRY_MOVED in an entry: the array was replaced (a rehash). */
#define RPS_TABLE_BUCKET_ENTRIES 16u
#define RPS_TABLE_ENTRY_SLOTBITS 27u /* at most */
#define RPS_TABLE_ENTRY_MOVED	 0xffffffffu
/* REPL_FWD: one entry a primary shard's update thread took from its ring, in
 * the order it took them, for the same shard of its backup (docs/replication.md).
 * Data after it: PUSH / ASSIGN: struct rps_push, [uint64 seq if flags has
 * RPS_PUSH_FLAG_SEQ], float[count]; DECLARE: struct rps_declare [+ struct
 * rps_optim_wire if flags has RPS_DECLARE_FLAG_OPTIM]; others: none. */
struct rps_repl_fwd {
	uint32_t type;   /* the ring entry type (server/shard.h, enum rps_srv_ent) */
	uint32_t shard;
	uint32_t worker;
	uint32_t clock;
	uint64_t u64;    /* CLOCK: the pushes of the clock */
	int32_t status;  /* PUSH / ASSIGN refused by the primary: counted, not applied */
	uint16_t flags;  /* the worker frame's hdr.flags */
	uint16_t reserved;
};
_Static_assert(sizeof(struct rps_repl_fwd) == 32, "rps_repl_fwd is 32 bytes");

/* RDMAPS_REPLICAS=3 (a chain primary -> backup 1 -> backup 2): the address a
 * backup listens on, after REPL_READY; and after the HELLO_ACK (num_shards 0)
 * a primary answers to a HELLO of role server with channel
 * RPS_REPL_HELLO_WHERE: where its first backup listens (backup 2 links
 * there). */
#define RPS_REPL_HELLO_WHERE 0xfffffffeu
/* A HELLO of role server with this channel: a replacement server asks to
 * join as the backup of a server that has none (refused: -EADDRINUSE). */
#define RPS_REPL_HELLO_JOIN 0xfffffffdu
/* REPL_COPY: a piece [off, off + len) of a shard's state of total bytes. */
struct rps_repl_copy_piece {
	uint32_t shard;
	uint32_t reserved;
	uint64_t total;
	uint64_t off;
};
_Static_assert(sizeof(struct rps_repl_copy_piece) == 24, "rps_repl_copy_piece is 24 bytes");
struct rps_repl_addr {
	uint32_t port;
	uint32_t reserved;
	char host[64]; /* NUL-terminated */
};
_Static_assert(sizeof(struct rps_repl_addr) == 72, "rps_repl_addr is 72 bytes");

/* Control path. */
struct rps_register {
	uint8_t role;
	uint8_t transport;    /* 0 tcp, 1 rdma */
	uint16_t port;        /* data port the node listens on (servers) */
	uint32_t want_rank;   /* UINT32_MAX: any; otherwise a rank to rejoin as */
	char host[64];        /* address workers connect to, NUL terminated */
	uint32_t pid;
	uint32_t reserved;
};
_Static_assert(sizeof(struct rps_register) == 80, "rps_register is 80 bytes");

struct rps_node {
	uint32_t id;          /* cluster-wide node id */
	uint8_t role;
	uint8_t alive;
	uint16_t port;
	uint32_t rank;        /* rank within its role */
	uint32_t pid;
	char host[64];
};
_Static_assert(sizeof(struct rps_node) == 80, "rps_node is 80 bytes");

struct rps_map {
	uint32_t your_id;
	uint32_t your_rank;
	uint32_t num_servers;
	uint32_t num_workers;
	uint32_t num_nodes;
	uint32_t epoch;       /* increases whenever the map changes */
	/* followed by struct rps_node[num_nodes] */
};
_Static_assert(sizeof(struct rps_map) == 24, "rps_map is 24 bytes");

struct rps_heartbeat {
	uint32_t id;
	uint32_t clock;       /* workers: current clock; servers: min shard clock */
	uint64_t counters[4]; /* servers: pushes, pulls, bytes in, bytes out */
};
_Static_assert(sizeof(struct rps_heartbeat) == 40, "rps_heartbeat is 40 bytes");

/* HEARTBEAT hdr.aux: the node's CPU use since its previous heartbeat, in
 * thousandths of one core, plus 1 (0: not known). 2 cores busy: 2001. */
#define RPS_HB_CPU_NONE 0u

/* Optional data after a server's HEARTBEAT (a scheduler of this version reads
 * it; workers send none): what `rdmaps-ctl status` and the dashboard show per
 * shard. */
struct rps_heartbeat_srv {
	uint32_t num_shards;  /* shard entries that follow */
	uint32_t shard_len;   /* bytes of each: 0 (older servers) = 8, rps_hb_shard;
			       * sizeof(struct rps_hb_shard_ext) */
	int64_t ckpt_age_ms;  /* since the oldest shard's newest checkpoint; -1: none yet */
	uint64_t ckpts;       /* checkpoints written, all shards */
	uint64_t ckpt_fails;  /* checkpoints that failed */
};
_Static_assert(sizeof(struct rps_heartbeat_srv) == 32, "rps_heartbeat_srv is 32 bytes");

struct rps_hb_shard {
	uint32_t ring_depth;  /* entries waiting in the shard's priority ring */
	uint32_t clock;       /* the shard's applied clock */
};
_Static_assert(sizeof(struct rps_hb_shard) == 8, "rps_hb_shard is 8 bytes");

/* A shard's entry with its counters (shard_len 32). */
struct rps_hb_shard_ext {
	uint32_t ring_depth;
	uint32_t clock;
	uint64_t pushes_applied; /* by the update thread (optimizer steps under ASP/SSP) */
	uint64_t pulls_served;	 /* PULL frames answered by the server's CPU */
	uint64_t ckpt_clock;	 /* clock of its newest checkpoint */
};
_Static_assert(sizeof(struct rps_hb_shard_ext) == 32, "rps_hb_shard_ext is 32 bytes");

/* REPORT (worker -> scheduler): one named figure of the job (loss,
 * accuracy, samples/s, ...) for the dashboard's curves. name: 1 to 23
 * characters of [A-Za-z0-9_.-], NUL padded; value: any double, a value that
 * is not finite is kept as a gap. */
#define RPS_REPORT_NAME_MAX 23
struct rps_report {
	char name[RPS_REPORT_NAME_MAX + 1];
	uint32_t clock; /* the worker's clock when it reported */
	uint32_t reserved;
	double value;
};
_Static_assert(sizeof(struct rps_report) == 40, "rps_report is 40 bytes");
/* 0 if r->name is a well-formed report name, else -EINVAL with *why_p. */
int rps_proto_report_check(const struct rps_report *r, const char **why_p);

/* Ring all-reduce (worker/ring*.c, docs/allreduce.md): a piece of the
 * flattened tensor, elements [offset, offset + count) of `total`, in phase
 * (0 reduce-scatter, 1 all-gather) and step of call `seq`. `keysum` is a hash
 * of the caller's keys and lengths: every rank must pass the same. */
struct rps_ring_data {
	uint64_t seq;	 /* the sender's allreduce call, from 1 */
	uint64_t total;	 /* elements of the whole call */
	uint64_t offset; /* first element of this piece */
	uint64_t keysum; /* FNV-1a of keys and lengths */
	uint32_t count;	 /* float32 elements that follow */
	uint16_t phase;	 /* 0 reduce-scatter, 1 all-gather */
	uint16_t step;	 /* 0 .. W-2 */
	uint32_t nkeys;
	uint32_t origin; /* ABORT: the rank that failed first */
};
_Static_assert(sizeof(struct rps_ring_data) == 48, "rps_ring_data is 48 bytes");

/* Control requests: CHECKPOINT and EXPORT (added in version 1, later).
 *
 * A requester (rdmaps-ctl, or a worker over its control connection) sends the
 * op with hdr.aux RPS_CTLREQ_REQ and a struct rps_ctlreq; the scheduler runs
 * one request at a time, sends the same op and struct (its own req_id) to
 * every live server, and relays what they answer, unchanged, to the
 * requester: EXPORT's RPS_CTLREQ_DATA frames (rps_export_part + float[count])
 * and one RPS_CTLREQ_RESULT frame per server (rps_ctlres +
 * rps_ctlres_shard[num_shards]). When every server it asked has answered, died
 * or run out of time, it ends the request with RPS_CTLREQ_DONE: hdr.status 0,
 * or the first failure with its reason as text (naming the server). */
enum rps_ctlreq_aux {
	RPS_CTLREQ_REQ = 0,    /* the request: struct rps_ctlreq */
	RPS_CTLREQ_DATA = 1,   /* EXPORT, server -> sched -> requester: a piece of a slice */
	RPS_CTLREQ_RESULT = 2, /* server -> sched -> requester: that server is done */
	RPS_CTLREQ_DONE = 3,   /* sched -> requester: the end; hdr.status; data: reason text */
	RPS_CTLREQ_ROWS = 4,   /* EXPORT, server -> sched -> requester: rows of a table */
};

#define RPS_CTLREQ_CLOCK 1u /* rps_ctlreq.flags: clock is a target clock */

struct rps_ctlreq {
	uint32_t clock;      /* with RPS_CTLREQ_CLOCK: the target clock (BSP) */
	uint32_t flags;      /* RPS_CTLREQ_* */
	uint32_t timeout_ms; /* the scheduler waits this long for the servers; 0: its default */
	uint32_t reserved;
};
_Static_assert(sizeof(struct rps_ctlreq) == 16, "rps_ctlreq is 16 bytes");

/* One server's answer. status != 0: the whole server failed (why says how);
 * otherwise each shard says for itself. */
struct rps_ctlres {
	uint32_t server;      /* rank */
	uint32_t num_shards;  /* rps_ctlres_shard entries that follow */
	uint32_t consistency; /* enum rps_consistency of the server */
	int32_t status;
	char why[240];        /* NUL terminated */
};
_Static_assert(sizeof(struct rps_ctlres) == 256, "rps_ctlres is 256 bytes");

struct rps_ctlres_shard {
	uint32_t shard;
	int32_t status;  /* 0 or -errno */
	uint64_t clock;  /* the shard's clock when it wrote / took its snapshot */
	uint64_t nslices;
	uint64_t nelems; /* EXPORT: elements sent */
	uint64_t nrows;	 /* EXPORT: table rows sent (RPS_CTLREQ_ROWS), every table */
	char text[472];  /* CHECKPOINT: the file; status != 0: the reason. NUL terminated */
};
_Static_assert(sizeof(struct rps_ctlres_shard) == 512, "rps_ctlres_shard is 512 bytes");

/* EXPORT data: elements [offset, offset + count) of slice `slice` of key,
 * as shard `shard` of server `server` held them at `clock`. */
struct rps_export_part {
	uint64_t key;
	uint32_t slice;
	uint32_t shard;
	uint64_t slice_elems; /* elements of the whole slice */
	uint64_t offset;
	uint32_t count;       /* float32 values that follow */
	uint32_t server;
	uint64_t clock;
};
_Static_assert(sizeof(struct rps_export_part) == 48, "rps_export_part is 48 bytes");
#define RPS_EXPORT_PART_FLOATS 65536u /* per frame: 256 KiB, under every control limit */

/* EXPORT table rows (RPS_CTLREQ_ROWS): rows [first, first + count) of the
 * `total` rows of table `table` that shard `shard` of server `server` held at
 * `clock`, followed by u64 ids[count], then float rows[count][dim] (fp16 /
 * bf16 tables widened to fp32: exact). Every shard sends at least one piece
 * per declared table (count 0 when it holds no row). */
struct rps_export_rows {
	uint32_t table;
	uint32_t shard;
	uint32_t server;
	uint32_t dim;
	uint64_t clock;
	uint64_t total; /* rows of this table on this shard */
	uint64_t first; /* index of this piece's first row among them */
	uint32_t count; /* rows that follow */
	uint32_t precision; /* enum rps_table_precision as stored */
};
_Static_assert(sizeof(struct rps_export_rows) == 48, "rps_export_rows is 48 bytes");
#define RPS_EXPORT_ROWS_BYTES (256u << 10) /* ids + rows per frame, at most */

/* What the protocol knows about one op: src/proto.c holds one descriptor per
 * op of enum rps_op, and every lookup by op (name, lengths, checks) reads it. */
struct rps_op_desc {
	const char *name;   /* "PUSH" */
	uint32_t fixed_len; /* payload bytes before any tail */
	uint32_t max_len;   /* largest payload; 0 = only the connection's limit */
	uint8_t has_data;   /* a variable tail may follow the fixed part */
	uint8_t control;    /* control path (scheduler), not data path (servers) */
	uint8_t senders;    /* bit (1 << enum rps_role) per role that may send it */
	/* The payload's own consistency (counts against len, ranges); NULL: none.
	 * Called with at least fixed_len bytes. 0 or -EPROTO with *why_p. */
	int (*check)(const struct rps_frame_hdr *h, const void *payload, const char **why_p);
};

/* The descriptor of op, or NULL for an unknown op. */
const struct rps_op_desc *rps_proto_op(uint8_t op);
/* Fixed payload size of an op (the part before any data), or -1 for an
 * unknown op. */
int rps_proto_fixed_len(uint8_t op);
/* "PUSH"; "UNKNOWN" for an unknown op. */
const char *rps_proto_op_name(uint8_t op);
/* What a hello claims, in words for a log line: "a worker asking for any
 * rank", "a server claiming rank 1", "rdmaps-ctl", "an unknown role 7 (rank 2)".
 * Writes into buf and returns it. */
const char *rps_proto_claim_text(uint32_t role, uint32_t rank, char *buf, size_t len);

/* Fill a header. */
void rps_proto_hdr_init(struct rps_frame_hdr *h, uint8_t op, uint32_t len, uint32_t req_id);

/* Check a received header: magic, version, known op, fixed part present,
 * len <= max_len. 0 or -EPROTO / -EMSGSIZE; *why_p gets a static reason. */
int rps_proto_hdr_check(const struct rps_frame_hdr *h, uint64_t max_len, const char **why_p);

/* Check a payload's internal consistency (e.g. a PUSH's count matches len,
 * a CLOCK's shard count matches len). 0 or -EPROTO with *why_p. */
int rps_proto_payload_check(const struct rps_frame_hdr *h, const void *payload, const char **why_p);

/* Hello: build from role/rank (channel 0, nonce 0: the transport draws the
 * nonce when it connects). */
void rps_proto_hello_init(struct rps_hello *h, uint8_t role, uint32_t rank);
/* A hello as received (buf, len bytes): its length, magic, version, role and
 * flags (0). Pure (fuzzed). 0 with *h_p, or -EPROTO with a static reason. The
 * secret is checked by the challenge-response after it (src/auth.h). */
int rps_proto_hello_decode(const void *buf, size_t len, struct rps_hello *h_p,
			   const char **why_p);

#endif
