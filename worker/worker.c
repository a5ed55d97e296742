/* Worker lifecycle: options, joining the cluster, create and destroy. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rdmaps/worker.h>

#include "src/alloc.h"
#include "src/auth.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/compress.h"
#include "worker/ring.h"
#include "worker/table.h"
#include "worker/local_agg.h"
#include "worker/worker_int.h"

#define RPS_WORKER_DEFAULT_TIMEOUT_MS 30000

void rps_worker_opts_init(struct rps_worker_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	/* set, to NULL / 0: a caller that fills them in afterwards is heard */
	opts->field_mask = RPS_WORKER_OPT_SCHEDULER | RPS_WORKER_OPT_TRANSPORT |
			   RPS_WORKER_OPT_SECRET | RPS_WORKER_OPT_TIMEOUT;
}

/* The options that are set in opts (NULL: none). */
static const char *opt_str(const struct rps_worker_opts *opts, uint64_t bit, const char *v)
{
	return opts && (opts->field_mask & bit) ? v : NULL;
}

void rps_worker_wake(struct rps_worker *w)
{
	if (w->tr && w->progress_started)
		rps_tr_wake(w->tr);
}

static void core_wake(void *arg)
{
	rps_worker_wake(arg);
}

static void core_piece_fini(void *arg, struct rps_piece *p)
{
	struct rps_worker *w = arg;

	if (p->kind == RPS_PK_PUSH && p->u.push.blob) {
		rps_cblob_put(p->u.push.blob); /* compressed data (worker/compress.h) */
		p->u.push.blob = NULL;
	}
	w->pull->piece_fini_locked(w, p);
}

/* ---- control callbacks (control thread) ---- */

static void on_dead(void *arg, const struct rps_node *node)
{
	struct rps_worker *w = arg;

	if (node->role != RPS_ROLE_SERVER || !w->servers)
		return;
	for (uint32_t i = 0; i < w->num_servers; i++) {
		struct rps_wserver *s = &w->servers[i];

		if (s->node_id != node->id)
			continue;
		if (s->node_pid && node->pid && node->pid != s->node_pid)
			continue; /* an older incarnation: we talk to its replacement */
		/* a server that leaves cleanly is gone as well (-EHOSTDOWN) */
		RPS_WARN("server %u (%s:%u) is gone (scheduler notice)", s->rank, s->host,
			 s->port);
		for (uint32_t j = 0; s->conns && j < s->nconns; j++)
			rps_wconn_mark_dead(w, &s->conns[j], -EHOSTDOWN);
	}
}

static void on_shutdown(void *arg)
{
	(void)arg;
	RPS_INFO("scheduler asks the cluster to shut down");
}

static void on_map(void *arg, const struct rps_map *map, const struct rps_node *nodes)
{
	(void)nodes;
	RPS_DEBUG("cluster map epoch %u: %u servers, %u workers", map->epoch, map->num_servers,
		  map->num_workers);
	rps_wgrow_on_map(arg, map); /* workers joined the running job (grow.c) */
}

/* ---- joining a running job ---- */

static uint32_t max_clock_seen(struct rps_worker *w)
{
	uint32_t c = 0;

	for (uint32_t i = 0; i < w->num_servers; i++)
		for (uint32_t j = 0; j < w->servers[i].nshards; j++)
			c = RPS_MAX(c, atomic_load(&w->servers[i].shards[j].clock_seen));
	return c;
}

/* A worker that joins a running job (it took a dead worker's rank) starts at
 * the shards' clock, not at 0: it takes the largest shard clock as its own and
 * tells every server (SYNC), so they wait for it from there, and its first
 * pull gets the current parameters. Read again after the SYNC: a shard that
 * moved on before our SYNC reached it makes us start at its clock instead. */
