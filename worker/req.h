/* Requests and their pieces.
 *
 * A request (struct rps_req, the public handle) fans out into pieces: one
 * per frame sent (DECLARE, PUSH, PULL) or per slice read over RDMA. The
 * request completes when its last piece completed; its status is the first
 * error of any piece.
 *
 * Pieces come from a pool that grows in blocks and never shrinks, so the
 * steady state allocates nothing. A piece is found again from the wire by
 * its slot and generation: req_id (32 bits, echoed by the server) and the
 * transport's 64-bit ctx (SEND_DONE, READ_DONE) both encode them, so an
 * answer for a piece that was failed and reused meanwhile is recognised as
 * stale and dropped.
 *
 * A piece is finished when nothing it waits for is outstanding (p->waits):
 * the response frame, the SEND_DONE of a zero-copy send (the caller's buffer
 * is in the transport's hands until then), the RDMA READs it posted.
 *
 * Locking: core->lock guards the pools, every piece's waits/status and
 * every request's counters. A request holds one extra reference (the
 * guard) while its submitter is still adding pieces, so it cannot complete
 * half-built; rps_wreq_seal drops it.
 * Callbacks and the freeing of orphaned internal requests run on the
 * progress thread (rps_wcore_drain); other threads queue them and wake it.
 */
#ifndef RPS_WORKER_REQ_H
#define RPS_WORKER_REQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <rdmaps/worker.h>

#include "src/proto.h"
#include "worker/keytab.h"
#include "worker/plan.h"

struct rps_wconn;
struct rps_wreg;

enum rps_piece_kind {
	RPS_PK_DECLARE = 1, /* DECLARE -> DECLARE_ACK */
	RPS_PK_PUSH,        /* PUSH or ASSIGN (zero copy) -> PUSH_ACK */
	RPS_PK_PULL,        /* PULL -> PULL_RESP (count 0: clock wait) */
	RPS_PK_RPULL,       /* RDMA: clock reads, then chunk reads of one slice */
	RPS_PK_RHDR,        /* RDMA: read a shard's store header */
	RPS_PK_ROWS,        /* tables: TABLE_DECLARE, ROWS_PULL or ROWS_PUSH (worker/table.h) */
};

/* What a piece still waits for. */
#define RPS_PW_RESP 1u /* a response frame */
#define RPS_PW_SEND 2u /* SEND_DONE of its zero-copy send */
#define RPS_PW_READ 4u /* RDMA READs (u.rp.outstanding) */
#define RPS_PW_ALL 7u

/* RDMA read path state of one slice. */
#define RPS_RD_WINDOW 4 /* READs in flight per slice */
enum rps_rp_phase { RPS_RP_CLOCK = 0, RPS_RP_DATA, RPS_RP_HDR };

struct rps_rd {
	uint64_t lo;     /* first slice chunk of this read slot */
	uint32_t n;      /* chunks it covers */
	uint8_t busy;    /* a READ of this slot is outstanding */
	uint32_t run_lo; /* outstanding re-read: chunks [lo + run_lo, + run_n) */
	uint32_t run_n;
	uint64_t torn;   /* chunks (bit i = lo + i) still to re-read */
	char *lines;     /* scratch: RPS_RPLAN_LINES per chunk (registered) */
	uint32_t lines_mrh; /* its registration's, 0 if none */
	char *bounce;	    /* unregistered dest: the data lands here first */
	uint32_t bounce_mrh;
};

struct rps_rpull {
	struct rps_rplan plan;
	float *dest;          /* element 0 of the slice in the caller's buffer */
	struct rps_wreg *reg;	    /* the registered pull buffer dest lies in (a reference) */
	uintptr_t dest_lo, dest_hi; /* ... its range */
	uint32_t dest_mrh;	    /* ... and handle; 0: none (bounce) */
	uint8_t bounce;		    /* data through bounce blocks, then copied */
	uint8_t nslots;       /* read slots with scratch (rd[0..nslots)) */
	uint32_t remote_key;
	uint64_t nchunks;     /* 0: a pure clock wait */
	uint64_t next;        /* next chunk not yet given to a read slot */
	uint32_t min_clock;
	uint64_t clock_raddr; /* the clock word this pull waits on */
	uint8_t phase;        /* enum rps_rp_phase */
	uint8_t outstanding;  /* READs posted, not yet done */
	uint32_t backoff_us;  /* clock re-read delay */
	uint64_t retry_at;    /* rps_now_ns() of the next clock read, 0 = none */
	uint64_t torn_retries;
	/* READ of a low-precision copy (worker/lowprec.h): the plan's elements
	 * are words of two 2-byte elements of this precision, lp_n of them in
	 * all, widened into dest; 0: float32 */
	uint32_t lp_prec;
	uint64_t lp_n;
	struct rps_rd rd[RPS_RD_WINDOW];
};

