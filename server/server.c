/* The server: options, set-up, the network thread and its glue to the
 * transport and the control channel (include/rdmaps/server.h).
 *
 * The network thread (the caller of rps_server_run) polls the data
 * transport and dispatches frames: DECLARE, PUSH and CLOCK become typed
 * entries of the target shard's priority ring (the update thread is the only
 * writer of its shard); PULLs are answered from here when their consistency
 * condition holds and parked on the shard otherwise. */
#include "server/server_int.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "src/alloc.h"
#include "src/ckpt.h"
#include "src/config.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/metrics.h"
#include "src/util.h"
#include "control/control.h"
#include "http/http.h"

#define RPS_SRV_POLL_MS 100
#define RPS_SRV_EVENTS	64

/* /metrics (RDMAPS_METRICS_PORT > 0): server rank r serves on port + 1 + r. */
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
};

struct rps_server {
	struct rps_server_opts opts; /* strings below are our copies */
	char *scheduler;
	char *transport;
	char *host;
	char *secret;
	char *ckpt_dir;	   /* RDMAPS_CHECKPOINT_DIR ("" none) */
	char *restore_dir; /* rps_server_set_restore, NULL none */
	const struct rps_config *cfg;
	uint32_t nworkers; /* configured (RDMAPS_NUM_WORKERS) */
	uint32_t chunk_bytes;
	uint64_t max_msg;
	int heartbeat_ms;

	struct rps_transport *tr;
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
	atomic_ullong faults_drop, faults_delay; /* RDMAPS_FAULT injections */

	struct srv_metrics m; /* m.reg NULL: off */
};

/* ---- options ------------------------------------------------------------------ */

void rps_server_opts_init(struct rps_server_opts *o)
{
	const struct rps_config *cfg = rps_config_get();
	int v;

	memset(o, 0, sizeof(*o));
	o->scheduler = cfg->scheduler;
	o->transport = cfg->transport;
	o->host = cfg->host;
	o->port = (uint16_t)cfg->port;
	o->secret = cfg->secret;
	o->shards = cfg->shards;
	if (cfg->update_cores[0]) {
		v = rps_config_parse_cores(cfg->update_cores, o->cores, RPS_MAX_CORES);
		if (v < 0) {
			RPS_WARN("update_cores \"%s\": not a core list, using all online cores",
				 cfg->update_cores);
			v = 0;
		}
		o->ncores = v;
	}
	o->shard_bytes = cfg->shard_bytes;
	o->ring_size = cfg->ring_size;

	rps_optim_opts_default(&o->optim);
	v = rps_optim_kind_parse(cfg->optimizer);
	if (v < 0)
		RPS_ERR("optimizer \"%s\": expected sgd, momentum, nesterov, adagrad or adam",
			cfg->optimizer);
	o->optim.kind = (enum rps_optim_kind)v;
	o->optim.lr = (float)cfg->lr;
	o->optim.momentum = (float)cfg->momentum;
	o->optim.beta1 = (float)cfg->beta1;
	o->optim.beta2 = (float)cfg->beta2;
	o->optim.eps = (float)cfg->eps;
	o->optim.weight_decay = (float)cfg->weight_decay;
	o->optim.clip_norm = (float)cfg->clip_norm;
	v = rps_optim_schedule_parse(cfg->lr_schedule);
	if (v < 0)
		RPS_ERR("lr_schedule \"%s\": expected constant, step, exp or cosine",
			cfg->lr_schedule);
	o->optim.schedule = (enum rps_lr_schedule)v;
	o->optim.step_size = cfg->lr_step;
	o->optim.gamma = (float)cfg->lr_gamma;
	o->optim.total_steps = cfg->lr_total;
	o->optim.lr_min = (float)cfg->lr_min;
	o->optim.staleness_lr = cfg->staleness_lr;

	v = rps_ring_policy_parse(cfg->priority);
	if (v < 0)
		RPS_ERR("priority \"%s\": expected fifo, freshest, staleness or magnitude",
			cfg->priority);
	o->priority = (enum rps_priority_policy)v;
	v = rps_server_consistency_parse(cfg->consistency);
	if (v < 0)
		RPS_ERR("consistency \"%s\": expected asp, bsp or ssp", cfg->consistency);
	o->consistency = (enum rps_consistency)v;
	o->staleness = cfg->staleness > 0 ? (uint32_t)cfg->staleness : 0;
	o->init.seed = cfg->seed;
	if (rps_server_init_parse(cfg->init, &o->init) < 0) {
		RPS_ERR(
		    "init \"%s\": expected zeros, const:V, uniform:A,B, normal:MEAN,STD or push",
		    cfg->init);
		o->init.kind = (enum rps_init_kind)(-1);
	}
	o->timeout_ms = cfg->timeout_ms;
}

static int opts_check(const struct rps_server_opts *o, const struct rps_config *cfg)
{
	if (o->shards < 1 || o->shards > RPS_MAX_SHARDS) {
		RPS_ERR("shards %d: must be 1..%d", o->shards, RPS_MAX_SHARDS);
		return -EINVAL;
	}
	if ((int)o->consistency < RPS_ASP || o->consistency > RPS_SSP) {
		RPS_ERR("bad consistency model");
		return -EINVAL;
	}
	if ((int)o->priority < RPS_PRIO_FIFO || o->priority > RPS_PRIO_CALLBACK ||
	    (o->priority == RPS_PRIO_CALLBACK && !o->priority_fn)) {
		RPS_ERR("bad priority policy");
		return -EINVAL;
	}
	if ((int)o->init.kind < RPS_INIT_DEFAULT || o->init.kind > RPS_INIT_PUSH) {
		RPS_ERR("bad initialiser");
		return -EINVAL;
	}
	if (o->init.kind == RPS_INIT_DEFAULT) {
		RPS_ERR("the server's initialiser cannot be 'default'");
		return -EINVAL;
	}
	if ((int)o->optim.kind < RPS_OPT_SGD || o->optim.kind > RPS_OPT_ADAM ||
	    (int)o->optim.schedule < RPS_LR_CONSTANT || o->optim.schedule > RPS_LR_COSINE ||
	    rps_optim_opts_check(&o->optim)) {
		RPS_ERR("bad optimizer settings (optimizer %d, lr %g, schedule %d)",
			(int)o->optim.kind, o->optim.lr, (int)o->optim.schedule);
		return -EINVAL;
	}
	if (!o->shard_bytes || !o->ring_size) {
		RPS_ERR("shard_bytes and ring_size must be > 0");
		return -EINVAL;
	}
	if (o->ncores < 0 || o->ncores > RPS_MAX_CORES) {
		RPS_ERR("ncores %d: must be 0..%d", o->ncores, RPS_MAX_CORES);
		return -EINVAL;
	}
	if (cfg->num_workers < 1 || cfg->num_workers > RPS_MAX_WORKERS) {
		RPS_ERR("num_workers %d: must be 1..%d", cfg->num_workers, RPS_MAX_WORKERS);
		return -EINVAL;
	}
	if (!cfg->chunk_bytes || cfg->chunk_bytes % 64 || cfg->chunk_bytes > UINT32_MAX) {
		RPS_ERR("chunk_bytes %llu: must be a multiple of 64",
			(unsigned long long)cfg->chunk_bytes);
		return -EINVAL;
	}
	if (cfg->max_msg < sizeof(struct rps_push) + sizeof(float)) {
		RPS_ERR("max_msg %llu: too small", (unsigned long long)cfg->max_msg);
		return -EINVAL;
	}
	return 0;
}

