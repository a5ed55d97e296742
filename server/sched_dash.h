/* The scheduler's dashboard: state shared by sched_dash.c (the loop's side:
 * curves, events, the snapshot) and sched_dash_http.c (the HTTP thread's
 * side: pages, the snapshot copied out, actions asked for). */
#ifndef RPS_SCHED_DASH_H
#define RPS_SCHED_DASH_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "server/sched_int.h"

#define DASH_SERIES	 64   /* curves kept (name x worker) */
#define DASH_POINTS	 512  /* points per curve (even): then thinned by 2 */
#define DASH_EVENTS	 256  /* newest events kept */
#define DASH_REPORT_RATE 200  /* REPORTs per second per worker; more dropped */
#define DASH_RATE_SLOTS	 1024 /* per slot (RPS_MAX_NODES) */
#define DASH_SNAP_MS	 250  /* a new snapshot at most this often while watched */
#define DASH_IDLE_MS	 2000 /* and this often when nobody asked for 3 s */
#define DASH_ACT_FILES	 4

struct dash_point {
	float t;	/* seconds since the scheduler started */
	uint32_t clock; /* the worker's clock */
	double v;
};

struct dash_series {
	char name[RPS_REPORT_NAME_MAX + 1];
	uint32_t worker; /* rank */
	uint32_t n;	 /* points kept */
	uint32_t stride; /* one report in stride is kept */
	uint32_t skip;	 /* reports to pass before the next kept one */
	uint64_t total;	 /* reports received */
	int last_kept;	 /* the newest report is among pts[] */
	struct dash_point last;
	struct dash_point pts[DASH_POINTS];
};

struct dash_event {
	double t;
	char kind[12]; /* join, death, left, rejoin, restore, checkpoint, action */
	char text[232];
};

enum dash_act_state {
	DASH_ACT_NONE,
	DASH_ACT_QUEUED,  /* the page asked; the loop has not started it */
	DASH_ACT_RUNNING, /* sent to the servers */
	DASH_ACT_DONE,
	DASH_ACT_FAILED,
};

struct sched_dash {
	/* loop thread only */
	struct dash_series *series[DASH_SERIES];
	int nseries;
	uint64_t dropped;	 /* reports over the rate */
	uint64_t dropped_series; /* reports of curves beyond DASH_SERIES */
	uint64_t rate_sec[DASH_RATE_SLOTS];
	uint32_t rate_n[DASH_RATE_SLOTS];
	struct dash_event events[DASH_EVENTS];
	uint64_t nevents;
	uint64_t built_ns;
	int dirty;
	uint64_t start_unix_ms; /* CLOCK_REALTIME when the dashboard started */
	/* shared with the HTTP thread */
	atomic_ullong asked_ns; /* last GET of the state */
	pthread_mutex_t lock;	/* snap, act, last_refusal_ns */
	char *snap;		/* the newest snapshot (json_dumps) */
	size_t snap_len;
	struct {
		uint32_t id;
		uint8_t op; /* RPS_OP_CHECKPOINT / RPS_OP_EXPORT */
		enum dash_act_state state;
		char why[640];
		uint64_t clock;
		int nfiles;
		char files[DASH_ACT_FILES][sizeof(((struct rps_ctlres_shard *)0)->text)];
	} act;
	uint64_t last_refusal_ns; /* a wrong secret is logged at most once a second */
	/* an export runs as rdmaps-ctl export would, in a thread of its own
	 * talking to this scheduler (rps_ctl_export) */
	pthread_t export_thread;
	int export_started;	/* loop thread */
	atomic_int export_done; /* set by the thread, joined by the loop */
	char export_path[RPS_STR_MAX + 64];
	char export_sched[RPS_STR_MAX + 8];
	const char *secret;	 /* the job's (rps_sched.secret) */
	struct rps_metrics *reg; /* /metrics */
};

#endif
