/* Server internals: the server object and its connections, shared by the
 * server's files (server.c, opts.c, conn.c, frame.c, cluster.c, metrics.c).
 * The shard pieces unit tests drive without a network have headers of their
 * own; dependencies point one way:
 *   server_int.h -> update.h -> shard.h -> keytab.h, pool.h
 *                -> pull.h   -> shard.h
 *                -> ckpt.h   -> shard.h
 * (update.c calls pull.c and ckpt.c; ckpt.c and pull.c call shard.c only.)
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

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmaps/server.h>

#include "server/ckpt.h"
#include "server/pull.h"
#include "server/repl.h"
#include "server/shard.h"
#include "server/update.h"
#include "src/codec.h"
#include "src/config.h"
#include "transport/transport.h"

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
	uint32_t shard_lo, shard_hi;	  /* the shards its CLOCK and SYNC count for */
	uint64_t next_clock;		  /* the clock its next CLOCK ends (has_next) */
	int has_next;			  /* a CLOCK or SYNC was taken from it */
	atomic_int nparked;		  /* its pulls parked in the shards */
	int net_ref;			  /* network thread: still holds its reference */
	struct rps_srv_conn *prev, *next; /* network thread's list */
	struct rps_srv_conn *close_next;  /* close stack */
	int repl;			  /* a server-to-server link (server/repl.h) */
};

/* ---- the server (server.c, opts.c, conn.c, frame.c, cluster.c, metrics.c) ---- */
#define RPS_SRV_POLL_MS 100
/* A pull may wait for a clock at most this far beyond the last CLOCK or SYNC
 * the server knows for its worker (+ the SSP staleness): a worker pulls for its own
 * clock, a little ahead at most (an async pull before its CLOCK). A pull
 * for a clock no worker will reach soon is refused (-ERANGE) instead of
 * parked for ever. */
#define RPS_SRV_PULL_AHEAD 64
#define RPS_SRV_EVENTS	64

/* /metrics (metrics.c). */
struct srv_metrics {
	struct rps_metrics *reg;
	struct rps_http_server *http;
	pthread_mutex_t lock; /* one refresh at a time */
	struct rps_metric *pushes[RPS_MAX_SHARDS], *pulls[RPS_MAX_SHARDS];
	struct rps_metric *depth[RPS_MAX_SHARDS], *clock[RPS_MAX_SHARDS];
	struct rps_metric *ckpts[RPS_MAX_SHARDS], *ckpt_fail[RPS_MAX_SHARDS];
	struct rps_metric *ckpt_age[RPS_MAX_SHARDS];
	struct rps_metric *bytes[2], *msgs[2]; /* rx, tx */
	struct rps_metric *faults[3];	       /* drop, delay, stall */
	/* per codec (src/codec.h): push frames, data bytes, float32 bytes */
	struct rps_metric *codec[RPS_CODEC_COUNT][3];
};

struct rps_server {
	struct rps_server_opts opts; /* strings below are our copies */
	char *scheduler;
	char *transport;
	char *host;
	char *secret;
	char *ckpt_dir;		      /* RDMAPS_CHECKPOINT_DIR ("" none) */
	char *restore_dir;	      /* rps_server_set_restore, NULL none */
	const struct rps_config *cfg; /* &cfg_copy */
	struct rps_config cfg_copy;
	uint32_t nworkers; /* configured (RDMAPS_NUM_WORKERS) */
	uint32_t chunk_bytes;
	uint64_t max_msg;
	int heartbeat_ms;

	struct rps_transport *tr;
	/* what the transport can do, decided once at create */
	int conn_per_shard; /* RPS_TR_CAP_CHANNELS: a connection carries one shard */
	int remote_read;    /* RPS_TR_CAP_READ: workers read the stores themselves */
	uint16_t port;
	int nshards;
	int shards_ready; /* initialised */
	struct rps_shard *shards;
	int ncores;
	int *cores;

	atomic_uint rank;	 /* UINT32_MAX until joined */
	atomic_uint map_workers; /* from the cluster map, 0 until joined */
	atomic_int stop;
	atomic_int ckpt_request; /* rps_server_checkpoint: the network thread queues it */
	int running;
	struct rps_ctl *ctl;
	uint8_t wgone[RPS_MAX_WORKERS]; /* control thread: left or dead */

	/* network thread */
	struct rps_srv_pool reqs;
	struct rps_srv_bufpool net_bufs;
	struct rps_srv_conn *conns;
	_Atomic(struct rps_srv_conn *) close_stack;

	/* counters for heartbeats */
	atomic_ullong n_push, n_pull, bytes_in, bytes_out;
	atomic_ullong msgs_in, msgs_out;
	atomic_ullong clock_hi; /* highest clock a worker reached here since start (frame.c) */
	atomic_ullong faults_drop, faults_delay; /* RDMAPS_FAULT injections */
	/* PUSH frames per codec (codec_push.c; 0: float32), their data bytes
	 * and what they were as float32 */
	atomic_ullong codec_frames[RPS_CODEC_COUNT], codec_bytes[RPS_CODEC_COUNT],
	    codec_raw[RPS_CODEC_COUNT];

	struct srv_metrics m; /* m.reg NULL: off */

