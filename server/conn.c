/* Connections of workers: admission (hello), references and closing, and
 * the answers sent on them (acks, pull answers), also for the update threads
 * (struct rps_shard_io). */
#include "server/server_int.h"

#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"

/* ---- connections ------------------------------------------------------------- */

/* The last reference queues the connection for the network thread, which
 * closes it (so close() never races the events of one poll batch). */
void rps_srv_conn_put(struct rps_server *srv, struct rps_srv_conn *sc)
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

void rps_srv_close_drain(struct rps_server *srv)
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

void rps_srv_free_reqs(struct rps_server *srv, struct rps_srv_req *r)
{
	while (r) {
		struct rps_srv_req *n = r->next;

		if (r->sc)
			rps_srv_conn_put(srv, r->sc);
		rps_srv_pool_put(r);
		r = n;
	}
}

/* Stop taking frames from a connection: its parked pulls go, its queued
 * pushes finish (their acks fail quietly) and the last reference closes it. */
void rps_srv_conn_drop(struct rps_server *srv, struct rps_srv_conn *sc)
{
	if (!sc->net_ref)
		return;
	atomic_store(&sc->closed, 1);
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_srv_req *l = rps_shard_pull_unpark(&srv->shards[s], sc);

		for (struct rps_srv_req *r = l; r; r = r->next)
			atomic_fetch_sub(&sc->nparked, 1);
		rps_srv_free_reqs(srv, l);
	}
	sc->net_ref = 0;
	rps_srv_conn_put(srv, sc);
}

/* A protocol error: say why (ERROR frame), log it, drop the connection. */
void rps_srv_conn_fail(struct rps_server *srv, struct rps_srv_conn *sc, int status, const char *why)
{
	struct rps_frame_hdr h;
	struct iovec iov = {(void *)why, strlen(why)};

	RPS_LOG_RATELIMITED(RPS_LOG_WARN, "closing %s: %s", sc->conn->peer, why);
	rps_proto_hdr_init(&h, RPS_OP_ERROR, (uint32_t)iov.iov_len, 0);
	h.status = status;
	rps_tr_post_send(sc->conn, &h, &iov, 1, 0);
	rps_srv_conn_drop(srv, sc);
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

void rps_srv_send_small(struct rps_server *srv, struct rps_srv_conn *sc, uint8_t op,
			uint32_t req_id, int status, const void *fixed, size_t len)
{
	send_small_aux(srv, sc, op, req_id, status, 0, fixed, len);
}

/* A refused pull: its fixed part echoed with count 0 (a PULL_RESP's length
 * always matches its count) and the status. */
void rps_srv_pull_refuse(struct rps_server *srv, struct rps_srv_conn *sc, uint32_t req_id,
			 const struct rps_pull *p, int status)
{
	struct rps_pull f = *p;

	f.count = 0;
	rps_srv_send_small(srv, sc, RPS_OP_PULL_RESP, req_id, status, &f, sizeof(f));
}

/* Answer a pull whose condition holds: a consistent copy of the piece in a
 * pooled buffer, sent zero copy, the buffer back to its pool on SEND_DONE. */
void rps_srv_pull_send(struct rps_server *srv, struct rps_srv_bufpool *bp, struct rps_shard *sh,
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
		RPS_LOG_RATELIMITED(RPS_LOG_WARN, "pull of %u elements from %s: no send buffer", p->count, sc->conn->peer);
		rps_srv_pull_refuse(srv, sc, req_id, p, -ENOMEM);
		return;
	}
	memcpy(buf, p, sizeof(*p));
	if (p->count)
		rps_shard_read(sh, m, p->offset, p->count, (float *)(buf + sizeof(*p)));
	iov.iov_base = buf;
	iov.iov_len = len;
	rps_srv_conn_get(sc);
	rc = rps_tr_post_send(sc->conn, &h, &iov, 1, (uint64_t)(uintptr_t)buf);
	if (rc) {
		RPS_DEBUG("pull answer to %s: %s", sc->conn->peer, strerror(-rc));
		rps_srv_pool_put(buf);
		rps_srv_conn_put(srv, sc);
		return;
	}
	atomic_fetch_add_explicit(&srv->bytes_out, sizeof(h) + len, memory_order_relaxed);
	atomic_fetch_add_explicit(&srv->msgs_out, 1, memory_order_relaxed);
}

/* rps_shard_io: what update threads say back. */
void rps_srv_push_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status)
{
	struct rps_server *srv = arg;

	if (req->token)
		rps_tr_release(srv->tr, req->token);
	if (req->repl_id && !rps_repl_local_done(srv, req->repl_id, status)) {
		/* the backup's acknowledgement sends the PUSH_ACK */
		if (req->sc)
			rps_srv_conn_put(srv, req->sc);
		rps_srv_pool_put(req);
		return;
	}
	if (req->sc) {
		rps_srv_send_small(srv, req->sc, RPS_OP_PUSH_ACK, req->req_id, status, NULL, 0);
		rps_srv_conn_put(srv, req->sc);
	}
	rps_srv_pool_put(req);
}