/* ---- connections ------------------------------------------------------------- */

static inline void conn_get(struct rps_srv_conn *sc)
{
	atomic_fetch_add_explicit(&sc->refs, 1, memory_order_relaxed);
}

/* The last reference queues the connection for the network thread, which
 * closes it (so close() never races the events of one poll batch). */
static void conn_put(struct rps_server *srv, struct rps_srv_conn *sc)
{
	struct rps_srv_conn *head;

	if (atomic_fetch_sub_explicit(&sc->refs, 1, memory_order_acq_rel) != 1)
		return;
	head = atomic_load_explicit(&srv->close_stack, memory_order_relaxed);
	do {
		sc->close_next = head;
	} while (!atomic_compare_exchange_weak_explicit(
	    &srv->close_stack, &head, sc, memory_order_release, memory_order_relaxed));
	rps_tr_wake(srv->tr);
}

static void conn_unlink(struct rps_server *srv, struct rps_srv_conn *sc)
{
	if (sc->prev)
		sc->prev->next = sc->next;
	else if (srv->conns == sc)
		srv->conns = sc->next;
	if (sc->next)
		sc->next->prev = sc->prev;
	sc->prev = sc->next = NULL;
}

static void close_drain(struct rps_server *srv)
{
	struct rps_srv_conn *sc =
	    atomic_exchange_explicit(&srv->close_stack, NULL, memory_order_acquire);

	while (sc) {
		struct rps_srv_conn *n = sc->close_next;

		conn_unlink(srv, sc);
		sc->conn->user = NULL;
		rps_tr_close(sc->conn);
		rps_free(sc);
		sc = n;
	}
}

static void free_reqs(struct rps_server *srv, struct rps_srv_req *r)
{
	while (r) {
		struct rps_srv_req *n = r->next;

		if (r->sc)
			conn_put(srv, r->sc);
		rps_srv_pool_put(r);
		r = n;
	}
}

/* Stop taking frames from a connection: its parked pulls go, its queued
 * pushes finish (their acks fail quietly) and the last reference closes it. */
static void conn_drop(struct rps_server *srv, struct rps_srv_conn *sc)
{
	if (!sc->net_ref)
		return;
	atomic_store(&sc->closed, 1);
	for (int s = 0; s < srv->nshards; s++)
		free_reqs(srv, rps_shard_pull_unpark(&srv->shards[s], sc));
	sc->net_ref = 0;
	conn_put(srv, sc);
}

/* A protocol error: say why (ERROR frame), log it, drop the connection. */
static void conn_fail(struct rps_server *srv, struct rps_srv_conn *sc, int status, const char *why)
{
	struct rps_frame_hdr h;
	struct iovec iov = {(void *)why, strlen(why)};

	RPS_WARN("closing %s: %s", sc->conn->peer, why);
	rps_proto_hdr_init(&h, RPS_OP_ERROR, (uint32_t)iov.iov_len, 0);
	h.status = status;
	rps_tr_post_send(sc->conn, &h, &iov, 1, 0);
	conn_drop(srv, sc);
}

/* ---- answers ---------------------------------------------------------------------- */

static void send_small_aux(struct rps_server *srv, struct rps_srv_conn *sc, uint8_t op,
			   uint32_t req_id, int status, uint32_t aux, const void *fixed, size_t len)
{
	struct rps_frame_hdr h;
	struct iovec iov = {(void *)fixed, len};
	int rc;

	if (atomic_load_explicit(&sc->closed, memory_order_relaxed))
		return;
	rps_proto_hdr_init(&h, op, (uint32_t)len, req_id);
	h.status = status;
	h.aux = aux;
	rc = rps_tr_post_send(sc->conn, &h, len ? &iov : NULL, len ? 1 : 0, 0);
	if (rc)
		RPS_DEBUG("%s to %s: %s", rps_proto_op_name(op), sc->conn->peer, strerror(-rc));
	else {
		atomic_fetch_add_explicit(&srv->bytes_out, sizeof(h) + len, memory_order_relaxed);
		atomic_fetch_add_explicit(&srv->msgs_out, 1, memory_order_relaxed);
	}
}

static void send_small(struct rps_server *srv, struct rps_srv_conn *sc, uint8_t op, uint32_t req_id,
		       int status, const void *fixed, size_t len)
{
	send_small_aux(srv, sc, op, req_id, status, 0, fixed, len);
}

/* A refused pull: its fixed part echoed with count 0 (a PULL_RESP's length
 * always matches its count) and the status. */
static void pull_refuse(struct rps_server *srv, struct rps_srv_conn *sc, uint32_t req_id,
			const struct rps_pull *p, int status)
{
	struct rps_pull f = *p;

	f.count = 0;
	send_small(srv, sc, RPS_OP_PULL_RESP, req_id, status, &f, sizeof(f));
}

/* Answer a pull whose condition holds: a consistent copy of the piece in a
 * pooled buffer, sent zero copy, the buffer back to its pool on SEND_DONE. */
static void pull_send(struct rps_server *srv, struct rps_srv_bufpool *bp, struct rps_shard *sh,
		      struct rps_srv_conn *sc, uint32_t req_id, const struct rps_pull *p,
		      const struct rps_slice_meta *m)
{
	size_t len = sizeof(*p) + (size_t)p->count * sizeof(float);
	struct rps_frame_hdr h;
	struct iovec iov;
	char *buf;
	int rc;

	if (atomic_load_explicit(&sc->closed, memory_order_relaxed))
		return;
	rps_proto_hdr_init(&h, RPS_OP_PULL_RESP, (uint32_t)len, req_id);
	h.aux = (uint32_t)rps_store_clock(&sh->store);
	buf = rps_srv_bufpool_get(bp, len);
	if (!buf) {
		RPS_WARN("pull of %u elements from %s: no send buffer", p->count, sc->conn->peer);
		pull_refuse(srv, sc, req_id, p, -ENOMEM);
		return;
	}
	memcpy(buf, p, sizeof(*p));
	if (p->count)
		rps_shard_read(sh, m, p->offset, p->count, (float *)(buf + sizeof(*p)));
	iov.iov_base = buf;
	iov.iov_len = len;
	conn_get(sc);
	rc = rps_tr_post_send(sc->conn, &h, &iov, 1, (uint64_t)(uintptr_t)buf);
	if (rc) {
		RPS_DEBUG("pull answer to %s: %s", sc->conn->peer, strerror(-rc));
		rps_srv_pool_put(buf);
		conn_put(srv, sc);
		return;
	}
	atomic_fetch_add_explicit(&srv->bytes_out, sizeof(h) + len, memory_order_relaxed);
	atomic_fetch_add_explicit(&srv->msgs_out, 1, memory_order_relaxed);
}

/* rps_shard_io: what update threads say back. */
static void io_push_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status)
{
	struct rps_server *srv = arg;

	if (req->token)
		rps_tr_release(srv->tr, req->token);
	if (req->sc) {
		send_small(srv, req->sc, RPS_OP_PUSH_ACK, req->req_id, status, NULL, 0);
		conn_put(srv, req->sc);
	}
	rps_srv_pool_put(req);
}

