/* The worker library's internals, shared by worker/ sources and the unit tests.
 *
 * Threads
 * - Callers (any number of application threads) validate locally, build
 *   pieces under core.lock (one acquisition per batch of pieces) and post
 *   frames / RDMA READs themselves, outside the lock.
 * - The progress thread polls the transport, matches answers to pieces,
 *   drives the pull strategy's state machines (read.c), closes dead connections and runs
 *   completion callbacks.
 * - The control thread (control/control.c) reports dead nodes; the worker
 *   marks their connections dead and lets the progress thread fail them.
 *
 * Dead connections. A connection is closed (and every piece on it failed)
 * only by the progress thread and only while no caller is between "checked
 * that the connection is alive" and "posted on it": callers bracket their
 * posts with rps_wsubmit_enter/leave (one atomic counter), and the progress
 * thread closes only when that counter is 0 (seq_cst on both sides, so a
 * caller either sees the dead flag or is seen by the closer).
 */
#ifndef RPS_WORKER_INT_H
#define RPS_WORKER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <rdmaps/worker.h>

#include "src/config.h"
#include "src/keymap.h"
#include "src/proto.h"
#include "src/util.h"
#include "control/control.h"
#include "transport/transport.h"
#include "worker/keytab.h"
#include "worker/plan.h"
#include "worker/req.h"

struct rps_wserver;
struct rps_wring;

struct rps_wconn {
	struct rps_conn *c;       /* NULL: never connected (offline worker) */
	struct rps_wserver *srv;
	uint32_t channel;         /* hello.channel: the shard with RPS_TR_CAP_CHANNELS, else 0 */
	_Atomic int dead;         /* 0, or -errno why it is dead */
	int closed;               /* progress thread: close() done, pieces failed */
};

struct rps_wshard {
	struct rps_shard_desc desc; /* from HELLO_ACK */
	struct rps_wconn *conn;     /* connection carrying this shard's frames */
	/* read strategy: where the store's chunks begin, from its header (read
	 * at connect); each slice's geometry comes with its DECLARE_ACK */
	uint64_t data_off;
	/* clocks seen: PULL_RESP hdr.aux, or the store's clock words (reads) */
	_Atomic uint32_t clock_seen;  /* shard clock (min over workers) */
	_Atomic uint32_t wclock_seen; /* worker_clock[my rank] */
	/* under core.lock */
	uint32_t pushes;         /* PUSH frames sent during the current clock */
	uint64_t seq;            /* the last push's sequence number (replicated shards) */
	uint32_t wait_tag;       /* BSP wait: last wait that included this shard */
};

/* Replicated shards: CLOCK frames a worker keeps per server, sent again to a
 * promoted backup (more than a worker can be ahead of a shard under BSP/SSP). */
#define RPS_WREPL_CLOCKS 16

struct rps_wserver {
	uint32_t rank;
	uint32_t node_id;
	uint32_t node_pid;        /* the incarnation we are connected to (map) */
	char host[64];
	uint16_t port;
	uint32_t nshards;
	uint32_t consistency;
	uint32_t staleness;
	uint32_t chunk_bytes;
	uint64_t max_msg;         /* the server's frame payload limit */
	uint64_t push_elems;      /* elements per PUSH frame to this server */
	uint64_t pull_elems;      /* elements per PULL_RESP from this server */
	uint32_t nconns;
	struct rps_wconn *conns;  /* 1, or nshards with RPS_TR_CAP_CHANNELS (channel = shard) */
	struct rps_wshard *shards;
	int lost; /* reconnector only: not back within timeout_ms: lost for good */
	/* replicated shards: the last RPS_WREPL_CLOCKS CLOCK frames sent to it
	 * (under clock_rw), the newest at clk_next - 1, sent again to its
	 * promoted backup: any of them may have been lost with it (worker/repl.c) */
	uint32_t clk_len;  /* bytes of each (the same for every clock) */
	uint32_t clk_n;    /* kept (<= RPS_WREPL_CLOCKS) */
	uint32_t clk_next; /* slot of the next one */
	uint32_t clk_frames[RPS_WREPL_CLOCKS][2 + RPS_MAX_SHARDS];
};

