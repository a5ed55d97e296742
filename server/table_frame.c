/* Sparse tables on the network thread: TABLE_DECLARE, ROWS_PUSH and
 * ROWS_PULL become RPS_ENT_TABLE entries of their shard's ring (the update
 * thread owns the tables, server/table.c); the answers go out from the
 * update thread through rps_srv_rows_done. */
#include "server/server_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#define RPS_SRV_CLOCK_STEP 16u /* as frame.c */

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

static void entry(struct rps_ring_entry *e, struct rps_shard *sh, struct rps_srv_req *req,
		  int control)
{
	memset(e, 0, sizeof(*e));
	e->type = RPS_ENT_TABLE;
	e->shard = sh->p.idx;
	e->ptr = req;
	e->ptr2 = req->sc;
	e->info.worker = req->worker;
	e->info.key = req->op == RPS_REQ_TABLE_DECLARE ? req->u.tdecl.td.table
		      : req->op == RPS_REQ_TABLE_MAP   ? req->u.tmap.table
						       : req->u.rows.r.table;
	if (control || req->op != RPS_REQ_ROWS_PUSH) {
		/* declarations and pulls: as fresh and as urgent as anything */
		e->info.timestamp_ns = UINT64_MAX;
		e->info.norm = INFINITY;
	} else {
		uint64_t clock = rps_store_clock(&sh->store);

		e->info.clock = req->u.rows.r.clock;
		e->info.staleness =
		    clock > req->u.rows.r.clock ? (uint32_t)(clock - req->u.rows.r.clock) : 0;
		e->info.timestamp_ns = req->u.rows.r.timestamp_ns;
		e->info.nelems = (size_t)req->u.rows.r.count * req->u.rows.r.dim;
	}
}

static void refuse(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev,
		   int status)
{
	switch (ev->hdr.op) {
	case RPS_OP_TABLE_DECLARE: {
		const struct rps_table_decl *d = ev->fixed;
		struct rps_table_ack a = {.table = d->table, .shard = d->shard};

		rps_srv_send_small(srv, sc, RPS_OP_TABLE_DECLARE_ACK, ev->hdr.req_id, status, &a,
				   sizeof(a));
		break;
	}
	case RPS_OP_ROWS_PUSH:
		rps_srv_send_small(srv, sc, RPS_OP_ROWS_PUSH_ACK, ev->hdr.req_id, status, NULL, 0);
		break;
	case RPS_OP_TABLE_MAP:
		rps_srv_send_small(srv, sc, RPS_OP_TABLE_MAP_RESP, ev->hdr.req_id, status, ev->fixed,
				   sizeof(struct rps_table_map));
		break;
	default:
		rps_srv_send_small(srv, sc, RPS_OP_ROWS_PULL_RESP, ev->hdr.req_id, status, ev->fixed,
				   sizeof(struct rps_rows));
		break;
	}
}

static int on_map(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_table_map *m = ev->fixed;
	struct rps_srv_req *req;
	struct rps_ring_entry e;
	struct rps_shard *sh;

	if (m->shard >= (uint32_t)srv->nshards) {
		refuse(srv, sc, ev, -EINVAL);
		return 0;
	}
	sh = &srv->shards[m->shard];
	req = req_new(srv, sc, RPS_REQ_TABLE_MAP, ev->hdr.req_id);
	if (!req) {
		refuse(srv, sc, ev, -ENOMEM);
		return 0;
	}
	req->u.tmap = *m;
	entry(&e, sh, req, 1);
	if (rps_srv_enqueue(srv, sh, &e))
		rps_srv_rows_done(srv, sh, req, RPS_OP_TABLE_MAP_RESP, -ECANCELED, 0, m, sizeof(*m),
				  NULL, 0);
	return 0;
}

