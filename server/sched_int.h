/* Scheduler internals shared by its files. Dependencies point one way:
 * sched.c (life cycle, poll loop, frame dispatch) -> sched_map.c (membership)
 * -> sched_health.c (heartbeats, deaths) -> sched_job.c (barriers, end of job)
 * -> sched_send.c (frames out); sched_status.c (STATUS, /metrics) -> sched_send.c.
 */
#ifndef RPS_SCHED_INT_H
#define RPS_SCHED_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http.h"
#include "server/sched.h"
#include "src/config.h"
#include "src/metrics.h"
#include "src/proto.h"
#include "transport/transport.h"

#define SCHED_POLL_MS		50	   /* longest poll: stop flag and heartbeat checks */
#define SCHED_REFUSED_LINGER_MS 2000	   /* a refused peer is closed after this at the latest */
#define SCHED_STOP_GRACE_MS	2000	   /* rps_sched_stop: wait this long for nodes to leave */
#define SCHED_MAX_MSG		(1u << 20) /* incoming frames are small; MAP / STATUS go out */
#define SCHED_EVENTS		64

enum sched_state {
	SCHED_WAITING, /* nodes register; no map yet */
	SCHED_RUNNING, /* map sent; barriers, heartbeats, rejoins */
	SCHED_ENDING,  /* SHUTDOWN sent; waiting for the nodes to leave */
};

enum slot_state {
	SLOT_EMPTY,
	SLOT_ALIVE,
	SLOT_LEFT, /* sent SHUTDOWN: a clean exit */
	SLOT_DEAD, /* silent too long, or closed without SHUTDOWN */
};

/* One accepted connection: a node (waiting or in a slot) or an rdmaps-ctl. */
struct sched_peer {
	struct rps_conn *conn;
	uint8_t role;	/* from the hello */
	int registered; /* REGISTER accepted: waiting (slot < 0) or in a slot */
	int slot;	/* index into slots, -1 if none */
	int closing;	/* close after this poll batch */
	int refused;	/* registration refused: ignore it, close soon */
	uint64_t refused_ns;
	uint64_t seq; /* registration order */
	uint64_t since_ns;   /* accepted */
	uint64_t last_rx_ns; /* its last frame */
	struct rps_register reg;
	struct sched_peer *next;
	struct rps_metric *tx_bytes, *tx_msgs; /* the scheduler's counters (or NULL) */
};

struct sched_slot {
	struct rps_node node; /* as it goes into the map */
	enum slot_state state;
	struct sched_peer *peer;
	uint8_t transport;
	uint64_t joined_ns;
	uint64_t last_hb_ns;
	uint32_t clock;
	uint64_t counters[4];
	int in_barrier[2];
	uint32_t barrier_req[2];
	/* rates of counters[] (pushes, pulls, bytes in, bytes out) between
	 * heartbeats, at least 0.5 s apart */
	double rate[4];
	uint64_t rate_ns;
	uint64_t rate_base[4];
	uint32_t cpu; /* HEARTBEAT hdr.aux: thousandths of a core + 1; 0 unknown */
	int rejoined; /* took the slot of a node that was gone (a restore) */
	/* servers: the heartbeat's tail */
	int have_srv;
	int have_ext; /* shards[] carry their counters (rps_hb_shard_ext) */
	struct rps_heartbeat_srv srv;
	uint64_t srv_ns; /* when it came (ages the checkpoint age) */
	struct rps_hb_shard_ext shards[RPS_MAX_SHARDS];
	/* per shard rates of pushes applied and pulls served, as rate[] */
	float shard_rate[RPS_MAX_SHARDS][2];
	uint64_t shard_base[RPS_MAX_SHARDS][2];
};

/* The control request in flight (CHECKPOINT / EXPORT), one at a time. */
struct sched_creq {
	int active;
	uint8_t op;
	struct sched_peer *from; /* the requester; NULL once it went away */
	uint32_t from_req;	 /* its req_id */
	uint32_t id;		 /* ours, in the frames to the servers */
	uint64_t deadline_ns;
	int timeout_ms;
	int from_dash;	     /* asked from the dashboard (no peer to answer) */
	uint64_t done_clock; /* CHECKPOINT: the largest shard clock written */
	int nfiles;
	char files[4][sizeof(((struct rps_ctlres_shard *)0)->text)]; /* CHECKPOINT: the first files
									written (dashboard) */
	uint8_t *waiting; /* [nslots]: asked, not answered yet */
	int status;	  /* the first failure */
	char why[256];
};

/* /metrics of the scheduler (RDMAPS_METRICS_PORT). */
struct sched_metrics {
	struct rps_metrics *reg;
	struct rps_http_server *http;
	struct rps_metric *nodes[2][3]; /* [server, worker][alive, dead, left] */
	struct rps_metric *missed[2];	/* nodes declared dead, per role */
	struct rps_metric *bytes[2];	/* rx, tx */
	struct rps_metric *msgs[2];
};