static void io_declare_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status,
			    const struct rps_declare_ack *ack)
{
	struct rps_server *srv = arg;
	struct rps_declare_ack a;
	uint32_t aux = 0; /* the slice's geometry (src/proto.h) */

	if (!status && ack) {
		const struct rps_slice_meta *m =
		    rps_srv_keytab_lookup(&sh->tab, ack->key, ack->slice);

		if (m)
			aux = rps_store_slice_aux(&m->sl);
	}
	if (status || !ack) {
		memset(&a, 0, sizeof(a));
		a.key = req->u.decl.key;
		a.slice = req->u.decl.slice;
		a.shard = req->u.decl.shard;
		a.nelems = req->u.decl.nelems;
		ack = &a;
		if (status != -EEXIST)
			RPS_WARN("declare of key %llu slice %u (%llu elements) from worker %u: %s",
				 (unsigned long long)a.key, a.slice, (unsigned long long)a.nelems,
				 req->worker, strerror(-status));
	}
	if (req->sc) {
		send_small_aux(srv, req->sc, RPS_OP_DECLARE_ACK, req->req_id, status, aux, ack,
			       sizeof(*ack));
		conn_put(srv, req->sc);
	}
	rps_srv_pool_put(req);
}

static void io_pull_answer(void *arg, struct rps_shard *sh, struct rps_srv_req *req)
{
	struct rps_server *srv = arg;

	if (req->sc) {
		pull_send(srv, &sh->bufs, sh, req->sc, req->req_id, &req->u.pull, req->meta);
		conn_put(srv, req->sc);
	}
	rps_srv_pool_put(req);
}

static const struct rps_shard_io server_io = {
    .push_done = io_push_done,
    .declare_done = io_declare_done,
    .pull_answer = io_pull_answer,
};

/* ---- frames (network thread) --------------------------------------------------- */

/* Into the shard's ring; a full ring blocks the network thread (TCP back
 * pressure), never drops. -ECANCELED when the server stops meanwhile. */
static int enqueue(struct rps_server *srv, struct rps_shard *sh, const struct rps_ring_entry *e)
{
	int rc = rps_ring_push(sh->ring, e);

	while (rc == -EAGAIN || rc == -ETIMEDOUT) {
		if (atomic_load_explicit(&srv->stop, memory_order_relaxed))
			return -ECANCELED;
		rc = rps_ring_push_wait(sh->ring, e, RPS_SRV_POLL_MS);
	}
	return rc ? -ECANCELED : 0;
}

static struct rps_srv_req *req_new(struct rps_server *srv, struct rps_srv_conn *sc, uint32_t op,
				   uint32_t req_id)
{
	struct rps_srv_req *req = rps_srv_pool_get(&srv->reqs);

	if (!req)
		return NULL;
	memset(req, 0, sizeof(*req));
	req->op = op;
	req->req_id = req_id;
	req->sc = sc;
	req->worker = sc->rank;
	conn_get(sc);
	return req;
}

static void on_declare(struct rps_server *srv, struct rps_srv_conn *sc,
		       const struct rps_tr_event *ev)
{
	const struct rps_declare *d = ev->fixed;
	struct rps_srv_req *req;
	struct rps_ring_entry e;
	struct rps_shard *sh;

	if (d->shard >= (uint32_t)srv->nshards) {
		struct rps_declare_ack a = {.key = d->key, .slice = d->slice, .shard = d->shard};

		send_small(srv, sc, RPS_OP_DECLARE_ACK, ev->hdr.req_id, -EINVAL, &a, sizeof(a));
		return;
	}
	sh = &srv->shards[d->shard];
	req = req_new(srv, sc, RPS_REQ_DECLARE, ev->hdr.req_id);
	if (!req) {
		struct rps_declare_ack a = {.key = d->key, .slice = d->slice, .shard = d->shard};

		send_small(srv, sc, RPS_OP_DECLARE_ACK, ev->hdr.req_id, -ENOMEM, &a, sizeof(a));
		return;
	}
	req->u.decl = *d;
	rps_shard_push_entry(sh, req, &e);
	if (enqueue(srv, sh, &e))
		io_declare_done(srv, sh, req, -ECANCELED, NULL);
}

/* Returns 1 if the token was kept (travels with the push). */
static int on_push(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_push *p = ev->fixed;
	struct rps_srv_req *req;
	struct rps_ring_entry e;
	struct rps_shard *sh;
	int kept = 0;

	if (ev->data_len != (size_t)p->count * sizeof(float)) {
		conn_fail(srv, sc, -EPROTO, "push data length disagrees with its count");
		return 0;
	}
	atomic_fetch_add_explicit(&srv->n_push, 1, memory_order_relaxed);
	if (p->shard >= (uint32_t)srv->nshards) {
		send_small(srv, sc, RPS_OP_PUSH_ACK, ev->hdr.req_id, -EINVAL, NULL, 0);
		return 0;
	}
	sh = &srv->shards[p->shard];
	req = req_new(srv, sc, RPS_REQ_PUSH, ev->hdr.req_id);
	if (!req) {
		RPS_ERR("push from %s: out of memory, clock %u of worker %u cannot complete",
			sc->conn->peer, p->clock, sc->rank);
		send_small(srv, sc, RPS_OP_PUSH_ACK, ev->hdr.req_id, -ENOMEM, NULL, 0);
		return 0;
	}
	req->u.push = *p;
	req->status = rps_shard_push_check(sh, p, &req->meta);
	if (!req->status && RPS_FAULT_DROP()) {
		/* fault injection: the push is lost, and the worker is told so
		 * (-EIO); it still counts for the worker's clock */
		atomic_fetch_add_explicit(&srv->faults_drop, 1, memory_order_relaxed);
		req->status = -EIO;
	}
	if (!req->status) {
		/* the gradient stays in the transport's buffer until applied */
		req->token = ev->token;
		req->data = ev->data;
		kept = 1;
	} else {
		/* refused now, but the worker counted it: the update thread counts
		 * it for the clock and answers with the status */
		RPS_DEBUG("push of key %llu slice %u [%llu, +%u) from %s: %s",
			  (unsigned long long)p->key, p->slice, (unsigned long long)p->offset,
			  p->count, sc->conn->peer, strerror(-req->status));
	}
	rps_shard_push_entry(sh, req, &e);
	if (enqueue(srv, sh, &e))
		io_push_done(srv, sh, req, -ECANCELED); /* releases a kept token */
	return kept;
}

