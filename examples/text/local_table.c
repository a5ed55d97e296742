#include "local_table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/table.h>

int local_table_init(struct local_table *t, const struct rps_table_spec *spec, uint64_t nids)
{
	const struct rps_optim_opts *o = &spec->optim;

	memset(t, 0, sizeof(*t));
	if (o->schedule != RPS_LR_CONSTANT || o->weight_decay != 0 || o->clip_norm != 0 ||
	    o->warmup_steps != 0 ||
	    (o->kind != RPS_OPT_SGD && o->kind != RPS_OPT_ADAGRAD && o->kind != RPS_OPT_ADAM)) {
		fprintf(stderr, "text-train --local: the table's optimizer must be sgd, adagrad "
				"or adam with a constant lr, no weight decay, clipping or warm-up\n");
		return -EINVAL;
	}
	t->spec = *spec;
	t->nids = nids;
	t->nstate = o->kind == RPS_OPT_ADAM ? 2 : o->kind == RPS_OPT_ADAGRAD ? 1 : 0;
	t->slot = calloc(nids, sizeof(uint32_t));
	return t->slot ? 0 : -ENOMEM;
}

static int grow(struct local_table *t)
{
	size_t cap = t->cap ? 2 * t->cap : 65536, dim = t->spec.dim;
	float *r;

	if (!(r = realloc(t->rows, cap * dim * sizeof(float))))
		return -ENOMEM;
	t->rows = r;
	if (t->nstate >= 1) {
		if (!(r = realloc(t->m, cap * dim * sizeof(float))))
			return -ENOMEM;
		t->m = r;
	}
	if (t->nstate >= 2) {
		uint64_t *s;

		if (!(r = realloc(t->v, cap * dim * sizeof(float))))
			return -ENOMEM;
		t->v = r;
		if (!(s = realloc(t->steps, cap * sizeof(uint64_t))))
			return -ENOMEM;
		t->steps = s;
	}
	t->cap = cap;
	return 0;
}

/* the row of id, created if new (NULL: out of memory) */
static float *row(struct local_table *t, uint64_t id, size_t *idx_p)
{
	size_t dim = t->spec.dim, i;

	if (!t->slot[id]) {
		if (t->n == t->cap && grow(t))
			return NULL;
		i = t->n++;
		rps_table_initial_row(&t->spec, id, t->rows + i * dim);
		if (t->nstate >= 1)
			memset(t->m + i * dim, 0, dim * sizeof(float));
		if (t->nstate >= 2) {
			memset(t->v + i * dim, 0, dim * sizeof(float));
			t->steps[i] = 0;
		}
		t->slot[id] = (uint32_t)(i + 1);
	}
	*idx_p = t->slot[id] - 1;
	return t->rows + *idx_p * dim;
}

int local_table_pull(struct local_table *t, const uint64_t *ids, size_t n, float *out)
{
	size_t dim = t->spec.dim, idx;

	for (size_t i = 0; i < n; i++) {
		const float *r = row(t, ids[i], &idx);

		if (!r)
			return -ENOMEM;
		memcpy(out + i * dim, r, dim * sizeof(float));
	}
	return 0;
}

/* The updates of src/optim.c, per row (lazy: rows not pushed do not move). */
int local_table_push(struct local_table *t, const uint64_t *ids, size_t n, float *grads)
{
	const struct rps_optim_opts *o = &t->spec.optim;
	size_t dim = t->spec.dim, idx;

	for (size_t i = 0; i < n; i++) {
		float *w = row(t, ids[i], &idx), *g = grads + i * dim;

		if (!w)
			return -ENOMEM;
		switch (o->kind) {
		case RPS_OPT_SGD:
			for (size_t d = 0; d < dim; d++)
				w[d] -= o->lr * g[d];
			break;
		case RPS_OPT_ADAGRAD: {
			float *m = t->m + idx * dim;

			for (size_t d = 0; d < dim; d++) {
				double mi = m[d] + (double)g[d] * g[d];

				w[d] = (float)(w[d] - o->lr * g[d] / (sqrt(mi) + o->eps));
				m[d] = (float)mi;
			}
			break;
		}
		default: { /* adam, the step count per row */
			float *m = t->m + idx * dim, *v = t->v + idx * dim;
			double tt = (double)++t->steps[idx];
			double bc1 = 1.0 - pow(o->beta1, tt), sbc2 = sqrt(1.0 - pow(o->beta2, tt));
			float lr = (float)(o->lr * sbc2 / bc1), eps = (float)(o->eps * sbc2);

			for (size_t d = 0; d < dim; d++) {
				m[d] = o->beta1 * m[d] + (1 - o->beta1) * g[d];
				v[d] = o->beta2 * v[d] + (1 - o->beta2) * g[d] * g[d];
				w[d] -= lr * m[d] / (sqrtf(v[d]) + eps);
			}
			break;
		}
		}
	}
	return 0;
}

void local_table_free(struct local_table *t)
{
	free(t->slot);
	free(t->rows);
	free(t->m);
	free(t->v);
	free(t->steps);
	memset(t, 0, sizeof(*t));
}