struct rps_sched {
	struct rps_config cfg; /* our copy of rps_sched_opts.cfg (or the defaults) */
	struct rps_transport *tr;
	char host[RPS_STR_MAX];
	char secret[256];
	uint16_t port;
	int num_servers;
	int num_workers;
	int hb_timeout_ms;
	int grace_ms;
	int nslots;
	struct sched_slot *slots;
	struct sched_peer *peers; /* every open connection, registration order irrelevant */
	int nwaiting[4];	  /* waiting registered nodes per role */
	uint64_t reg_seq;
	uint32_t epoch;
	enum sched_state state;
	uint64_t start_ns;
	uint64_t end_deadline_ns;
	atomic_int stop;
	int stopping; /* stop() seen, SHUTDOWN sent */
	void *mapbuf; /* rps_map + rps_node[nslots] */
	size_t mapbuf_len;
	struct sched_creq creq;
	uint32_t creq_seq;
	uint32_t barrier_gen[2]; /* barriers of each group released so far */
	int workers_seen;	 /* workers that registered while waiting */
	int abandoned;		 /* ended that way: rps_sched_run returns -ECANCELED */
	uint64_t workers_gone_ns; /* the last waiting worker went away (0: some wait) */
	struct sched_metrics m;	 /* reg NULL: no /metrics */
	struct sched_dash *dash; /* the dashboard (with /metrics), NULL: none */
	struct rps_metric dummy; /* where metric updates go without a registry */
	int max_workers; /* growth (sched_grow.c): slots for this many workers; >= num_workers */
};

static inline struct rps_metric *met(struct rps_sched *s, struct rps_metric *m)
{
	return m ? m : &s->dummy;
}

/* sched_send.c: frames to peers, rendezvous progress */
const char *rps_sched_role_name(uint8_t role);
int rps_sched_send_frame(struct sched_peer *p, uint8_t op, uint32_t req_id, int32_t status,
			 uint32_t aux, const void *a, size_t alen, const void *b, size_t blen);
void rps_sched_refuse(struct rps_sched *s, struct sched_peer *p, uint32_t req_id, int status,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void rps_sched_progress_text(const struct rps_sched *s, char *buf, size_t len);
void rps_sched_send_progress(struct rps_sched *s);

/* sched_job.c: barriers and the end of the job */
void rps_sched_barriers_eval(struct rps_sched *s);
/* Waiting for the cluster: a registered node went away (before the map). */
void rps_sched_waiting_gone(struct rps_sched *s, uint8_t role);
/* Waiting, every worker that registered went away and none came back within
 * RDMAPS_REGISTER_TIMEOUT_MS: end the job with a message. */
void rps_sched_check_abandoned(struct rps_sched *s, uint64_t now);
int rps_sched_barrier_passed(uint32_t gen, uint32_t seq);
void rps_sched_check_end(struct rps_sched *s);
void rps_sched_on_barrier(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h);
void rps_sched_begin_stop(struct rps_sched *s);
int rps_sched_nodes_remaining(const struct rps_sched *s);

/* sched_health.c: heartbeats, leaves and deaths */
void rps_sched_describe(const struct sched_slot *sl, char *buf, size_t len);
void rps_sched_node_gone(struct rps_sched *s, int i, int status, const char *why);
void rps_sched_on_heartbeat(struct rps_sched *s, struct sched_peer *p, uint32_t aux,
			    const struct rps_heartbeat *hb, const void *tail, size_t tail_len);
void rps_sched_on_shutdown(struct rps_sched *s, struct sched_peer *p);
void rps_sched_check_timers(struct rps_sched *s, uint64_t now);

/* sched_map.c: membership: registration, ranks, the map */
void rps_sched_on_register(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h,
			   const struct rps_register *r);

/* sched_grow.c: workers joining a running job beyond the initial count
 * (RDMAPS_MAX_WORKERS, docs/scheduler.md "Growth") */
int rps_sched_grow_init(struct rps_sched *s);
/* A worker that replaces no one, while the job runs: the slot of a new rank
 * (num_workers and the map grow; the caller fills the slot and sends the
 * map), or -1 with the reason in why. */
int rps_sched_grow_slot(struct rps_sched *s, const struct rps_register *r, char *why, size_t len);

/* sched_creq.c: CHECKPOINT and EXPORT, relayed to the servers */
void rps_sched_on_creq(struct rps_sched *s, struct sched_peer *p, const struct rps_tr_event *ev);
void rps_sched_creq_node_gone(struct rps_sched *s, int i);
void rps_sched_creq_check(struct rps_sched *s, uint64_t now);
void rps_sched_creq_peer_closing(struct rps_sched *s, struct sched_peer *p);

/* sched_dash.c: the dashboard's state (curves, events) and its snapshot;
 * sched_dash_http.c: its pages and actions. Every function is a no-op
 * without a dashboard (s->dash NULL). */
struct sched_dash;
int rps_sched_dash_create(struct rps_sched *s);
void rps_sched_dash_destroy(struct rps_sched *s);
void rps_sched_dash_tick(struct rps_sched *s, uint64_t now);
void rps_sched_dash_event(struct rps_sched *s, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rps_sched_dash_report(struct rps_sched *s, struct sched_peer *p,
			   const struct rps_tr_event *ev);
/* A dashboard request (CHECKPOINT / EXPORT) ended: status, why. */
void rps_sched_dash_creq_done(struct rps_sched *s, int status, const char *why);
/* The HTTP handler of the scheduler's port: /metrics, the page, its API. */
int rps_sched_dash_http(const struct rps_http_req *rq, void *arg, struct rps_http_resp *rs);
/* Loop side of the actions: start a request the page asked for. */
int rps_sched_creq_start_dash(struct rps_sched *s, uint8_t op);

/* sched_status.c: STATUS table and /metrics */
void rps_sched_on_status(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h);
/* REPL_MAP from a replacement server joining as a backup (sched_repl.c) */
void rps_sched_on_repl_map(struct rps_sched *s, struct sched_peer *p,
			   const struct rps_frame_hdr *h);
void rps_sched_metrics_update(struct rps_sched *s);
int rps_sched_metrics_start(struct rps_sched *s, const char *host, int port);

#endif
