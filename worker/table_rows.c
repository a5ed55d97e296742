/* Sparse tables: pull_rows / push_rows as batched row frames
 * (include/rdmaps/table.h, docs/tables.md).
 *
 * A call sorts its ids by (shard, id): each shard gets its distinct ids in
 * frames of at most what its server takes (max_msg); a pull's answer row is
 * copied to every position that asked for its id, a push sends each distinct
 * id once with the sum of its gradients (in position order). Everything the
 * frames point at lives in one batch allocation, freed when the request
 * completes (the pieces of a request are never detached before their
 * connection's end, so nothing writes into a freed batch).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/rowinit.h"
#include "src/rowprec.h"
#include "src/util.h"
#include "worker/table.h"
#include "worker/worker_int.h"

struct item {
	uint64_t id;
	uint32_t g; /* server * RPS_MAX_SHARDS + shard */
	uint32_t i; /* position in the call */
};

struct batch {
	rps_done_cb cb; /* the caller's (async forms) */
	void *arg;
	uint64_t *uid;	  /* distinct ids, by (shard, id) */
	uint32_t *ustart; /* nu + 1 */
	uint32_t *pos;	  /* n positions, grouped by distinct id */
	float *ugrads;	  /* push: nu * dim sums */
	size_t nu;
	struct rps_wtrows v; /* the view the frames take */
};

