/* The control channel client's private state, shared by its three files:
 * control.c (join and leave), control_events.c (frames from the scheduler,
 * heartbeats, the control thread), control_req.c (map, barriers, heartbeat
 * figures asked for by the node). See control.c for the locking rules. */
#ifndef RPS_CONTROL_INT_H
#define RPS_CONTROL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "src/config.h"
#include "transport/transport.h"

#define CTL_RETRY_MS	  150	     /* between connection attempts while no scheduler */
#define CTL_LEAVE_WAIT_MS 1000	     /* rps_ctl_leave: wait this long for the scheduler's close */
#define CTL_MAX_MSG	  (1u << 20) /* a MAP of RPS_MAX_NODES nodes is 80 KiB */
#define CTL_EVENTS	  16
#define CTL_STATUS_MAX_MSG (4u << 20) /* rdmaps-ctl: the status table of RPS_MAX_NODES nodes fits */

struct rps_ctl {
	struct rps_transport *tr;
	struct rps_conn *conn; /* NULL once closed */
	char sched[RPS_STR_MAX];
	uint8_t role;
	int heartbeat_ms;
	struct rps_ctl_events ev; /* a copy of the joiner's */
	void *arg;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* barrier releases, loss, close */
	pthread_t thread;
	int thread_started;
	atomic_int stop;

	struct rps_map map;
	struct rps_node *nodes; /* RPS_MAX_NODES */
	uint32_t id;
	uint32_t rank;
	int joined;	    /* MAP received */
	int join_status;    /* join: refusal / loss */
	char progress[256]; /* the scheduler's last progress text */

	uint32_t next_req;
	int barrier_waiting[2];
	int barrier_done[2];
	int barrier_status[2];
	uint32_t barrier_req[2];
	uint32_t barrier_seq[2]; /* barriers entered per group (sent in hdr.aux) */

	/* rps_ctl_request: the one control request this node waits for */
	int creq_waiting;
	uint8_t creq_op;
	uint32_t creq_id;
	int creq_done;
	int creq_status;
	char creq_why[256];
	uint32_t creq_shards, creq_failed; /* shard results seen */

	uint32_t hb_clock;
	uint64_t hb_counters[4];
	/* servers: rps_heartbeat_srv + rps_hb_shard[] after the heartbeat */
	char hb_tail[sizeof(struct rps_heartbeat_srv) +
		     RPS_MAX_SHARDS * sizeof(struct rps_hb_shard_ext)];
	size_t hb_tail_len;
	uint64_t last_hb_ns;
	uint64_t cpu_base_ns;  /* process CPU time at the previous heartbeat */
	uint64_t cpu_wall_ns;  /* and the monotonic time then */

	int closed;   /* connection closed */
	int lost;     /* ... without SHUTDOWN and before leave */
	int shutdown; /* SHUTDOWN received */
	int leaving;  /* rps_ctl_leave() running */

	/* control thread's copies for the callbacks */
	struct rps_map cb_map;
	struct rps_node *cb_nodes;
};

struct rps_ctl_opts;
/* rdmaps-ctl (ctl_status.c): connect to the scheduler as role "ctl" with
 * opts completed from the environment into *full_p. Problems are reported on
 * stderr ("rdmaps-ctl: ..."). 0, -EDESTADDRREQ (address not host:port),
 * -EACCES (secret), or why it could not be reached. */
int rps_ctl_client_open(const struct rps_ctl_opts *opts, struct rps_ctl_opts *full_p,
			struct rps_transport **tr_p, struct rps_conn **conn_p);
/* rdmaps-ctl: poll tr until fn sets *done_p (its return value is the
 * result) or timeout_ms passed (-ETIMEDOUT). A closed connection or an ERROR
 * frame from the scheduler ends it too (reported); fn sees every other
 * frame. */
int rps_ctl_client_wait(const struct rps_ctl_opts *o, struct rps_transport *tr, int timeout_ms,
			int (*fn)(void *arg, const struct rps_tr_event *ev, int *done_p), void *arg);

/* Under ctl->lock. */
int rps_ctl_send_locked(struct rps_ctl *ctl, uint8_t op, uint32_t req_id, uint32_t aux,
			const void *payload, size_t len);
/* A heartbeat if one is due. */
void rps_ctl_maybe_heartbeat(struct rps_ctl *ctl);
/* What the control thread must do after an event, outside the lock. */
struct ctl_action {
	int map; /* call on_map with cb_map / cb_nodes */
	int dead;
	struct rps_node dead_node;
	int shutdown;
};
/* One event from the scheduler's connection; act NULL while joining. */
void rps_ctl_handle_event(struct rps_ctl *ctl, struct rps_tr_event *ev, struct ctl_action *act);
/* A control request's frame (CHECKPOINT / EXPORT) from the scheduler. */
void rps_ctl_on_creq(struct rps_ctl *ctl, const struct rps_tr_event *ev);
/* The control thread: polls, runs callbacks, sends heartbeats. */
void *rps_ctl_thread(void *arg);

#endif