static int join_clock(struct rps_worker *w)
{
	uint32_t c = 0;
	int rc;

	for (int round = 0; round < 5; round++) {
		rc = w->pull->read_clocks(w, UINT32_MAX);
		if (rc) {
			RPS_ERR("worker: reading the shards' clocks: %s", rps_strerror(rc));
			return rc;
		}
		if (max_clock_seen(w) <= c)
			break;
		c = max_clock_seen(w);
		rc = rps_wsync_send(w, UINT32_MAX, c);
		if (rc)
			return rc;
	}
	if (c) {
		w->joined_running = 1;
		atomic_store(&w->clock, c);
		if (w->ctl)
			rps_ctl_set_heartbeat(w->ctl, c, NULL);
		RPS_INFO("worker %u joins a running job at clock %u", w->rank, c);
	}
	return 0;
}

/* ---- create / destroy ---- */

static int worker_alloc(struct rps_worker **w_p)
{
	struct rps_worker *w = rps_calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	rps_wcore_init(&w->core);
	rc = rps_keytab_init(&w->keys);
	if (rc) {
		rps_wcore_fini(&w->core);
		rps_free(w);
		return rc;
	}
	{
		pthread_rwlockattr_t ra;

		pthread_rwlockattr_init(&ra);
		pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&w->clock_rw, &ra);
		pthread_rwlockattr_destroy(&ra);
	}
	atomic_init(&w->clock, 0);
	atomic_init(&w->submitters, 0);
	atomic_init(&w->publishing, 0);
	atomic_init(&w->reconnect, 0);
	pthread_mutex_init(&w->reconn_lock, NULL);
	rps_wregs_init(&w->regs);
	atomic_init(&w->dead_pending, 0);
	atomic_init(&w->stop, 0);
	atomic_init(&w->leaving, 0);
	w->core.wake = core_wake;
	w->core.wake_arg = w;
	w->pull = &rps_wpull_frame; /* until create chooses */
	w->core.piece_fini = core_piece_fini;
	w->core.piece_fini_arg = w;
	*w_p = w;
	return 0;
}

int rps_worker_keep(struct rps_worker *w, void *ptr)
{
	int rc = 0;

	pthread_mutex_lock(&w->core.lock);
	if (w->ngrave == w->grave_cap) {
		size_t cap = w->grave_cap ? w->grave_cap * 2 : 16;
		void **g = rps_realloc(w->grave, cap * sizeof(*g));

		if (g) {
			w->grave = g;
			w->grave_cap = cap;
		}
	}
	if (w->ngrave < w->grave_cap)
		w->grave[w->ngrave++] = ptr;
	else
		rc = -ENOMEM;
	pthread_mutex_unlock(&w->core.lock);
	return rc;
}

static void worker_free(struct rps_worker *w)
{
	for (size_t i = 0; i < w->ngrave; i++)
		rps_free(w->grave[i]);
	rps_free(w->grave);
	if (w->servers) {
		for (uint32_t i = 0; i < w->num_servers; i++) {
			rps_free(w->servers[i].conns);
			rps_free(w->servers[i].shards);
		}
		rps_free(w->servers);
	}
	rps_keytab_fini(&w->keys);
	rps_wtables_free(w);
	rps_wcore_fini(&w->core);
	pthread_rwlock_destroy(&w->clock_rw);
	pthread_mutex_destroy(&w->reconn_lock);
	pthread_mutex_destroy(&w->regs.lock);
	rps_free(w);
}

/* Undo whatever create did (any stage) and free w: the one way down. */
static void worker_teardown(struct rps_worker *w)
{
	rps_wreconnector_stop(w);
	rps_wring_destroy(w->ring); /* before the map goes */
	w->ring = NULL;
	if (w->ctl) {
		rps_ctl_leave(w->ctl);
		w->ctl = NULL;
	}
	if (w->progress_started) {
		atomic_store(&w->stop, 1);
		rps_tr_wake(w->tr);
		pthread_join(w->progress, NULL);
		w->progress_started = 0;
	}
	if (w->tr)
		rps_wconn_close_all(w);
	/* nothing can answer any more: whatever is left fails */
	pthread_mutex_lock(&w->core.lock);
	for (uint32_t i = 0; w->servers && i < w->num_servers; i++)
		for (uint32_t j = 0; w->servers[i].conns && j < w->servers[i].nconns; j++)
			rps_wcore_fail_conn_locked(&w->core, &w->servers[i].conns[j], -ECANCELED);
	pthread_mutex_unlock(&w->core.lock);
	rps_wcore_drain(&w->core);
	w->pull->fini(w);
	rps_wregs_fini(w);
	rps_wtread_free(w); /* table reads' scratch, before the transport */
	if (w->tr) {
		rps_transport_destroy(w->tr);
		w->tr = NULL;
	}
	worker_free(w);
}

