/* Sparse tables: specs, the tables declared through this worker, and
 * rps_worker_declare_table (include/rdmaps/table.h). */
#include "worker/table.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <rdmaps/optim.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/optim.h"
#include "worker/worker_int.h"

void rps_table_spec_init(struct rps_table_spec *spec)
{
	if (!spec)
		return;
	memset(spec, 0, sizeof(*spec));
	spec->precision = RPS_TABLE_FP32;
	spec->init = RPS_TABLE_INIT_UNIFORM;
	spec->init_scale = 0.01f;
	rps_optim_opts_init(&spec->optim);
}

int rps_wtable_resolve(const struct rps_table_spec *in_p, struct rps_table_spec *out)
{
	const struct rps_table_spec copy = *in_p, *in = &copy; /* out may be in_p */
	uint64_t m = in->field_mask;

	rps_table_spec_init(out);
	if (m & ~RPS_TABLE_SPEC_ALL) {
		RPS_ERR("table spec: unknown field_mask bits %#llx (RPS_TABLE_SPEC_* only)",
			(unsigned long long)(m & ~RPS_TABLE_SPEC_ALL));
		return -EINVAL;
	}
	if (!(m & RPS_TABLE_SPEC_DIM)) {
		RPS_ERR("table spec: dim not set (set spec.dim and RPS_TABLE_SPEC_DIM)");
		return -EINVAL;
	}
	out->dim = in->dim;
	if (m & RPS_TABLE_SPEC_PRECISION)
		out->precision = in->precision;
	if (m & RPS_TABLE_SPEC_INIT)
		out->init = in->init;
	if (m & RPS_TABLE_SPEC_INIT_SCALE)
		out->init_scale = in->init_scale;
	if (m & RPS_TABLE_SPEC_SEED)
		out->seed = in->seed;
	if (m & RPS_TABLE_SPEC_OPTIM)
		out->optim = in->optim;
	if (m & RPS_TABLE_SPEC_CAPACITY_HINT)
		out->capacity_hint = in->capacity_hint;
	out->field_mask = RPS_TABLE_SPEC_ALL;
	if (!out->dim || out->dim > RPS_TABLE_MAX_DIM) {
		RPS_ERR("table spec: dim %u outside 1..%u", out->dim, RPS_TABLE_MAX_DIM);
		return -EINVAL;
	}
	if (out->precision != RPS_TABLE_FP32 && out->precision != RPS_TABLE_FP16 &&
	    out->precision != RPS_TABLE_BF16) {
		RPS_ERR("table spec: unknown precision %u (RPS_TABLE_FP32, _FP16, _BF16)",
			out->precision);
		return -EINVAL;
	}
	if (out->init > RPS_TABLE_INIT_NORMAL) {
		RPS_ERR("table spec: unknown init %u (RPS_TABLE_INIT_ZERO, _UNIFORM, _NORMAL)",
			out->init);
		return -EINVAL;
	}
	if (!isfinite(out->init_scale) || out->init_scale < 0) {
		RPS_ERR("table spec: init_scale %g must be finite and >= 0",
			(double)out->init_scale);
		return -EINVAL;
	}
	if (rps_optim_opts_validate(&out->optim)) {
		RPS_ERR("table spec: optimizer refused (reason above)");
		return -EINVAL;
	}
	return 0;
}

static struct rps_wtables *tables_of(struct rps_worker *w)
{
	struct rps_wtables *ts;

	pthread_mutex_lock(&w->core.lock);
	ts = w->tables;
	if (!ts) {
		ts = rps_calloc(1, sizeof(*ts));
		if (ts) {
			pthread_mutex_init(&ts->lock, NULL);
			w->tables = ts;
		}
	}
	pthread_mutex_unlock(&w->core.lock);
	return ts;
}

int rps_wtable_get(struct rps_worker *w, rps_table_t table, struct rps_table_spec *spec_p)
{
	struct rps_wtables *ts = tables_of(w);
	int rc = -ENOENT;

	if (!ts)
		return -ENOMEM;
	pthread_mutex_lock(&ts->lock);
	for (uint32_t i = 0; i < ts->n; i++)
		if (ts->t[i].table == table) {
			if (spec_p)
				*spec_p = ts->t[i].spec;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&ts->lock);
	return rc;
}

int rps_wtable_add(struct rps_worker *w, rps_table_t table, const struct rps_table_spec *spec)
{
	struct rps_wtables *ts = tables_of(w);
	int rc = 0;

	if (!ts)
		return -ENOMEM;
	pthread_mutex_lock(&ts->lock);
	for (uint32_t i = 0; i < ts->n; i++)
		if (ts->t[i].table == table)
			goto out; /* another thread declared it meanwhile */
	if (ts->n == ts->cap) {
		uint32_t cap = ts->cap ? ts->cap * 2 : 8;
		struct rps_wtable *t = rps_realloc(ts->t, cap * sizeof(*t));

		if (!t) {
			rc = -ENOMEM;
			goto out;
		}
		ts->t = t;
		ts->cap = cap;
	}
	ts->t[ts->n].table = table;
	ts->t[ts->n].spec = *spec;
	ts->n++;
out:
	pthread_mutex_unlock(&ts->lock);
	return rc;
}

void rps_wtables_free(struct rps_worker *w)
{
	if (!w->tables)
		return;
	pthread_mutex_destroy(&w->tables->lock);
	rps_free(w->tables->t);
	rps_free(w->tables);
	w->tables = NULL;
}