static void on_pull(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_pull *p = ev->fixed;
	struct rps_slice_meta *m = NULL;
	struct rps_srv_req *req;
	struct rps_shard *sh;
	int rc;

	atomic_fetch_add_explicit(&srv->n_pull, 1, memory_order_relaxed);
	if (p->shard >= (uint32_t)srv->nshards) {
		pull_refuse(srv, sc, ev->hdr.req_id, p, -EINVAL);
		return;
	}
	sh = &srv->shards[p->shard];
	atomic_fetch_add_explicit(&sh->pulls_served, 1, memory_order_relaxed);
	rc = rps_shard_pull_check(sh, p, &m);
	if (rc) {
		RPS_DEBUG("pull of key %llu slice %u [%llu, +%u) shard %u from %s: %s",
			  (unsigned long long)p->key, p->slice, (unsigned long long)p->offset,
			  p->count, p->shard, sc->conn->peer, strerror(-rc));
		pull_refuse(srv, sc, ev->hdr.req_id, p, rc);
		return;
	}
	if (rps_shard_pull_ready(sh, p->min_clock, sc->rank)) {
		pull_send(srv, &srv->net_bufs, sh, sc, ev->hdr.req_id, p, m);
		return;
	}
	req = req_new(srv, sc, RPS_REQ_PULL, ev->hdr.req_id);
	if (!req) {
		pull_refuse(srv, sc, ev->hdr.req_id, p, -ENOMEM);
		return;
	}
	req->u.pull = *p;
	req->meta = m;
	if (rps_shard_pull_park(sh, req)) {
		/* the clock moved meanwhile */
		pull_send(srv, &srv->net_bufs, sh, sc, ev->hdr.req_id, p, m);
		free_reqs(srv, req);
	}
}

static void on_clock(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_clock *c = ev->fixed;
	const uint8_t *pushes = ev->data;
	int lo = 0, hi = srv->nshards;
	char why[96];

	if (c->num_shards != (uint32_t)srv->nshards ||
	    ev->data_len != (size_t)c->num_shards * sizeof(uint32_t)) {
		snprintf(why, sizeof(why), "clock %u for %u shards, this server has %d", c->clock,
			 c->num_shards, srv->nshards);
		conn_fail(srv, sc, -EPROTO, why);
		return;
	}
	/* With channels (RDMA) the same CLOCK comes on every shard's connection,
	 * after that shard's pushes: each copy counts for its own shard only. */
	if (srv->tr->caps & RPS_TR_CAP_CHANNELS) {
		lo = sc->conn->hello.channel;
		hi = lo + 1;
	}
	for (int s = lo; s < hi; s++) {
		struct rps_ring_entry e;
		uint32_t n;

		memcpy(&n, pushes + (size_t)s * sizeof(n), sizeof(n));
		memset(&e, 0, sizeof(e));
		e.type = RPS_ENT_CLOCK;
		e.shard = (uint32_t)s;
		e.info.worker = sc->rank;
		e.info.clock = c->clock;
		e.info.timestamp_ns = UINT64_MAX;
		e.info.norm = INFINITY;
		e.u64 = n;
		if (enqueue(srv, &srv->shards[s], &e))
			return;
	}
}

/* A worker says where its clock is (it joined late, or reconnected after we
 * were restarted): before its other frames on this connection, so the shard
 * sees it first (control entries are as urgent as any). */
static void on_sync(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_sync *y = ev->fixed;
	int lo = 0, hi = srv->nshards;

	if (srv->tr->caps & RPS_TR_CAP_CHANNELS) {
		lo = (int)sc->conn->hello.channel;
		hi = lo + 1;
	}
	RPS_DEBUG("worker %u at %s: sync at clock %u", sc->rank, sc->conn->peer, y->clock);
	for (int s = lo; s < hi; s++) {
		struct rps_ring_entry e;

		memset(&e, 0, sizeof(e));
		e.type = RPS_ENT_SYNC;
		e.shard = (uint32_t)s;
		e.info.worker = sc->rank;
		e.info.clock = y->clock;
		e.info.timestamp_ns = UINT64_MAX;
		e.info.norm = INFINITY;
		if (enqueue(srv, &srv->shards[s], &e))
			return;
	}
}

static void on_recv(struct rps_server *srv, const struct rps_tr_event *ev)
{
	struct rps_srv_conn *sc = ev->conn->user;
	const char *why = NULL;
	int kept = 0;

	if (!sc || atomic_load_explicit(&sc->closed, memory_order_relaxed)) {
		rps_tr_release(srv->tr, ev->token);
		return;
	}
	atomic_fetch_add_explicit(&srv->bytes_in, sizeof(ev->hdr) + ev->hdr.len,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&srv->msgs_in, 1, memory_order_relaxed);
	{
		uint64_t d = RPS_FAULT_DELAY_NS();

		if (d) { /* fault injection: this frame (and all behind it) is late */
			atomic_fetch_add_explicit(&srv->faults_delay, 1, memory_order_relaxed);
			rps_fault_sleep_ns(d);
		}
	}
	if (rps_proto_payload_check(&ev->hdr, ev->fixed, &why)) {
		conn_fail(srv, sc, -EPROTO, why ? why : "malformed frame");
		rps_tr_release(srv->tr, ev->token);
		return;
	}
	switch (ev->hdr.op) {
	case RPS_OP_PUSH:
		kept = on_push(srv, sc, ev);
		break;
	case RPS_OP_PULL:
		on_pull(srv, sc, ev);
		break;
	case RPS_OP_CLOCK:
		on_clock(srv, sc, ev);
		break;
	case RPS_OP_SYNC:
		on_sync(srv, sc, ev);
		break;
	case RPS_OP_DECLARE:
		on_declare(srv, sc, ev);
		break;
	case RPS_OP_ERROR:
		/* the worker gives up on this connection and says why */
		RPS_INFO("worker %u at %s: error %s: %.*s", sc->rank, sc->conn->peer,
			 rps_strerror(ev->hdr.status), (int)RPS_MIN(ev->data_len, (size_t)200),
			 ev->data ? (const char *)ev->data : "");
		conn_drop(srv, sc);
		break;
	default: {
		char buf[64];

		snprintf(buf, sizeof(buf), "unexpected %s frame from a worker",
			 rps_proto_op_name(ev->hdr.op));
		conn_fail(srv, sc, -EPROTO, buf);
		break;
	}
	}
	if (!kept)
		rps_tr_release(srv->tr, ev->token);
}

static void on_accepted(struct rps_server *srv, struct rps_conn *c)
{
	struct rps_srv_conn *sc = rps_calloc(1, sizeof(*sc));

	if (!sc) {
		RPS_ERR("connection from %s: out of memory", c->peer);
		rps_tr_close(c);
		return;
	}
	sc->conn = c;
	sc->owner = srv;
	sc->rank = c->hello.rank;
	atomic_init(&sc->refs, 1);
	atomic_init(&sc->closed, 0);
	sc->net_ref = 1;
	sc->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = sc;
	srv->conns = sc;
	c->user = sc;
	RPS_INFO("worker %u connected from %s (channel %u)", sc->rank, c->peer, c->hello.channel);
}

static void on_closed(struct rps_server *srv, const struct rps_tr_event *ev)
{
	struct rps_srv_conn *sc = ev->conn->user;

	if (!sc) {
		rps_tr_close(ev->conn);
		return;
	}
	if (!sc->net_ref)
		return; /* we dropped it already; the last reference closes it */
	/* the transport logged why */
	RPS_INFO("worker %u at %s disconnected (%s)", sc->rank, ev->conn->peer,
		 rps_strerror(ev->status));
	conn_drop(srv, sc);
}

