/* Control requests relayed by the scheduler: CHECKPOINT and EXPORT
 * (src/proto.h, docs/protocol.md).
 *
 * The control thread only copies the request and wakes the network thread
 * (rps_srv_creq_on_request); the network loop (rps_srv_creq_poll) queues an
 * RPS_ENT_CTLREQ entry into every shard's ring, waits, one poll round at a
 * time, until every shard published its result (snap.c), then answers the
 * scheduler over the control connection: EXPORT's DATA frames (every slice
 * in pieces of at most RPS_EXPORT_PART_FLOATS values) and one RESULT frame.
 * A newer request abandons one still waiting (the scheduler has given up on
 * it); each request has its own generation so that late results are told
 * apart.
 */
#include "server/server_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control/control.h"
#include "server/snap.h"
#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

void rps_srv_creq_on_request(void *arg, const struct rps_frame_hdr *h, const void *data, size_t len)
{
	struct rps_server *srv = arg;

	if (len != sizeof(struct rps_ctlreq) || !data) {
		RPS_WARN("scheduler: %s request of %zu bytes ignored", rps_proto_op_name(h->op),
			 len);
		return;
	}
	pthread_mutex_lock(&srv->creq.lock);
	srv->creq.op = h->op;
	srv->creq.req_id = h->req_id;
	memcpy(&srv->creq.req, data, sizeof(srv->creq.req));
	atomic_store(&srv->creq.pending, 1);
	pthread_mutex_unlock(&srv->creq.lock);
	if (srv->tr)
		rps_tr_wake(srv->tr);
}

static void result_hdr(struct rps_server *srv, struct rps_ctlres *res, int status, const char *why)
{
	memset(res, 0, sizeof(*res));
	res->server = atomic_load(&srv->rank);
	res->num_shards = (uint32_t)srv->nshards;
	res->consistency = (uint32_t)srv->opts.consistency;
	res->status = status;
	if (why)
		snprintf(res->why, sizeof(res->why), "%s", why);
}

/* The whole server failed: RESULT with the reason and no shards. */
static void answer_failed(struct rps_server *srv, uint8_t op, uint32_t req_id, int status,
			  const char *why)
{
	struct rps_ctlres res;

	RPS_ERR("%s request: %s", rps_proto_op_name(op), why);
	result_hdr(srv, &res, status, why);
	res.num_shards = 0;
	rps_ctl_send(srv->ctl, op, req_id, 0, RPS_CTLREQ_RESULT, &res, sizeof(res), NULL, 0);
}

static void start(struct rps_server *srv, uint8_t op, uint32_t req_id, const struct rps_ctlreq *r)
{
	char why[200];

	if (srv->creq.active)
		RPS_WARN("%s request abandoned for a newer one (the scheduler gave up on it)",
			 rps_proto_op_name(srv->creq.a_op));
	srv->creq.active = 0;
	if (op == RPS_OP_CHECKPOINT && !srv->ckpt_dir[0]) {
		snprintf(why, sizeof(why),
			 "no checkpoint directory: start the servers with "
			 "RDMAPS_CHECKPOINT_DIR=DIR (or --checkpoint-dir DIR)");
		answer_failed(srv, op, req_id, -ENOTSUP, why);
		return;
	}
	if (++srv->creq.gen == 0)
		srv->creq.gen = 1;
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_ring_entry e;

		rps_srv_ctl_entry(&e, RPS_ENT_CTLREQ, (uint32_t)s, srv->creq.gen);
		e.info.key = op;
		e.info.nelems = r->flags & RPS_CTLREQ_CLOCK ? 1 : 0;
		e.u64 = r->clock;
		if (rps_srv_enqueue(srv, &srv->shards[s], &e)) {
			answer_failed(srv, op, req_id, -ECANCELED, "the server is stopping");
			return;
		}
	}
	RPS_INFO("%s requested%s", rps_proto_op_name(op),
		 r->flags & RPS_CTLREQ_CLOCK ? " for a target clock" : "");
	if (r->flags & RPS_CTLREQ_CLOCK)
		RPS_DEBUG("%s: target clock %u", rps_proto_op_name(op), r->clock);
	srv->creq.active = 1;
	srv->creq.a_op = op;
	srv->creq.a_req_id = req_id;
}

/* EXPORT: one shard's snapshot as DATA frames. 0 or the send's failure. */
static int send_snap(struct rps_server *srv, uint32_t req_id, const struct rps_shard_creq_res *r)
{
	const char *p = r->snap, *end = p + r->snap_len;

	while (p < end) {
		struct rps_export_part part;
		const float *v;

		memcpy(&part, p, sizeof(part));
		v = (const float *)(const void *)(p + sizeof(part));
		for (uint64_t off = 0; off < part.slice_elems;) {
			uint64_t n = RPS_MIN(part.slice_elems - off, RPS_EXPORT_PART_FLOATS);
			int rc;

			part.offset = off;
			part.count = (uint32_t)n;
			rc = rps_ctl_send(srv->ctl, RPS_OP_EXPORT, req_id, 0, RPS_CTLREQ_DATA,
					  &part, sizeof(part), v + off, n * sizeof(float));
			if (rc)
				return rc;
			off += n;
		}
		p += sizeof(part) + part.slice_elems * sizeof(float);
	}
	return 0;
}

