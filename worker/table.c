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

int rps_wtable_resolve(const struct rps_table_spec *in, struct rps_table_spec *out)
{
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
	if (out->precision == RPS_TABLE_FP16 || out->precision == RPS_TABLE_BF16) {
		RPS_ERR("table spec: precision %s is not served yet (only RPS_TABLE_FP32)",
			out->precision == RPS_TABLE_FP16 ? "fp16" : "bf16");
		return -ENOTSUP;
	}
	if (out->precision != RPS_TABLE_FP32) {
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

static int table_add(struct rps_worker *w, rps_table_t table, const struct rps_table_spec *spec)
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

int rps_worker_declare_table(struct rps_worker *w, rps_table_t table,
			     const struct rps_table_spec *spec)
{
	struct rps_table_spec s, old;
	struct rps_table_decl *decls;
	struct rps_req *req;
	uint32_t total = 0, k = 0;
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
	if (rc)
		return rc;
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
			pthread_mutex_unlock(&w->core.lock);
			rps_wtable_post(w, p);
		}
	}
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	rc = rps_req_wait(req, -1);
	rps_free(decls);
	if (rc) {
		RPS_ERR("declare table %u (dim %u) on the servers: %s", table, s.dim,
			rps_strerror(rc));
		return rc;
	}
	return table_add(w, table, &s);
}