static void dispatch(struct rps_server *srv, const struct rps_tr_event *ev)
{
	switch (ev->type) {
	case RPS_TR_EV_RECV:
		on_recv(srv, ev);
		break;
	case RPS_TR_EV_SEND_DONE:
		/* only pull answers are sent zero copy */
		if (ev->ctx) {
			rps_srv_pool_put((void *)(uintptr_t)ev->ctx);
			if (ev->conn && ev->conn->user)
				conn_put(srv, ev->conn->user);
		}
		break;
	case RPS_TR_EV_ACCEPTED:
		on_accepted(srv, ev->conn);
		break;
	case RPS_TR_EV_CLOSED:
		on_closed(srv, ev);
		break;
	case RPS_TR_EV_READ_DONE:
	default:
		break;
	}
}

/* ---- transport and control callbacks ----------------------------------------- */

static int on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		    size_t *ack_len_p, const char **why_p)
{
	struct rps_server *srv = arg;
	struct rps_hello_ack *a = ack;
	struct rps_shard_desc *d = (struct rps_shard_desc *)(a + 1);
	uint32_t nw = atomic_load(&srv->map_workers);

	if (!nw)
		nw = srv->nworkers;
	if (h->role != RPS_ROLE_WORKER) {
		*why_p = "only workers connect to a server";
		return -EPROTO;
	}
	if (h->rank >= nw) {
		*why_p = "worker rank beyond the number of workers";
		return -EINVAL;
	}
	if (h->channel >= (uint32_t)srv->nshards) {
		*why_p = "channel beyond the server's shards";
		return -EINVAL;
	}
	memset(a, 0, sizeof(*a));
	a->server_rank = atomic_load(&srv->rank);
	a->num_shards = (uint32_t)srv->nshards;
	a->num_workers = nw;
	a->consistency = srv->opts.consistency;
	a->staleness = srv->opts.staleness;
	a->chunk_bytes = srv->chunk_bytes;
	a->max_msg = srv->max_msg;
	for (int s = 0; s < srv->nshards; s++) {
		const struct rps_shard *sh = &srv->shards[s];

		memset(&d[s], 0, sizeof(d[s]));
		if (srv->tr->caps & RPS_TR_CAP_READ) {
			d[s].addr = sh->mr.remote_addr;
			d[s].size = sh->store.size;
			d[s].remote_key = sh->mr.remote_key;
		}
	}
	*ack_len_p = sizeof(*a) + (size_t)srv->nshards * sizeof(*d);
	return 0;
}

static void queue_worker(struct rps_server *srv, uint32_t type, uint32_t w)
{
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_ring_entry e;
		int rc;

		memset(&e, 0, sizeof(e));
		e.type = type;
		e.shard = (uint32_t)s;
		e.info.worker = w;
		e.info.timestamp_ns = UINT64_MAX;
		e.info.norm = INFINITY;
		do {
			rc = rps_ring_push_wait(srv->shards[s].ring, &e, RPS_SRV_POLL_MS);
		} while (rc == -ETIMEDOUT && !atomic_load(&srv->stop));
	}
}

/* One control entry (ptr: per-shard array or NULL) into every shard's ring. */
static int queue_all(struct rps_server *srv, uint32_t type, struct rps_shard_restore *r)
{
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_ring_entry e;
		int rc;

		memset(&e, 0, sizeof(e));
		e.type = type;
		e.shard = (uint32_t)s;
		e.ptr = r ? &r[s] : NULL;
		e.info.timestamp_ns = UINT64_MAX;
		e.info.norm = INFINITY;
		rc = enqueue(srv, &srv->shards[s], &e);
		if (rc)
			return rc;
	}
	return 0;
}

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
	queue_worker(srv, RPS_ENT_DEAD, node->rank);
}

/* A new map: a worker that took the rank of a dead one is waited for again. */
static void on_map(void *arg, const struct rps_map *map, const struct rps_node *nodes)
{
	struct rps_server *srv = arg;

	for (uint32_t i = 0; nodes && i < map->num_nodes; i++) {
		const struct rps_node *n = &nodes[i];

		if (n->role != RPS_ROLE_WORKER || !n->alive || n->rank >= srv->nworkers ||
		    !srv->wgone[n->rank])
			continue;
		srv->wgone[n->rank] = 0;
		RPS_INFO("worker %u rejoined from %.64s", n->rank, n->host);
		queue_worker(srv, RPS_ENT_REVIVE, n->rank);
	}
}

static void on_shutdown(void *arg)
{
	struct rps_server *srv = arg;

	RPS_INFO("shutdown requested by the scheduler");
	rps_server_stop(srv);
}

/* ---- life cycle ---------------------------------------------------------------------- */

static int cores_setup(struct rps_server *srv)
{
	const struct rps_server_opts *o = &srv->opts;

	if (o->ncores > 0) {
		srv->cores = rps_calloc((size_t)o->ncores, sizeof(int));
		if (!srv->cores)
			return -ENOMEM;
		memcpy(srv->cores, o->cores, (size_t)o->ncores * sizeof(int));
		srv->ncores = o->ncores;
		return 0;
	}
	/* every core this process may run on */
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set)) {
		RPS_WARN("sched_getaffinity: %m: update threads left unpinned");
		srv->ncores = 0;
		return 0;
	}
	srv->cores = rps_calloc(CPU_SETSIZE, sizeof(int));
	if (!srv->cores)
		return -ENOMEM;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			srv->cores[n++] = c;
	srv->ncores = n;
	return 0;
}

static void cores_desc(const struct rps_server *srv, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	if (!srv->ncores) {
		snprintf(buf, len, "unpinned");
		return;
	}
	for (int s = 0; s < srv->nshards && off < len; s++) {
		int c = srv->shards[s].core;

		off += (size_t)snprintf(buf + off, len - off, "%s%d", s ? "," : "", c);
	}
}

