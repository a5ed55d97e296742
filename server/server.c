/* The server object: create (transport, shards, update threads), stop,
 * destroy, and the hand-off of entries into the shards' rings
 * (include/rdmaps/server.h). */
#include "server/server_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "control/control.h"
#include "src/alloc.h"
#include "src/auth.h"
#include "src/config.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/util.h"

/* ---- hand-off into the shards' rings ---------------------------------------- */

/* Into the shard's ring; a full ring blocks the network thread (TCP back
 * pressure), never drops. -ECANCELED when the server stops meanwhile. */
int rps_srv_enqueue(struct rps_server *srv, struct rps_shard *sh, const struct rps_ring_entry *e)
{
	int rc = rps_ring_push(sh->ring, e);

	while (rc == -EAGAIN || rc == -ETIMEDOUT) {
		if (atomic_load_explicit(&srv->stop, memory_order_relaxed))
			return -ECANCELED;
		rc = rps_ring_push_wait(sh->ring, e, RPS_SRV_POLL_MS);
	}
	return rc ? -ECANCELED : 0;
}

void rps_srv_ctl_entry(struct rps_ring_entry *e, uint32_t type, uint32_t shard, uint32_t worker)
{
	memset(e, 0, sizeof(*e));
	e->type = type;
	e->shard = shard;
	e->info.worker = worker;
	e->info.timestamp_ns = UINT64_MAX;
	e->info.norm = INFINITY;
}

/* One control entry into every shard's ring: about worker w, with ptr r[s]
 * (r NULL: none). Stops at the first failure (the server stops). */
static int queue_each(struct rps_server *srv, uint32_t type, uint32_t w,
		      struct rps_shard_restore *r, uint32_t pid)
{
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_ring_entry e;
		int rc;

		rps_srv_ctl_entry(&e, type, (uint32_t)s, w);
		e.ptr = r ? &r[s] : NULL;
		e.u64 = pid;
		rc = rps_srv_enqueue(srv, &srv->shards[s], &e);
		if (rc)
			return rc;
	}
	return 0;
}

void rps_srv_queue_worker(struct rps_server *srv, uint32_t type, uint32_t w)
{
	queue_each(srv, type, w, NULL, 0);
}

void rps_srv_queue_worker_pid(struct rps_server *srv, uint32_t type, uint32_t w, uint32_t pid)
{
	queue_each(srv, type, w, NULL, pid);
}

int rps_srv_queue_all(struct rps_server *srv, uint32_t type, struct rps_shard_restore *r)
{
	return queue_each(srv, type, 0, r, 0);
}

/* ---- restore and checkpoint requests ----------------------------------------- */

int rps_server_set_restore(struct rps_server *srv, const char *dir)
{
	char *d;

	if (!srv || !dir || !dir[0] || srv->running)
		return -EINVAL;
	d = rps_strdup(dir);
	if (!d)
		return -ENOMEM;
	rps_free(srv->restore_dir);
	srv->restore_dir = d;
	return 0;
}

void rps_server_checkpoint(struct rps_server *srv)
{
	if (!srv)
		return;
	atomic_store(&srv->ckpt_request, 1);
	if (srv->tr)
		rps_tr_wake(srv->tr);
}

/* ---- life cycle ----------------------------------------------------------------- */