/* EXPORT: one shard's table rows as ROWS frames (table_export.c's records
 * cut into pieces of at most RPS_EXPORT_ROWS_BYTES; an empty table: one
 * piece of no row). 0 or the send's failure. */
static int send_rows(struct rps_server *srv, uint32_t req_id, const struct rps_shard_creq_res *r)
{
	const char *p = r->rows_snap, *end = p + r->rows_len;
	char *piece = p < end ? rps_malloc(RPS_EXPORT_ROWS_BYTES) : NULL;
	int rc = 0;

	if (p < end && !piece)
		return -ENOMEM;
	while (p < end && !rc) {
		struct rps_export_rows h;
		const char *ids, *rows;
		uint64_t per;
		size_t rb;

		memcpy(&h, p, sizeof(h));
		rb = (size_t)h.dim * sizeof(float);
		ids = p + sizeof(h);
		rows = ids + (size_t)h.total * 8;
		per = RPS_MAX(1u, RPS_EXPORT_ROWS_BYTES / (8 + rb));
		h.first = 0;
		do {
			uint64_t n = RPS_MIN(h.total - h.first, per);

			h.count = (uint32_t)n;
			memcpy(piece, ids + h.first * 8, n * 8);
			memcpy(piece + n * 8, rows + h.first * rb, n * rb);
			rc = rps_ctl_send(srv->ctl, RPS_OP_EXPORT, req_id, 0, RPS_CTLREQ_ROWS, &h,
					  sizeof(h), piece, n * (8 + rb));
			h.first += n;
		} while (!rc && h.first < h.total);
		p = rows + h.total * rb;
	}
	rps_free(piece);
	return rc;
}

static void finish(struct rps_server *srv)
{
	size_t len =
	    sizeof(struct rps_ctlres) + (size_t)srv->nshards * sizeof(struct rps_ctlres_shard);
	struct rps_ctlres_shard *sr;
	char *buf = rps_calloc(1, len);
	uint8_t op = srv->creq.a_op;
	uint32_t req_id = srv->creq.a_req_id;
	int rc = 0, failed = 0;

	srv->creq.active = 0;
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_shard_creq_res *r = &srv->shards[s].creq_res;

		if (!r->rc && op == RPS_OP_EXPORT && !rc)
			rc = send_snap(srv, req_id, r);
		if (!r->rc && op == RPS_OP_EXPORT && !rc)
			rc = send_rows(srv, req_id, r);
		rps_free(r->snap);
		r->snap = NULL;
		rps_free(r->rows_snap);
		r->rows_snap = NULL;
		failed += r->rc != 0;
		if (!buf)
			continue;
		sr = (struct rps_ctlres_shard *)(void *)(buf + sizeof(struct rps_ctlres)) + s;
		sr->shard = (uint32_t)s;
		sr->status = r->rc;
		sr->clock = r->clock;
		sr->nslices = r->nslices;
		sr->nelems = r->nelems;
		sr->nrows = r->nrows;
		snprintf(sr->text, sizeof(sr->text), "%.*s", (int)sizeof(sr->text) - 1, r->text);
	}
	if (rc) {
		RPS_ERR("%s: sending to the scheduler: %s", rps_proto_op_name(op),
			rps_strerror(rc));
	} else if (!buf) {
		answer_failed(srv, op, req_id, -ENOMEM, "out of memory for the answer");
	} else {
		result_hdr(srv, (struct rps_ctlres *)(void *)buf, 0, NULL);
		rc = rps_ctl_send(srv->ctl, op, req_id, 0, RPS_CTLREQ_RESULT, buf, len, NULL, 0);
		if (failed)
			RPS_WARN("%s: %d of %d shard(s) failed", rps_proto_op_name(op), failed,
				 srv->nshards);
		else
			RPS_INFO("%s: done on %d shard(s)", rps_proto_op_name(op), srv->nshards);
	}
	rps_free(buf);
}

void rps_srv_creq_poll(struct rps_server *srv)
{
	if (atomic_load_explicit(&srv->creq.pending, memory_order_relaxed)) {
		struct rps_ctlreq r;
		uint32_t req_id;
		uint8_t op;

		pthread_mutex_lock(&srv->creq.lock);
		atomic_store(&srv->creq.pending, 0);
		op = srv->creq.op;
		req_id = srv->creq.req_id;
		r = srv->creq.req;
		pthread_mutex_unlock(&srv->creq.lock);
		if (srv->ctl)
			start(srv, op, req_id, &r);
	}
	if (!srv->creq.active)
		return;
	for (int s = 0; s < srv->nshards; s++)
		if (atomic_load_explicit(&srv->shards[s].creq_done, memory_order_acquire) !=
		    srv->creq.gen)
			return;
	finish(srv);
}

void rps_srv_creq_fini(struct rps_server *srv)
{
	for (int s = 0; s < srv->shards_ready; s++) {
		rps_free(srv->shards[s].creq_res.snap);
		srv->shards[s].creq_res.snap = NULL;
		rps_free(srv->shards[s].creq_res.rows_snap);
		srv->shards[s].creq_res.rows_snap = NULL;
	}
	pthread_mutex_destroy(&srv->creq.lock);
}