static int on_declare(struct rps_server *srv, struct rps_srv_conn *sc,
		      const struct rps_tr_event *ev)
{
	const struct rps_table_decl *d = ev->fixed;
	struct rps_optim_wire wire;
	struct rps_optim_opts o, *op;
	struct rps_srv_req *req;
	struct rps_ring_entry e;
	struct rps_shard *sh;
	char why[RPS_DECLARE_REASON_MAX];

	if (d->shard >= (uint32_t)srv->nshards || !ev->data || ev->data_len != sizeof(wire)) {
		refuse(srv, sc, ev, -EINVAL);
		return 0;
	}
	memcpy(&wire, ev->data, sizeof(wire));
	if (rps_optim_wire_decode(&wire, &o, why, sizeof(why))) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN, "table %u from worker %u: bad optimizer: %s",
				    d->table, sc->rank, why);
		refuse(srv, sc, ev, -EINVAL);
		return 0;
	}
	sh = &srv->shards[d->shard];
	op = rps_malloc(sizeof(*op));
	req = op ? req_new(srv, sc, RPS_REQ_TABLE_DECLARE, ev->hdr.req_id) : NULL;
	if (!req) {
		rps_free(op);
		refuse(srv, sc, ev, -ENOMEM);
		return 0;
	}
	*op = o;
	req->u.tdecl.td = *d;
	req->u.tdecl.optim = op;
	entry(&e, sh, req, 1);
	if (rps_srv_enqueue(srv, sh, &e)) {
		rps_free(op);
		req->u.tdecl.optim = NULL;
		rps_srv_rows_done(srv, sh, req, RPS_OP_TABLE_DECLARE_ACK, -ECANCELED, 0, NULL, 0,
				  NULL, 0);
	}
	return 0;
}

static int on_push(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_rows *r = ev->fixed;
	struct rps_srv_req *req;
	struct rps_ring_entry e;
	struct rps_shard *sh;
	uint64_t known = rps_srv_known_clock(srv, sc);

	atomic_fetch_add_explicit(&srv->n_push, 1, memory_order_relaxed);
	if (r->clock > known + RPS_SRV_CLOCK_STEP + srv->opts.staleness) {
		char why[160];

		snprintf(why, sizeof(why),
			 "ROWS_PUSH at clock %u refused: worker %u is known here at clock %llu",
			 r->clock, sc->rank, (unsigned long long)known);
		rps_srv_conn_fail(srv, sc, -ERANGE, why);
		return 0;
	}
	if (r->shard >= (uint32_t)srv->nshards) {
		refuse(srv, sc, ev, -EINVAL);
		return 0;
	}
	sh = &srv->shards[r->shard];
	req = req_new(srv, sc, RPS_REQ_ROWS_PUSH, ev->hdr.req_id);
	if (!req) {
		RPS_ERR("row push from %s: out of memory, clock %u of worker %u cannot complete",
			sc->conn->peer, r->clock, sc->rank);
		refuse(srv, sc, ev, -ENOMEM);
		return 0;
	}
	req->u.rows.r = *r;
	req->token = ev->token; /* ids and gradients stay in the receive buffer */
	req->data = ev->data;
	entry(&e, sh, req, 0);
	if (rps_srv_enqueue(srv, sh, &e))
		rps_srv_rows_done(srv, sh, req, RPS_OP_ROWS_PUSH_ACK, -ECANCELED, 0, NULL, 0, NULL,
				  0);
	return 1;
}

