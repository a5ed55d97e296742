/* The network thread: poll the data transport and dispatch frames. DECLARE,
 * PUSH, ASSIGN and CLOCK become typed entries of the target shard's priority ring
 * (the update thread is the only writer of its shard); PULLs are answered
 * from here when their consistency condition holds and parked otherwise. */
#include "server/server_int.h"
#include "server/lowprec.h"
#include "server/codec_push.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/util.h"

/* ---- frames (network thread) --------------------------------------------------- */

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
	rps_srv_conn_get(sc);
	return req;
}

/* The optimizer spec after a DECLARE (RPS_DECLARE_FLAG_OPTIM), decoded and
 * checked into *o_p (allocated): 0, or -EINVAL / -ENOMEM with why set. */
static int declare_spec(const struct rps_tr_event *ev, struct rps_optim_opts **o_p, char *why,
			size_t len)
{
	struct rps_optim_wire wire;
	struct rps_optim_opts o;
	const struct rps_declare *d = ev->fixed;
	int rc;

	*o_p = NULL;
	if (!ev->data || ev->data_len != sizeof(wire)) {
		snprintf(why, len, "declare of key %llu: optimizer spec of %zu bytes, not %zu",
			 (unsigned long long)d->key, ev->data_len, sizeof(wire));
		return -EINVAL;
	}
	memcpy(&wire, ev->data, sizeof(wire));
	rc = rps_optim_wire_decode(&wire, &o, why, len);
	if (rc) {
		char tmp[RPS_DECLARE_REASON_MAX];

		snprintf(tmp, sizeof(tmp), "key %llu slice %u: bad optimizer spec: %s",
			 (unsigned long long)d->key, d->slice, why);
		snprintf(why, len, "%s", tmp);
		return rc;
	}
	*o_p = rps_malloc(sizeof(o));
	if (!*o_p) {
		snprintf(why, len, "key %llu: out of memory", (unsigned long long)d->key);
		return -ENOMEM;
	}
	**o_p = o;
	return 0;
}

static void on_declare(struct rps_server *srv, struct rps_srv_conn *sc,
		       const struct rps_tr_event *ev)
{
	const struct rps_declare *d = ev->fixed;
	struct rps_optim_opts *optim = NULL;
	struct rps_srv_req *req;
	struct rps_ring_entry e;
	struct rps_shard *sh;

	if (ev->hdr.flags & RPS_DECLARE_FLAG_OPTIM) {
		char why[RPS_DECLARE_REASON_MAX];
		int rc = declare_spec(ev, &optim, why, sizeof(why));

		if (rc) {
			/* a refusal with its reason, as the update thread's */
			req = req_new(srv, sc, RPS_REQ_DECLARE, ev->hdr.req_id);
			if (!req) {
				struct rps_declare_ack a = {
				    .key = d->key, .slice = d->slice, .shard = d->shard};

				rps_srv_send_small(srv, sc, RPS_OP_DECLARE_ACK, ev->hdr.req_id, rc,
						   &a, sizeof(a));
				return;
			}
			req->u.decl = *d;
			req->u.decl_flags = ev->hdr.flags;
			rps_srv_declare_done(srv, NULL, req, rc, NULL, why);
			return;
		}
	}
	if (d->shard >= (uint32_t)srv->nshards) {
		struct rps_declare_ack a = {.key = d->key, .slice = d->slice, .shard = d->shard};

		rps_free(optim);
		rps_srv_send_small(srv, sc, RPS_OP_DECLARE_ACK, ev->hdr.req_id, -EINVAL, &a,
				   sizeof(a));
		return;
	}
	sh = &srv->shards[d->shard];
	req = req_new(srv, sc, RPS_REQ_DECLARE, ev->hdr.req_id);
	if (!req) {
		rps_free(optim);
		struct rps_declare_ack a = {.key = d->key, .slice = d->slice, .shard = d->shard};

		rps_srv_send_small(srv, sc, RPS_OP_DECLARE_ACK, ev->hdr.req_id, -ENOMEM, &a,
				   sizeof(a));
		return;
	}
	req->u.decl = *d;
	req->u.decl_optim = optim;
	req->u.decl_flags = ev->hdr.flags;
	rps_shard_push_entry(sh, req, &e);
	if (rps_srv_enqueue(srv, sh, &e))
		rps_srv_declare_done(srv, sh, req, -ECANCELED, NULL, NULL);
}

/* Clocks are checked against state (docs/security.md): a CLOCK may end at
 * most RPS_SRV_CLOCK_STEP + staleness clocks beyond what this server knows of
 * the worker and of the job; a SYNC (a worker that reconnects, perhaps to a
 * server restarted from an older checkpoint) may jump at most
 * RPS_SRV_SYNC_JUMP. Backwards is harmless (the shard keeps the larger). */