int rps_server_create(const struct rps_server_opts *opts, struct rps_server **server_p)
{
	const struct rps_config *cfg;
	struct rps_tr_params tp;
	struct rps_server *srv;
	char cores[256], stale[32];
	int rc;

	srv = rps_calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	pthread_mutex_init(&srv->creq.lock, NULL);
	/* our own copy of the configuration: the caller's need not outlive this
	 * call, and rps_server_run reads it later */
	if (opts && opts->field_mask & RPS_SERVER_OPT_CONFIG && opts->config) {
		srv->cfg_copy = *opts->config;
	} else {
		rc = rps_config_init(&srv->cfg_copy);
		if (rc)
			goto err;
	}
	cfg = srv->cfg = &srv->cfg_copy;
	rps_srv_opts_from_config(&srv->opts, cfg);
	if (opts)
		rps_srv_opts_merge(&srv->opts, opts);
	opts = &srv->opts;
	rc = rps_srv_opts_check(opts, cfg);
	if (rc)
		goto err;
	if (srv->opts.consistency == RPS_SSP && !srv->opts.staleness) {
		/* SSP with bound 0 is BSP: a pull at clock c sees exactly the clocks
		 * before c, so pushes of c must not be applied before every worker
		 * finished c - 1 (docs/api.md) */
		RPS_INFO("consistency ssp with staleness 0 runs as bsp");
		srv->opts.consistency = RPS_BSP;
	}
	if (cfg->fault[0] && !rps_fault_on) {
		rc = rps_fault_init(cfg->fault);
		if (rc)
			goto err;
	}
	srv->scheduler = rps_strdup(opts->scheduler);
	srv->transport = rps_strdup(opts->transport);
	srv->host = rps_strdup(opts->host[0] ? opts->host : "0.0.0.0");
	srv->secret = rps_strdup(opts->secret);
	srv->ckpt_dir = rps_strdup(cfg->checkpoint_dir);
	if (!srv->scheduler || !srv->transport || !srv->host || !srv->secret || !srv->ckpt_dir) {
		rc = -ENOMEM;
		goto err;
	}
	rc = rps_auth_token_role_ok(srv->secret, RPS_ROLE_SERVER); /* issue 20: tokens */
	if (rc)
		goto err;
	if (cfg->table_evict_clocks > 0 && cfg->table_evict_seconds > 0) { /* issue 22 */
		RPS_ERR("both RDMAPS_TABLE_EVICT_CLOCKS (%d) and RDMAPS_TABLE_EVICT_SECONDS (%d) are "
			"set: table rows are evicted by clocks or by time, set one of them to 0",
			cfg->table_evict_clocks, cfg->table_evict_seconds);
		rc = -EINVAL;
		goto err;
	}
	srv->nworkers = (uint32_t)cfg->num_workers;
	if (cfg->max_workers > cfg->num_workers) /* growth: state for workers that join later */
		srv->nworkers = (uint32_t)cfg->max_workers;
	srv->chunk_bytes = (uint32_t)cfg->chunk_bytes;
	srv->max_msg = cfg->max_msg;
	srv->heartbeat_ms = cfg->heartbeat_ms > 0 ? cfg->heartbeat_ms : 1000;
	srv->nshards = opts->shards;
	atomic_init(&srv->rank, UINT32_MAX);
	atomic_init(&srv->map_workers, 0);
	atomic_init(&srv->stop, 0);
	atomic_init(&srv->close_stack, NULL);
	atomic_init(&srv->n_push, 0);
	atomic_init(&srv->n_pull, 0);
	atomic_init(&srv->bytes_in, 0);
	atomic_init(&srv->bytes_out, 0);
	rps_srv_pool_init(&srv->reqs, sizeof(struct rps_srv_req));
	rps_srv_bufpool_init(&srv->net_bufs, srv->max_msg);

	rps_tr_params_from_config(cfg, &tp);
	tp.secret = srv->secret;
	if (opts->timeout_ms > 0)
		tp.timeout_ms = opts->timeout_ms;
	tp.nchannels = (uint32_t)srv->nshards;
	tp.arg = srv;
	tp.on_hello = rps_srv_on_hello;
	tp.recv_dest = NULL;
	rc = rps_transport_create(srv->transport, &tp, &srv->tr);
	if (rc)
		goto err;
	srv->conn_per_shard = rps_tr_has(srv->tr, RPS_TR_CAP_CHANNELS);
	srv->remote_read = rps_tr_has(srv->tr, RPS_TR_CAP_READ);

	srv->shards = rps_calloc((size_t)srv->nshards, sizeof(*srv->shards));
	if (!srv->shards) {
		rc = -ENOMEM;
		goto err;
	}
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_shard_params sp = {
		    .idx = (uint32_t)s,
		    .nworkers = srv->nworkers,
		    .shard_bytes = opts->shard_bytes,
		    .chunk_bytes = srv->chunk_bytes,
		    .ring_size = opts->ring_size,
		    .priority = opts->priority,
		    .priority_fn = opts->priority_fn,
		    .priority_arg = opts->priority_arg,
		    .consistency = srv->opts.consistency,
		    .staleness = srv->opts.staleness,
		    .bsp_arrival = !strcmp(cfg->bsp_sum, "arrival"),
		    .optim = opts->optim,
		    .init = opts->init,
		    .max_msg = srv->max_msg,
		    .ckpt_dir = srv->ckpt_dir,
		    .ckpt_every = cfg->checkpoint_every > 0 ? (uint32_t)cfg->checkpoint_every : 0,
		    .ckpt_secs = cfg->checkpoint_secs > 0 ? (uint32_t)cfg->checkpoint_secs : 0,
		    .server_shards = (uint32_t)srv->nshards,
		    .evict_clocks = cfg->table_evict_clocks > 0 ? (uint32_t)cfg->table_evict_clocks : 0,
		    .evict_secs = cfg->table_evict_seconds > 0 ? (uint32_t)cfg->table_evict_seconds : 0,
		};
		struct rps_shard *sh = &srv->shards[s];

		rc = rps_shard_init(sh, &sp, &rps_srv_io, srv);
		if (rc)
			goto err;
		srv->shards_ready++;
	}
	/* listen first: it binds the RDMA device the stores are registered with.
	 * No worker connects before rps_server_run has joined the cluster. */
	rc = rps_tr_listen(srv->tr, srv->host, opts->port, &srv->port);
	if (rc) {
		RPS_ERR("listen on %s:%u: %s", srv->host, opts->port, strerror(-rc));
		goto err;
	}
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_shard *sh = &srv->shards[s];

		rc = rps_tr_reg_mem(srv->tr, sh->store.base, sh->store.size,
				    RPS_TR_ACCESS_REMOTE_READ, &sh->mr);
		if (rc) {
			RPS_ERR("shard %d: register %zu bytes with %s: %s", s, sh->store.size,
				srv->transport, strerror(-rc));
			goto err;
		}
		sh->mr_ok = 1;
		if (srv->remote_read)
			sh->read_tr = srv->tr; /* tables' row chunks (server/table.c) */
	}
	rc = rps_srv_cores_setup(srv);
	if (!rc)
		rc = rps_repl_init(srv); /* before the update threads start */
	if (rc)
		goto err;
	for (int s = 0; s < srv->nshards; s++) {
		rc = rps_shard_start(&srv->shards[s],
				     srv->ncores ? srv->cores[s % srv->ncores] : -1);
		if (rc)
			goto err;
	}
	rps_srv_cores_desc(srv, cores, sizeof(cores));
	snprintf(stale, sizeof(stale), " (staleness %u)", opts->staleness);
	RPS_INFO("rdmaps-server: transport %s on %s:%u, %d shards of %zu bytes, update cores %s, "
		 "default optimizer %s (lr %g; keys the job gives no optimizer), consistency %s%s, %u workers, allocator %s",
		 srv->transport, srv->host, srv->port, srv->nshards, opts->shard_bytes, cores,
		 rps_optim_kind_name(opts->optim.kind), opts->optim.lr,
		 rps_server_consistency_name(srv->opts.consistency),
		 srv->opts.consistency == RPS_SSP ? stale : "", srv->nworkers,
		 rps_allocator_name());
	if (srv->opts.consistency == RPS_BSP && srv->nworkers > 1)
		RPS_INFO("bsp: each clock's pushes summed %s",
			 strcmp(cfg->bsp_sum, "arrival")
			     ? "in worker-rank order, one lane per worker and slice (memory: the "
			       "parameters + one copy per worker; RDMAPS_BSP_SUM=arrival: + one)"
			     : "in arrival order (RDMAPS_BSP_SUM=arrival): not reproducible bit for bit");
	*server_p = srv;
	return 0;