int rps_server_create(const struct rps_server_opts *opts, struct rps_server **server_p)
{
	const struct rps_config *cfg = rps_config_get();
	struct rps_server_opts def;
	struct rps_tr_params tp;
	struct rps_server *srv;
	char cores[256], stale[32];
	int rc;

	if (!opts) {
		rps_server_opts_init(&def);
		opts = &def;
	}
	rc = opts_check(opts, cfg);
	if (rc)
		return rc;
	srv = rps_calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->opts = *opts;
	srv->cfg = cfg;
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
			goto err_srv;
	}
	srv->scheduler = rps_strdup(opts->scheduler ? opts->scheduler : cfg->scheduler);
	srv->transport =
	    rps_strdup(opts->transport && opts->transport[0] ? opts->transport : cfg->transport);
	srv->host = rps_strdup(opts->host && opts->host[0] ? opts->host : "0.0.0.0");
	srv->secret = rps_strdup(opts->secret ? opts->secret : cfg->secret);
	srv->ckpt_dir = rps_strdup(cfg->checkpoint_dir);
	if (!srv->scheduler || !srv->transport || !srv->host || !srv->secret || !srv->ckpt_dir) {
		rc = -ENOMEM;
		goto err_srv;
	}
	srv->nworkers = (uint32_t)cfg->num_workers;
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
	tp.on_hello = on_hello;
	tp.recv_dest = NULL;
	rc = rps_transport_create(srv->transport, &tp, &srv->tr);
	if (rc)
		goto err_srv;

	srv->shards = rps_calloc((size_t)srv->nshards, sizeof(*srv->shards));
	if (!srv->shards) {
		rc = -ENOMEM;
		goto err_tr;
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
		    .optim = opts->optim,
		    .init = opts->init,
		    .max_msg = srv->max_msg,
		    .ckpt_dir = srv->ckpt_dir,
		    .ckpt_every = cfg->checkpoint_every > 0 ? (uint32_t)cfg->checkpoint_every : 0,
		    .ckpt_secs = cfg->checkpoint_secs > 0 ? (uint32_t)cfg->checkpoint_secs : 0,
		    .server_shards = (uint32_t)srv->nshards,
		};
		struct rps_shard *sh = &srv->shards[s];

		rc = rps_shard_init(sh, &sp, &server_io, srv);
		if (rc)
			goto err_shards;
		srv->shards_ready++;
	}
	/* listen first: it binds the RDMA device the stores are registered with.
	 * No worker connects before rps_server_run has joined the cluster. */
	rc = rps_tr_listen(srv->tr, srv->host, opts->port, &srv->port);
	if (rc) {
		RPS_ERR("listen on %s:%u: %s", srv->host, opts->port, strerror(-rc));
		goto err_shards;
	}
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_shard *sh = &srv->shards[s];

		rc = rps_tr_reg_mem(srv->tr, sh->store.base, sh->store.size,
					   RPS_TR_ACCESS_REMOTE_READ, &sh->mr);
		if (rc) {
			RPS_ERR("shard %d: register %zu bytes with %s: %s", s, sh->store.size,
				srv->transport, strerror(-rc));
			goto err_shards;
		}
		sh->mr_ok = 1;
	}
	rc = cores_setup(srv);
	if (rc)
		goto err_shards;
	for (int s = 0; s < srv->nshards; s++) {
		rc = rps_shard_start(&srv->shards[s],
				     srv->ncores ? srv->cores[s % srv->ncores] : -1);
		if (rc)
			goto err_threads;
	}
	cores_desc(srv, cores, sizeof(cores));
	snprintf(stale, sizeof(stale), " (staleness %u)", opts->staleness);
	RPS_INFO("rdmaps-server: transport %s on %s:%u, %d shards of %zu bytes, update cores %s, "
		 "optimizer %s (lr %g), consistency %s%s, %u workers, allocator %s",
		 srv->transport, srv->host, srv->port, srv->nshards, opts->shard_bytes, cores,
		 rps_optim_kind_name(opts->optim.kind), opts->optim.lr,
		 rps_server_consistency_name(srv->opts.consistency),
		 srv->opts.consistency == RPS_SSP ? stale : "", srv->nworkers,
		 rps_allocator_name());
	*server_p = srv;
	return 0;

err_threads:
	for (int s = 0; s < srv->nshards; s++)
		rps_shard_stop(&srv->shards[s]);
err_shards:
	for (int s = 0; s < srv->shards_ready; s++)
		if (srv->shards[s].mr_ok)
			rps_tr_dereg_mem(srv->tr, &srv->shards[s].mr);
err_tr:
	rps_transport_destroy(srv->tr);
	for (int s = 0; s < srv->shards_ready; s++)
		rps_shard_fini(&srv->shards[s]);
	rps_free(srv->shards);
	rps_free(srv->cores);
err_srv:
	rps_srv_bufpool_fini(&srv->net_bufs);
	rps_srv_pool_fini(&srv->reqs);
	rps_free(srv->scheduler);
	rps_free(srv->transport);
	rps_free(srv->host);
	rps_free(srv->secret);
	rps_free(srv->ckpt_dir);
	rps_free(srv->restore_dir);
	rps_free(srv);
	return rc;
}

static const char *advertised_host(const struct rps_server *srv);

/* Age (ms) of the oldest shard's newest checkpoint, -1 if a shard has none. */
static int64_t ckpt_age_ms(struct rps_server *srv)
{
	uint64_t oldest = UINT64_MAX, now = rps_wall_ns();

	for (int s = 0; s < srv->nshards; s++) {
		uint64_t t = atomic_load(&srv->shards[s].ckpt_wall_ns);

		if (!t)
			return -1;
		if (t < oldest)
			oldest = t;
	}
	if (oldest == UINT64_MAX)
		return -1;
	return now > oldest ? (int64_t)((now - oldest) / 1000000u) : 0;
}

static void heartbeat(struct rps_server *srv)
{
	struct {
		struct rps_heartbeat_srv t;
		struct rps_hb_shard sh[RPS_MAX_SHARDS];
	} tail;
	uint64_t counters[4];
	uint64_t min = UINT64_MAX;

	memset(&tail.t, 0, sizeof(tail.t));
	tail.t.num_shards = (uint32_t)srv->nshards;
	tail.t.ckpt_age_ms = ckpt_age_ms(srv);
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_shard *sh = &srv->shards[s];
		uint64_t c = rps_store_clock(&sh->store);

		if (c < min)
			min = c;
		tail.sh[s].clock = (uint32_t)RPS_MIN(c, UINT32_MAX);
		tail.sh[s].ring_depth = (uint32_t)RPS_MIN(rps_ring_depth(sh->ring), UINT32_MAX);
		tail.t.ckpts += atomic_load(&sh->ckpts_ok);
		tail.t.ckpt_fails += atomic_load(&sh->ckpts_failed);
	}
	counters[0] = atomic_load_explicit(&srv->n_push, memory_order_relaxed);
	counters[1] = atomic_load_explicit(&srv->n_pull, memory_order_relaxed);
	counters[2] = atomic_load_explicit(&srv->bytes_in, memory_order_relaxed);
	counters[3] = atomic_load_explicit(&srv->bytes_out, memory_order_relaxed);
	rps_ctl_set_heartbeat(srv->ctl, (uint32_t)RPS_MIN(min, UINT32_MAX), counters);
	rps_ctl_set_heartbeat_tail(srv->ctl, &tail,
				   sizeof(tail.t) + (size_t)srv->nshards * sizeof(tail.sh[0]));
}

/* ---- /metrics ---------------------------------------------------------------- */

/* Mirror the server's own counters into the registry, then render (HTTP thread). */
static int metrics_handler(const char *path, void *arg, char **body_p, size_t *len_p,
			   const char **ctype_p)
{
	struct rps_server *srv = arg;
	struct srv_metrics *m = &srv->m;
	uint64_t now = rps_wall_ns();

	pthread_mutex_lock(&m->lock);
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_shard *sh = &srv->shards[s];
		uint64_t t = atomic_load(&sh->ckpt_wall_ns);

		rps_metric_set_count(m->pushes[s], atomic_load(&sh->pushes_applied));
		rps_metric_set_count(m->pulls[s], atomic_load(&sh->pulls_served));
		rps_metric_set(m->depth[s], (double)rps_ring_depth(sh->ring));
		rps_metric_set(m->clock[s], (double)rps_store_clock(&sh->store));
		rps_metric_set_count(m->ckpts[s], atomic_load(&sh->ckpts_ok));
		rps_metric_set_count(m->ckpt_fail[s], atomic_load(&sh->ckpts_failed));
		rps_metric_set(m->ckpt_age[s], t ? (now > t ? (double)(now - t) / 1e9 : 0) : -1);
	}
	rps_metric_set_count(m->bytes[0], atomic_load(&srv->bytes_in));
	rps_metric_set_count(m->bytes[1], atomic_load(&srv->bytes_out));
	rps_metric_set_count(m->msgs[0], atomic_load(&srv->msgs_in));
	rps_metric_set_count(m->msgs[1], atomic_load(&srv->msgs_out));
	rps_metric_set_count(m->faults[0], atomic_load(&srv->faults_drop));
	rps_metric_set_count(m->faults[1], atomic_load(&srv->faults_delay));
	{
		uint64_t st = 0;

		for (int s = 0; s < srv->nshards; s++)
			st += atomic_load(&srv->shards[s].faults_stall);
		rps_metric_set_count(m->faults[2], st);
	}
	pthread_mutex_unlock(&m->lock);
	return rps_http_metrics_handler(path, m->reg, body_p, len_p, ctype_p);
}