struct rps_worker;
struct rps_wread; /* the read strategy's state (worker/read.h) */
struct rps_wtables; /* declared tables (worker/table.h) */

/* ---- registered pull buffers (reg.c) ---- */
#define RPS_WREG_MAX 64

struct rps_wreg {
	_Atomic uint32_t gen;	  /* odd: registered */
	_Atomic uintptr_t lo, hi; /* [lo, hi) */
	uint32_t handle;	  /* the transport registration's (rps_tr_sge.handle) */
	_Atomic long inflight;	  /* pieces / requests using it */
	int has_mr;
	struct rps_tr_mr mr;
};

struct rps_wregs {
	pthread_mutex_t lock; /* register / unregister */
	_Atomic int n;	      /* e[0..n) were ever used */
	struct rps_wreg e[RPS_WREG_MAX];
};

void rps_wregs_init(struct rps_wregs *r);
/* Deregister what is left (before the transport goes). */
void rps_wregs_fini(struct rps_worker *w);
/* The registration covering [addr, addr + len), with a reference taken, or
 * NULL. Lock-free. */
struct rps_wreg *rps_wreg_get(struct rps_worker *w, const void *addr, size_t len);
/* Another reference to g (the caller holds one). */
static inline void rps_wreg_hold(struct rps_wreg *g)
{
	atomic_fetch_add_explicit(&g->inflight, 1, memory_order_relaxed);
}
static inline void rps_wreg_put(struct rps_wreg *g)
{
	if (g)
		atomic_fetch_sub_explicit(&g->inflight, 1, memory_order_release);
}

/* ---- the pull strategy, chosen once at create ----
 * rps_wpull_frame (pull_frame.c): PULL frames, the server answers each with
 *   a snapshot of the slice. Any transport.
 * rps_wpull_read (read*.c): one-sided reads of the servers' shard stores,
 *   no server CPU. Transports with RPS_TR_CAP_READ whose servers' stores are
 *   readable.
 * Callers are inside rps_wsubmit_enter where they post. */
struct rps_wpull_ops {
	const char *name;
	int (*init)(struct rps_worker *w);
	void (*fini)(struct rps_worker *w);
	/* Optional (NULL: none). The common pull made cheap: one key (k,
	 * checked), no callback. Makes the request, posts and returns 0 with
	 * *req_p set, or -EAGAIN (nothing done) when the pull is not of the
	 * kind it serves: then submit takes it. Not inside rps_wsubmit_enter. */
	int (*pull1)(struct rps_worker *w, const struct rps_wkey *k, float *vals,
		     uint32_t min_clock, struct rps_req **req_p);
	/* Append the pull pieces of n keys to req (clock min_clock) and post
	 * them. A failure is recorded in req and returned. */
	int (*submit)(struct rps_worker *w, struct rps_req *req, const rps_key_t *keys, float *vals,
		      const size_t *lens, size_t n, uint32_t min_clock);
	/* Append to req a wait until shard (server, shard) reached clock c
	 * (BSP push), named by a key and slice it holds. */
	int (*clock_wait)(struct rps_worker *w, struct rps_req *req, rps_key_t key, uint32_t slice,
			  uint32_t server, uint32_t shard, uint32_t c);
	/* Every shard's clock of server (UINT32_MAX: all) as of now into
	 * clock_seen. Waits. */
	int (*read_clocks)(struct rps_worker *w, uint32_t server);
	/* server's (UINT32_MAX: every server's) connections are new (create,
	 * reconnect): learn what the strategy needs of its shards. Waits. */
	int (*attach)(struct rps_worker *w, uint32_t server);
	/* Progress thread: a READ_DONE event; the timers, returning the poll
	 * timeout they need (ms, -1 none). */
	void (*read_done)(struct rps_worker *w, const struct rps_tr_event *ev);
	int (*timers)(struct rps_worker *w);
	/* Under core.lock: a piece finishes, before it is freed. */
	void (*piece_fini_locked)(struct rps_worker *w, struct rps_piece *p);
};

