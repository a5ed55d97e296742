/* A shard's sparse tables: declare, row pushes and pulls (table.h). Only the
 * update thread touches a shard's tables, so rows are created, updated and
 * read here without locks; the rows' seqlock versions are for one-sided
 * readers (docs/tables.md).
 *
 * Consistency (docs/tables.md):
 *   ASP/SSP: a row push is applied when the update thread takes it, one
 *            optimizer step per row it carries (a row's step count is its own).
 *   BSP:     a row push of clock c is kept; when the shard finishes clock c
 *            (with its dense keys) the gradients of each row are summed in
 *            (worker rank, arrival) order and applied as ONE step.
 *   A pull of min_clock c is answered when the dense condition
 *   (rps_shard_pull_ready) holds; rows it names that do not exist yet are
 *   created then, with their initial value.
 */
#include "server/table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/table.h>

#include "server/pull.h"
#include "src/alloc.h"
#include "src/log.h"
#include "src/optim.h"
#include "src/rowprec.h"

struct rps_shard_table *rps_shard_table_find(const struct rps_shard *sh, uint32_t table)
{
	const struct rps_shard_tables *ts = sh->tables;

	for (uint32_t i = 0; ts && i < ts->n; i++)
		if (ts->t[i]->decl.table == table)
			return ts->t[i];
	return NULL;
}

static struct rps_shard_tables *tables_get(struct rps_shard *sh)
{
	if (!sh->tables)
		sh->tables = rps_calloc(1, sizeof(*sh->tables));
	return sh->tables;
}

int rps_shard_table_declare(struct rps_shard *sh, const struct rps_table_decl *d,
			    const struct rps_optim_opts *optim, char *why, size_t len)
{
	struct rps_shard_table *t = rps_shard_table_find(sh, d->table), **arr;
	struct rps_shard_tables *ts;
	int rc;

	why[0] = 0;
	if (!d->dim || d->dim > RPS_TABLE_MAX_DIM) {
		snprintf(why, len, "table %u: dim %u outside 1..%u", d->table, d->dim,
			 RPS_TABLE_MAX_DIM);
		return -EINVAL;
	}
	if (!rps_row_prec_valid(d->precision)) {
		snprintf(why, len, "table %u: unknown precision %u (fp32 0, fp16 1, bf16 2)",
			 d->table, d->precision);
		return -EINVAL;
	}
	if (d->init > RPS_TABLE_INIT_NORMAL || !isfinite(d->init_scale) || d->init_scale < 0) {
		snprintf(why, len, "table %u: bad initialiser %u scale %g", d->table, d->init,
			 (double)d->init_scale);
		return -EINVAL;
	}
	if (t) {
		if (t->decl.dim != d->dim || t->decl.init != d->init ||
		    t->decl.precision != d->precision ||
		    t->decl.init_scale != d->init_scale || t->decl.seed != d->seed ||
		    !rps_optim_opts_same(&t->optim, optim)) {
			char a[96], b[96];

			rps_optim_describe(&t->optim, a, sizeof(a));
			rps_optim_describe(optim, b, sizeof(b));
			snprintf(why, len,
				 "table %u exists with dim %u %s init %u scale %g seed %llu (%s); "
				 "declared again with dim %u %s init %u scale %g seed %llu (%s)",
				 d->table, t->decl.dim, rps_row_prec_name(t->decl.precision),
				 t->decl.init, (double)t->decl.init_scale,
				 (unsigned long long)t->decl.seed, a, d->dim,
				 rps_row_prec_name(d->precision), d->init, (double)d->init_scale,
				 (unsigned long long)d->seed, b);
			return -EEXIST;
		}
		return 0;
	}
	ts = tables_get(sh);
	t = rps_calloc(1, sizeof(*t));
	arr = ts ? rps_realloc(ts->t, (ts->n + 1) * sizeof(*arr)) : NULL;
	if (arr)
		ts->t = arr;
	if (!t || !arr) {
		rps_free(t);
		snprintf(why, len, "table %u: out of memory", d->table);
		return -ENOMEM;
	}
	rc = rps_rowtab_init(&t->rt, d->table, d->dim, d->init, d->init_scale, d->seed, optim->kind,
			     d->capacity_hint);
	if (!rc)
		rc = rps_rowtab_set_precision(&t->rt, d->precision);
	if (!rc && (sh->p.evict_clocks || sh->p.evict_secs)) /* docs/tables.md "Eviction" */
		rc = rps_rowtab_evict_enable(&t->rt);
	if (!rc && !ts->scratch) {
		ts->scratch = rps_aligned_alloc(64, RPS_TABLE_MAX_DIM * sizeof(float));
		if (!ts->scratch)
			rc = -ENOMEM;
	}
	if (rc) {
		rps_rowtab_fini(&t->rt);
		rps_free(t);
		snprintf(why, len, "table %u: %s", d->table, strerror(-rc));
		return rc;
	}
	t->decl = *d;
	t->decl.shard = sh->p.idx;
	t->optim = *optim;
	ts->t[ts->n++] = t;
	RPS_DEBUG("shard %u: table %u declared, dim %u, %s", sh->p.idx, d->table, d->dim,
		  rps_row_prec_name(d->precision));
	return 0;
}