#define RPS_SRV_CLOCK_STEP 16u
#define RPS_SRV_SYNC_JUMP  65536u

/* The highest clock this server knows for sc's worker: its connection's,
 * its record in its shards, their clocks, and the job's highest here. */
static uint64_t known_clock(struct rps_server *srv, const struct rps_srv_conn *sc)
{
	uint64_t k = atomic_load_explicit(&srv->clock_hi, memory_order_relaxed);

	if (sc->has_next && sc->next_clock > k)
		k = sc->next_clock;
	for (uint32_t s = sc->shard_lo; s < sc->shard_hi; s++) {
		uint64_t w = rps_store_worker_clock(&srv->shards[s].store, sc->rank);
		uint64_t c = rps_store_clock(&srv->shards[s].store);

		k = w > k ? w : k;
		k = c > k ? c : k;
	}
	return k;
}

uint64_t rps_srv_known_clock(struct rps_server *srv, const struct rps_srv_conn *sc)
{
	return known_clock(srv, sc);
}

/* 0 if `clock` may be taken (then remembered as the connection's next),
 * else the connection is closed with an ERROR naming both clocks. */
static int clock_check(struct rps_server *srv, struct rps_srv_conn *sc, const char *what,
		       uint64_t clock, uint64_t next, uint64_t step)
{
	uint64_t known = known_clock(srv, sc);
	unsigned long long hi; /* clock_hi's type (atomic_ullong): clang checks the pointer */
	char why[192];

	if (clock > known + step) {
		snprintf(why, sizeof(why),
			 "%s at clock %llu refused: worker %u is known here at clock %llu (at "
			 "most %llu ahead is taken)",
			 what, (unsigned long long)clock, sc->rank, (unsigned long long)known,
			 (unsigned long long)step);
		rps_srv_conn_fail(srv, sc, -ERANGE, why);
		return -ERANGE;
	}
	sc->next_clock = next;
	sc->has_next = 1;
	hi = atomic_load_explicit(&srv->clock_hi, memory_order_relaxed);
	while (next > hi && !atomic_compare_exchange_weak_explicit(&srv->clock_hi, &hi, next,
								   memory_order_relaxed,
								   memory_order_relaxed))
		;
	return 0;
}

/* PUSH, and ASSIGN (the same frame, op assign: the values become the
 * parameters, no clock counts it). Returns 1 if the token was kept (travels
 * with the push). */
