/* Cluster membership: join the scheduler (rank, map, restore), follow
 * deaths, rejoins and the shutdown of the job, then serve. */
#include "server/server_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control/control.h"
#include "src/alloc.h"
#include "src/config.h"
#include "src/log.h"

/* ---- control channel callbacks (control thread) ------------------------------ */

static void on_dead(void *arg, const struct rps_node *node)
{
	struct rps_server *srv = arg;

	if (node->role != RPS_ROLE_WORKER) {
		RPS_INFO("node %u (role %u, rank %u) at %.64s:%u is dead", node->id, node->role,
			 node->rank, node->host, node->port);
		return;
	}
	if (node->rank >= srv->nworkers)
		return;
	/* the control channel said whether it left or was declared dead */
	RPS_INFO("worker %u (node %u, %.64s, pid %u) gone: clocks and barriers go on with the "
		 "remaining workers",
		 node->rank, node->id, node->host, node->pid);
	srv->wgone[node->rank] = 1;
	rps_srv_queue_worker_pid(srv, RPS_ENT_DEAD, node->rank, node->pid);
}

/* A new map: a worker that took the rank of a dead one is waited for again. */
static void on_map(void *arg, const struct rps_map *map, const struct rps_node *nodes)
{
	struct rps_server *srv = arg;

	rps_srv_grow_on_map(srv, map); /* growth: the job's worker count (grow.c) */
	for (uint32_t i = 0; nodes && i < map->num_nodes; i++) {
		const struct rps_node *n = &nodes[i];

		if (n->role != RPS_ROLE_WORKER || !n->alive || n->rank >= srv->nworkers ||
		    !srv->wgone[n->rank])
			continue;
		srv->wgone[n->rank] = 0;
		RPS_INFO("worker %u rejoined from %.64s", n->rank, n->host);
		rps_srv_queue_worker_pid(srv, RPS_ENT_REVIVE, n->rank, n->pid);
	}
}

static void on_shutdown(void *arg)
{
	struct rps_server *srv = arg;

	RPS_INFO("shutdown requested by the scheduler");
	rps_server_stop(srv);
}

const struct rps_ctl_events rps_srv_ctl_events = {
    .on_dead = on_dead,
    .on_shutdown = on_shutdown,
    .on_map = on_map,
    .on_request = rps_srv_creq_on_request,
};