/* One-sided reads: register the arena chunks the table grew since last
 * time (update thread). A failure is logged once; readers then fall back to
 * frames for rows in unregistered chunks (TABLE_MAP tells them what is). */
static void reg_chunks(struct rps_shard *sh, struct rps_shard_table *t)
{
	size_t bytes = ((size_t)1 << t->rt.chunk_shift) * t->rt.slot_bytes;

	rps_shard_table_reg_index(sh, t); /* after a rehash: the new array */
	if (!sh->read_tr || t->reg_failed)
		return;
	while (t->nreg < t->rt.nchunks) {
		int rc;

		if (t->nreg == t->mrs_cap) {
			uint32_t cap = t->mrs_cap ? t->mrs_cap * 2 : 16;
			struct rps_tr_mr *m = rps_realloc(t->mrs, cap * sizeof(*m));

			if (!m) {
				t->reg_failed = 1;
				return;
			}
			t->mrs = m;
			t->mrs_cap = cap;
		}
		rc = rps_tr_reg_mem(sh->read_tr, t->rt.chunks[t->nreg], bytes,
				    RPS_TR_ACCESS_REMOTE_READ, &t->mrs[t->nreg]);
		if (rc) {
			RPS_ERR("shard %u table %u: register row chunk %u (%zu bytes): %s; rows "
				"from it on are served by frames only",
				sh->p.idx, t->decl.table, t->nreg, bytes, strerror(-rc));
			t->reg_failed = 1;
			return;
		}
		t->nreg++;
	}
}

static void done(struct rps_shard *sh, struct rps_srv_req *req, uint8_t op, int status,
		 uint32_t aux, const void *fixed, size_t flen, const void *data, size_t dlen)
{
	if (req->op == RPS_REQ_ROWS_PULL) {
		rps_free(req->u.rows.ids);
		req->u.rows.ids = NULL;
	} else if (req->op == RPS_REQ_TABLE_DECLARE) {
		rps_free(req->u.tdecl.optim);
		req->u.tdecl.optim = NULL;
	}
	sh->io->rows_done(sh->io_arg, sh, req, op, status, aux, fixed, flen, data, dlen);
}

static void handle_declare(struct rps_shard *sh, struct rps_srv_req *req)
{
	struct rps_table_ack ack = {.table = req->u.tdecl.td.table, .shard = sh->p.idx};
	char why[RPS_DECLARE_REASON_MAX];
	struct rps_shard_table *t;
	int rc =
	    rps_shard_table_declare(sh, &req->u.tdecl.td, req->u.tdecl.optim, why, sizeof(why));

	t = rps_shard_table_find(sh, ack.table);
	ack.rows = t ? rps_rowtab_rows(&t->rt) : 0;
	if (rc)
		RPS_LOG_RATELIMITED(RPS_LOG_WARN, "table declare from worker %u refused: %s",
				    req->worker, why);
	done(sh, req, RPS_OP_TABLE_DECLARE_ACK, rc, 0, &ack, sizeof(ack), rc ? why : NULL,
	     rc ? strnlen(why, sizeof(why)) : 0);
}