struct rps_cblob;
struct rps_wkey;

struct rps_piece {
	uint32_t slot;
	_Atomic uint32_t gen;  /* bumped on every allocation */
	uint8_t kind;          /* enum rps_piece_kind; 0 = free */
	uint8_t waits;         /* RPS_PW_* outstanding */
	uint8_t resend;        /* replicated shards: kept to be sent again after a failover */
	int status;            /* first error */
	struct rps_req *req;
	struct rps_wconn *conn;
	uint32_t server;
	uint32_t shard;
	struct rps_piece *next; /* free list, retry list */
	union {
		struct {
			struct rps_frame_hdr hdr;
			struct rps_push fixed;
			const float *data;
			uint8_t assign; /* sent as ASSIGN, not counted in a CLOCK */
			/* compressed (worker/compress.h): codec 0 sends data as
			 * float32; otherwise cdata[clen] with hdr.flags = codec,
			 * from blob (a reference, dropped when the piece ends) */
			uint8_t codec;
			uint32_t clen;
			const void *cdata;
			struct rps_cblob *blob;
			struct rps_wkey *wkey; /* its per-key wire counters */
			/* replicated shards: its sequence number (0: none, sent
			 * without) */
			uint64_t seq;
		} push;
		struct {
			struct rps_pull fixed;
			float *dest;       /* NULL once detached (answer discarded) */
			struct rps_wreg *reg; /* registered buffer dest lies in (a reference) */
			uint8_t receiving; /* recv_dest gave dest out: data is landing */
			uint8_t lp;	   /* PULL_LP of this precision (worker/lowprec.h); 0: PULL */
		} pull;
		struct {
			struct rps_declare fixed;
			struct rps_wslice *out;
			const struct rps_optim_opts *optim; /* sent with it; NULL: none */
		} decl;
		struct rps_rpull rp;
		struct { /* RPS_PK_ROWS: everything points into the call's batch */
			uint8_t op;		   /* the frame sent */
			struct rps_rows r;	   /* ROWS_*: the fixed part */
			const uint64_t *ids;	   /* r.count distinct ids */
			const float *grads;	   /* PUSH: r.count * r.dim summed gradients */
			const uint32_t *ustart;	   /* PULL: id j fills out rows pos[ustart[j] ..
						    * uend[j]) */
			const uint32_t *uend;
			const uint32_t *pos;
			float *out;
			const struct rps_table_decl *decl; /* TABLE_DECLARE */
			const struct rps_optim_opts *optim;
			uint64_t *rows_out; /* TABLE_DECLARE: += the shard's row count */
			/* one-sided reads (table_read.c): the shard's cache, and for a
			 * READ piece (op RPS_WT_OP_READ) the slot and where it lands */
			struct rps_wtshard *cache;
			uint64_t raddr;
			uint32_t rkey;
			uint32_t slot_bytes;
			char *local;
			uint32_t lhandle;
			uint32_t tries;
		} rows;
	} u;
};

/* A direct request: one READ of a one-chunk slice, posted by read_notify
 * and finished by whoever waits for or tests the request (read_direct.c).
 * It has no piece and no event; it is not counted in reqs_inflight. */
struct rps_rdirect {
	struct rps_tr_done done; /* the READ's completion */
	struct rps_wconn *conn;
	char *lines;             /* scratch: the chunk's two version lines */
	uint32_t lines_mrh;     /* its registration's, 0 if none */
	struct rps_wreg *reg; /* scatter into a registered dest: its reference */
	uint64_t raddr;
	uint32_t remote_key;
	uint32_t line;           /* version line bytes (rps_rplan_torn) */
	/* copy != 0: the chunk is read whole into lines (one sge); its data,
	 * len bytes at lines + line, of which copy go to dest once clean */
	float *dest;
	uint32_t len, copy;
	int nsge;
	struct rps_tr_sge sge[RPS_RPLAN_MIN_SGE];
};

struct rps_req {
	struct rps_wcore *core;
	int remaining;   /* pieces not finished + the guard while being built */
	int status;      /* first error */
	uint8_t aborted; /* a connection failed under it: finish without the rest */
	uint8_t done;
	uint8_t orphan;  /* nobody will wait: free on completion */
	uint8_t queued;  /* on the drain queue */
	uint8_t direct;  /* a direct request: dr, no pieces */
	rps_done_cb cb;
	void *arg;
	struct rps_req *next;
	struct rps_rdirect dr;
};