	/* control requests relayed by the scheduler (ctlreq.c) */
	struct {
		pthread_mutex_t lock; /* the pending copy */
		atomic_int pending;   /* the control thread left one for the network thread */
		uint8_t op;
		uint32_t req_id;
		struct rps_ctlreq req;
		/* network thread */
		int active;
		uint8_t a_op;
		uint32_t a_req_id;
		uint32_t gen;
	} creq;

	struct rps_repl *repl; /* replicated shards (server/repl.h); NULL: none */
};

/* server.c: entries into the shards' rings (network and control threads). */
int rps_srv_enqueue(struct rps_server *srv, struct rps_shard *sh, const struct rps_ring_entry *e);
/* A control entry (DEAD, CLOCK, ...): as fresh and as urgent as anything. */
void rps_srv_ctl_entry(struct rps_ring_entry *e, uint32_t type, uint32_t shard, uint32_t worker);
void rps_srv_queue_worker(struct rps_server *srv, uint32_t type, uint32_t w);
/* The same about one incarnation of worker w (its pid, 0 = any): a notice
 * about an older one does not touch a replacement that already synced. */
void rps_srv_queue_worker_pid(struct rps_server *srv, uint32_t type, uint32_t w, uint32_t pid);
int rps_srv_queue_all(struct rps_server *srv, uint32_t type, struct rps_shard_restore *r);

/* opts.c */
void rps_srv_opts_from_config(struct rps_server_opts *o, const struct rps_config *cfg);
void rps_srv_opts_merge(struct rps_server_opts *o, const struct rps_server_opts *from);
int rps_srv_opts_check(const struct rps_server_opts *o, const struct rps_config *cfg);
int rps_srv_cores_setup(struct rps_server *srv);
void rps_srv_cores_desc(const struct rps_server *srv, char *buf, size_t len);
/* The address workers are told to connect to. */
const char *rps_srv_advertised_host(const struct rps_server *srv);

/* conn.c */
static inline void rps_srv_conn_get(struct rps_srv_conn *sc)
{
	atomic_fetch_add_explicit(&sc->refs, 1, memory_order_relaxed);
}
void rps_srv_conn_put(struct rps_server *srv, struct rps_srv_conn *sc);
void rps_srv_close_drain(struct rps_server *srv);
void rps_srv_free_reqs(struct rps_server *srv, struct rps_srv_req *r);
void rps_srv_conn_drop(struct rps_server *srv, struct rps_srv_conn *sc);
void rps_srv_conn_fail(struct rps_server *srv, struct rps_srv_conn *sc, int status,
		       const char *why);
void rps_srv_send_small(struct rps_server *srv, struct rps_srv_conn *sc, uint8_t op,
			uint32_t req_id, int status, const void *fixed, size_t len);
void rps_srv_pull_refuse(struct rps_server *srv, struct rps_srv_conn *sc, uint32_t req_id,
			 const struct rps_pull *p, int status);
void rps_srv_pull_send(struct rps_server *srv, struct rps_srv_bufpool *bp, struct rps_shard *sh,
		       struct rps_srv_conn *sc, uint32_t req_id, const struct rps_pull *p,
		       const struct rps_slice_meta *m);
void rps_srv_push_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status);
void rps_srv_declare_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status,
			  const struct rps_declare_ack *ack, const char *why);
extern const struct rps_shard_io rps_srv_io;
/* grow.c: a map with more workers (RDMAPS_MAX_WORKERS) */
void rps_srv_grow_on_map(struct rps_server *srv, const struct rps_map *map);
int rps_srv_on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		     size_t *ack_len_p, const char **why_p);

/* frame.c: the network loop of rps_server_run without the scheduler: poll and
 * dispatch until rps_server_stop (tests run it in-process). */
int rps_server_serve(struct rps_server *srv);
uint16_t rps_server_port(const struct rps_server *srv);
/* The highest clock this server knows for sc's worker. */
uint64_t rps_srv_known_clock(struct rps_server *srv, const struct rps_srv_conn *sc);

/* table_frame.c: TABLE_DECLARE, ROWS_PUSH, ROWS_PULL from a worker (1: the
 * receive token was kept); the update threads' answers. */
int rps_srv_on_table_frame(struct rps_server *srv, struct rps_srv_conn *sc,
			   const struct rps_tr_event *ev);
void rps_srv_rows_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, uint8_t op,
		       int status, uint32_t aux, const void *fixed, size_t flen, const void *data,
		       size_t dlen);

/* ctlreq.c: CHECKPOINT / EXPORT from the scheduler. on_request is the
 * control thread's callback; poll runs in the network loop. */
void rps_srv_creq_on_request(void *arg, const struct rps_frame_hdr *h, const void *data,
			     size_t len);
void rps_srv_creq_poll(struct rps_server *srv);
/* Shards stopped: free what no one collected. */
void rps_srv_creq_fini(struct rps_server *srv);

/* cluster.c: what the scheduler tells a server (also a promoted backup's) */
struct rps_ctl_events;
extern const struct rps_ctl_events rps_srv_ctl_events;

/* metrics.c */
void rps_srv_heartbeat(struct rps_server *srv);
int rps_srv_metrics_start(struct rps_server *srv, uint32_t rank);
void rps_srv_metrics_stop(struct rps_server *srv);

#endif