static int on_pull(struct rps_server *srv, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	const struct rps_rows *r = ev->fixed;
	struct rps_srv_req *req;
	struct rps_ring_entry e;
	struct rps_shard *sh;
	uint64_t *ids;

	atomic_fetch_add_explicit(&srv->n_pull, 1, memory_order_relaxed);
	if (r->shard >= (uint32_t)srv->nshards) {
		refuse(srv, sc, ev, -EINVAL);
		return 0;
	}
	if (sizeof(*r) + (uint64_t)r->count * (r->dim * sizeof(float) +
					       (r->flags & RPS_ROWS_FLAG_SLOTS ? 4u : 0u)) >
	    srv->max_msg) {
		refuse(srv, sc, ev, -EMSGSIZE);
		return 0;
	}
	if ((uint64_t)r->clock > rps_srv_known_clock(srv, sc) + (uint64_t)srv->opts.staleness +
					 RPS_SRV_PULL_AHEAD) {
		refuse(srv, sc, ev, -ERANGE);
		return 0;
	}
	sh = &srv->shards[r->shard];
	atomic_fetch_add_explicit(&sh->pulls_served, 1, memory_order_relaxed);
	ids = rps_malloc((size_t)r->count * 8 + 8);
	req = ids ? req_new(srv, sc, RPS_REQ_ROWS_PULL, ev->hdr.req_id) : NULL;
	if (!req) {
		rps_free(ids);
		refuse(srv, sc, ev, -ENOMEM);
		return 0;
	}
	memcpy(ids, ev->data, (size_t)r->count * 8);
	req->u.rows.r = *r;
	req->u.rows.ids = ids;
	entry(&e, sh, req, 0);
	if (rps_srv_enqueue(srv, sh, &e)) {
		rps_free(ids);
		req->u.rows.ids = NULL;
		rps_srv_rows_done(srv, sh, req, RPS_OP_ROWS_PULL_RESP, -ECANCELED, 0, r, sizeof(*r),
				  NULL, 0);
	}
	return 0;
}

int rps_srv_on_table_frame(struct rps_server *srv, struct rps_srv_conn *sc,
			   const struct rps_tr_event *ev)
{
	switch (ev->hdr.op) {
	case RPS_OP_TABLE_DECLARE:
		return on_declare(srv, sc, ev);
	case RPS_OP_ROWS_PUSH:
		return on_push(srv, sc, ev);
	case RPS_OP_ROWS_PULL:
		return on_pull(srv, sc, ev);
	case RPS_OP_TABLE_MAP:
		return on_map(srv, sc, ev);
	default:
		return 0;
	}
}

void rps_srv_rows_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, uint8_t op,
		       int status, uint32_t aux, const void *fixed, size_t flen, const void *data,
		       size_t dlen)
{
	struct rps_server *srv = arg;
	struct rps_srv_conn *sc = req->sc;
	struct rps_table_ack ack;
	struct rps_rows rows;

	(void)sh;
	if (req->token)
		rps_tr_release(srv->tr, req->token);
	if (sc && !atomic_load_explicit(&sc->closed, memory_order_relaxed)) {
		struct rps_frame_hdr h;
		struct iovec iov[2];
		int cnt = 0, rc;

		/* an answer without its fixed part (a cancelled request) */
		if (!fixed && op == RPS_OP_TABLE_DECLARE_ACK) {
			memset(&ack, 0, sizeof(ack));
			ack.table = req->u.tdecl.td.table;
			ack.shard = req->u.tdecl.td.shard;
			fixed = &ack;
			flen = sizeof(ack);
		} else if (!fixed && op == RPS_OP_ROWS_PULL_RESP) {
			rows = req->u.rows.r;
			fixed = &rows;
			flen = sizeof(rows);
		}
		if (op == RPS_OP_ROWS_PULL_RESP && status) {
			rows = *(const struct rps_rows *)fixed;
			fixed = &rows;
			dlen = 0;
		}
		if (flen) {
			iov[cnt].iov_base = (void *)fixed;
			iov[cnt++].iov_len = flen;
		}
		if (dlen) {
			iov[cnt].iov_base = (void *)data;
			iov[cnt++].iov_len = dlen;
		}
		rps_proto_hdr_init(&h, op, (uint32_t)(flen + dlen), req->req_id);
		h.status = status;
		h.aux = aux;
		rc = rps_tr_post_send(sc->conn, &h, cnt ? iov : NULL, cnt, 0);
		if (rc) {
			RPS_DEBUG("%s to %s: %s", rps_proto_op_name(op), sc->conn->peer,
				  strerror(-rc));
		} else {
			atomic_fetch_add_explicit(&srv->bytes_out, sizeof(h) + h.len,
						  memory_order_relaxed);
			atomic_fetch_add_explicit(&srv->msgs_out, 1, memory_order_relaxed);
		}
	}
	if (sc)
		rps_srv_conn_put(srv, sc);
	rps_srv_pool_put(req);
}