#define RPS_PIECE_BLOCK 1024u
#define RPS_PIECE_MAX_BLOCKS 4096u /* 4M pieces: req_id keeps 22 bits of slot */
#define RPS_REQ_BLOCK 256u
#define RPS_KEPT_SLOTS 64u /* threads that keep a direct request each */

struct rps_wcore {
	uint64_t id;             /* unique in the process, never reused */
	pthread_mutex_t lock;
	pthread_cond_t cv;       /* a request completed, or pieces freed */
	int cv_waiters;          /* threads in cv_wait (req.c): no broadcast without */
	_Atomic(struct rps_piece *) blocks[RPS_PIECE_MAX_BLOCKS];
	uint32_t nblocks;
	struct rps_piece *free_pieces;
	uint64_t pieces_inuse;
	uint64_t pieces_total;   /* pieces ever allocated (tests, statistics) */
	struct rps_req *free_reqs;
	void **req_blocks;       /* for freeing */
	uint32_t nreq_blocks, req_blocks_cap;
	uint64_t reqs_inflight;  /* requests not yet complete */
	struct rps_req *drain_head, *drain_tail; /* completed cb / orphan requests */
	int abort_pending;       /* some request was aborted: rps_wcore_abort_scan */
	void (*wake)(void *arg); /* make the progress thread drain */
	void *wake_arg;
	/* A waiting caller (not the progress thread) reaps completions itself
	 * for up to spin_ns before it sleeps: spin(wake_arg) handles what the
	 * transport has ready. NULL / 0: callers sleep at once. */
	void (*spin)(void *arg);
	uint64_t spin_ns;
	_Atomic uint64_t spin_last_ns; /* when a caller last spun */
	/* direct waits that slept, and those woken by the nap (rps_worker_stats) */
	_Atomic uint64_t stat_direct_sleeps, stat_direct_naps;
	/* Direct requests (req->direct). direct_step(arg, req, arm): 1 once
	 * req is finished (req->status set), 0 while its READ is out; arm: the
	 * caller is about to sleep on cv and wants a broadcast when the READ
	 * ends. direct_fini_locked(arg, req) releases what req holds. */
	int (*direct_step)(void *arg, struct rps_req *req, int arm);
	void (*direct_fini_locked)(void *arg, struct rps_req *req);
	void *direct_arg;
	/* replicated shards (RDMAPS_REPLICAS > 1): push pieces of a lost
	 * connection are kept for the promoted backup, not failed */
	int keep_pushes;
	/* finished direct requests kept, one per thread (rps_wreq_new_direct) */
	_Atomic(struct rps_req *) kept[RPS_KEPT_SLOTS];
	/* called under the lock when a piece finishes, before it is freed */
	void (*piece_fini)(void *arg, struct rps_piece *p);
	void *piece_fini_arg;
};

int rps_wcore_init(struct rps_wcore *core);
void rps_wcore_fini(struct rps_wcore *core);
/* The calling thread is core's progress thread (it calls this first). */
void rps_wcore_be_progress(struct rps_wcore *core);
/* Is the calling thread the progress thread? */
int rps_wcore_on_progress(const struct rps_wcore *core);
/* Unlock; if completions were queued and we are not the progress thread, wake it. */
void rps_wcore_unlock(struct rps_wcore *core);
/* Progress thread: run queued callbacks, free orphans. Returns how many. */
int rps_wcore_drain(struct rps_wcore *core);

/* ---- ids ---- */
#define RPS_REQID_SLOT_BITS 22u
#define RPS_REQID_SLOT_MASK ((1u << RPS_REQID_SLOT_BITS) - 1)
static inline uint32_t rps_piece_reqid(const struct rps_piece *p)
{
	uint32_t gen = atomic_load_explicit(&((struct rps_piece *)p)->gen, memory_order_relaxed);

	return (gen << RPS_REQID_SLOT_BITS) | p->slot;
}
/* ctx: bit 63 set (never 0), gen in 62..32, sub in 31..24, slot in 23..0 */
static inline uint64_t rps_piece_ctx(const struct rps_piece *p, uint8_t sub)
{
	uint32_t gen = atomic_load_explicit(&((struct rps_piece *)p)->gen, memory_order_relaxed);

	return (1ull << 63) | ((uint64_t)(gen & 0x7fffffffu) << 32) | ((uint64_t)sub << 24) |
	       (p->slot & 0xffffffu);
}
static inline uint8_t rps_ctx_sub(uint64_t ctx)
{
	return (uint8_t)(ctx >> 24);
}
/* The live piece a req_id / ctx names, or NULL (stale, garbage). Lock-free;
 * the caller checks the piece's fields under the lock before trusting it. */
