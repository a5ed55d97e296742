/* Replicated shards (docs/replication.md), RDMAPS_REPLICAS = 2.
 *
 * Every server s hosts a backup of server s - 1 (mod the number of servers):
 * a second struct rps_server in its process (the standby) with the same
 * shards, settings and update threads, listening on a port of its own. The
 * standby connects to its primary as a client (role server, the same
 * authenticated handshake as a worker) and says REPL_READY; from then on each
 * primary shard's update thread sends every entry it takes from its ring
 * (DECLARE, PUSH, ASSIGN, CLOCK, SYNC, DEAD, REVIVE) down that link before it
 * handles it, and the standby's same shard handles the same entries in the
 * same order: the same bits (the optimizer and BSP sums are deterministic in
 * their entry order). A worker's push is acknowledged when both the primary
 * applied it and the standby acknowledged it (repl.c, the pending acks).
 *
 * When the primary dies the link closes; the standby joins the scheduler in
 * the primary's rank (as a restarted server does), and the workers reconnect
 * to it through the map, resending the pushes not acknowledged (their
 * sequence numbers make a resent push count once) and their last CLOCK.
 *
 * Files: repl.c (link, forwarding, acks, standby, promotion), repl_apply.c
 * (update threads: sequence numbers seen, applying forwarded entries).
 */
#ifndef RPS_SERVER_REPL_H
#define RPS_SERVER_REPL_H

#include <stdint.h>

#include "server/shard.h"
#include "src/proto.h"
#include "transport/transport.h"

struct rps_server;
struct rps_srv_conn;
struct rps_map;
struct rps_node;

/* Sequence numbers of one worker's pushes seen by one shard: every number
 * below lo, and those of [lo, lo + RPS_REPL_SEEN_WIN) whose bit is set. */
#define RPS_REPL_SEEN_WIN 1024u
struct rps_repl_seen {
	uint64_t lo;
	uint64_t bits[RPS_REPL_SEEN_WIN / 64];
};

/* ---- update threads (repl_apply.c) ---- */
/* 1 if worker w's push seq was seen by this shard (a resend: not applied
 * again), else records it and returns 0. */
int rps_repl_seen_check(struct rps_shard *sh, uint32_t w, uint64_t seq);
/* A backup's shard: handle the forwarded entry e->ptr (struct rps_srv_req). */
void rps_repl_apply(struct rps_shard *sh, const struct rps_ring_entry *e);

/* ---- the server (repl.c) ---- */
/* At create: RDMAPS_REPLICAS > 1 sets the forwarding of every shard (it
 * waits for the backup's link at the first entry). 0 or -errno. */
int rps_repl_init(struct rps_server *srv);
/* After joining as rank `rank` of a map of nservers: start the standby for
 * the previous server (its primary's address from the map). */
int rps_repl_start(struct rps_server *srv, uint32_t rank, const struct rps_node *nodes, int nnodes,
		   uint32_t nservers);
/* The host server leaves the scheduler: its standby stops following it. */
void rps_repl_stop_standby(struct rps_server *srv);
/* Stop the standby and the links (rps_server_destroy, before the update
 * threads stop: they may still forward what they drain). */
void rps_repl_fini(struct rps_server *srv);
/* Free what rps_repl_fini stopped: only once the update threads, which
 * call the forwarding hook with it, have stopped. */
void rps_repl_free(struct rps_server *srv);

/* ---- a replacement server joining as a backup (repl.c, repl_join.c) ---- */
/* Primary's update thread (RPS_ENT_REPL_COPY): the shard's state to the
 * joining backup, then forwarding from this entry on. */
void rps_repl_copy_take(struct rps_shard *sh);
/* Joining backup's update thread (RPS_ENT_REPL_LOAD): load it, say so. */
void rps_repl_load_run(struct rps_shard *sh, void *arg);
/* A replacement server (no rank of its own): a standby in a free slot (of
 * 2) as the backup of server prev at node; waits for the link. 1 linked, 0
 * that server has a backup (the slot is free again), or -errno. */
int rps_repl_join_standby(struct rps_server *srv, int k, uint32_t prev, const struct rps_node *node);
/* 1 if one of its standbys backs up server rank. */
int rps_repl_join_backs(const struct rps_server *srv, uint32_t rank);
/* Its scheduler connection for the map (owned by srv->repl from now). */
struct rps_repl_mapper;
int rps_repl_join_set_mapper(struct rps_server *srv, struct rps_repl_mapper *m);
/* Standbys it runs that are not stopped. */
int rps_repl_join_busy(const struct rps_server *srv);
/* repl_join.c: the map from the scheduler over a control connection: the
 * nodes (>= 0), -EAGAIN while the job forms, -ECANCELED when it ends, or
 * -errno (the scheduler is not reachable). Any thread. */
int rps_repl_join_map(struct rps_repl_mapper *m, struct rps_map *map_p, struct rps_node *nodes,
		      int max);
void rps_repl_join_mapper_free(struct rps_repl_mapper *m);
/* rps_server_run, RDMAPS_REPLICAS > 1, before joining: 0 if the job forms
 * (join as usual); 1 if it runs already: this server ran as the backup of
 * the servers without one until the job ended, *rc_p its result. */
int rps_repl_join_maybe(struct rps_server *srv, int *rc_p);

/* network thread hooks */
int rps_repl_on_hello(struct rps_server *srv, const struct rps_hello *h, void *ack,
		      size_t *ack_len_p, const char **why_p);
/* A frame on a server-to-server connection: returns 1 if the token was kept. */
int rps_repl_on_frame(struct rps_server *srv, struct rps_srv_conn *sc,
		      const struct rps_tr_event *ev);
void rps_repl_conn_closed(struct rps_server *srv, struct rps_srv_conn *sc);
/* A forwarded push was applied here (status): 1 if its PUSH_ACK is to be
 * sent now, 0 if it waits for the backup's. */
int rps_repl_local_done(struct rps_server *srv, uint32_t id, int status);
/* A worker connection: is this server a standby not (yet) serving workers? */
int rps_repl_refuses_workers(const struct rps_server *srv, const char **why_p);

#endif