/* Pulls by one-sided reads when the transport reads remote memory and every
 * server's stores are readable; by frames otherwise. */
static const struct rps_wpull_ops *pull_strategy(struct rps_worker *w)
{
	int readable =
	    rps_tr_has(w->tr, RPS_TR_CAP_READ) && w->tr->max_read_sge >= RPS_RPLAN_MIN_SGE;

	for (uint32_t i = 0; readable && i < w->num_servers; i++) {
		struct rps_wserver *s = &w->servers[i];

		for (uint32_t j = 0; j < s->nshards; j++)
			if (!s->shards[j].desc.addr || !s->shards[j].desc.size)
				readable = 0;
		if (s->chunk_bytes < 64 || s->chunk_bytes % 64)
			readable = 0;
	}
	if (readable)
		return &rps_wpull_read;
	if (rps_tr_has(w->tr, RPS_TR_CAP_READ))
		RPS_WARN("transport %s reads remote memory, but the servers' stores are not "
			 "readable (or max_read_sge %d < %d): pulls go by frames",
			 w->transport_name, w->tr->max_read_sge, RPS_RPLAN_MIN_SGE);
	return &rps_wpull_frame;
}

static int build_keymap(struct rps_worker *w)
{
	const struct rps_config *cfg = w->cfg;
	int mode = rps_keymap_mode_parse(cfg->key_map[0] ? cfg->key_map : "hash");
	uint64_t slice_elems = cfg->slice_bytes / sizeof(float);
	int rc;

	if (mode < 0) {
		RPS_ERR("key_map %s: expected hash or range", cfg->key_map);
		return -EINVAL;
	}
	if (!slice_elems)
		slice_elems = UINT64_MAX / 2; /* no slicing */
	rc = rps_keymap_init(&w->km, (enum rps_keymap_mode)mode, w->num_servers,
			     w->shards_per_server, cfg->key_range, slice_elems);
	if (rc)
		RPS_ERR("key map (%s, %u servers, %u shards, key_range %llu, slice %llu B): %s",
			cfg->key_map, w->num_servers, w->shards_per_server,
			(unsigned long long)cfg->key_range, (unsigned long long)cfg->slice_bytes,
			rps_strerror(rc));
	return rc;
}

static const struct rps_ctl_events worker_ctl_events = {
    .on_dead = on_dead,
    .on_shutdown = on_shutdown,
    .on_map = on_map,
};

