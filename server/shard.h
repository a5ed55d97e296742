/* A shard (shard.c): its store, key table, priority ring and clocks, the
 * requests and ring entries that travel through it, and the creation of
 * slices (DECLARE) with their initial values. The update thread (update.h),
 * pulls (pull.h) and checkpoints (ckpt.h) build on it.
 */
#ifndef RPS_SERVER_SHARD_H
#define RPS_SERVER_SHARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmaps/server.h>

#include "server/keytab.h"
#include "server/pool.h"
#include "src/optim.h"
#include "src/proto.h"
#include "src/ring.h"
#include "src/store.h"
#include "transport/transport.h"

struct rps_srv_conn; /* the server's side of a connection (server_int.h) */
struct rps_ckpt_async; /* a shard's checkpoint writer (ckpt_async.h) */

enum rps_srv_req_op {
	RPS_REQ_DECLARE = 1,
	RPS_REQ_PUSH,
	RPS_REQ_PULL,
	RPS_REQ_ASSIGN, /* u.push: the values become the parameters (ASSIGN) */
	RPS_REQ_TABLE_DECLARE, /* u.tdecl (server/table.h) */
	RPS_REQ_ROWS_PUSH,     /* u.rows: ids and gradients in data (the frame's tail) */
	RPS_REQ_ROWS_PULL,     /* u.rows: ids owned (u.rows.ids) */
	RPS_REQ_TABLE_MAP,     /* u.tmap */
};

struct rps_slice_meta;

/* One DECLARE, PUSH, ASSIGN or parked PULL on its way through a shard. */
struct rps_srv_req {
	struct rps_srv_req *next;    /* parked / deferred lists */
	struct rps_srv_conn *sc;     /* NULL in tests */
	void *token;		     /* PUSH, ASSIGN: receive token, released when applied */
	float *data;		     /* PUSH, ASSIGN: count floats, usable as scratch */
	struct rps_slice_meta *meta; /* PUSH / ASSIGN / PULL: validated slice (NULL: none) */
	uint32_t op;		     /* enum rps_srv_req_op */
	uint32_t req_id;
	uint32_t worker; /* requester's rank */
	int32_t status;	 /* PUSH refused at validation: only counted */
	/* a compressed PUSH (src/codec.h): the codec id, data holds data_len
	 * bytes of it until the update thread widens it (server/codec_push.c) */
	uint16_t codec;
	uint32_t data_len;
	uint64_t seq;	 /* PUSH: the worker's sequence number (has_seq) */
	uint8_t has_seq;
	uint32_t repl_id; /* PUSH / ASSIGN forwarded to a backup: its pending ack (repl.c) */
	uint16_t flags;	  /* the frame's hdr.flags */
	union {
		struct {
			struct rps_declare decl;
			/* RPS_DECLARE_FLAG_OPTIM: the spec (owned: freed with the
			 * request, rps_srv_declare_done); NULL: none */
			struct rps_optim_opts *decl_optim;
			uint16_t decl_flags; /* the DECLARE's hdr.flags */
		};
		struct rps_push push;
		struct rps_pull pull;
		struct { /* RPS_REQ_TABLE_DECLARE */
			struct rps_table_decl td;
			struct rps_optim_opts *optim; /* owned */
		} tdecl;
		struct rps_table_map tmap;
		struct { /* RPS_REQ_ROWS_PUSH / _PULL (server/table.c) */
			struct rps_rows r;
			uint64_t *ids; /* PULL: count ids, owned */
		} rows;
	} u;
};

/* Ring entry types (struct rps_ring_entry.type). */
enum rps_srv_ent {
	RPS_ENT_DECLARE = 1, /* ptr = req, ptr2 = conn */
	RPS_ENT_PUSH,	     /* ptr = req, ptr2 = conn */
	RPS_ENT_CLOCK,	     /* info.worker ends info.clock with u64 pushes to this shard */
	RPS_ENT_DEAD,	     /* info.worker is dead: no longer waited for; u64 = its pid or 0 */
	RPS_ENT_REVIVE,	     /* info.worker rejoined: waited for again from the shard's clock;
			      * u64 = the new incarnation's pid or 0 */
	RPS_ENT_SYNC,	     /* info.worker says its clock is info.clock (RPS_OP_SYNC);
			      * u64 = its pid (rps_sync.pid) or 0 */
	RPS_ENT_CKPT,	     /* write a checkpoint now (on request) */
	RPS_ENT_RESTORE,     /* ptr = struct rps_shard_restore: load a checkpoint file */
	RPS_ENT_CTLREQ,	     /* control request (snap.h): info.key = op, info.worker = gen,
			      * info.nelems = 1: u64 is a target clock */
	RPS_ENT_ASSIGN,	     /* ptr = req (RPS_REQ_ASSIGN), ptr2 = conn: no clock counts it */
	RPS_ENT_TABLE,	     /* ptr = req: a table's DECLARE, ROWS_PUSH or ROWS_PULL
			      * (server/table.c) */
	RPS_ENT_REPL,	     /* a backup: ptr = a forwarded entry (server/repl.h) */
	RPS_ENT_REPL_COPY,   /* a primary: copy the shard to the joining backup (repl.h) */
	RPS_ENT_REPL_LOAD,   /* a joining backup: ptr = the shard's state to load (repl.h) */
};
/* RPS_ENT_CLOCK u64: the pushes of the clock, and this bit if the worker
 * sent the CLOCK again to a promoted backup (ignored if finished already) */