extern const struct rps_wpull_ops rps_wpull_frame;
extern const struct rps_wpull_ops rps_wpull_read;

struct rps_worker {
	struct rps_wcore core;
	const struct rps_config *cfg; /* &own_cfg (NULL: offline worker) */
	struct rps_config own_cfg;    /* from opts->config, or rps_config_init */
	char transport_name[16];
	char secret[256];
	char scheduler[RPS_STR_MAX];
	int timeout_ms;

	struct rps_ctl *ctl;
	_Atomic uint64_t report_sec; /* rps_worker_report: the current second */
	_Atomic uint32_t report_n;   /* and the reports sent in it */
	struct rps_transport *tr;
	uint32_t rank;
	uint32_t num_workers;
	uint32_t num_servers;
	uint32_t shards_per_server;
	struct rps_wserver *servers;
	struct rps_keymap km;
	struct rps_keytab keys;
	enum rps_consistency consistency;
	uint32_t staleness;
	const struct rps_wpull_ops *pull; /* the pull strategy */
	struct rps_wregs regs;		  /* registered pull buffers */
	struct rps_wread *read;  /* its state when it is rps_wpull_read */
	int channels;            /* one connection per shard (RPS_TR_CAP_CHANNELS) */

	_Atomic uint32_t clock;  /* the current clock c */
	/* Pushes are built under the read side, rps_worker_clock runs under the
	 * write side: a push's frames all carry, and are all counted in, the
	 * clock that was current when it was called. */
	pthread_rwlock_t clock_rw;
	uint32_t wait_tag;       /* under core.lock: dedupes shards in a BSP wait */

	_Atomic long submitters; /* callers between alive-check and post */
	_Atomic int publishing;  /* a reconnect swaps connections: submitters wait */
	_Atomic int reconnect;   /* a server connection died: API calls reconnect first */
	pthread_mutex_t reconn_lock;
	pthread_t reconn_thread;  /* the thread reconnecting (its posts do not wait) */
	/* the reconnector: a thread that reconnects as soon as the map allows,
	 * so that a worker blocked on a healthy server still re-joins the
	 * restarted one (the others' clocks wait for its SYNC) */
	pthread_mutex_t rc_lock;
	pthread_cond_t rc_cond;
	int rc_started, rc_stop;
	pthread_t rc_thread;
	_Atomic int dead_pending;/* some connection was marked dead */
	_Atomic int stop;
	_Atomic int leaving;     /* destroy began: lost connections are expected */
	int progress_started;
	pthread_t progress;

	/* memory that late answers may still write into, freed at destroy */
	void **grave;
	size_t ngrave, grave_cap;

	/* statistics */
	_Atomic uint64_t stat_pushes, stat_pulls, stat_bytes_out, stat_bytes_in;
	_Atomic uint64_t stat_torn, stat_direct;
	_Atomic uint32_t stat_max_stale; /* largest clock lag a data pull saw */
	/* pushes on the wire (worker/compress.c): float32 bytes before any
	 * codec, whole PUSH frames, and the frames' bytes of the last clock */
	_Atomic uint64_t stat_push_raw, stat_push_wire, stat_step_mark, stat_last_step;
	/* sparse tables (worker/table_index.c, table_read.c, table_rows.c):
	 * READs of the servers' row index, READs of row slots, ROWS_PULL frames,
	 * index buckets found moved (a rehash) */
	_Atomic uint64_t stat_row_ix_reads, stat_row_slot_reads, stat_row_frames, stat_row_moved;

	struct rps_wring *ring; /* ring all-reduce (worker/ring.h); NULL offline */

	/* sparse tables declared through this worker (worker/table.h) */
	struct rps_wtables *tables;

	/* aggregation on the host (local_agg.c): set up by the first
	 * rps_worker_local_pushpull, freed at destroy */
	struct rps_wlocal *local;
	int joined_running; /* joined a running job (join_clock): it aggregates alone */
	/* growth (worker/grow.c): the job's worker count from the latest map, and
	 * how many times it grew since this worker joined */
	_Atomic uint32_t grow_workers;
	_Atomic uint32_t grow_gen;
};

