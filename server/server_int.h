/* Server internals: the pieces of a shard that unit tests drive without a
 * network (key table, update logic, clocks, parked pulls, pools).
 *
 * Threads
 * - the network thread polls the transport, validates frames, answers PULLs it
 *   can answer at once and queues DECLARE / PUSH / CLOCK as typed entries into
 *   the shard's priority ring;
 * - each shard's update thread pops its ring and is the only writer of the
 *   shard: store, key table inserts, optimizer state, accumulators, clocks;
 * - the control thread (control/control.h) queues DEAD entries.
 * What the update thread has to say back (acks, parked pull answers) goes
 * through struct rps_shard_io, which the server fills with transport calls and
 * tests fill with recorders.
 */
#ifndef RPS_SERVER_INT_H
#define RPS_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmaps/server.h>

#include "src/optim.h"
#include "src/proto.h"
#include "src/ring.h"
#include "src/store.h"
#include "transport/transport.h"

/* ---- object pools (pool.c) ------------------------------------------------
 * One owner thread takes objects; any thread gives them back (a lock-free
 * stack the owner empties in one exchange, so no ABA). Objects are allocated
 * only when the pool is empty and kept until rps_srv_pool_fini, which frees all of
 * them, in use or not. Payloads are 64-byte aligned. */
struct rps_srv_pool;

struct rps_srv_pool_obj {
	struct rps_srv_pool_obj *next;	   /* free list / return stack */
	struct rps_srv_pool_obj *all_next; /* every object of the pool */
	struct rps_srv_pool *pool;
	size_t size; /* payload bytes */
	char pad[32];
};
_Static_assert(sizeof(struct rps_srv_pool_obj) == 64, "pool header is one line");

struct rps_srv_pool {
	size_t obj_size;
	struct rps_srv_pool_obj *free; /* owner only */
	struct rps_srv_pool_obj *all;  /* owner only */
	_Atomic(struct rps_srv_pool_obj *) ret;
	uint64_t nobjs;
};

void rps_srv_pool_init(struct rps_srv_pool *p, size_t obj_size);
void rps_srv_pool_fini(struct rps_srv_pool *p);
/* Owner thread. NULL when out of memory. */
void *rps_srv_pool_get(struct rps_srv_pool *p);
/* Any thread. */
void rps_srv_pool_put(void *obj);

/* Send buffers in power-of-two size classes from 4 KiB up to max_bytes. */
#define RPS_BUF_MIN_SHIFT 12
#define RPS_BUF_CLASSES	  24
struct rps_srv_bufpool {
	struct rps_srv_pool cls[RPS_BUF_CLASSES];
	int nclasses;
	size_t max_bytes;
};
void rps_srv_bufpool_init(struct rps_srv_bufpool *bp, size_t max_bytes);
void rps_srv_bufpool_fini(struct rps_srv_bufpool *bp);
/* Owner thread; NULL if bytes > max_bytes or out of memory. Give back with rps_srv_pool_put. */
void *rps_srv_bufpool_get(struct rps_srv_bufpool *bp, size_t bytes);

/* ---- connections and requests ------------------------------------------ */

/* The server's side of one worker connection (conn->user). Freed, and the
 * transport connection closed, when the last reference goes: the network
 * thread holds one while the connection is up, every queued request, parked
 * pull and zero-copy send holds one. */
struct rps_srv_conn {
	struct rps_conn *conn;
	void *owner; /* struct rps_server */
	atomic_int refs;
	atomic_int closed;		  /* no more frames taken from it */
	uint32_t rank;			  /* worker rank (hello) */
	int net_ref;			  /* network thread: still holds its reference */
	struct rps_srv_conn *prev, *next; /* network thread's list */
	struct rps_srv_conn *close_next;  /* close stack */
};

enum rps_srv_req_op {
	RPS_REQ_DECLARE = 1,
	RPS_REQ_PUSH,
	RPS_REQ_PULL,
};

struct rps_slice_meta;

/* One DECLARE, PUSH or parked PULL on its way through a shard. */
struct rps_srv_req {
	struct rps_srv_req *next;    /* parked / deferred lists */
	struct rps_srv_conn *sc;     /* NULL in tests */
	void *token;		     /* PUSH: receive token, released when applied */
	float *data;		     /* PUSH: count floats, usable as scratch */
	struct rps_slice_meta *meta; /* PUSH / PULL: validated slice (NULL: none) */
	uint32_t op;		     /* enum rps_srv_req_op */
	uint32_t req_id;
	uint32_t worker; /* requester's rank */
	int32_t status;	 /* PUSH refused at validation: only counted */
	union {
		struct rps_declare decl;
		struct rps_push push;
		struct rps_pull pull;
	} u;
};