#define RPS_ENT_CLOCK_RESENT (1ull << 63)

struct rps_shard;

struct rps_shard_io {
	/* A push was applied (or refused): release req->token, answer PUSH_ACK with
	 * status, drop req->sc, free req. */
	void (*push_done)(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status);
	/* A declare finished: answer DECLARE_ACK (ack valid when status == 0; why:
	 * NULL or the refusal's reason, for the requester), free req and its
	 * decl_optim. */
	void (*declare_done)(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status,
			     const struct rps_declare_ack *ack, const char *why);
	/* A parked pull's condition holds: answer it, free req (update thread). */
	void (*pull_answer)(void *arg, struct rps_shard *sh, struct rps_srv_req *req);
	/* Tables (server/table.c): answer req with a frame of op (payload: fixed
	 * then data, copied), release req->token, drop req->sc, free req. */
	void (*rows_done)(void *arg, struct rps_shard *sh, struct rps_srv_req *req, uint8_t op,
			  int status, uint32_t aux, const void *fixed, size_t flen,
			  const void *data, size_t dlen);
};

struct rps_shard_params {
	uint32_t idx;
	uint32_t nworkers;
	size_t shard_bytes;
	uint32_t chunk_bytes;
	size_t ring_size;
	enum rps_priority_policy priority;
	rps_priority_fn priority_fn;
	void *priority_arg;
	enum rps_consistency consistency;
	uint32_t staleness;
	int bsp_arrival; /* BSP: one sum in arrival order (RDMAPS_BSP_SUM=arrival) */
	struct rps_optim_opts optim;
	struct rps_init init; /* for RPS_INIT_DEFAULT */
	uint64_t max_msg;     /* largest frame payload (pull size limit) */
	/* checkpoints (ckpt.c); ckpt_dir NULL or "": none */
	const char *ckpt_dir;
	uint32_t ckpt_every;	/* clocks between checkpoints; 0 = off */
	uint32_t ckpt_secs;	/* seconds between checkpoints (at a clock boundary); 0 = off */
	uint32_t server_shards; /* shards of the server (the files' num_shards) */
	uint32_t evict_clocks;	/* tables: evict rows idle this many clocks; 0 = off */
	uint32_t evict_secs;	/* tables: evict rows idle this many seconds; 0 = off */
};

/* A restore handed to a shard's update thread (RPS_ENT_RESTORE). */
struct rps_shard_restore {
	char path[512];
	uint32_t rank, nshards;
	int rc;		 /* result */
	atomic_int done; /* set by the update thread */
	uint64_t clock;	 /* the restored clock */
	uint64_t nslices;
};

/* What a shard's update thread made of a control request (snap.c). */
struct rps_shard_creq_res {
	int rc;
	uint64_t clock; /* the shard's clock when it ran */
	uint64_t nslices, nelems;
	char text[480]; /* checkpoint: its path; rc != 0: the reason */
	void *snap;	/* EXPORT: records of struct rps_export_part + float[slice_elems] */
	size_t snap_len;
	/* EXPORT: the tables' rows (server/table_export.c), nrows in all */
	void *rows_snap;
	size_t rows_len;
	uint64_t nrows;
};

#define RPS_CLOCK_NONE UINT32_MAX

struct rps_shard {
	struct rps_shard_params p;
	struct rps_optim_opts optim_noclip; /* clipping is per tensor (update.c), not per run */
	struct rps_shard_spec *specs;	    /* update thread: the distinct specs of slices */
	uint32_t nspecs;
	const struct rps_shard_io *io;
	void *io_arg;

	struct rps_store store;
	struct rps_tr_mr mr;
	int mr_ok;
	struct rps_srv_keytab tab;
	struct rps_ring *ring;

	pthread_t thread;
	int thread_ok;
	int core; /* pinned core or -1 */