/* The table of a rows request, or NULL with *status_p set. */
static struct rps_shard_table *rows_table(struct rps_shard *sh, const struct rps_srv_req *req,
					  int *status_p)
{
	const struct rps_rows *r = &req->u.rows.r;
	struct rps_shard_table *t = rps_shard_table_find(sh, r->table);

	if (!t) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN,
				    "rows of table %u from worker %u: no such table on shard %u "
				    "(declare it first)",
				    r->table, req->worker, sh->p.idx);
		*status_p = -ENOENT;
		return NULL;
	}
	if (t->decl.dim != r->dim) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN,
				    "rows of table %u from worker %u: dim %u, the table's is %u",
				    r->table, req->worker, r->dim, t->decl.dim);
		*status_p = -EINVAL;
		return NULL;
	}
	if (req->op == RPS_REQ_ROWS_PULL && RPS_ROWS_PREC_OF(r->flags) != t->decl.precision) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN,
				    "rows of table %u from worker %u: asked as %s, the table "
				    "stores %s (declare it with the same precision)",
				    r->table, req->worker, rps_row_prec_name(RPS_ROWS_PREC_OF(r->flags)),
				    rps_row_prec_name(t->decl.precision));
		*status_p = -EINVAL;
		return NULL;
	}
	t->rt.now = rps_shard_tables_now(sh); /* what a touch records (eviction) */
	return t;
}

/* One optimizer step of row id with gradient g (scratch). */
static int row_step(struct rps_shard_table *t, uint64_t id, float *g, uint32_t staleness)
{
	int64_t s = rps_rowtab_get(&t->rt, id, NULL);
	uint32_t *step;

	if (s < 0)
		return (int)s;
	step = rps_rowtab_step(&t->rt, (uint64_t)s);
	rps_rowtab_write_begin(&t->rt, (uint64_t)s);
	if (t->rt.prec == RPS_TABLE_FP32) {
		rps_optim_apply(&t->optim, rps_rowtab_data(&t->rt, (uint64_t)s), g,
				rps_rowtab_m(&t->rt, (uint64_t)s), rps_rowtab_v(&t->rt, (uint64_t)s),
				t->decl.dim, *step, staleness);
	} else { /* widen, step in fp32, round to nearest even */
		rps_rowtab_load(&t->rt, (uint64_t)s, t->rt.wide);
		rps_optim_apply(&t->optim, t->rt.wide, g, rps_rowtab_m(&t->rt, (uint64_t)s),
				rps_rowtab_v(&t->rt, (uint64_t)s), t->decl.dim, *step, staleness);
		rps_rowtab_store(&t->rt, (uint64_t)s, t->rt.wide);
	}
	rps_rowtab_write_end(&t->rt, (uint64_t)s);
	rps_rowtab_updated(&t->rt, (uint64_t)s);
	(*step)++;
	return 0;
}