/* A refused DECLARE with a spec: the ack and the reason after it. */
static void send_declare_refusal(struct rps_server *srv, struct rps_srv_conn *sc, uint32_t req_id,
				 int status, const struct rps_declare_ack *ack, const char *why)
{
	size_t n = strnlen(why, RPS_DECLARE_REASON_MAX);
	struct rps_frame_hdr h;
	struct iovec iov[2] = {{(void *)ack, sizeof(*ack)}, {(void *)why, n}};
	int rc;

	if (atomic_load_explicit(&sc->closed, memory_order_relaxed))
		return;
	rps_proto_hdr_init(&h, RPS_OP_DECLARE_ACK, (uint32_t)(sizeof(*ack) + n), req_id);
	h.status = status;
	rc = rps_tr_post_send(sc->conn, &h, iov, n ? 2 : 1, 0);
	if (rc) {
		RPS_DEBUG("DECLARE_ACK to %s: %s", sc->conn->peer, strerror(-rc));
		return;
	}
	atomic_fetch_add_explicit(&srv->bytes_out, sizeof(h) + h.len, memory_order_relaxed);
	atomic_fetch_add_explicit(&srv->msgs_out, 1, memory_order_relaxed);
}

void rps_srv_declare_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status,
			  const struct rps_declare_ack *ack, const char *why)
{
	struct rps_server *srv = arg;
	struct rps_declare_ack a;
	uint32_t aux = 0; /* the slice's geometry (src/proto.h) */
	int has_optim = !!(req->u.decl_flags & RPS_DECLARE_FLAG_OPTIM);

	if (!status && ack && sh) {
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
		if (why)
			RPS_LOG_RATELIMITED(RPS_LOG_WARN, "declare from worker %u refused: %s", req->worker, why);
		else if (status != -EEXIST)
			RPS_LOG_RATELIMITED(RPS_LOG_WARN, "declare of key %llu slice %u (%llu elements) from worker %u: %s",
				 (unsigned long long)a.key, a.slice, (unsigned long long)a.nelems,
				 req->worker, strerror(-status));
	}
	rps_free(req->u.decl_optim);
	req->u.decl_optim = NULL;
	if (req->sc) {
		/* a reason only for a worker that sent a spec: it knows the tail */
		if (status && why && has_optim)
			send_declare_refusal(srv, req->sc, req->req_id, status, ack, why);
		else
			send_small_aux(srv, req->sc, RPS_OP_DECLARE_ACK, req->req_id, status, aux,
				       ack, sizeof(*ack));
		rps_srv_conn_put(srv, req->sc);
	}
	rps_srv_pool_put(req);
}

static void io_pull_answer(void *arg, struct rps_shard *sh, struct rps_srv_req *req)
{
	struct rps_server *srv = arg;

	if (req->sc) {
		atomic_fetch_sub(&req->sc->nparked, 1);
		rps_srv_pull_send(srv, &sh->bufs, sh, req->sc, req->req_id, &req->u.pull,
				  req->meta);
		rps_srv_conn_put(srv, req->sc);
	}
	rps_srv_pool_put(req);
}

const struct rps_shard_io rps_srv_io = {
    .push_done = rps_srv_push_done,
    .declare_done = rps_srv_declare_done,
    .pull_answer = io_pull_answer,
    .rows_done = rps_srv_rows_done,
};

/* ---- admission (transport hello) ---------------------------------------------- */

int rps_srv_on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		     size_t *ack_len_p, const char **why_p)
{
	struct rps_server *srv = arg;
	struct rps_hello_ack *a = ack;
	struct rps_shard_desc *d = (struct rps_shard_desc *)(a + 1);
	uint32_t nw = atomic_load(&srv->map_workers);

	if (!nw)
		nw = srv->nworkers;
	if (h->role == RPS_ROLE_SERVER) /* a backup's link (server/repl.c) */
		return rps_repl_on_hello(srv, h, ack, ack_len_p, why_p);
	if (rps_repl_refuses_workers(srv, why_p))
		return -EAGAIN;
	if (h->role != RPS_ROLE_WORKER) {
		*why_p = "only workers connect to a server";
		return -EPROTO;
	}
	if (h->rank >= srv->nworkers) {
		/* growth: ranks up to RDMAPS_MAX_WORKERS - 1 may come before our map says so */
		*why_p = srv->nworkers > nw ? "worker rank beyond RDMAPS_MAX_WORKERS of this server"
					    : "worker rank beyond the number of workers (a worker "
					      "joining the running job needs RDMAPS_MAX_WORKERS on "
					      "the servers)";
		return -EINVAL;
	}
	if (h->rank >= nw)
		nw = h->rank + 1; /* a new worker whose map we have not seen yet */
	if (h->channel >= (uint32_t)srv->nshards) {
		*why_p = "channel beyond the server's shards";
		return -EINVAL;
	}
	{
		/* one live connection per identity (and shard): frame.c checks it
		 * again at ACCEPTED, this says it before any ack */
		uint32_t lo = srv->conn_per_shard ? h->channel : 0;
		uint32_t hi = srv->conn_per_shard ? h->channel + 1 : (uint32_t)srv->nshards;

		for (struct rps_srv_conn *o = srv->conns; o; o = o->next)
			if (o->net_ref && !atomic_load(&o->closed) && o->rank == h->rank &&
			    o->shard_lo < hi && lo < o->shard_hi) {
				*why_p = "this worker rank is already connected: a second "
					 "connection for a live rank is refused";
				return -EADDRINUSE;
			}
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
		if (srv->remote_read) {
			d[s].addr = sh->mr.remote_addr;
			d[s].size = sh->store.size;
			/* read access for this connection only (a memory window
			 * where the transport has them, docs/rdma.md): for the
			 * shards it reads, the others' keys stay 0 */
			if (!srv->conn_per_shard || (uint32_t)s == h->channel) {
				int rc = rps_tr_grant(c, &sh->mr, &d[s].remote_key);

				if (rc) {
					*why_p = "server could not grant read access (see its log)";
					return rc;
				}
			}
		}
	}
	*ack_len_p = sizeof(*a) + (size_t)srv->nshards * sizeof(*d);
	return 0;
}