int rps_worker_create(const struct rps_worker_opts *opts, struct rps_worker **worker_p)
{
	struct rps_ctl_join_opts jo;
	struct rps_tr_params tp;
	struct rps_node *nodes = NULL;
	struct rps_map map;
	struct rps_worker *w;
	const char *s;
	int nnodes, rc;

	if (!worker_p)
		return -EINVAL;
	rc = worker_alloc(&w);
	if (rc)
		return rc;
	if (opts && (opts->field_mask & RPS_WORKER_OPT_CONFIG) && opts->config) {
		w->own_cfg = *opts->config;
	} else {
		rc = rps_config_init(&w->own_cfg);
		if (rc) {
			RPS_ERR("worker: bad RDMAPS_* settings: %s", rps_strerror(rc));
			goto err;
		}
	}
	w->cfg = &w->own_cfg;
	s = opt_str(opts, RPS_WORKER_OPT_TRANSPORT, opts ? opts->transport : NULL);
	snprintf(w->transport_name, sizeof(w->transport_name), "%s", s ? s : w->cfg->transport);
	s = opt_str(opts, RPS_WORKER_OPT_SECRET, opts ? opts->secret : NULL);
	snprintf(w->secret, sizeof(w->secret), "%s", s ? s : w->cfg->secret);
	rc = rps_auth_token_role_ok(w->secret, RPS_ROLE_WORKER); /* issue 20: tokens */
	if (rc)
		goto err;
	s = opt_str(opts, RPS_WORKER_OPT_SCHEDULER, opts ? opts->scheduler : NULL);
	snprintf(w->scheduler, sizeof(w->scheduler), "%s", s ? s : w->cfg->scheduler);
	w->timeout_ms = opts && (opts->field_mask & RPS_WORKER_OPT_TIMEOUT) && opts->timeout_ms > 0
				? opts->timeout_ms
				: w->cfg->timeout_ms;
	if (w->timeout_ms <= 0)
		w->timeout_ms = RPS_WORKER_DEFAULT_TIMEOUT_MS;
	if (!w->scheduler[0]) {
		RPS_ERR("worker: no scheduler address (RDMAPS_SCHEDULER=host:port)");
		rc = -EINVAL;
		goto err;
	}
	if (w->cfg->fault[0] && !rps_fault_on) {
		rc = rps_fault_init(w->cfg->fault);
		if (rc)
			goto err;
	}

	rps_tr_params_from_config(w->cfg, &tp);
	tp.secret = w->secret;
	tp.timeout_ms = w->timeout_ms;
	tp.arg = w;
	tp.recv_dest = rps_wrecv_dest;
	rc = rps_transport_create(w->transport_name, &tp, &w->tr);
	if (rc)
		goto err;
	w->channels = rps_tr_has(w->tr, RPS_TR_CAP_CHANNELS);

	rps_ctl_join_opts_init(&jo, w->cfg, RPS_ROLE_WORKER);
	jo.scheduler = w->scheduler;
	jo.secret = w->secret;
	/* the status table's data path: 1 = one-sided reads */
	jo.transport = rps_tr_has(w->tr, RPS_TR_CAP_READ) ? 1 : 0;
	jo.timeout_ms = w->timeout_ms;
	jo.events = &worker_ctl_events;
	jo.arg = w;
	/* the ring all-reduce's port, in the map for the other workers */
	rc = rps_wring_create(w, &tp, jo.host, &w->ring, &jo.port);
	if (rc)
		goto err;
	rc = rps_ctl_join(&jo, &w->ctl);
	if (rc) {
		RPS_ERR("worker: join %s: %s", w->scheduler, rps_strerror(rc));
		goto err;
	}
	nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes));
	if (!nodes) {
		rc = -ENOMEM;
		goto err;
	}
	nnodes = rps_ctl_map(w->ctl, &map, nodes, RPS_MAX_NODES);
	if (nnodes < 0) {
		rc = nnodes;
		goto err;
	}
	w->rank = rps_ctl_rank(w->ctl);
	w->num_workers = map.num_workers;
	w->num_servers = map.num_servers;
	rps_log_set_ident("worker", (int)w->rank);
	rps_wring_set_rank(w->ring, w->rank, w->num_workers);
	if (!w->num_servers) {
		RPS_ERR("worker: the cluster has no server");
		rc = -EINVAL;
		goto err;
	}

	rc = rps_wconn_connect_all(w, nodes, nnodes);
	if (rc)
		goto err;
	if (w->cfg->replicas > 1) {
		/* replicated shards: pushes carry sequence numbers, never reused by
		 * this rank (a replacement starts at its own start time), and are
		 * kept for a promoted backup when a server dies (docs/replication.md) */
		uint64_t base = rps_wall_ns();

		w->core.keep_pushes = 1;
		for (uint32_t i = 0; i < w->num_servers; i++)
			for (uint32_t j = 0; j < w->servers[i].nshards; j++)
				w->servers[i].shards[j].seq = base;
	}
	rc = build_keymap(w);
	if (rc)
		goto err;
	w->pull = pull_strategy(w);
	rc = w->pull->init(w);
	if (rc)
		goto err;

	if (rps_tr_has(w->tr, RPS_TR_CAP_PROGRESS) && w->cfg->wait_spin_us > 0) {
		w->core.spin = rps_wprogress_spin;
		w->core.spin_ns = (uint64_t)w->cfg->wait_spin_us * 1000u;
	}
	w->progress_started = 1; /* wake() may be called from now on */
	rc = pthread_create(&w->progress, NULL, rps_wprogress_main, w);
	if (rc) {
		rc = -rc;
		RPS_ERR("worker: progress thread: %s", strerror(-rc));
		w->progress_started = 0;
		goto err;
	}
	pthread_setname_np(w->progress, "rps-progress");
	for (int tries = 0;; tries++) {
		/* a connection lost meanwhile (a server's idle timeout while this
		 * process was stopped): reconnect and do it again */
		rc = w->pull->attach(w, UINT32_MAX);
		if (!rc)
			rc = join_clock(w);
		if (!rc || tries == RPS_WRETRY_TRIES - 1 || rps_wretry_lost(w, rc))
			break;
		RPS_WARN("worker: reconnected while joining; joining again (%d of %d)", tries + 2,
			 RPS_WRETRY_TRIES);
	}
	if (rc)
		goto err;
	rc = rps_wreconnector_start(w);
	if (rc)
		goto err;
	rps_free(nodes);
	RPS_INFO("worker %u of %u: %u servers x %u shards over %s (%s pulls, %s)", w->rank,
		 w->num_workers, w->num_servers, w->shards_per_server, w->transport_name,
		 w->pull->name,
		 w->consistency == RPS_BSP   ? "bsp"
		 : w->consistency == RPS_SSP ? "ssp"
					     : "asp");
	*worker_p = w;
	return 0;