/* BSP: keep the frame's gradients for the clock's end. */
static int pend_add(struct rps_shard_table *t, uint32_t worker, const char *ids, const char *grads,
		    uint32_t n)
{
	size_t row = (size_t)t->decl.dim * sizeof(float);

	if (t->npend + n > t->pend_cap) {
		size_t cap = t->pend_cap ? t->pend_cap : 1024;
		struct rps_row_pend *p;

		while (cap < t->npend + n)
			cap *= 2;
		p = rps_realloc(t->pend, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		t->pend = p;
		t->pend_cap = cap;
	}
	if (t->npend + n > t->grads_cap) {
		size_t cap = t->grads_cap ? t->grads_cap : 1024;
		float *g;

		while (cap < t->npend + n)
			cap *= 2;
		g = rps_realloc(t->pend_grads, cap * row);
		if (!g)
			return -ENOMEM;
		t->pend_grads = g;
		t->grads_cap = cap;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct rps_row_pend *p = &t->pend[t->npend];

		memcpy(&p->id, ids + (size_t)i * 8, 8);
		if (t->rt.evict) { /* a row with a gradient waiting is not idle */
			int64_t s = rps_rowtab_find(&t->rt, p->id);

			if (s >= 0)
				rps_rowtab_touch(&t->rt, (uint64_t)s);
		}
		p->worker = worker;
		p->seq = (uint32_t)t->npend;
		memcpy(t->pend_grads + (size_t)t->npend * t->decl.dim, grads + (size_t)i * row,
		       row);
		t->npend++;
	}
	return 0;
}

static int pend_cmp(const void *a, const void *b)
{
	const struct rps_row_pend *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->worker != y->worker)
		return x->worker < y->worker ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void rps_shard_tables_apply_clock(struct rps_shard *sh, uint64_t c)
{
	struct rps_shard_tables *ts = sh->tables;

	(void)c;
	for (uint32_t k = 0; k < ts->n; k++) {
		struct rps_shard_table *t = ts->t[k];
		uint32_t dim = t->decl.dim;
		size_t i = 0;

		if (!t->npend)
			continue;
		/* the clock's sum is the state of c + 1 */
		t->rt.now = sh->p.evict_secs ? rps_shard_tables_now(sh) : (uint32_t)sh->clock + 1;
		qsort(t->pend, t->npend, sizeof(*t->pend), pend_cmp);
		while (i < t->npend) {
			size_t j = i + 1;
			float *g = ts->scratch;
			int rc;

			memcpy(g, t->pend_grads + (size_t)t->pend[i].seq * dim,
			       dim * sizeof(float));
			for (; j < t->npend && t->pend[j].id == t->pend[i].id; j++) {
				const float *x = t->pend_grads + (size_t)t->pend[j].seq * dim;

				for (uint32_t e = 0; e < dim; e++)
					g[e] += x[e];
			}
			rc = row_step(t, t->pend[i].id, g, 0);
			reg_chunks(sh, t);
			if (rc)
				RPS_LOG_RATELIMITED(
				    RPS_LOG_ERROR, "shard %u table %u: row %llu not updated: %s",
				    sh->p.idx, t->decl.table, (unsigned long long)t->pend[i].id,
				    strerror(-rc));
			i = j;
		}
		t->npend = 0;
	}
	ts->redo = 1;
}

static void handle_push(struct rps_shard *sh, struct rps_srv_req *req)
{
	const struct rps_rows *r = &req->u.rows.r;
	struct rps_shard_tables *ts = sh->tables;
	uint32_t w = req->worker;
	int status = req->status;
	struct rps_shard_table *t;

	if (sh->p.consistency == RPS_BSP && r->clock > sh->clock && w < sh->p.nworkers &&
	    sh->live[w]) {
		/* a push for a later clock: keep it until the shard gets there */
		req->next = NULL;
		if (ts->deferred_tail)
			ts->deferred_tail->next = req;
		else
			ts->deferred = req;
		ts->deferred_tail = req;
		return;
	}
	t = status ? NULL : rows_table(sh, req, &status);
	if (t) {
		const char *ids = (const char *)req->data;
		const char *grads = ids + (size_t)r->count * 8;
		size_t row = (size_t)r->dim * sizeof(float);

		t->pushes++;
		if (sh->p.consistency == RPS_BSP) {
			status = pend_add(t, w, ids, grads, r->count);
		} else {
			uint32_t stale =
			    sh->clock > r->clock ? (uint32_t)(sh->clock - r->clock) : 0;

			for (uint32_t i = 0; i < r->count && !status; i++) {
				uint64_t id;

				memcpy(&id, ids + (size_t)i * 8, 8);
				memcpy(ts->scratch, grads + i * row, row);
				status = row_step(t, id, ts->scratch, stale);
			}
			reg_chunks(sh, t);
		}
		atomic_fetch_add_explicit(&sh->pushes_applied, 1, memory_order_relaxed);
	}
	rps_shard_count_push(sh, w, r->clock, status);
	done(sh, req, RPS_OP_ROWS_PUSH_ACK, status, 0, NULL, 0, NULL, 0);
	rps_shard_push_progress(sh, w);
}

static int send_room(struct rps_shard_tables *ts, size_t bytes)
{
	char *b;

	if (bytes <= ts->send_cap)
		return 0;
	b = rps_realloc(ts->sendbuf, bytes);
	if (!b)
		return -ENOMEM;
	ts->sendbuf = b;
	ts->send_cap = bytes;
	return 0;
}

/* Answer a pull whose condition holds (rows created as needed). */
static void pull_answer(struct rps_shard *sh, struct rps_shard_table *t, struct rps_srv_req *req)
{
	struct rps_shard_tables *ts = sh->tables;
	struct rps_rows r = req->u.rows.r;
	size_t row = (size_t)r.dim * t->rt.eb; /* stored precision (rows_table checked) */
	uint32_t aux = (uint32_t)rps_store_clock(&sh->store);
	int slots = !!(r.flags & RPS_ROWS_FLAG_SLOTS);
	size_t dlen = (size_t)r.count * (row + (slots ? 4 : 0));
	int rc = send_room(ts, dlen + 1);

	for (uint32_t i = 0; i < r.count && !rc; i++) {
		int created;
		int64_t s = rps_rowtab_get(&t->rt, req->u.rows.ids[i], &created);

		if (s < 0) {
			rc = (int)s;
			break;
		}
		t->rows_created += (uint64_t)created;
		rps_rowtab_touch(&t->rt, (uint64_t)s);
		memcpy(ts->sendbuf + i * row, rps_rowtab_raw(&t->rt, (uint64_t)s), row);
		if (slots) {
			uint32_t s32 = (uint32_t)s;

			memcpy(ts->sendbuf + (size_t)r.count * row + (size_t)i * 4, &s32, 4);
		}
	}
	t->pulls++;
	reg_chunks(sh, t);
	if (rc) {
		RPS_LOG_RATELIMITED(RPS_LOG_ERROR, "shard %u table %u: pull of %u rows: %s",
				    sh->p.idx, r.table, r.count, strerror(-rc));
		done(sh, req, RPS_OP_ROWS_PULL_RESP, rc, aux, &r, sizeof(r), NULL, 0);
		return;
	}
	done(sh, req, RPS_OP_ROWS_PULL_RESP, 0, aux, &r, sizeof(r), ts->sendbuf, dlen);
}

/* TABLE_MAP: the registered chunks from `first` on. */
static void handle_map(struct rps_shard *sh, struct rps_srv_req *req)
{
	struct rps_shard_tables *ts = sh->tables;
	struct rps_table_map m = req->u.tmap;
	struct rps_shard_table *t = rps_shard_table_find(sh, m.table);
	struct rps_table_chunk *c;
	struct rps_table_index ix;
	uint32_t n;

	if (!t || !sh->read_tr) {
		done(sh, req, RPS_OP_TABLE_MAP_RESP, t ? -EOPNOTSUPP : -ENOENT, 0, &m, sizeof(m),
		     NULL, 0);
		return;
	}
	reg_chunks(sh, t); /* rows restored from a checkpoint, for instance */
	n = t->nreg > m.first ? t->nreg - m.first : 0;
	if (n > RPS_TABLE_MAP_MAX)
		n = RPS_TABLE_MAP_MAX;
	if (send_room(ts, (size_t)n * sizeof(*c) + sizeof(ix))) {
		done(sh, req, RPS_OP_TABLE_MAP_RESP, -ENOMEM, 0, &m, sizeof(m), NULL, 0);
		return;
	}
	c = (struct rps_table_chunk *)ts->sendbuf;
	for (uint32_t i = 0; i < n; i++) {
		c[i].addr = t->mrs[m.first + i].remote_addr;
		c[i].remote_key = t->mrs[m.first + i].remote_key;
		c[i].reserved = 0;
		/* read access for the asking connection only (docs/rdma.md) */
		if (rps_srv_req_grant(req, &t->mrs[m.first + i], &c[i].remote_key)) {
			done(sh, req, RPS_OP_TABLE_MAP_RESP, -ENOMEM, 0, &m, sizeof(m), NULL, 0);
			return;
		}
	}
	m.count = n;
	m.nchunks = t->nreg;
	m.chunk_shift = t->rt.chunk_shift;
	m.slot_bytes = t->rt.slot_bytes;
	m.dim = t->decl.dim;
	rps_shard_table_index_desc(t, &ix); /* the row index, after the chunks */
	/* the index too is read through the asking connection's own window
	 * (RDMAPS_RDMA_MW): the region's key reads nothing then */
	if ((ix.flags & RPS_TABLE_INDEX_READABLE) &&
	    rps_srv_req_grant(req, &t->ixmrs[t->nixreg - 1], &ix.remote_key)) {
		done(sh, req, RPS_OP_TABLE_MAP_RESP, -ENOMEM, 0, &m, sizeof(m), NULL, 0);
		return;
	}
	memcpy(ts->sendbuf + (size_t)n * sizeof(*c), &ix, sizeof(ix));
	done(sh, req, RPS_OP_TABLE_MAP_RESP, 0, 0, &m, sizeof(m), c,
	     (size_t)n * sizeof(*c) + sizeof(ix));
}

static void handle_pull(struct rps_shard *sh, struct rps_srv_req *req)
{
	struct rps_shard_tables *ts = sh->tables;
	int status = 0;
	struct rps_shard_table *t = rows_table(sh, req, &status);

	if (!t) {
		done(sh, req, RPS_OP_ROWS_PULL_RESP, status, 0, &req->u.rows.r,
		     sizeof(req->u.rows.r), NULL, 0);
		return;
	}
	if (!rps_shard_pull_ready(sh, req->u.rows.r.clock, req->worker)) {
		req->next = NULL;
		if (ts->parked_tail)
			ts->parked_tail->next = req;
		else
			ts->parked = req;
		ts->parked_tail = req;
		atomic_fetch_add_explicit(&sh->pulls_parked, 1, memory_order_relaxed);
		return;
	}
	pull_answer(sh, t, req);
}

void rps_shard_table_handle(struct rps_shard *sh, struct rps_srv_req *req)
{
	if (!tables_get(sh)) {
		done(sh, req,
		     req->op == RPS_REQ_TABLE_DECLARE ? RPS_OP_TABLE_DECLARE_ACK
		     : req->op == RPS_REQ_ROWS_PUSH   ? RPS_OP_ROWS_PUSH_ACK
		     : req->op == RPS_REQ_TABLE_MAP   ? RPS_OP_TABLE_MAP_RESP
						      : RPS_OP_ROWS_PULL_RESP,
		     -ENOMEM, 0, NULL, 0, NULL, 0);
		return;
	}
	switch (req->op) {
	case RPS_REQ_TABLE_DECLARE:
		handle_declare(sh, req);
		break;
	case RPS_REQ_ROWS_PUSH:
		handle_push(sh, req);
		break;
	case RPS_REQ_ROWS_PULL:
		handle_pull(sh, req);
		break;
	case RPS_REQ_TABLE_MAP:
		handle_map(sh, req);
		break;
	default:
		RPS_ERR("shard %u: table request of unknown kind %u dropped", sh->p.idx, req->op);
		break;
	}
}

void rps_shard_tables_after(struct rps_shard *sh)
{
	struct rps_shard_tables *ts = sh->tables;

	while (ts->redo && ts->deferred) {
		struct rps_srv_req *r = ts->deferred;

		ts->redo = 0;
		ts->deferred = ts->deferred_tail = NULL;
		while (r) {
			struct rps_srv_req *n = r->next;

			handle_push(sh, r);
			r = n;
		}
	}
	ts->redo = 0;
	rps_shard_tables_evict_tick(sh);
	if (ts->parked) {
		struct rps_srv_req *r = ts->parked, *keep = NULL, *keep_tail = NULL;

		ts->parked = ts->parked_tail = NULL;
		while (r) {
			struct rps_srv_req *n = r->next;
			int status = 0;
			struct rps_shard_table *t;

			r->next = NULL;
			if (!rps_shard_pull_ready(sh, r->u.rows.r.clock, r->worker)) {
				if (keep_tail)
					keep_tail->next = r;
				else
					keep = r;
				keep_tail = r;
			} else if ((t = rows_table(sh, r, &status))) {
				pull_answer(sh, t, r);
			} else {
				done(sh, r, RPS_OP_ROWS_PULL_RESP, status, 0, &r->u.rows.r,
				     sizeof(r->u.rows.r), NULL, 0);
			}
			r = n;
		}
		/* answers above may not park: keep the order of the rest */
		if (keep) {
			keep_tail->next = ts->parked;
			ts->parked = keep;
			if (!ts->parked_tail)
				ts->parked_tail = keep_tail;
		}
	}
}

void rps_shard_tables_stop(struct rps_shard *sh)
{
	struct rps_shard_tables *ts = sh->tables;
	struct rps_srv_req *r;

	for (uint32_t i = 0; i < ts->n; i++) {
		struct rps_shard_table *t = ts->t[i];

		for (uint32_t c = 0; sh->read_tr && c < t->nreg; c++)
			rps_tr_dereg_mem(sh->read_tr, &t->mrs[c]);
		t->nreg = 0;
		rps_shard_table_index_stop(sh, t);
	}

	r = ts->deferred;
	ts->deferred = ts->deferred_tail = NULL;
	while (r) {
		struct rps_srv_req *n = r->next;

		done(sh, r, RPS_OP_ROWS_PUSH_ACK, -ECANCELED, 0, NULL, 0, NULL, 0);
		r = n;
	}
	r = ts->parked;
	ts->parked = ts->parked_tail = NULL;
	while (r) {
		struct rps_srv_req *n = r->next;

		done(sh, r, RPS_OP_ROWS_PULL_RESP, -ECANCELED, 0, &r->u.rows.r, sizeof(r->u.rows.r),
		     NULL, 0);
		r = n;
	}
}

void rps_shard_tables_fini(struct rps_shard *sh)
{
	struct rps_shard_tables *ts = sh->tables;

	if (!ts)
		return;
	for (uint32_t i = 0; i < ts->n; i++) {
		rps_rowtab_fini(&ts->t[i]->rt);
		rps_free(ts->t[i]->mrs);
		rps_free(ts->t[i]->pend);
		rps_free(ts->t[i]->pend_grads);
		rps_free(ts->t[i]);
	}
	rps_free(ts->t);
	rps_free(ts->scratch);
	rps_free(ts->sendbuf);
	rps_free(ts);
	sh->tables = NULL;
}