static int on_push(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev,
		   int assign)
{
	const struct rps_push *p = ev->fixed;
	struct rps_srv_req *req;
	struct rps_ring_entry e;
	struct rps_shard *sh;
	int kept = 0;

	const char *data = ev->data;
	size_t data_len = ev->data_len;
	uint64_t seq = 0;

	if (ev->hdr.flags & RPS_PUSH_FLAG_SEQ) {
		/* its sequence number first (replicated shards) */
		if (data_len < sizeof(seq)) {
			rps_srv_conn_fail(srv, sc, -EPROTO, "push without its sequence number");
			return 0;
		}
		memcpy(&seq, data, sizeof(seq));
		data += sizeof(seq);
		data_len -= sizeof(seq);
	}
	if (ev->hdr.flags & RPS_CODEC_MASK) {
		/* compressed (src/codec.h): exactly the codec's bytes, else nothing
		 * is applied and the connection ends with the reason */
		if (rps_srv_push_codec_check(srv, sc, ev, data, data_len))
			return 0;
	} else if (data_len != (size_t)p->count * sizeof(float)) {
		rps_srv_conn_fail(srv, sc, -EPROTO, "push data length disagrees with its count");
		return 0;
	} else if (!assign) {
		atomic_fetch_add_explicit(&srv->codec_frames[0], 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&srv->codec_bytes[0], data_len, memory_order_relaxed);
		atomic_fetch_add_explicit(&srv->codec_raw[0], data_len, memory_order_relaxed);
	}
	if (!assign)
		atomic_fetch_add_explicit(&srv->n_push, 1, memory_order_relaxed);
	/* a push for a far future clock would wait (BSP) or count for nothing */
	if (!assign && p->clock > known_clock(srv, sc) + RPS_SRV_CLOCK_STEP + srv->opts.staleness) {
		char why[160];

		snprintf(why, sizeof(why),
			 "PUSH at clock %u refused: worker %u is known here at clock %llu",
			 p->clock, sc->rank, (unsigned long long)known_clock(srv, sc));
		rps_srv_conn_fail(srv, sc, -ERANGE, why);
		return 0;
	}
	if (p->shard >= (uint32_t)srv->nshards) {
		rps_srv_send_small(srv, sc, RPS_OP_PUSH_ACK, ev->hdr.req_id, -EINVAL, NULL, 0);
		return 0;
	}
	sh = &srv->shards[p->shard];
	req = req_new(srv, sc, assign ? RPS_REQ_ASSIGN : RPS_REQ_PUSH, ev->hdr.req_id);
	if (!req) {
		RPS_ERR("%s from %s: out of memory, clock %u of worker %u cannot complete",
			assign ? "assign" : "push", sc->conn->peer, p->clock, sc->rank);
		rps_srv_send_small(srv, sc, RPS_OP_PUSH_ACK, ev->hdr.req_id, -ENOMEM, NULL, 0);
		return 0;
	}
	req->u.push = *p;
	req->seq = seq;
	req->has_seq = !!(ev->hdr.flags & RPS_PUSH_FLAG_SEQ);
	req->status = rps_shard_push_check(sh, p, &req->meta);
	if (!req->status && !assign && RPS_FAULT_DROP()) {
		/* fault injection: the push is lost, and the worker is told so
		 * (-EIO); it still counts for the worker's clock */
		atomic_fetch_add_explicit(&srv->faults_drop, 1, memory_order_relaxed);
		req->status = -EIO;
	}
	if (!req->status) {
		/* the gradient stays in the transport's buffer until applied */
		req->token = ev->token;
		req->data = (float *)(void *)data;
		req->codec = ev->hdr.flags & RPS_CODEC_MASK;
		req->data_len = (uint32_t)data_len;
		kept = 1;
	} else {
		/* refused now, but the worker counted it: the update thread counts
		 * it for the clock and answers with the status */
		RPS_DEBUG("%s of key %llu slice %u [%llu, +%u) from %s: %s",
			  assign ? "assign" : "push", (unsigned long long)p->key, p->slice,
			  (unsigned long long)p->offset, p->count, sc->conn->peer,
			  strerror(-req->status));
	}
	rps_shard_push_entry(sh, req, &e);
	if (rps_srv_enqueue(srv, sh, &e))
		rps_srv_push_done(srv, sh, req, -ECANCELED); /* releases a kept token */
	return kept;
}

static void on_pull(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_pull *p = ev->fixed;
	struct rps_slice_meta *m = NULL;
	struct rps_srv_req *req;
	struct rps_shard *sh;
	uint64_t known;
	int lp = ev->hdr.op == RPS_OP_PULL_LP;
	int rc;

	atomic_fetch_add_explicit(&srv->n_pull, 1, memory_order_relaxed);
	if (p->shard >= (uint32_t)srv->nshards) {
		rps_srv_pull_refuse(srv, sc, ev->hdr.req_id, p, -EINVAL);
		return;
	}
	sh = &srv->shards[p->shard];
	atomic_fetch_add_explicit(&sh->pulls_served, 1, memory_order_relaxed);
	rc = rps_shard_pull_check(sh, p, &m);
	if (rc) {
		RPS_DEBUG("pull of key %llu slice %u [%llu, +%u) shard %u from %s: %s",
			  (unsigned long long)p->key, p->slice, (unsigned long long)p->offset,
			  p->count, p->shard, sc->conn->peer, strerror(-rc));
		rps_srv_pull_refuse(srv, sc, ev->hdr.req_id, p, rc);
		return;
	}
	if (lp && m && (!rps_lp_of(m) || rps_lp_of(m)->prec != ev->hdr.flags)) {
		/* asked for a copy the slice does not have (server/lowprec.h) */
		RPS_LOG_RATELIMITED(RPS_LOG_WARN,
				    "low-precision pull of key %llu slice %u from worker %u refused: "
				    "the slice has %s copy (declare it with that pull precision)",
				    (unsigned long long)p->key, p->slice, sc->rank,
				    rps_lp_of(m) ? "another" : "no low-precision");
		rps_srv_pull_refuse(srv, sc, ev->hdr.req_id, p, -EINVAL);
		return;
	}
	if (rps_shard_pull_ready(sh, p->min_clock, sc->rank)) {
		rps_srv_pull_send(srv, &srv->net_bufs, sh, sc, ev->hdr.req_id, p, m, lp);
		return;
	}
	/* Bounded: parked pulls hold memory and cost every clock a scan. */
	known = known_clock(srv, sc);
	if ((uint64_t)p->min_clock > known + (uint64_t)srv->opts.staleness + RPS_SRV_PULL_AHEAD) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN,
				    "pull from worker %u at %s for clock %u refused: the worker is "
				    "known here at clock %llu (at most %d ahead)",
				    sc->rank, sc->conn->peer, p->min_clock, (unsigned long long)known,
				    RPS_SRV_PULL_AHEAD + srv->opts.staleness);
		rps_srv_pull_refuse(srv, sc, ev->hdr.req_id, p, -ERANGE);
		return;
	}
	if (atomic_load(&sc->nparked) >= srv->cfg->max_parked_pulls) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN,
				    "pull from worker %u at %s refused: %d pulls already wait for a "
				    "clock (RDMAPS_MAX_PARKED_PULLS)",
				    sc->rank, sc->conn->peer, atomic_load(&sc->nparked));
		rps_srv_pull_refuse(srv, sc, ev->hdr.req_id, p, -EBUSY);
		return;
	}
	req = req_new(srv, sc, RPS_REQ_PULL, ev->hdr.req_id);
	if (!req) {
		rps_srv_pull_refuse(srv, sc, ev->hdr.req_id, p, -ENOMEM);
		return;
	}
	req->u.pull = *p;
	req->meta = m;
	req->flags = (uint16_t)lp; /* io_pull_answer: a low-precision pull */
	atomic_fetch_add(&sc->nparked, 1);
	if (rps_shard_pull_park(sh, req)) {
		atomic_fetch_sub(&sc->nparked, 1);
		/* the clock moved meanwhile */
		rps_srv_pull_send(srv, &srv->net_bufs, sh, sc, ev->hdr.req_id, p, m, lp);
		rps_srv_free_reqs(srv, req);
	}
}