/* grow.c: a new map (control thread) */
void rps_wgrow_on_map(struct rps_worker *w, const struct rps_map *map);

/* ---- connections (conn.c; losing them: reconnect.c) ---- */
int rps_wconn_connect_all(struct rps_worker *w, const struct rps_node *nodes, int nnodes);
/* HELLO to server s on channel, retried (server not up yet) until
 * deadline_ns; the HELLO_ACK payload into ack[RPS_TR_ACK_MAX]. Logs a failure. */
int rps_wconn_connect_one(struct rps_worker *w, struct rps_wserver *s, uint32_t channel,
			  uint64_t deadline_ns, void *ack, size_t *ack_len_p,
			  struct rps_conn **conn_p);
void rps_wconn_close_all(struct rps_worker *w);
/* Mark a connection dead (any thread); the progress thread closes it. */
void rps_wconn_mark_dead(struct rps_worker *w, struct rps_wconn *wc, int status);
/* Progress thread: close dead connections nobody is posting on; fail their
 * pieces. Returns 1 if some are still waiting for callers to leave. */
int rps_wconn_reap(struct rps_worker *w);
static inline int rps_wconn_dead(const struct rps_wconn *wc)
{
	int d = atomic_load((_Atomic int *)&wc->dead);

	if (d)
		return d;
	return wc->c ? 0 : -ENOTCONN;
}
void rps_wsubmit_wait(struct rps_worker *w);
static inline void rps_wsubmit_enter(struct rps_worker *w)
{
	atomic_fetch_add(&w->submitters, 1);
	if (RPS_UNLIKELY(atomic_load(&w->publishing)))
		rps_wsubmit_wait(w); /* a reconnect is replacing connections */
}
static inline void rps_wsubmit_leave(struct rps_worker *w)
{
	atomic_fetch_sub(&w->submitters, 1);
}
static inline struct rps_wshard *rps_wshard_get(struct rps_worker *w, uint32_t server,
						uint32_t shard)
{
	return &w->servers[server].shards[shard];
}

/* ---- reconnecting to a restarted server (reconnect.c) ----
 * A dead server connection (closed, or the scheduler's notice) sets
 * w->reconnect. The next API call (push, pull, pushpull, clock, declare)
 * first waits, up to timeout_ms, for the server or its replacement (a new
 * incarnation in the cluster map), connects, tells it our clock (SYNC),
 * attaches the pull strategy and re-declares our keys there; requests
 * that were in flight on the dead connection have failed with -ECONNRESET /
 * -EHOSTDOWN. Returns 0, or -EHOSTDOWN if it did not come back in time. */
int rps_wreconnect(struct rps_worker *w);
/* A call failed with rc: if rc says a connection was lost (-ECONNRESET,
 * -EHOSTDOWN, -EPIPE, -ENOTCONN), give the progress thread a moment to mark
 * it and reconnect (rps_wreconnect), and return 0 if the caller may try the
 * idempotent call again; else (or if reconnecting failed) the error. */
int rps_wretry_lost(struct rps_worker *w, int rc);
/* Attempts in all of an idempotent call (declare, joining) whose
 * connections are lost under it. */
#define RPS_WRETRY_TRIES 3
int rps_wreconnector_start(struct rps_worker *w);
void rps_wreconnector_stop(struct rps_worker *w);
static inline int rps_wready(struct rps_worker *w)
{
	if (RPS_UNLIKELY(atomic_load_explicit(&w->reconnect, memory_order_acquire)))
		return rps_wreconnect(w);
	return 0;
}
/* Tell every server (every channel) our clock c (RPS_OP_SYNC). */
int rps_wsync_send(struct rps_worker *w, uint32_t server, uint32_t c);
/* Declare every key's slices on one server again (after its restart). */
int rps_wdeclare_server(struct rps_worker *w, uint32_t server);