err:
	rps_free(nodes);
	worker_teardown(w);
	return rc;
}

void rps_worker_destroy(struct rps_worker *w)
{
	int rc;

	if (!w)
		return;
	rc = rps_wcore_quiesce(&w->core, w->tr ? w->timeout_ms : 0);
	if (rc)
		RPS_WARN("worker: requests still in flight after %d ms; failing them",
			 w->timeout_ms);
	atomic_store(&w->leaving, 1);
	rps_wlocal_fini(w);
	worker_teardown(w);
}

/* ---- offline worker (unit tests) ---- */

int rps_worker_create_offline(const struct rps_keymap *km, struct rps_worker **worker_p)
{
	struct rps_worker *w;
	int rc;

	rc = worker_alloc(&w);
	if (rc)
		return rc;
	w->km = *km;
	w->num_servers = km->num_servers;
	w->num_workers = 1;
	w->shards_per_server = km->shards_per_server;
	snprintf(w->transport_name, sizeof(w->transport_name), "none");
	w->timeout_ms = 1000;
	w->servers = rps_calloc(w->num_servers, sizeof(*w->servers));
	if (!w->servers)
		goto err_nomem;
	for (uint32_t i = 0; i < w->num_servers; i++) {
		struct rps_wserver *s = &w->servers[i];

		s->rank = i;
		s->nshards = km->shards_per_server;
		s->max_msg = 1u << 20;
		s->push_elems = rps_wplan_push_elems(s->max_msg, 0);
		s->pull_elems = rps_wplan_pull_elems(s->max_msg, 0);
		s->nconns = 1;
		s->conns = rps_calloc(1, sizeof(*s->conns));
		s->shards = rps_calloc(s->nshards, sizeof(*s->shards));
		if (!s->conns || !s->shards)
			goto err_nomem;
		s->conns[0].srv = s;
		atomic_init(&s->conns[0].dead, 0);
		for (uint32_t j = 0; j < s->nshards; j++)
			s->shards[j].conn = &s->conns[0];
	}
	*worker_p = w;
	return 0;
err_nomem:
	worker_free(w);
	return -ENOMEM;
}

/* ---- small public calls ---- */

int rps_worker_rank(const struct rps_worker *w)
{
	return w ? (int)w->rank : -EINVAL;
}


int rps_worker_num_servers(const struct rps_worker *w)
{
	return w ? (int)w->num_servers : -EINVAL;
}

const char *rps_worker_transport(const struct rps_worker *w)
{
	return w ? w->transport_name : "";
}

uint32_t rps_worker_clock_value(const struct rps_worker *w)
{
	return w ? atomic_load(&((struct rps_worker *)w)->clock) : 0;
}

enum rps_consistency rps_worker_consistency(const struct rps_worker *w)
{
	return w ? w->consistency : RPS_ASP;
}

