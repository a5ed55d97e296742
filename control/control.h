/* The control channel: a node's connection to rdmaps-sched (always TCP).
 *
 * rps_ctl_join() registers the node, waits until the scheduler has the whole
 * cluster (RDMAPS_NUM_SERVERS servers + RDMAPS_NUM_WORKERS workers) and returns
 * the cluster map. A background thread then sends heartbeats and receives
 * map updates, barrier releases, dead-node notices and shutdown.
 * Workers may start before servers: the scheduler holds them until all came.
 */
#ifndef RPS_CONTROL_H
#define RPS_CONTROL_H

#include "src/proto.h"
#include <stddef.h>
#include <stdint.h>

struct rps_ctl;
struct rps_config;
struct rps_conn;
struct rps_hello;
struct rps_transport;

/* The control channel's TCP transport (the scheduler, the control client,
 * rdmaps-ctl): cfg's transport settings, then secret (NULL: none), max_msg,
 * timeout_ms (<= 0: cfg's), arg and on_hello (NULL: accept every hello with
 * the secret) as struct rps_tr_params describes them. 0 or -errno, logged. */
int rps_ctl_transport_create(const struct rps_config *cfg, const char *secret, uint64_t max_msg,
			     int timeout_ms, void *arg,
			     int (*on_hello)(void *arg, struct rps_conn *c,
					     const struct rps_hello *h, void *ack,
					     size_t *ack_len_p, const char **why_p),
			     struct rps_transport **tr_p);

/* "server", "worker", "ctl", "scheduler" for RPS_ROLE_* (src/proto.h); "?"
 * otherwise. The control client's and the scheduler's logs. */
const char *rps_ctl_role_name(uint8_t role);

/* What a node does about the scheduler's news; called from the control
 * thread with rps_ctl_join_opts.arg. Every member may be NULL. */
struct rps_ctl_events {
	void (*on_dead)(void *arg, const struct rps_node *node);
	void (*on_shutdown)(void *arg);
	void (*on_map)(void *arg, const struct rps_map *map, const struct rps_node *nodes);
	/* servers: a control request (CHECKPOINT / EXPORT, aux RPS_CTLREQ_REQ)
	 * relayed by the scheduler; answer with rps_ctl_send (same op and
	 * req_id). Called from the control thread: copy what it needs, return. */
	void (*on_request)(void *arg, const struct rps_frame_hdr *h, const void *data,
			   size_t len);
};

struct rps_ctl_join_opts {
	const char *scheduler; /* "host:port" */
	const char *secret;
	uint8_t role;	    /* RPS_ROLE_SERVER or RPS_ROLE_WORKER */
	uint8_t transport;  /* 0 tcp, 1 rdma (data path of this node) */
	const char *host;   /* servers: address workers connect to */
	uint16_t port;	    /* servers: data port */
	uint32_t want_rank; /* UINT32_MAX: any; a rank to rejoin as after a restart */
	int timeout_ms;	    /* how long to wait for the scheduler and the cluster */
	int heartbeat_ms;
	const struct rps_config *cfg; /* the node's configuration; NULL: defaults + RDMAPS_* */
	const struct rps_ctl_events *events; /* NULL: none */
	void *arg;
};

/* A node's join options from its configuration: scheduler, secret, data
 * transport, host, the rank asked for (RDMAPS_RANK, else any), timeout and
 * heartbeat interval; port 0 and no callbacks. The caller then sets what it
 * knows better (a server's port, a restored rank, its callbacks). */
void rps_ctl_join_opts_init(struct rps_ctl_join_opts *o, const struct rps_config *cfg,
			    uint8_t role);
/* Connect, register, wait for the map. -ECONNREFUSED/-ETIMEDOUT if no
 * scheduler, -EACCES wrong secret. */
int rps_ctl_join(const struct rps_ctl_join_opts *o, struct rps_ctl **ctl_p);
/* The map as of now: copies at most max nodes; returns the node count. */
int rps_ctl_map(struct rps_ctl *ctl, struct rps_map *map_p, struct rps_node *nodes, int max);
uint32_t rps_ctl_rank(const struct rps_ctl *ctl);
uint32_t rps_ctl_id(const struct rps_ctl *ctl);
/* Block until every live node of the group (0 workers, 1 workers+servers)
 * entered the barrier; -EHOSTDOWN if the scheduler is gone. */
int rps_ctl_barrier(struct rps_ctl *ctl, uint32_t group, int timeout_ms);
/* Figures reported with each heartbeat. */
void rps_ctl_set_heartbeat(struct rps_ctl *ctl, uint32_t clock, const uint64_t counters[4]);
/* Servers: data sent after each heartbeat (struct rps_heartbeat_srv and its
 * rps_hb_shard[]), copied; len 0 for none. -EINVAL if it does not fit. */
int rps_ctl_set_heartbeat_tail(struct rps_ctl *ctl, const void *tail, size_t len);
/* Health of the control channel: 0, -EHOSTDOWN if the scheduler connection
 * was lost, -ESHUTDOWN after a SHUTDOWN from the scheduler. */
int rps_ctl_status(const struct rps_ctl *ctl);
/* One frame to the scheduler: hdr with op, req_id, status, aux; payload a
 * then b (either may be empty). Any thread. 0 or -errno. */
int rps_ctl_send(struct rps_ctl *ctl, uint8_t op, uint32_t req_id, int32_t status, uint32_t aux,
		 const void *a, size_t alen, const void *b, size_t blen);
/* Workers: ask the scheduler for a control request (RPS_OP_CHECKPOINT) and
 * wait for its end (up to r->timeout_ms plus a margin). 0, or the failure
 * (logged with the scheduler's reason): -EHOSTDOWN no scheduler, -EBUSY
 * another request of this node is waiting, -ETIMEDOUT, or what a server
 * answered. Another node's request running at the scheduler is waited for
 * (asked again every 100 ms). */
int rps_ctl_request(struct rps_ctl *ctl, uint8_t op, const struct rps_ctlreq *r);
/* Tell the scheduler we leave (clean exit), stop the thread, free. */
void rps_ctl_leave(struct rps_ctl *ctl);

#endif