static int metrics_register(struct rps_server *srv)
{
	static const char *const dirs[2] = {"rx", "tx"};
	static const char *const kinds[3] = {"drop", "delay", "stall"};
	struct srv_metrics *m = &srv->m;
	char lab[96];
	int rc = 0;

	for (int s = 0; s < srv->nshards && !rc; s++) {
		snprintf(lab, sizeof(lab), "shard=\"%d\"", s);
		rc = rps_metrics_counter(m->reg, "rdmaps_pushes_total",
					 "pushes applied by the shard's update thread", lab,
					 &m->pushes[s]);
		if (!rc)
			rc = rps_metrics_counter(
			    m->reg, "rdmaps_pull_requests_total",
			    "pulls served by the server's CPU (TCP; RDMA reads do not reach it)",
			    lab, &m->pulls[s]);
		if (!rc)
			rc = rps_metrics_gauge(m->reg, "rdmaps_ring_depth",
					       "pushes waiting in the shard's priority ring", lab,
					       &m->depth[s]);
		if (!rc)
			rc = rps_metrics_gauge(m->reg, "rdmaps_shard_clock",
					       "the shard's applied clock", lab, &m->clock[s]);
		if (!rc)
			rc = rps_metrics_counter(m->reg, "rdmaps_checkpoints_total",
						 "checkpoints written", lab, &m->ckpts[s]);
		if (!rc)
			rc = rps_metrics_counter(m->reg, "rdmaps_checkpoint_failures_total",
						 "checkpoints that failed", lab, &m->ckpt_fail[s]);
		if (!rc)
			rc = rps_metrics_gauge(m->reg, "rdmaps_checkpoint_age_seconds",
					       "time since the shard's last checkpoint (-1: none)",
					       lab, &m->ckpt_age[s]);
	}
	for (int d = 0; d < 2 && !rc; d++) {
		snprintf(lab, sizeof(lab), "transport=\"%s\",dir=\"%s\"", srv->transport, dirs[d]);
		rc = rps_metrics_counter(m->reg, "rdmaps_bytes_total",
					 "bytes of frames sent / received (headers included)", lab,
					 &m->bytes[d]);
		if (!rc)
			rc = rps_metrics_counter(m->reg, "rdmaps_messages_total",
						 "frames sent / received", lab, &m->msgs[d]);
	}
	for (int k = 0; k < 3 && !rc; k++) {
		snprintf(lab, sizeof(lab), "kind=\"%s\"", kinds[k]);
		rc = rps_metrics_counter(m->reg, "rdmaps_faults_injected_total",
					 "faults injected (RDMAPS_FAULT)", lab, &m->faults[k]);
	}
	return rc;
}

/* /metrics on port + 1 + rank (the scheduler takes port itself), so that a
 * scheduler and several servers fit on one host. */
static int metrics_start(struct rps_server *srv, uint32_t rank)
{
	int base = srv->cfg->metrics_port, port;
	int rc;

	if (base <= 0)
		return 0;
	port = base + 1 + (int)rank;
	if (port > 65535) {
		RPS_ERR("metrics port %d + 1 + rank %u is beyond 65535", base, rank);
		return -EINVAL;
	}
	pthread_mutex_init(&srv->m.lock, NULL);
	rc = rps_metrics_create(&srv->m.reg);
	if (!rc)
		rc = metrics_register(srv);
	if (!rc)
		rc = rps_http_start(srv->host, (uint16_t)port, NULL, metrics_handler, srv,
				    &srv->m.http);
	if (rc) {
		RPS_ERR("/metrics on %s:%d: %s", srv->host, port, rps_strerror(rc));
		rps_metrics_destroy(srv->m.reg);
		srv->m.reg = NULL;
		return rc;
	}
	RPS_INFO("metrics on http://%s:%d/metrics", advertised_host(srv), port);
	return 0;
}

static void metrics_stop(struct rps_server *srv)
{
	if (!srv->m.reg)
		return;
	rps_http_stop(srv->m.http);
	rps_metrics_destroy(srv->m.reg);
	pthread_mutex_destroy(&srv->m.lock);
	memset(&srv->m, 0, sizeof(srv->m));
}

/* The address workers are told to connect to. */
static const char *advertised_host(const struct rps_server *srv)
{
	if (!strcmp(srv->host, "0.0.0.0") || !strcmp(srv->host, "::"))
		return "127.0.0.1";
	return srv->host;
}

int rps_server_serve(struct rps_server *srv)
{
	struct rps_tr_event ev[RPS_SRV_EVENTS];
	uint64_t next_hb = rps_now_ns() + (uint64_t)srv->heartbeat_ms * 1000000ull;
	int rc = 0;

	while (!atomic_load(&srv->stop)) {
		int n = rps_tr_poll(srv->tr, ev, RPS_SRV_EVENTS, RPS_SRV_POLL_MS);

		if (n < 0 && n != -EINTR && n != -EAGAIN && n != -ETIMEDOUT) {
			RPS_ERR("poll %s: %s", srv->transport, strerror(-n));
			rc = n;
			break;
		}
		for (int i = 0; i < n; i++)
			dispatch(srv, &ev[i]);
		close_drain(srv);
		if (atomic_exchange(&srv->ckpt_request, 0))
			queue_all(srv, RPS_ENT_CKPT, NULL);
		if (srv->ctl && rps_now_ns() >= next_hb) {
			heartbeat(srv);
			next_hb = rps_now_ns() + (uint64_t)srv->heartbeat_ms * 1000000ull;
		}
	}
	RPS_INFO("stopping: %llu pushes, %llu pulls served",
		 (unsigned long long)atomic_load(&srv->n_push),
		 (unsigned long long)atomic_load(&srv->n_pull));
	return rc;
}

uint16_t rps_server_port(const struct rps_server *srv)
{
	return srv->port;
}

struct rps_shard *rps_server_shard(struct rps_server *srv, int i)
{
	return i >= 0 && i < srv->nshards ? &srv->shards[i] : NULL;
}

/* ---- restore (rdmaps-server --restore DIR) --------------------------------------- */

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

/* The server ranks that have checkpoint files in dir: the one rank, or
 * UINT32_MAX if none or several (then the scheduler's choice decides). */