struct rps_piece *rps_piece_by_reqid(struct rps_wcore *core, uint32_t req_id);
struct rps_piece *rps_piece_by_ctx(struct rps_wcore *core, uint64_t ctx);

/* ---- under core->lock ---- */
/* NULL only when the pool is at its maximum (-ENOMEM) or memory is out. */
struct rps_piece *rps_piece_alloc_locked(struct rps_wcore *core, struct rps_req *req,
					 uint8_t kind, uint8_t waits);
/* Clear `mask` of p's waits, record status (first error wins); when nothing
 * is left, free the piece and account it to its request. */
void rps_piece_clear_locked(struct rps_wcore *core, struct rps_piece *p, unsigned mask,
			    int status);
/* p's connection is gone, with status (any code: RDMA's -ETIMEDOUT, retries
 * exceeded, too): p fails with it (first error wins) and its request is
 * aborted (below), so that it does not wait for pieces parked elsewhere.
 * p's waits are the caller's to clear. */
void rps_piece_conn_lost_locked(struct rps_wcore *core, struct rps_piece *p, int status);
/* Fail every live piece whose conn is c (all waits cleared) and abort their
 * requests, whatever status is. Returns how many. */
int rps_wcore_fail_conn_locked(struct rps_wcore *core, const struct rps_wconn *c, int status);
/* Live pieces. */
uint64_t rps_wcore_pieces_locked(struct rps_wcore *core);

/* Abort. When a piece fails because its connection is gone (-ECONNRESET,
 * -EHOSTDOWN, -ECANCELED, -ENOTCONN as its status when it finishes, or
 * rps_piece_conn_lost_locked / rps_wcore_fail_conn_locked with any status)
 * its request is marked aborted: its
 * other pieces may be parked on healthy servers (a BSP pull waiting for a
 * clock that will not come), and the request must not hang on them. The
 * progress thread then detaches every piece of an aborted request that no
 * longer touches the caller's memory: a PULL whose answer is not landing
 * (its answer will be discarded), a PUSH whose SEND_DONE came, a DECLARE; an
 * RDMA pull with no READ in flight is finished, one with READs stops posting
 * and finishes at its last READ_DONE. A detached piece lives on without a
 * request until its answer or its connection's end frees it.
 * Progress thread only (it alone reads a PULL's dest after posting). */
static inline int rps_status_is_conn(int st)
{
	return st == -ECONNRESET || st == -EHOSTDOWN || st == -ECANCELED || st == -ENOTCONN;
}
/* Detach p from its aborted request if it is safe now. 1 if detached. */
int rps_piece_detach_locked(struct rps_wcore *core, struct rps_piece *p);
/* Detach what can be of every aborted request. */
void rps_wcore_abort_scan_locked(struct rps_wcore *core);

/* ---- requests ---- */
/* A new request holding the guard reference. cb NULL: a handle for
 * rps_req_wait/test. NULL on -ENOMEM. */
struct rps_req *rps_wreq_new(struct rps_wcore *core, rps_done_cb cb, void *arg);
struct rps_req *rps_wreq_new_locked(struct rps_wcore *core, rps_done_cb cb, void *arg);
/* A direct request (struct rps_rdirect): no guard, not in reqs_inflight.
 * Its creator fills r->dr; r->dr.lines, if not NULL, is scratch it had
 * before (the calling thread's last one, kept in core->kept). Takes
 * core->lock only when the thread kept none. NULL on -ENOMEM. */
struct rps_req *rps_wreq_new_direct(struct rps_wcore *core);
/* A direct request is finished (or its READ never posted): kept for the
 * thread's next, or back to the pool (direct_fini_locked releases its
 * scratch). Not under core->lock. */
void rps_wreq_free_direct(struct rps_req *req);
/* Back to the pool (a completed request nobody will look at again). */
void rps_wreq_free_locked(struct rps_req *r);
/* Record an error on the request without a piece (first error wins). */
void rps_wreq_fail_locked(struct rps_req *req, int status);
/* Drop the guard: the request completes once its pieces have. */
void rps_wreq_seal(struct rps_req *req);
void rps_wreq_seal_locked(struct rps_req *req);
/* Wait for an internal request; on timeout it is orphaned (freed when it
 * completes) and -ETIMEDOUT returned. timeout_ms < 0: forever. */
int rps_wreq_wait_internal(struct rps_req *req, int timeout_ms);
/* Wait (timeout_ms < 0: forever) until no request is in flight. 0 or -ETIMEDOUT. */
int rps_wcore_quiesce(struct rps_wcore *core, int timeout_ms);

#endif