static int item_cmp(const void *a, const void *b)
{
	const struct item *x = a, *y = b;

	if (x->g != y->g)
		return x->g < y->g ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static void batch_free(struct batch *b)
{
	if (!b)
		return;
	rps_free(b->uid);
	rps_free(b->ustart);
	rps_free(b->pos);
	rps_free(b->ugrads);
	rps_free(b);
}

static void batch_done(int status, void *arg)
{
	struct batch *b = arg;
	rps_done_cb cb = b->cb;
	void *cb_arg = b->arg;

	batch_free(b);
	cb(status, cb_arg);
}

/* Check a call's arguments: 0 with *dim_p, or -EINVAL / -ENOENT logged. */
static int rows_check(struct rps_worker *w, const char *what, rps_table_t table,
		      const uint64_t *ids, size_t n, const void *buf, const char *bufname,
		      uint32_t *dim_p, uint32_t *prec_p)
{
	struct rps_table_spec s;

	if (!w) {
		RPS_ERR("%s: worker is NULL", what);
		return -EINVAL;
	}
	if (rps_wtable_get(w, table, &s)) {
		RPS_ERR("%s: table %u is not declared through this worker "
			"(rps_worker_declare_table first)",
			what, table);
		return -ENOENT;
	}
	if (!n || n > RPS_TABLE_MAX_BATCH) {
		RPS_ERR("%s: table %u: n = %zu ids, must be 1..%u (split larger batches)", what,
			table, n, RPS_TABLE_MAX_BATCH);
		return -EINVAL;
	}
	if (!ids || !buf) {
		RPS_ERR("%s: table %u: %s is NULL", what, table, !ids ? "ids" : bufname);
		return -EINVAL;
	}
	*dim_p = s.dim;
	*prec_p = s.precision;
	return 0;
}

/* Sort ids by (shard, id) into b: distinct ids, their position ranges;
 * push: the summed gradients. */
static int batch_build(struct rps_worker *w, rps_table_t table, const uint64_t *ids, size_t n,
		       uint32_t dim, const float *grads, struct batch *b)
{
	struct item *it = rps_malloc(n * sizeof(*it));
	size_t nu = 0;

	b->uid = rps_malloc(n * sizeof(*b->uid));
	b->ustart = rps_malloc((n + 1) * sizeof(*b->ustart));
	b->pos = rps_malloc(n * sizeof(*b->pos));
	if (grads)
		b->ugrads = rps_malloc(n * (size_t)dim * sizeof(float));
	if (!it || !b->uid || !b->ustart || !b->pos || (grads && !b->ugrads)) {
		rps_free(it);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t h = rps_row_hash(table, ids[i]) >> 32;
		uint32_t srv = (uint32_t)(h % w->num_servers);
		uint32_t sh = (uint32_t)((h / w->num_servers) % w->servers[srv].nshards);

		it[i].id = ids[i];
		it[i].g = srv * RPS_MAX_SHARDS + sh;
		it[i].i = (uint32_t)i;
	}
	qsort(it, n, sizeof(*it), item_cmp);
	for (size_t k = 0; k < n; k++) {
		if (!k || it[k].id != it[k - 1].id || it[k].g != it[k - 1].g) {
			b->uid[nu] = it[k].id;
			b->ustart[nu] = (uint32_t)k;
			if (grads)
				memcpy(b->ugrads + nu * dim, grads + (size_t)it[k].i * dim,
				       dim * sizeof(float));
			nu++;
		} else if (grads) {
			float *s = b->ugrads + (nu - 1) * dim;
			const float *g = grads + (size_t)it[k].i * dim;

			for (uint32_t e = 0; e < dim; e++)
				s[e] += g[e];
		}
		b->pos[k] = it[k].i;
	}
	b->ustart[nu] = (uint32_t)n;
	b->nu = nu;
	b->v.uid = b->uid;
	b->v.ustart = b->ustart;
	b->v.uend = b->ustart + 1;
	b->v.pos = b->pos;
	b->v.ugrads = b->ugrads;
	b->v.nu = nu;
	rps_free(it);
	return 0;
}

uint32_t rps_wtable_group(struct rps_worker *w, rps_table_t table, uint64_t id)
{
	uint64_t h = rps_row_hash(table, id) >> 32;
	uint32_t srv = (uint32_t)(h % w->num_servers);

	return srv * RPS_MAX_SHARDS + (uint32_t)((h / w->num_servers) % w->servers[srv].nshards);
}

void rps_wtable_post_frames(struct rps_worker *w, struct rps_req *req, rps_table_t table,
			    uint32_t dim, const struct rps_wtrows *b, float *out, int push,
			    uint32_t clock, uint32_t flags)
{
	size_t u = 0;

	while (u < b->nu) {
		uint32_t g = rps_wtable_group(w, table, b->uid[u]);
		uint32_t si = g / RPS_MAX_SHARDS, shi = g % RPS_MAX_SHARDS;
		struct rps_wserver *srv = &w->servers[si];
		/* what one frame may carry each way (server's max_msg, the transport's
		 * frame, our receive limit): the dense planner's element counts */
		uint64_t push_bytes =
		    srv->push_elems * 4 + sizeof(struct rps_push) - sizeof(struct rps_rows);
		uint64_t pull_bytes = srv->pull_elems * 4;
		uint64_t fmax = push ? push_bytes / (8ull + 4ull * dim)
				     : RPS_MIN(pull_bytes / (4ull * dim + (flags & RPS_ROWS_FLAG_SLOTS ? 4u : 0u)),
					       push_bytes / 8ull); /* SLOTS: a slot word per row */
		size_t end = u, cnt;
		struct rps_piece *p;

		if (fmax < 1)
			fmax = 1;
		if (fmax > RPS_ROWS_FRAME_MAX)
			fmax = RPS_ROWS_FRAME_MAX;
		while (end < b->nu && end - u < fmax &&
		       rps_wtable_group(w, table, b->uid[end]) == g)
			end++;
		cnt = end - u;
		pthread_mutex_lock(&w->core.lock);
		p = rps_piece_alloc_locked(&w->core, req, RPS_PK_ROWS, RPS_PW_RESP);
		if (!p) {
			rps_wreq_fail_locked(req, -ENOMEM);
			pthread_mutex_unlock(&w->core.lock);
			return;
		}
		p->conn = srv->shards[shi].conn;
		p->server = si;
		p->shard = shi;
		memset(&p->u.rows, 0, sizeof(p->u.rows));
		p->u.rows.op = push ? RPS_OP_ROWS_PUSH : RPS_OP_ROWS_PULL;
		p->u.rows.r.table = table;
		p->u.rows.r.shard = shi;
		p->u.rows.r.count = (uint32_t)cnt;
		p->u.rows.r.dim = dim;
		p->u.rows.r.clock = clock;
		p->u.rows.r.flags = flags;
		p->u.rows.ids = b->uid + u;
		if (push) {
			p->u.rows.grads = b->ugrads + u * dim;
			p->u.rows.r.timestamp_ns = rps_wall_ns();
			srv->shards[shi].pushes++;
		} else {
			p->u.rows.ustart = b->ustart + u;
			p->u.rows.uend = b->uend + u;
			p->u.rows.pos = b->pos;
			p->u.rows.out = out;
			if (flags & RPS_ROWS_FLAG_SLOTS)
				p->u.rows.cache = rps_wtshard_get(w, table, si, shi);
		}
		pthread_mutex_unlock(&w->core.lock);
		if (push) {
			atomic_fetch_add_explicit(&w->stat_pushes, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&w->stat_bytes_out, cnt * dim * sizeof(float),
						  memory_order_relaxed);
		} else {
			atomic_fetch_add_explicit(&w->stat_pulls, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&w->stat_row_frames, 1, memory_order_relaxed);
		}
		rps_wtable_post(w, p);
		u = end;
	}
}

void rps_wtable_post(struct rps_worker *w, struct rps_piece *p)
{
	struct rps_wconn *wc = p->conn;
	uint32_t id = rps_piece_reqid(p);
	struct rps_frame_hdr h;
	struct rps_optim_wire spec;
	struct rps_table_map map;
	struct rps_rows r = p->u.rows.r;
	struct iovec iov[3];
	uint8_t op = p->u.rows.op;
	int cnt, rc;

	rc = rps_wconn_dead(wc);
	if (rc)
		goto err;
	if (op == RPS_OP_TABLE_MAP) {
		memset(&map, 0, sizeof(map));
		map.table = r.table;
		map.shard = r.shard;
		map.first = r.count;
		iov[0].iov_base = &map;
		iov[0].iov_len = sizeof(map);
		cnt = 1;
	} else if (op == RPS_OP_TABLE_DECLARE) {
		rps_optim_wire_encode(p->u.rows.optim, &spec);
		iov[0].iov_base = (void *)p->u.rows.decl;
		iov[0].iov_len = sizeof(*p->u.rows.decl);
		iov[1].iov_base = &spec;
		iov[1].iov_len = sizeof(spec);
		cnt = 2;
	} else {
		iov[0].iov_base = &r;
		iov[0].iov_len = sizeof(r);
		iov[1].iov_base = (void *)p->u.rows.ids;
		iov[1].iov_len = (size_t)r.count * 8;
		cnt = 2;
		if (op == RPS_OP_ROWS_PUSH) {
			iov[2].iov_base = (void *)p->u.rows.grads;
			iov[2].iov_len = (size_t)r.count * r.dim * sizeof(float);
			cnt = 3;
		}
	}
	rps_proto_hdr_init(&h, op, 0, id);
	for (int i = 0; i < cnt; i++)
		h.len += (uint32_t)iov[i].iov_len;
	rc = rps_tr_post_send(wc->c, &h, iov, cnt, 0); /* by copy: ctx 0 */
	if (!rc)
		return;
	if (rc != -ECONNRESET)
		RPS_ERR("server %u channel %u: send %s: %s", wc->srv->rank, wc->channel,
			rps_proto_op_name(op), rps_strerror(rc));
err:
	pthread_mutex_lock(&w->core.lock);
	if (rps_piece_by_reqid(&w->core, id) == p && p->kind == RPS_PK_ROWS) {
		if (op == RPS_OP_ROWS_PUSH) {
			struct rps_wshard *sh = rps_wshard_get(w, p->server, p->shard);

			/* the frame never left: do not count it in the CLOCK */
			if (r.clock == atomic_load(&w->clock) && sh->pushes)
				sh->pushes--;
		}
		rps_piece_clear_locked(&w->core, p, RPS_PW_ALL, rc);
	}
	rps_wcore_unlock(&w->core);
}

static void clock_seen_max(_Atomic uint32_t *a, uint32_t v)
{
	uint32_t cur = atomic_load(a);

	while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

void rps_wtable_recv_locked(struct rps_worker *w, struct rps_wconn *wc,
			    const struct rps_tr_event *ev)
{
	const struct rps_frame_hdr *h = &ev->hdr;
	struct rps_piece *p = rps_piece_by_reqid(&w->core, h->req_id);
	int st = h->status > 0 ? -EPROTO : h->status;
	uint8_t want = h->op == RPS_OP_TABLE_DECLARE_ACK ? RPS_OP_TABLE_DECLARE
		       : h->op == RPS_OP_ROWS_PUSH_ACK	 ? RPS_OP_ROWS_PUSH
		       : h->op == RPS_OP_TABLE_MAP_RESP	 ? RPS_OP_TABLE_MAP
							 : RPS_OP_ROWS_PULL;

	if (!p || p->kind != RPS_PK_ROWS || p->conn != wc || !(p->waits & RPS_PW_RESP) ||
	    p->u.rows.op != want) {
		RPS_DEBUG("server %u: stale %s for request %#x", wc->srv->rank,
			  rps_proto_op_name(h->op), h->req_id);
		return;
	}
	if (h->op == RPS_OP_TABLE_MAP_RESP) {
		if (!st)
			rps_wtable_map_recv_locked(w, p, ev);
	} else if (h->op == RPS_OP_TABLE_DECLARE_ACK && !st && ev->fixed && p->u.rows.rows_out) {
		const struct rps_table_ack *a = ev->fixed;

		*p->u.rows.rows_out += a->rows;
	} else if (h->op == RPS_OP_TABLE_DECLARE_ACK && st && ev->data_len && ev->data) {
		char why[RPS_LOG_ESC_BUF];

		RPS_ERR("server %u: table %u refused (%s): %s", wc->srv->rank,
			p->u.rows.decl->table, rps_strerror(st),
			rps_log_escape(ev->data, RPS_MIN(ev->data_len, RPS_DECLARE_REASON_MAX), why,
				       sizeof(why)));
	} else if (h->op == RPS_OP_ROWS_PULL_RESP && !st) {
		const struct rps_rows *f = ev->fixed;
		const struct rps_rows *mine = &p->u.rows.r;
		uint32_t prec = RPS_ROWS_PREC_OF(mine->flags); /* rows as stored */
		size_t row = (size_t)mine->dim * rps_row_elem_bytes(prec);
		int slots = !!(mine->flags & RPS_ROWS_FLAG_SLOTS);

		if (!f || f->table != mine->table || f->count != mine->count ||
		    f->dim != mine->dim || f->flags != mine->flags || !ev->data ||
		    ev->data_len != mine->count * (row + (slots ? 4u : 0u))) {
			RPS_ERR("server %u: rows answer does not match table %u (%u rows)",
				wc->srv->rank, mine->table, mine->count);
			st = -EPROTO;
		} else {
			const char *src = ev->data;
			const uint32_t *us = p->u.rows.ustart, *ue = p->u.rows.uend;

			for (uint32_t j = 0; j < mine->count; j++)
				for (uint32_t k = us[j]; k < ue[j]; k++)
					rps_row_widen(prec, src + j * row,
						      p->u.rows.out +
							  (size_t)p->u.rows.pos[k] * mine->dim,
						      mine->dim);
			if (slots && p->u.rows.cache)
				rps_wtshard_learn(p->u.rows.cache, p->u.rows.ids,
						  src + (size_t)mine->count * row, mine->count);
			clock_seen_max(&rps_wshard_get(w, p->server, p->shard)->clock_seen, h->aux);
			atomic_fetch_add_explicit(&w->stat_bytes_in, mine->count * row,
						  memory_order_relaxed);
		}
	} else if (st && h->op != RPS_OP_TABLE_DECLARE_ACK) {
		RPS_ERR("server %u: %s of table %u refused: %s", wc->srv->rank,
			h->op == RPS_OP_ROWS_PUSH_ACK ? "row push" : "row pull", p->u.rows.r.table,
			rps_strerror(st));
	}
	rps_piece_clear_locked(&w->core, p, RPS_PW_RESP, st);
}

/* ---- the public calls ---- */

static int rows_call(struct rps_worker *w, rps_table_t table, const uint64_t *ids, size_t n,
		     float *out, const float *grads, int push, rps_done_cb cb, void *arg)
{
	const char *what = push ? "push_rows" : "pull_rows";
	struct batch *b;
	struct rps_req *req;
	uint32_t dim, prec, clock;
	int rc = rows_check(w, what, table, ids, n, push ? (const void *)grads : out,
			    push ? "grads" : "out", &dim, &prec);

	if (rc)
		return rc;
	rc = rps_wready(w);
	if (rc)
		return rc;
	b = rps_calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	rc = batch_build(w, table, ids, n, dim, grads, b);
	if (rc) {
		batch_free(b);
		return rc;
	}
	b->cb = cb;
	b->arg = arg;
	req = rps_wreq_new(&w->core, cb ? batch_done : NULL, cb ? b : NULL);
	if (!req) {
		batch_free(b);
		return -ENOMEM;
	}
	if (push)
		pthread_rwlock_rdlock(&w->clock_rw); /* the pushes count in this clock */
	clock = atomic_load(&w->clock);
	if (!push && !cb && rps_wtable_reads_on(w)) {
		/* one-sided reads of the rows seen before, frames for the rest */
		rps_wreq_seal(req);
		rc = rps_req_wait(req, -1); /* an empty request: completes at once */
		rc = rps_wtable_read_pull(w, table, dim, prec, &b->v, out, clock);
		batch_free(b);
		return rc;
	}
	rps_wsubmit_enter(w);
	/* a pull names the table's precision: the answer's rows are in it */
	rps_wtable_post_frames(w, req, table, dim, &b->v, out, push, clock,
			       push ? 0 : RPS_ROWS_FLAG_PREC(prec));
	rps_wsubmit_leave(w);
	if (push)
		pthread_rwlock_unlock(&w->clock_rw);
	rps_wreq_seal(req);
	if (cb)
		return 0;
	rc = rps_req_wait(req, -1);
	batch_free(b);
	return rc;
}

int rps_worker_pull_rows(struct rps_worker *w, rps_table_t table, const uint64_t *ids, size_t n,
			 float *out)
{
	return rows_call(w, table, ids, n, out, NULL, 0, NULL, NULL);
}

int rps_worker_push_rows(struct rps_worker *w, rps_table_t table, const uint64_t *ids, size_t n,
			 const float *grads)
{
	return rows_call(w, table, ids, n, NULL, grads, 1, NULL, NULL);
}

int rps_worker_pull_rows_cb(struct rps_worker *w, rps_table_t table, const uint64_t *ids, size_t n,
			    float *out, rps_done_cb cb, void *arg)
{
	if (!cb) {
		RPS_ERR("pull_rows_cb: table %u: cb is NULL", table);
		return -EINVAL;
	}
	return rows_call(w, table, ids, n, out, NULL, 0, cb, arg);
}

int rps_worker_push_rows_cb(struct rps_worker *w, rps_table_t table, const uint64_t *ids, size_t n,
			    const float *grads, rps_done_cb cb, void *arg)
{
	if (!cb) {
		RPS_ERR("push_rows_cb: table %u: cb is NULL", table);
		return -EINVAL;
	}
	return rows_call(w, table, ids, n, NULL, grads, 1, cb, arg);
}