static void on_clock(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_clock *c = ev->fixed;
	const uint8_t *pushes = ev->data;
	int lo = (int)sc->shard_lo, hi = (int)sc->shard_hi;
	char why[96];

	if (c->num_shards != (uint32_t)srv->nshards ||
	    ev->data_len != (size_t)c->num_shards * sizeof(uint32_t)) {
		snprintf(why, sizeof(why), "clock %u for %u shards, this server has %d", c->clock,
			 c->num_shards, srv->nshards);
		rps_srv_conn_fail(srv, sc, -EPROTO, why);
		return;
	}
	if (clock_check(srv, sc, "CLOCK", c->clock, (uint64_t)c->clock + 1,
			RPS_SRV_CLOCK_STEP + (uint64_t)srv->opts.staleness))
		return;
	for (int s = lo; s < hi; s++) {
		struct rps_ring_entry e;
		uint32_t n;

		memcpy(&n, pushes + (size_t)s * sizeof(n), sizeof(n));
		rps_srv_ctl_entry(&e, RPS_ENT_CLOCK, (uint32_t)s, sc->rank);
		e.info.clock = c->clock;
		e.u64 = n;
		if (ev->hdr.flags & RPS_CLOCK_FLAG_RESENT) /* replicated shards */
			e.u64 |= RPS_ENT_CLOCK_RESENT;
		if (rps_srv_enqueue(srv, &srv->shards[s], &e))
			return;
	}
}

/* A worker says where its clock is (it joined late, or reconnected after we
 * were restarted): before its other frames on this connection, so the shard
 * sees it first (control entries are as urgent as any). */
static void on_sync(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_sync *y = ev->fixed;
	int lo = (int)sc->shard_lo, hi = (int)sc->shard_hi;

	RPS_DEBUG("worker %u at %s: sync at clock %u", sc->rank, sc->conn->peer, y->clock);
	if (clock_check(srv, sc, "SYNC", y->clock, y->clock, RPS_SRV_SYNC_JUMP))
		return;
	for (int s = lo; s < hi; s++) {
		struct rps_ring_entry e;

		rps_srv_ctl_entry(&e, RPS_ENT_SYNC, (uint32_t)s, sc->rank);
		e.info.clock = y->clock;
		e.u64 = y->pid;
		if (rps_srv_enqueue(srv, &srv->shards[s], &e))
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
		rps_srv_conn_fail(srv, sc, -EPROTO, why ? why : "malformed frame");
		rps_tr_release(srv->tr, ev->token);
		return;
	}
	if (sc->repl) { /* a server-to-server link (server/repl.c) */
		if (!rps_repl_on_frame(srv, sc, ev))
			rps_tr_release(srv->tr, ev->token);
		return;
	}
	switch (ev->hdr.op) {
	case RPS_OP_PUSH:
		kept = on_push(srv, sc, ev, 0);
		break;
	case RPS_OP_ASSIGN:
		kept = on_push(srv, sc, ev, 1);
		break;
	case RPS_OP_PULL:
	case RPS_OP_PULL_LP: /* low-precision (server/lowprec.h) */
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
	case RPS_OP_TABLE_DECLARE:
	case RPS_OP_ROWS_PUSH:
	case RPS_OP_ROWS_PULL:
	case RPS_OP_TABLE_MAP:
		kept = rps_srv_on_table_frame(srv, sc, ev); /* table_frame.c */
		break;
	case RPS_OP_ERROR: {
		/* the worker gives up on this connection and says why */
		char text[RPS_LOG_ESC_BUF];

		RPS_LOG_RATELIMITED_EX(RPS_LOG_INFO, RPS_LOG_RL_MS, 20, "worker %u at %s: error %s: %s", sc->rank, sc->conn->peer,
			 rps_strerror(ev->hdr.status),
			 rps_log_escape(ev->data, ev->data_len, text, sizeof(text)));
		rps_srv_conn_drop(srv, sc);
		break;
	}
	default: {
		char buf[64];

		snprintf(buf, sizeof(buf), "unexpected %s frame from a worker",
			 rps_proto_op_name(ev->hdr.op));
		rps_srv_conn_fail(srv, sc, -EPROTO, buf);
		break;
	}
	}
	if (!kept)
		rps_tr_release(srv->tr, ev->token);
}