/* ---- replicated shards (repl.c): kept for a promoted backup ---- */
/* rc: a post failed because the connection is gone. */
int rps_wrepl_lost(int rc);
/* rps_wclock_send, under clock_rw: keep the CLOCK frame sent to s. */
void rps_wrepl_keep_clock(struct rps_wserver *s, const void *frame, uint32_t len);
/* Progress thread, under core.lock: SEND_DONE e of push p. 1 if handled
 * (a completion of a replaced connection, or a broken one: p is kept). */
int rps_wkept_send_done_locked(struct rps_worker *w, struct rps_piece *p,
			       const struct rps_tr_event *e);
/* Under core.lock: the pieces of server s kept for its backup. fail: fail
 * them with that status; else mark them sent again and return them in
 * out[] (at most max). Their number. */
size_t rps_wrepl_kept_locked(struct rps_worker *w, struct rps_wserver *s, int fail,
			     struct rps_piece **out, size_t max);
/* Reconnector, clock_rw held, publishing: to s's promoted backup, the kept
 * CLOCK frames and every kept piece. */
int rps_wrepl_resend(struct rps_worker *w, struct rps_wserver *s);

/* ---- progress (progress.c, worker.c) ---- */
/* The progress thread's main loop (arg: the worker). */
void *rps_wprogress_main(void *arg);
/* rps_wcore.spin: a waiting caller handles what the transport has ready. */
void rps_wprogress_spin(void *arg);
/* A data pull at min_clock was answered with the shard at shard_clock. */
void rps_wstat_staleness(struct rps_worker *w, uint32_t min_clock, uint32_t shard_clock);
void rps_worker_wake(struct rps_worker *w);
/* Keep ptr (rps_malloc'ed) until destroy: an orphaned request may still
 * write into it. 0, or -ENOMEM (then the caller must leak it). */
int rps_worker_keep(struct rps_worker *w, void *ptr);

/* ---- frames (push.c, pull_frame.c, declare.c) ---- */
/* Post a piece's frame (the piece is set up, waits set). On failure the
 * piece is failed under the lock. Caller is inside rps_wsubmit_enter. */
void rps_wpost_piece(struct rps_worker *w, struct rps_piece *p);
/* Progress thread, under core.lock: an answer frame for a piece. */
void rps_wrecv_locked(struct rps_worker *w, struct rps_wconn *wc, const struct rps_tr_event *ev);
/* recv_dest callback of the transport. */
void *rps_wrecv_dest(void *arg, struct rps_conn *c, const struct rps_frame_hdr *h,
		     const void *fixed);

/* Wait as BSP requires (clock_rw held for reading meanwhile), a new
 * request, its push pieces at the current clock: the request is not sealed
 * yet (push.c). */
int rps_wpush_post(struct rps_worker *w, const rps_key_t *keys, const float *grads,
		   const size_t *lens, size_t n, rps_done_cb cb, void *arg,
		   struct rps_req **req_p);
/* A new request with the ASSIGN pieces of n keys (vals back to back, as a
 * push's gradients): not sealed yet; no clock wait, nothing counted for a
 * CLOCK (push.c). */
int rps_wassign_post(struct rps_worker *w, const rps_key_t *keys, const float *vals,
		     const size_t *lens, size_t n, struct rps_req **req_p);
/* A push piece is sent: count its bytes (worker, key) (compress.c). */
void rps_wstat_push_wire(struct rps_worker *w, const struct rps_piece *p);
/* A clock ends: the push bytes of the clock that ended (compress.c). */
void rps_wstat_push_step(struct rps_worker *w);

/* Send CLOCK to every server and advance the clock; *new_clock_p (may be
 * NULL) receives the new clock. First send error, the clock advances anyway. */
int rps_wclock_send(struct rps_worker *w, uint32_t *new_clock_p);

/* An in-process worker without scheduler or network, for unit tests:
 * num_servers servers of shards shards, keys mapped by km. Every send fails
 * with -ENOTCONN; local validation runs as in a real worker. */
int rps_worker_create_offline(const struct rps_keymap *km, struct rps_worker **worker_p);

#endif