int rps_server_run(struct rps_server *srv)
{
	struct rps_ctl_join_opts jo;
	struct rps_shard_restore *restore = NULL;
	struct rps_node *nodes = NULL;
	struct rps_map map;
	uint32_t rank, want = UINT32_MAX;
	int rc = 0, nnodes;

	if (srv->running)
		return -EBUSY;
	srv->running = 1;
	if (!srv->scheduler[0]) {
		RPS_ERR("no scheduler address: set RDMAPS_SCHEDULER or --scheduler");
		return -EINVAL;
	}
	if (strcmp(rps_srv_advertised_host(srv), srv->host))
		RPS_WARN("listening on %s: advertising 127.0.0.1 to workers (set --host)",
			 srv->host);
	/* RDMAPS_REPLICAS > 1 and the job runs already: a backup (repl_join.c) */
	if (rps_repl_join_maybe(srv, &rc))
		return rc;
	rps_ctl_join_opts_init(&jo, srv->cfg, RPS_ROLE_SERVER);
	jo.scheduler = srv->scheduler;
	jo.secret = srv->secret;
	/* the status table's data path: 1 = one-sided reads */
	jo.transport = srv->remote_read ? 1 : 0;
	jo.host = rps_srv_advertised_host(srv);
	jo.port = srv->port;
	want = jo.want_rank;
	if (srv->restore_dir) {
		int nranks = 0;
		uint32_t r = rps_srv_restore_rank_of_dir(srv->restore_dir, &nranks);

		if (nranks <= 0) {
			RPS_ERR(
			    "--restore %s: no checkpoint files (server<R>-shard<S>-clock<C>.ckpt)",
			    srv->restore_dir);
			return -ENOENT;
		}
		if (want == UINT32_MAX)
			want = r; /* the one rank in the directory, else the scheduler's choice */
		restore = rps_calloc((size_t)srv->nshards, sizeof(*restore));
		if (!restore)
			return -ENOMEM;
		/* refuse before joining when we know whose files to load */
		if (want != UINT32_MAX) {
			rc = rps_srv_restore_find(srv->restore_dir, want, (uint32_t)srv->nshards,
						  restore);
			if (rc)
				goto out_free;
		}
	}
	jo.want_rank = want;
	jo.timeout_ms = srv->opts.timeout_ms;
	jo.heartbeat_ms = srv->heartbeat_ms;
	jo.events = &rps_srv_ctl_events;
	jo.arg = srv;
	rc = rps_ctl_join(&jo, &srv->ctl);
	if (rc) {
		RPS_ERR("cannot join the scheduler at %s: %s", srv->scheduler, rps_strerror(rc));
		srv->ctl = NULL;
		goto out_free;
	}
	rank = rps_ctl_rank(srv->ctl);
	rps_log_set_ident("server", (int)rank);
	memset(&map, 0, sizeof(map));
	nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes));
	if (!nodes) {
		rc = -ENOMEM;
		goto out_leave;
	}
	nnodes = rps_ctl_map(srv->ctl, &map, nodes, RPS_MAX_NODES);
	if (map.num_workers > srv->nworkers) {
		RPS_ERR("the cluster has %u workers, this server was set up for %u "
			"(RDMAPS_NUM_WORKERS, or RDMAPS_MAX_WORKERS when the job grows): start it "
			"with the job's settings",
			map.num_workers, srv->nworkers);
		rc = -EINVAL;
		goto out_leave;
	}
	atomic_store(&srv->map_workers, map.num_workers ? map.num_workers : srv->nworkers);
	for (uint32_t w = map.num_workers; map.num_workers && w < srv->nworkers; w++) {
		/* never coming, or (RDMAPS_MAX_WORKERS) not yet: waited for once in the map */
		srv->wgone[w] = 1;
		rps_srv_queue_worker(srv, RPS_ENT_DEAD, w);
	}
	for (int i = 0; i < nnodes && i < RPS_MAX_NODES; i++) {
		/* joined a running job (restart): its dead workers are not waited for */
		if (nodes[i].role == RPS_ROLE_WORKER && !nodes[i].alive &&
		    nodes[i].rank < srv->nworkers) {
			srv->wgone[nodes[i].rank] = 1;
			rps_srv_queue_worker(srv, RPS_ENT_DEAD, nodes[i].rank);
		}
	}
	atomic_store(&srv->rank, rank);
	for (int s = 0; s < srv->nshards; s++)
		atomic_store(&srv->shards[s].server_rank, rank);
	if (restore) {
		if (want != UINT32_MAX && rank != want)
			RPS_WARN(
			    "asked for rank %u to restore its checkpoints, the scheduler gave %u: "
			    "restoring rank %u's",
			    want, rank, rank);
		if (want != rank) {
			rc = rps_srv_restore_find(srv->restore_dir, rank, (uint32_t)srv->nshards,
						  restore);
			if (rc)
				goto out_leave;
		}
		rc = rps_srv_queue_all(srv, RPS_ENT_RESTORE, restore);
		if (!rc)
			rc =
			    rps_srv_restore_wait(srv->restore_dir, (uint32_t)srv->nshards, restore);
		if (rc)
			goto out_leave;
	}
	RPS_INFO("joined as server %u of %u with %u workers", rank, map.num_servers,
		 atomic_load(&srv->map_workers));
	rc = rps_srv_metrics_start(srv, rank);
	if (!rc) /* RDMAPS_REPLICAS > 1: the backup of the previous server */
		rc = rps_repl_start(srv, rank, nodes, nnodes, map.num_servers);
	if (rc)
		goto out_leave;

	rc = rps_server_serve(srv);
out_leave:
	rps_repl_stop_standby(srv); /* before the map it reads goes */
	rps_srv_metrics_stop(srv);
	rps_ctl_leave(srv->ctl);
	srv->ctl = NULL;
out_free:
	rps_free(nodes);
	rps_free(restore);
	return rc;
}