err:
	rps_server_destroy(srv); /* undoes what was done, in order */
	return rc;
}

void rps_server_stop(struct rps_server *srv)
{
	if (!srv)
		return;
	atomic_store(&srv->stop, 1);
	if (srv->tr)
		rps_tr_wake(srv->tr);
}

/* Also the unwind of a failed rps_server_create: everything is undone only
 * as far as it was done (shards_ready, mr_ok, thread_ok, tr). */
void rps_server_destroy(struct rps_server *srv)
{
	struct rps_srv_conn *sc;

	if (!srv)
		return;
	atomic_store(&srv->stop, 1);
	rps_repl_fini(srv); /* the backup this server hosts, and the link to its own */
	/* update threads drain their rings: queued pushes are applied and acked */
	for (int s = 0; s < srv->shards_ready; s++)
		rps_shard_stop(&srv->shards[s]);
	for (int s = 0; s < srv->shards_ready; s++)
		rps_srv_free_reqs(srv, rps_shard_pull_unpark(&srv->shards[s], NULL));
	rps_repl_free(srv); /* the update threads, which forward with it, are stopped */
	rps_srv_close_drain(srv);
	/* what is left holds references for sends that will not complete now */
	sc = srv->conns;
	while (sc) {
		struct rps_srv_conn *n = sc->next;

		sc->conn->user = NULL;
		rps_tr_close(sc->conn);
		rps_free(sc);
		sc = n;
	}
	srv->conns = NULL;
	for (int s = 0; s < srv->shards_ready; s++)
		if (srv->shards[s].mr_ok)
			rps_tr_dereg_mem(srv->tr, &srv->shards[s].mr);
	if (srv->tr)
		rps_transport_destroy(srv->tr);
	srv->tr = NULL;
	rps_srv_creq_fini(srv);
	/* the control thread first: its events (a worker's death, a restore)
	 * go into the shards' rings, which rps_shard_fini frees */
	if (srv->ctl)
		rps_ctl_leave(srv->ctl);
	srv->ctl = NULL;
	for (int s = 0; s < srv->shards_ready; s++)
		rps_shard_fini(&srv->shards[s]);
	rps_srv_bufpool_fini(&srv->net_bufs);
	rps_srv_pool_fini(&srv->reqs);
	rps_free(srv->shards);
	rps_free(srv->cores);
	rps_free(srv->scheduler);
	rps_free(srv->transport);
	rps_free(srv->host);
	rps_free(srv->secret);
	rps_free(srv->ckpt_dir);
	rps_free(srv->restore_dir);
	rps_free(srv);
}