/* Ring entry types (struct rps_ring_entry.type). */
enum rps_srv_ent {
	RPS_ENT_DECLARE = 1, /* ptr = req, ptr2 = conn */
	RPS_ENT_PUSH,	     /* ptr = req, ptr2 = conn */
	RPS_ENT_CLOCK,	     /* info.worker ends info.clock with u64 pushes to this shard */
	RPS_ENT_DEAD,	     /* info.worker is dead: no longer waited for */
	RPS_ENT_REVIVE,	     /* info.worker rejoined: waited for again from the shard's clock */
	RPS_ENT_SYNC,	     /* info.worker says its clock is info.clock (RPS_OP_SYNC) */
	RPS_ENT_CKPT,	     /* write a checkpoint now (on request) */
	RPS_ENT_RESTORE,     /* ptr = struct rps_shard_restore: load a checkpoint file */
};

/* ---- key table (keytab.c) -------------------------------------------------
 * (key, slice) -> slice meta. Insert-only open addressing, one writer (the
 * update thread), lock-free readers: a meta is fully built before its pointer
 * is published with release; readers load with acquire. */
struct rps_slice_meta {
	uint64_t key;
	uint32_t slice;
	uint32_t shard;
	uint64_t nelems;
	struct rps_store_slice sl;
	uint64_t data_off; /* byte offset of element 0 in the store */
	/* update thread only */
	struct rps_optim_state opt;
	uint64_t elems_applied; /* ASP/SSP: elements stepped, step = this / nelems */
	float *acc;		/* BSP: sum of this clock's pushes */
	int dirty;		/* BSP: acc holds something for this clock */
	struct rps_slice_meta *dirty_next;
	int pending_init; /* RPS_INIT_PUSH: not yet fully assigned */
	uint64_t assigned;
	uint8_t *assigned_map; /* bit per element assigned */
};

struct rps_srv_keytab {
	_Atomic(struct rps_slice_meta *) *slots;
	uint64_t mask;
	uint64_t count;
	uint64_t max; /* inserts allowed (load <= 1/2) */
};

/* Room for max_entries slices. -ENOMEM. */
int rps_srv_keytab_init(struct rps_srv_keytab *t, uint64_t max_entries);
/* Frees the table; each meta is handed to free_fn (may be NULL). */
void rps_srv_keytab_fini(struct rps_srv_keytab *t, void (*free_fn)(struct rps_slice_meta *m));
/* Any thread. NULL if absent. */
struct rps_slice_meta *rps_srv_keytab_lookup(const struct rps_srv_keytab *t, uint64_t key,
					     uint32_t slice);
/* The one writer. -EEXIST (same key and slice present), -ENOSPC. */
int rps_srv_keytab_insert(struct rps_srv_keytab *t, struct rps_slice_meta *m);
uint64_t rps_srv_keytab_count(const struct rps_srv_keytab *t);

/* ---- shards (shard.c, update.c, pull.c) ---------------------------------- */
struct rps_shard;

struct rps_shard_io {
	/* A push was applied (or refused): release req->token, answer PUSH_ACK with
	 * status, drop req->sc, free req. */
	void (*push_done)(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status);
	/* A declare finished: answer DECLARE_ACK (ack valid when status == 0), free req. */
	void (*declare_done)(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status,
			     const struct rps_declare_ack *ack);
	/* A parked pull's condition holds: answer it, free req (update thread). */
	void (*pull_answer)(void *arg, struct rps_shard *sh, struct rps_srv_req *req);
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
	struct rps_optim_opts optim;
	struct rps_init init; /* for RPS_INIT_DEFAULT */
	uint64_t max_msg;     /* largest frame payload (pull size limit) */
	/* checkpoints (ckpt.c); ckpt_dir NULL or "": none */
	const char *ckpt_dir;
	uint32_t ckpt_every;	/* clocks between checkpoints; 0 = off */
	uint32_t ckpt_secs;	/* seconds between checkpoints (at a clock boundary); 0 = off */
	uint32_t server_shards; /* shards of the server (the files' num_shards) */
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

#define RPS_CLOCK_NONE UINT32_MAX

struct rps_shard {
	struct rps_shard_params p;
	struct rps_optim_opts optim_noclip; /* clipping is done per piece, before the runs */
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
	uint32_t win;		      /* clocks tracked ahead per worker (power of two) */
	uint32_t *applied;	      /* [nworkers * win]: pushes counted for clock c */
	uint32_t *expected;	      /* [nworkers * win]: from CLOCK, or RPS_CLOCK_NONE */
	struct rps_slice_meta *dirty; /* BSP: slices with a sum for the current clock */
	struct rps_srv_req *deferred, *deferred_tail; /* BSP: pushes for a later clock */
	int redo;				      /* clock advanced: retry deferred pushes */
	int changed;				      /* a clock moved: parked pulls may be ready */
	uint64_t ckpt_last_clock;		      /* clock of the last checkpoint written */
	uint64_t ckpt_last_ns;			      /* rps_now_ns() of it (or of the start) */

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