uint32_t rps_worker_staleness_bound(const struct rps_worker *w)
{
	return w && w->consistency == RPS_SSP ? w->staleness : 0;
}

uint32_t rps_worker_max_staleness(const struct rps_worker *w)
{
	return w ? atomic_load(&((struct rps_worker *)w)->stat_max_stale) : 0;
}

#define STAT(bit, member, counter)                                                         \
	do {                                                                               \
		if (st->field_mask & (bit))                                                \
			st->member = atomic_load_explicit(&(counter), memory_order_relaxed); \
	} while (0)

int rps_worker_stats(const struct rps_worker *cw, struct rps_worker_stats *st)
{
	struct rps_worker *w = (struct rps_worker *)cw; /* only loads below */

	if (!w || !st)
		return -EINVAL;
	STAT(RPS_WORKER_STAT_PULLS, pulls, w->stat_pulls);
	STAT(RPS_WORKER_STAT_PUSHES, pushes, w->stat_pushes);
	STAT(RPS_WORKER_STAT_BYTES_OUT, bytes_out, w->stat_bytes_out);
	STAT(RPS_WORKER_STAT_BYTES_IN, bytes_in, w->stat_bytes_in);
	STAT(RPS_WORKER_STAT_TORN_RETRIES, torn_retries, w->stat_torn);
	STAT(RPS_WORKER_STAT_DIRECT_PULLS, direct_pulls, w->stat_direct);
	STAT(RPS_WORKER_STAT_DIRECT_SLEEPS, direct_sleeps, w->core.stat_direct_sleeps);
	STAT(RPS_WORKER_STAT_DIRECT_NAPS, direct_naps, w->core.stat_direct_naps);
	STAT(RPS_WORKER_STAT_PUSH_RAW_BYTES, push_raw_bytes, w->stat_push_raw);
	STAT(RPS_WORKER_STAT_PUSH_WIRE_BYTES, push_wire_bytes, w->stat_push_wire);
	STAT(RPS_WORKER_STAT_LAST_STEP_PUSH_BYTES, last_step_push_bytes, w->stat_last_step);
	STAT(RPS_WORKER_STAT_ROW_INDEX_READS, row_index_reads, w->stat_row_ix_reads);
	STAT(RPS_WORKER_STAT_ROW_SLOT_READS, row_slot_reads, w->stat_row_slot_reads);
	STAT(RPS_WORKER_STAT_ROW_PULL_FRAMES, row_pull_frames, w->stat_row_frames);
	STAT(RPS_WORKER_STAT_ROW_INDEX_MOVED, row_index_moved, w->stat_row_moved);
	return 0;
}
#undef STAT

void rps_wstat_staleness(struct rps_worker *w, uint32_t min_clock, uint32_t shard_clock)
{
	uint32_t st = min_clock > shard_clock ? min_clock - shard_clock : 0;
	uint32_t cur = atomic_load_explicit(&w->stat_max_stale, memory_order_relaxed);

	while (cur < st && !atomic_compare_exchange_weak(&w->stat_max_stale, &cur, st))
		;
}

int rps_worker_barrier(struct rps_worker *w)
{
	if (!w)
		return -EINVAL;
	if (!w->ctl)
		return -ENOTCONN;
	return rps_ctl_barrier(w->ctl, 0, -1);
}

int rps_worker_checkpoint(struct rps_worker *w, uint32_t clock, int timeout_ms)
{
	struct rps_ctlreq r;

	if (!w)
		return -EINVAL;
	if (!w->ctl) {
		RPS_ERR("checkpoint: this worker has no scheduler connection (an offline "
			"worker cannot ask the servers)");
		return -ENOTCONN;
	}
	memset(&r, 0, sizeof(r));
	if (clock != UINT32_MAX) {
		r.clock = clock;
		r.flags = RPS_CTLREQ_CLOCK;
	}
	if (timeout_ms <= 0)
		timeout_ms = w->cfg && w->cfg->timeout_ms > 0 ? w->cfg->timeout_ms : 30000;
	r.timeout_ms = (uint32_t)timeout_ms;
	return rps_ctl_request(w->ctl, RPS_OP_CHECKPOINT, &r);
}