uint32_t rps_worker_table_dim(const struct rps_worker *w, rps_table_t table)
{
	struct rps_table_spec s;

	if (!w || rps_wtable_get((struct rps_worker *)w, table, &s))
		return 0;
	return s.dim;
}

static int same_spec(const struct rps_table_spec *a, const struct rps_table_spec *b)
{
	return a->dim == b->dim && a->precision == b->precision && a->init == b->init &&
	       a->init_scale == b->init_scale && a->seed == b->seed &&
	       rps_optim_opts_same(&a->optim, &b->optim);
}

/* TABLE_DECLARE of s on every shard of server `only` (UINT32_MAX: of every
 * server); rows_p (NULL: none) receives the sum of the shards' row counts. */
static int declare_send(struct rps_worker *w, rps_table_t table, const struct rps_table_spec *sp,
			uint64_t *rows_p, uint32_t only)
{
	struct rps_table_spec s = *sp;
	struct rps_table_decl *decls;
	struct rps_req *req;
	uint32_t total = 0, k = 0;
	int rc;

	if (rows_p)
		*rows_p = 0;
	for (uint32_t i = 0; i < w->num_servers; i++)
		total += w->servers[i].nshards;
	decls = rps_calloc(total ? total : 1, sizeof(*decls));
	req = decls ? rps_wreq_new(&w->core, NULL, NULL) : NULL;
	if (!req) {
		rps_free(decls);
		return -ENOMEM;
	}
	rps_wsubmit_enter(w);
	for (uint32_t i = 0; i < w->num_servers; i++) {
		struct rps_wserver *srv = &w->servers[i];
		/* the capacity hint spread over every shard of the job */
		uint64_t hint = total ? s.capacity_hint / total + 1 : s.capacity_hint;

		for (uint32_t j = 0; j < srv->nshards; j++, k++) {
			struct rps_table_decl *d = &decls[k];
			struct rps_piece *p;

			if (only != UINT32_MAX && i != only)
				continue;
			d->table = table;
			d->shard = j;
			d->dim = s.dim;
			d->precision = s.precision;
			d->init = s.init;
			d->init_scale = s.init_scale;
			d->seed = s.seed;
			d->capacity_hint = s.capacity_hint ? hint : 0;
			pthread_mutex_lock(&w->core.lock);
			p = rps_piece_alloc_locked(&w->core, req, RPS_PK_ROWS, RPS_PW_RESP);
			if (!p) {
				rps_wreq_fail_locked(req, -ENOMEM);
				pthread_mutex_unlock(&w->core.lock);
				continue;
			}
			p->conn = srv->shards[j].conn;
			p->server = i;
			p->shard = j;
			memset(&p->u.rows, 0, sizeof(p->u.rows));
			p->u.rows.op = RPS_OP_TABLE_DECLARE;
			p->u.rows.decl = d;
			p->u.rows.optim = &s.optim;
			p->u.rows.rows_out = rows_p;
			pthread_mutex_unlock(&w->core.lock);
			rps_wtable_post(w, p);
		}
	}
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	rc = rps_req_wait(req, -1);
	rps_free(decls);
	if (rc)
		RPS_ERR("declare table %u (dim %u) on the servers: %s", table, s.dim,
			rps_strerror(rc));
	return rc;
}

int rps_worker_declare_table(struct rps_worker *w, rps_table_t table,
			     const struct rps_table_spec *spec)
{
	struct rps_table_spec s, old;
	int rc;

	if (!w || !spec) {
		RPS_ERR("declare table %u: %s is NULL", table, w ? "spec" : "worker");
		return -EINVAL;
	}
	rc = rps_wtable_resolve(spec, &s);
	if (rc)
		return rc;
	if (!rps_wtable_get(w, table, &old)) {
		if (same_spec(&old, &s))
			return 0;
		RPS_ERR("declare table %u: declared through this worker already with dim %u "
			"and another spec (now dim %u)",
			table, old.dim, s.dim);
		return -EEXIST;
	}
	rc = rps_wready(w);
	if (!rc)
		rc = declare_send(w, table, &s, NULL, UINT32_MAX);
	if (rc)
		return rc;
	return rps_wtable_add(w, table, &s);
}

int rps_worker_table_rows(struct rps_worker *w, rps_table_t table, uint64_t *rows_p)
{
	struct rps_table_spec s;
	int rc;

	if (!w || !rows_p) {
		RPS_ERR("table_rows: %s is NULL", w ? "rows_p" : "worker");
		return -EINVAL;
	}
	if (rps_wtable_get(w, table, &s)) {
		RPS_ERR("table_rows: table %u is not declared through this worker", table);
		return -ENOENT;
	}
	rc = rps_wready(w);
	if (rc)
		return rc;
	return declare_send(w, table, &s, rows_p, UINT32_MAX);
}

int rps_wtables_redeclare(struct rps_worker *w, uint32_t server)
{
	struct rps_wtables *ts = w->tables;
	struct rps_wtable *copy;
	uint32_t n;
	int rc = 0;

	if (!ts)
		return 0;
	pthread_mutex_lock(&ts->lock);
	n = ts->n;
	copy = n ? rps_malloc(n * sizeof(*copy)) : NULL;
	if (copy)
		memcpy(copy, ts->t, n * sizeof(*copy));
	pthread_mutex_unlock(&ts->lock);
	if (n && !copy)
		return -ENOMEM;
	rps_wtable_forget(w, server); /* its rows' slots are not the new server's */
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = declare_send(w, copy[i].table, &copy[i].spec, NULL, server);
	rps_free(copy);
	return rc;
}