	/* set by the server once it joined (UINT32_MAX before): checkpoint file
	 * names, kill_at_clock */
	atomic_uint server_rank;
};

/* Store, key table, ring, clocks. -EINVAL, -ENOMEM. No thread yet. */
int rps_shard_init(struct rps_shard *sh, const struct rps_shard_params *p,
		   const struct rps_shard_io *io, void *io_arg);
/* Frees everything (the update thread must be stopped, the MR deregistered). */
void rps_shard_fini(struct rps_shard *sh);
/* Start the update thread, pinned to core (< 0: not pinned; a failed pin warns). */
int rps_shard_start(struct rps_shard *sh, int core);
/* Close the ring, let the thread drain it and join. Deferred pushes are
 * answered with -ECANCELED. */
void rps_shard_stop(struct rps_shard *sh);

/* Update thread: handle one popped entry (also answers parked pulls whose
 * condition now holds). Tests call it directly. */
void rps_shard_handle(struct rps_shard *sh, const struct rps_ring_entry *e);
/* Create a slice (idempotent). 0 with *ack_p, -EEXIST, -EINVAL, -ENOSPC, -ENOMEM. */
int rps_shard_declare(struct rps_shard *sh, const struct rps_declare *d,
		      struct rps_declare_ack *ack_p);

/* Network thread: validate a push. 0 (with *meta_p), -ENOENT, -EINVAL. */
int rps_shard_push_check(const struct rps_shard *sh, const struct rps_push *p,
			 struct rps_slice_meta **meta_p);
/* Fill the ring entry of a push / declare / clock. */
void rps_shard_push_entry(const struct rps_shard *sh, struct rps_srv_req *req,
			  struct rps_ring_entry *e_p);

/* Pulls. Validation: 0 (with *meta_p, NULL for count == 0), -ENOENT, -EINVAL,
 * -EMSGSIZE (the answer would not fit a frame). */
int rps_shard_pull_check(const struct rps_shard *sh, const struct rps_pull *p,
			 struct rps_slice_meta **meta_p);
/* Does the consistency condition for min_clock hold for requester (any thread)? */
int rps_shard_pull_ready(const struct rps_shard *sh, uint32_t min_clock, uint32_t requester);
/* Park a pull unless its condition holds now: 1 = ready (not parked, the
 * caller answers), 0 = parked (the update thread answers it later). */
int rps_shard_pull_park(struct rps_shard *sh, struct rps_srv_req *req);
/* Update thread: answer every parked pull whose condition holds. */
void rps_shard_pull_release(struct rps_shard *sh);
/* Unpark the pulls of one connection (sc NULL: all); returns them as a list. */
struct rps_srv_req *rps_shard_pull_unpark(struct rps_shard *sh, const struct rps_srv_conn *sc);

/* Copy elements [off, off + n) of a slice consistently (seqlock). */
void rps_shard_read(const struct rps_shard *sh, const struct rps_slice_meta *m, uint64_t off,
		    uint64_t n, float *dst);

/* ---- checkpoints (ckpt.c) ---- */
/* Update thread: write this shard's checkpoint now (at the shard's clock).
 * 0 or -errno (logged, counted in ckpts_failed). */
int rps_shard_ckpt_write(struct rps_shard *sh);
/* Update thread, after the clock moved: write one if every / secs say so. */
void rps_shard_ckpt_maybe(struct rps_shard *sh);
/* Update thread: load r->path into this (empty) shard: slices, parameters,
 * optimizer state, and the clock for every worker. Sets r->rc, r->done. */
void rps_shard_restore_run(struct rps_shard *sh, struct rps_shard_restore *r);

/* "zeros" | "const:V" | "uniform:A,B" | "normal:MEAN,STD" | "push" -> init
 * (seed untouched). -EINVAL. */
int rps_server_init_parse(const char *s, struct rps_init *init_p);
/* Value of element e of slice `slice` of key under init (deterministic). */
float rps_server_init_value(const struct rps_init *init, uint64_t key, uint32_t slice, uint64_t e);
/* "asp" | "bsp" | "ssp" -> consistency, or -EINVAL. */
int rps_server_consistency_parse(const char *s);
const char *rps_server_consistency_name(enum rps_consistency c);

/* ---- the server (server.c) ---- */
/* The network loop of rps_server_run without the scheduler: poll and dispatch
 * until rps_server_stop (tests run it in-process). */
int rps_server_serve(struct rps_server *srv);
uint16_t rps_server_port(const struct rps_server *srv);
struct rps_shard *rps_server_shard(struct rps_server *srv, int i);

#endif