/* A live connection of the same worker rank for the same shards: the
 * identity a connection authenticated as is held by one connection at a
 * time. A worker that lost its connection reconnects once we saw it close. */
static struct rps_srv_conn *live_twin(struct rps_server *srv, const struct rps_srv_conn *sc)
{
	for (struct rps_srv_conn *o = srv->conns; o; o = o->next)
		if (o != sc && o->net_ref && !atomic_load(&o->closed) && o->rank == sc->rank &&
		    o->shard_lo < sc->shard_hi && sc->shard_lo < o->shard_hi)
			return o;
	return NULL;
}

static void on_accepted(struct rps_server *srv, struct rps_conn *c)
{
	struct rps_srv_conn *sc = rps_calloc(1, sizeof(*sc));
	struct rps_srv_conn *twin;

	if (!sc) {
		RPS_ERR("connection from %s: out of memory", c->peer);
		rps_tr_close(c);
		return;
	}
	sc->conn = c;
	sc->owner = srv;
	sc->rank = c->hello.rank;
	/* A CLOCK or SYNC counts for the shards the connection carries: the one
	 * shard of its channel when every shard has its own connection (the same
	 * CLOCK then comes on each, after that shard's pushes), else all. */
	sc->shard_lo = srv->conn_per_shard ? c->hello.channel : 0;
	sc->shard_hi = srv->conn_per_shard ? c->hello.channel + 1 : (uint32_t)srv->nshards;
	atomic_init(&sc->refs, 1);
	atomic_init(&sc->closed, 0);
	atomic_init(&sc->nparked, 0);
	sc->net_ref = 1;
	sc->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = sc;
	srv->conns = sc;
	c->user = sc;
	if (c->hello.role == RPS_ROLE_SERVER) { /* a backup's link: no worker's identity */
		sc->repl = 1;
		sc->rank = UINT32_MAX;
		sc->shard_lo = sc->shard_hi = 0;
		return;
	}
	twin = live_twin(srv, sc);
	if (twin) {
		char why[160];

		snprintf(why, sizeof(why),
			 "worker rank %u is already connected from %s: a second connection for "
			 "a live rank is refused",
			 sc->rank, twin->conn->peer);
		rps_srv_conn_fail(srv, sc, -EADDRINUSE, why);
		return;
	}
	RPS_LOG_RATELIMITED_EX(RPS_LOG_INFO, RPS_LOG_RL_MS, 20, "worker %u connected from %s (channel %u)",
			       sc->rank, c->peer, c->hello.channel);
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
	if (sc->repl) {
		rps_repl_conn_closed(srv, sc);
		rps_srv_conn_drop(srv, sc);
		return;
	}
	/* the transport logged why */
	RPS_LOG_RATELIMITED_EX(RPS_LOG_INFO, RPS_LOG_RL_MS, 20, "worker %u at %s disconnected (%s)", sc->rank, ev->conn->peer,
		 rps_strerror(ev->status));
	rps_srv_conn_drop(srv, sc);
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
				rps_srv_conn_put(srv, ev->conn->user);
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
		rps_srv_close_drain(srv);
		if (atomic_exchange(&srv->ckpt_request, 0))
			rps_srv_queue_all(srv, RPS_ENT_CKPT, NULL);
		rps_srv_creq_poll(srv);
		if (srv->ctl && rps_now_ns() >= next_hb) {
			rps_srv_heartbeat(srv);
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