static uint32_t restore_rank_of_dir(const char *dir, int *nranks_p)
{
	uint32_t first = UINT32_MAX;
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (!d) {
		RPS_ERR("--restore %s: %m", dir);
		*nranks_p = -1;
		return UINT32_MAX;
	}
	while ((de = readdir(d))) {
		unsigned r, sh;
		unsigned long long c;
		int end = 0;

		if (sscanf(de->d_name, "server%u-shard%u-clock%llu.ckpt%n", &r, &sh, &c, &end) !=
			3 ||
		    de->d_name[end])
			continue;
		if (first == UINT32_MAX) {
			first = r;
			n = 1;
		} else if (r != first && n == 1) {
			n = 2;
		}
	}
	closedir(d);
	*nranks_p = n;
	return n == 1 ? first : UINT32_MAX;
}

/* Find a checkpoint of every shard of `rank`: at one common clock if the
 * files allow it. 0 with paths, or -errno (logged: no silent fresh start). */
static int restore_find(struct rps_server *srv, uint32_t rank, struct rps_shard_restore *r)
{
	struct rps_ckpt_info info;
	uint64_t common = UINT64_MAX;
	int rc, mixed = 0;

	for (int s = 0; s < srv->nshards; s++) {
		rc = rps_ckpt_find(srv->restore_dir, rank, (uint32_t)s, (uint32_t)srv->nshards,
				   &info);
		if (rc) {
			RPS_ERR(
			    "cannot restore server %u: no valid checkpoint of shard %d in %s (%s)",
			    rank, s, srv->restore_dir, rps_strerror(rc));
			return rc;
		}
		snprintf(r[s].path, sizeof(r[s].path), "%s", info.path);
		r[s].clock = info.clock;
		if (info.clock < common)
			common = info.clock;
	}
	for (int s = 0; s < srv->nshards && !mixed; s++) {
		if (r[s].clock == common)
			continue;
		rc = rps_ckpt_find_max(srv->restore_dir, rank, (uint32_t)s, (uint32_t)srv->nshards,
				       common, &info);
		if (rc) {
			mixed = 1;
			break;
		}
		snprintf(r[s].path, sizeof(r[s].path), "%s", info.path);
		r[s].clock = info.clock;
	}
	if (mixed)
		RPS_WARN("restore: the shards of server %u have no checkpoint at one common clock "
			 "(newest %llu): each shard takes its own newest",
			 rank, (unsigned long long)common);
	for (int s = 0; s < srv->nshards; s++) {
		r[s].rank = rank;
		r[s].nshards = (uint32_t)srv->nshards;
		r[s].rc = 0;
		atomic_init(&r[s].done, 0);
	}
	return 0;
}

/* Load the files found into the shards (their update threads do it). */
static int restore_load(struct rps_server *srv, struct rps_shard_restore *r)
{
	uint64_t nslices = 0, lo = UINT64_MAX, hi = 0;
	int rc = queue_all(srv, RPS_ENT_RESTORE, r);

	if (rc)
		return rc;
	for (int s = 0; s < srv->nshards; s++) {
		struct timespec ts = {0, 1000000};

		while (!atomic_load(&r[s].done))
			nanosleep(&ts, NULL);
		if (r[s].rc) {
			RPS_ERR("restore of shard %d from %s failed: %s", s, r[s].path,
				rps_strerror(r[s].rc));
			return r[s].rc;
		}
		nslices += r[s].nslices;
		lo = RPS_MIN(lo, r[s].clock);
		hi = RPS_MAX(hi, r[s].clock);
	}
	RPS_INFO("restored from %s: %d shards at clock %llu (up to %llu), %llu slices; workers go "
		 "on from their own clocks (updates after the checkpoint are lost)",
		 srv->restore_dir, srv->nshards, (unsigned long long)lo, (unsigned long long)hi,
		 (unsigned long long)nslices);
	return 0;
}

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
	if (strcmp(advertised_host(srv), srv->host))
		RPS_WARN("listening on %s: advertising 127.0.0.1 to workers (set --host)",
			 srv->host);
	rps_ctl_join_opts_init(&jo, srv->cfg, RPS_ROLE_SERVER);
	jo.scheduler = srv->scheduler;
	jo.secret = srv->secret;
	jo.transport = strcmp(srv->transport, "rdma") ? 0 : 1;
	jo.host = advertised_host(srv);
	jo.port = srv->port;
	want = jo.want_rank;
	if (srv->restore_dir) {
		int nranks = 0;
		uint32_t r = restore_rank_of_dir(srv->restore_dir, &nranks);

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
			rc = restore_find(srv, want, restore);
			if (rc)
				goto out_free;
		}
	}
	jo.want_rank = want;
	jo.timeout_ms = srv->opts.timeout_ms;
	jo.heartbeat_ms = srv->heartbeat_ms;
	jo.on_dead = on_dead;
	jo.on_shutdown = on_shutdown;
	jo.on_map = on_map;
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
			"(RDMAPS_NUM_WORKERS)",
			map.num_workers, srv->nworkers);
		rc = -EINVAL;
		goto out_leave;
	}
	atomic_store(&srv->map_workers, map.num_workers ? map.num_workers : srv->nworkers);
	for (uint32_t w = map.num_workers; map.num_workers && w < srv->nworkers; w++)
		queue_worker(srv, RPS_ENT_DEAD, w); /* never coming */
	for (int i = 0; i < nnodes && i < RPS_MAX_NODES; i++) {
		/* joined a running job (restart): its dead workers are not waited for */
		if (nodes[i].role == RPS_ROLE_WORKER && !nodes[i].alive &&
		    nodes[i].rank < srv->nworkers) {
			srv->wgone[nodes[i].rank] = 1;
			queue_worker(srv, RPS_ENT_DEAD, nodes[i].rank);
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
			rc = restore_find(srv, rank, restore);
			if (rc)
				goto out_leave;
		}
		rc = restore_load(srv, restore);
		if (rc)
			goto out_leave;
	}
	RPS_INFO("joined as server %u of %u with %u workers", rank, map.num_servers,
		 atomic_load(&srv->map_workers));
	rc = metrics_start(srv, rank);
	if (rc)
		goto out_leave;

	rc = rps_server_serve(srv);
out_leave:
	metrics_stop(srv);
	rps_ctl_leave(srv->ctl);
	srv->ctl = NULL;
out_free:
	rps_free(nodes);
	rps_free(restore);
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

void rps_server_destroy(struct rps_server *srv)
{
	struct rps_srv_conn *sc;

	if (!srv)
		return;
	atomic_store(&srv->stop, 1);
	/* update threads drain their rings: queued pushes are applied and acked */
	for (int s = 0; s < srv->nshards; s++)
		rps_shard_stop(&srv->shards[s]);
	for (int s = 0; s < srv->nshards; s++)
		free_reqs(srv, rps_shard_pull_unpark(&srv->shards[s], NULL));
	close_drain(srv);
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
	for (int s = 0; s < srv->nshards; s++)
		if (srv->shards[s].mr_ok)
			rps_tr_dereg_mem(srv->tr, &srv->shards[s].mr);
	rps_transport_destroy(srv->tr);
	srv->tr = NULL;
	for (int s = 0; s < srv->shards_ready; s++)
		rps_shard_fini(&srv->shards[s]);
	if (srv->ctl)
		rps_ctl_leave(srv->ctl);
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
