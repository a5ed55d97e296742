#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int ensure(void **p, size_t *cap, size_t need, size_t elem)
{
	void *q;

	if (need <= *cap)
		return 0;
	q = realloc(*p, need * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = need;
	return 0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

int text_batch_build(struct text_batch *b, const struct text_set *s, const size_t *ex, size_t n)
{
	size_t total = 0, k = 0, hc = 64, hmask;

	for (size_t i = 0; i < n; i++)
		total += s->off[ex[i] + 1] - s->off[ex[i]];
	while (hc < 2 * total)
		hc *= 2;
	if (hc > b->hcap) {
		free(b->hkey);
		free(b->hval);
		b->hkey = malloc(hc * sizeof(uint64_t));
		b->hval = malloc(hc * sizeof(uint32_t));
		b->hcap = b->hkey && b->hval ? hc : 0;
		if (!b->hcap)
			return -ENOMEM;
	}
	if (ensure((void **)&b->slot, &b->slot_cap, total, sizeof(uint32_t)) ||
	    ensure((void **)&b->uids, &b->uid_cap, total, sizeof(uint64_t)))
		return -ENOMEM;
	hmask = hc - 1;
	memset(b->hval, 0xff, hc * sizeof(uint32_t)); /* UINT32_MAX: empty */
	b->n = n;
	b->ex = ex;
	b->nu = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t f = s->off[ex[i]]; f < s->off[ex[i] + 1]; f++) {
			uint64_t id = s->ids[f];
			size_t h = mix(id) & hmask;

			while (b->hval[h] != UINT32_MAX && b->hkey[h] != id)
				h = (h + 1) & hmask;
			if (b->hval[h] == UINT32_MAX) {
				b->hkey[h] = id;
				b->hval[h] = (uint32_t)b->nu;
				b->uids[b->nu++] = id;
			}
			b->slot[k++] = b->hval[h];
		}
	}
	return 0;
}

void text_batch_free(struct text_batch *b)
{
	free(b->uids);
	free(b->slot);
	free(b->hkey);
	free(b->hval);
	memset(b, 0, sizeof(*b));
}

/* h = mean of the example's rows; z = softmax(h W + b); returns -log z[y] */
static double forward(const float *params, int dim, int ncls, const uint32_t *slot, size_t nf,
		      const float *rows, int y, float *h, float *z)
{
	const float *W = params, *bias = params + (size_t)dim * ncls;
	float inv = 1.0f / (float)nf, zmax = -INFINITY, zy;
	double sum = 0;

	memset(h, 0, (size_t)dim * sizeof(float));
	for (size_t f = 0; f < nf; f++) {
		const float *r = rows + (size_t)slot[f] * dim;

		for (int d = 0; d < dim; d++)
			h[d] += r[d];
	}
	for (int d = 0; d < dim; d++)
		h[d] *= inv;
	for (int c = 0; c < ncls; c++)
		z[c] = bias[c];
	for (int d = 0; d < dim; d++) {
		const float *wd = W + (size_t)d * ncls;

		for (int c = 0; c < ncls; c++)
			z[c] += h[d] * wd[c];
	}
	for (int c = 0; c < ncls; c++)
		zmax = z[c] > zmax ? z[c] : zmax;
	zy = z[y] - zmax;
	for (int c = 0; c < ncls; c++) {
		z[c] = expf(z[c] - zmax);
		sum += z[c];
	}
	for (int c = 0; c < ncls; c++)
		z[c] = (float)(z[c] / sum);
	return log(sum) - zy;
}

double text_grad(const float *params, int dim, int ncls, const struct text_set *s,
		 const struct text_batch *b, const float *rows, float scale, float *grows,
		 float *gparams, float *hbuf, float *zbuf)
{
	const float *W = params;
	float *gW = gparams, *gb = gparams + (size_t)dim * ncls;
	const uint32_t *slot = b->slot;
	double loss = 0;
	float dh[512];

	memset(grows, 0, b->nu * (size_t)dim * sizeof(float));
	memset(gparams, 0, text_nparams(dim, ncls) * sizeof(float));
	for (size_t i = 0; i < b->n; i++) {
		size_t e = b->ex[i], nf = s->off[e + 1] - s->off[e];
		int y = s->y[e];

		loss += forward(params, dim, ncls, slot, nf, rows, y, hbuf, zbuf);
		/* dz = scale * (p - onehot(y)) */
		zbuf[y] -= 1.0f;
		for (int c = 0; c < ncls; c++) {
			zbuf[c] *= scale;
			gb[c] += zbuf[c];
		}
		for (int d = 0; d < dim; d++) {
			const float *wd = W + (size_t)d * ncls;
			float *gwd = gW + (size_t)d * ncls, acc = 0;

			for (int c = 0; c < ncls; c++) {
				gwd[c] += hbuf[d] * zbuf[c];
				acc += wd[c] * zbuf[c];
			}
			dh[d] = acc / (float)nf;
		}
		for (size_t f = 0; f < nf; f++) {
			float *g = grows + (size_t)slot[f] * dim;

			for (int d = 0; d < dim; d++)
				g[d] += dh[d];
		}
		slot += nf;
	}
	return loss;
}

size_t text_correct(const float *params, int dim, int ncls, const struct text_set *s,
		    const struct text_batch *b, const float *rows, double *loss_p, float *hbuf,
		    float *zbuf)
{
	const uint32_t *slot = b->slot;
	size_t right = 0;
	double loss = 0;

	for (size_t i = 0; i < b->n; i++) {
		size_t e = b->ex[i], nf = s->off[e + 1] - s->off[e];
		int best = 0;

		loss += forward(params, dim, ncls, slot, nf, rows, s->y[e], hbuf, zbuf);
		for (int c = 1; c < ncls; c++)
			best = zbuf[c] > zbuf[best] ? c : best;
		right += best == s->y[e];
		slot += nf;
	}
	*loss_p = loss;
	return right;
}