	/* update thread only */
	uint64_t clock;		      /* shard clock: min over live workers */
	uint64_t *wclock;	      /* [nworkers] */
	uint8_t *live;		      /* [nworkers] */
	uint8_t *nwarn;		      /* [nworkers]: stale-clock warnings logged */
	uint32_t *wpid;		      /* [nworkers]: pid of the incarnation that sent SYNC, 0 */
	uint32_t win;		      /* clocks tracked ahead per worker (power of two) */
	uint32_t *applied;	      /* [nworkers * win]: pushes counted for clock c */
	uint32_t *expected;	      /* [nworkers * win]: from CLOCK, or RPS_CLOCK_NONE */
	struct rps_slice_meta *dirty; /* BSP: slices with a sum for the current clock */
	struct rps_srv_req *deferred, *deferred_tail; /* BSP: pushes for a later clock */
	int redo;				      /* clock advanced: retry deferred pushes */
	int changed;				      /* a clock moved: parked pulls may be ready */
	uint64_t ckpt_last_clock;		      /* clock of the last checkpoint written */
	uint64_t ckpt_last_ns;			      /* rps_now_ns() of it (or of the start) */
	float *codec_buf;			      /* compressed pushes widened (codec_push.c) */
	size_t codec_cap;			      /* ... its floats */

	/* parked pulls: network thread adds, update thread answers */
	pthread_mutex_t park_lock;
	struct rps_srv_req *parked, *parked_tail;
	atomic_uint nparked;

	struct rps_srv_bufpool bufs; /* update thread's send buffers */

	/* counters */
	atomic_ullong pushes_applied;
	atomic_ullong pulls_parked;
	atomic_ullong faults_stall; /* RDMAPS_FAULT stall_update_ms injected */
	atomic_ullong pulls_served; /* PULL frames answered or parked (network thread) */
	/* checkpoints (update thread writes, anyone reads) */
	atomic_ullong ckpts_ok, ckpts_failed;
	atomic_ullong ckpt_wall_ns; /* CLOCK_REALTIME of the newest, 0: none */
	atomic_ullong ckpt_clock;   /* its clock */
	struct rps_ckpt_async *ckpt_async; /* the writer thread (ckpt_async.h); NULL: none */

	/* control requests (snap.c): the update thread's pending one (gen 0:
	 * none), and its result, published by storing its gen in creq_done */
	uint32_t creq_gen, creq_op;
	int creq_wait; /* BSP: until the clock reaches creq_target */
	uint64_t creq_target;
	struct rps_shard_creq_res creq_res;
	atomic_uint creq_done;

	/* set by the server once it joined (UINT32_MAX before): checkpoint file
	 * names, kill_at_clock */
	atomic_uint server_rank;

	/* sparse tables (server/table.h); NULL until the first is declared */
	struct rps_shard_tables *tables;
	/* set by the server when workers read remotely: tables register their
	 * row chunks with it (NULL: none) */
	struct rps_transport *read_tr;
	/* replicated shards (server/repl.h): every entry the update thread
	 * takes, handed to fwd first (NULL: no backup); the sequence numbers
	 * of pushes seen, per worker (update thread) */
	void (*fwd)(void *arg, struct rps_shard *sh, const struct rps_ring_entry *e);
	void *fwd_arg;
	struct rps_repl_seen *seen; /* [nworkers], NULL until the first push with one */
};

/* Store, key table, ring, clocks. -EINVAL, -ENOMEM. No thread yet. */
int rps_shard_init(struct rps_shard *sh, const struct rps_shard_params *p,
		   const struct rps_shard_io *io, void *io_arg);
/* Frees everything (the update thread must be stopped, the MR deregistered). */
void rps_shard_fini(struct rps_shard *sh);

/* Create a slice (idempotent). 0 with *ack_p, -EEXIST, -EINVAL, -ENOSPC, -ENOMEM. */
int rps_shard_declare(struct rps_shard *sh, const struct rps_declare *d,
		      struct rps_declare_ack *ack_p);
/* The same with the job's optimizer spec for the slice (optim NULL: none,
 * as rps_shard_declare). A slice with a spec keeps it; another spec for it
 * is -EINVAL, as is a spec for a slice already updated with the shard's
 * default; a slice without updates takes the spec (its state reallocated).
 * On -EINVAL (and -ENOSPC for too many distinct specs) why[len] says why,
 * naming the key; nothing about the slice changed. */
int rps_shard_declare_opt(struct rps_shard *sh, const struct rps_declare *d,
			  const struct rps_optim_opts *optim, struct rps_declare_ack *ack_p,
			  char *why, size_t len);
/* The optimizer a slice runs: its spec or the shard's default. */
static inline const struct rps_optim_opts *rps_shard_slice_optim(const struct rps_shard *sh,
								 const struct rps_slice_meta *m)
{
	return m->spec ? &m->spec->opts : &sh->p.optim;
}

/* Copy elements [off, off + n) of a slice consistently (seqlock). */
void rps_shard_read(const struct rps_shard *sh, const struct rps_slice_meta *m, uint64_t off,
		    uint64_t n, float *dst);

/* Value of element e of slice `slice` of key under init (deterministic). */
float rps_server_init_value(const struct rps_init *init, uint64_t key, uint32_t slice, uint64_t e);
/* "asp" | "bsp" | "ssp" -> consistency, or -EINVAL. */
int rps_server_consistency_parse(const char *s);
const char *rps_server_consistency_name(enum rps_consistency c);

#endif
