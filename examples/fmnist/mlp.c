#include "mlp.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W1_ROWS (MLP_IN / MLP_W1_BLOCKS) /* rows of W1 per block */
_Static_assert(MLP_IN % MLP_W1_BLOCKS == 0, "W1 blocks must split its rows evenly");

const size_t mlp_lens[MLP_NTENSORS] = {
	[0 ... MLP_W1_BLOCKS - 1] = W1_ROWS * MLP_H1,
	[MLP_T_B1] = MLP_H1,
	[MLP_T_W2] = MLP_H1 * MLP_H2,
	[MLP_T_B2] = MLP_H2,
	[MLP_T_W3] = MLP_H2 * MLP_OUT,
	[MLP_T_B3] = MLP_OUT,
};
const size_t mlp_fan_in[MLP_NTENSORS] = {
	[0 ... MLP_W1_BLOCKS - 1] = MLP_IN,
	[MLP_T_W2] = MLP_H1,
	[MLP_T_W3] = MLP_H2,
};

size_t mlp_offset(int t)
{
	size_t off = 0;

	for (int i = 0; i < t; i++)
		off += mlp_lens[i];
	return off;
}

size_t mlp_nparams(void)
{
	size_t n = 0;

	for (int i = 0; i < MLP_NTENSORS; i++)
		n += mlp_lens[i];
	return n;
}

/* Views of the flat parameter (or gradient) array. */
struct views {
	float *w1, *b1, *w2, *b2, *w3, *b3;
};

static struct views views_of(float *p)
{
	struct views v;

	v.w1 = p; /* the W1 blocks are its consecutive row ranges */
	v.b1 = p + mlp_offset(MLP_T_B1);
	v.w2 = p + mlp_offset(MLP_T_W2);
	v.b2 = p + mlp_offset(MLP_T_B2);
	v.w3 = p + mlp_offset(MLP_T_W3);
	v.b3 = p + mlp_offset(MLP_T_B3);
	return v;
}

int mlp_ws_init(struct mlp_ws *ws, size_t batch)
{
	memset(ws, 0, sizeof(*ws));
	ws->batch = batch;
	ws->h1 = malloc(batch * MLP_H1 * sizeof(float));
	ws->h2 = malloc(batch * MLP_H2 * sizeof(float));
	ws->z = malloc(batch * MLP_OUT * sizeof(float));
	ws->dh1 = malloc(batch * MLP_H1 * sizeof(float));
	ws->dh2 = malloc(batch * MLP_H2 * sizeof(float));
	if (!ws->h1 || !ws->h2 || !ws->z || !ws->dh1 || !ws->dh2) {
		mlp_ws_free(ws);
		return -ENOMEM;
	}
	return 0;
}

void mlp_ws_free(struct mlp_ws *ws)
{
	free(ws->h1);
	free(ws->h2);
	free(ws->z);
	free(ws->dh1);
	free(ws->dh2);
	memset(ws, 0, sizeof(*ws));
}

/* xorshift64* and Box-Muller: deterministic normals from a seed. */
static double uniform01(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return ((*s * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}

void mlp_init_params(float *params, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	float *p = params;

	for (int t = 0; t < MLP_NTENSORS; t++) {
		double std = mlp_fan_in[t] ? sqrt(2.0 / (double)mlp_fan_in[t]) : 0.0;

		for (size_t i = 0; i < mlp_lens[t]; i++) {
			if (std == 0.0) {
				p[i] = 0.0f;
				continue;
			}
			double u1 = uniform01(&s), u2 = uniform01(&s);
			if (u1 < 1e-300)
				u1 = 1e-300;
			p[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
		}
		p += mlp_lens[t];
	}
}

/* out[n x cols] = act(in[n x k] W[k x cols] + b) */
static void relu(float *v, size_t n);

static void dense(const float *in, size_t n, size_t k, const float *w, const float *b, size_t cols,
		  float *out, int act)
{
	for (size_t r = 0; r < n; r++)
		memcpy(out + r * cols, b, cols * sizeof(float));
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)cols, (int)k, 1.0f, in,
		    (int)k, w, (int)cols, 1.0f, out, (int)cols);
	if (act)
		relu(out, n * cols);
}

static int hook_wait(const struct mlp_hooks *h, int t)
{
	return h && h->wait_param ? h->wait_param(h->arg, t) : 0;
}

static int hook_ready(const struct mlp_hooks *h, int t)
{
	return h && h->grad_ready ? h->grad_ready(h->arg, t) : 0;
}

static void relu(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = v[i] > 0.0f ? v[i] : 0.0f;
}

/* Forward pass; each tensor is waited for just before it is used, and layer 1
 * is accumulated block by block of W1 rows (= block by block of input pixels). */
static int forward(const struct views *v, const float *x, size_t n, struct mlp_ws *ws,
		   const struct mlp_hooks *h)
{
	int rc;

	if ((rc = hook_wait(h, MLP_T_B1)))
		return rc;
	for (size_t r = 0; r < n; r++)
		memcpy(ws->h1 + r * MLP_H1, v->b1, MLP_H1 * sizeof(float));
	for (int b = 0; b < MLP_W1_BLOCKS; b++) {
		if ((rc = hook_wait(h, b)))
			return rc;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, MLP_H1, W1_ROWS,
			    1.0f, x + b * W1_ROWS, MLP_IN, v->w1 + (size_t)b * W1_ROWS * MLP_H1,
			    MLP_H1, 1.0f, ws->h1, MLP_H1);
	}
	relu(ws->h1, n * MLP_H1);
	if ((rc = hook_wait(h, MLP_T_W2)) || (rc = hook_wait(h, MLP_T_B2)))
		return rc;
	dense(ws->h1, n, MLP_H1, v->w2, v->b2, MLP_H2, ws->h2, 1);
	if ((rc = hook_wait(h, MLP_T_W3)) || (rc = hook_wait(h, MLP_T_B3)))
		return rc;
	dense(ws->h2, n, MLP_H2, v->w3, v->b3, MLP_OUT, ws->z, 0);
	return 0;
}

/* dW[k x cols] = in^T d ; db = column sums of d */
static void dense_back_params(const float *in, const float *d, size_t n, size_t k, size_t cols,
			      float *dw, float *db)
{
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)cols, (int)n, 1.0f, in,
		    (int)k, d, (int)cols, 0.0f, dw, (int)cols);
	memset(db, 0, cols * sizeof(float));
	for (size_t r = 0; r < n; r++)
		for (size_t c = 0; c < cols; c++)
			db[c] += d[r * cols + c];
}

/* din[n x k] = (d[n x cols] W^T) masked by relu'(act_in) */
static void dense_back_input(const float *d, const float *w, size_t n, size_t k, size_t cols,
			     const float *act_in, float *din)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)k, (int)cols, 1.0f, d,
		    (int)cols, w, (int)cols, 0.0f, din, (int)k);
	for (size_t i = 0; i < n * k; i++)
		if (act_in[i] <= 0.0f)
			din[i] = 0.0f;
}

int mlp_grad(const float *params, const float *x, const uint8_t *y, size_t n, float scale,
	     float *grad, struct mlp_ws *ws, const struct mlp_hooks *h, float *loss_p)
{
	struct views v = views_of((float *)params), g = views_of(grad);
	double loss = 0.0;
	int rc;

	if ((rc = forward(&v, x, n, ws, h)))
		return rc;
	/* softmax cross-entropy; z becomes dL/dz = scale * (p - onehot) / n */
	for (size_t r = 0; r < n; r++) {
		float *z = ws->z + r * MLP_OUT, mx = z[0], sum = 0.0f;

		for (int c = 1; c < MLP_OUT; c++)
			mx = z[c] > mx ? z[c] : mx;
		for (int c = 0; c < MLP_OUT; c++) {
			z[c] = expf(z[c] - mx);
			sum += z[c];
		}
		for (int c = 0; c < MLP_OUT; c++)
			z[c] /= sum;
		loss -= log(z[y[r]] > 1e-30f ? z[y[r]] : 1e-30f);
		z[y[r]] -= 1.0f;
		for (int c = 0; c < MLP_OUT; c++)
			z[c] *= scale / (float)n;
	}
	*loss_p = (float)(loss / (double)n);
	/* backward, handing out each tensor's gradient as soon as it is final */
	dense_back_params(ws->h2, ws->z, n, MLP_H2, MLP_OUT, g.w3, g.b3);
	if ((rc = hook_ready(h, MLP_T_W3)) || (rc = hook_ready(h, MLP_T_B3)))
		return rc;
	dense_back_input(ws->z, v.w3, n, MLP_H2, MLP_OUT, ws->h2, ws->dh2);
	dense_back_params(ws->h1, ws->dh2, n, MLP_H1, MLP_H2, g.w2, g.b2);
	if ((rc = hook_ready(h, MLP_T_W2)) || (rc = hook_ready(h, MLP_T_B2)))
		return rc;
	dense_back_input(ws->dh2, v.w2, n, MLP_H1, MLP_H2, ws->h1, ws->dh1);
	memset(g.b1, 0, MLP_H1 * sizeof(float));
	for (size_t r = 0; r < n; r++)
		for (size_t c = 0; c < MLP_H1; c++)
			g.b1[c] += ws->dh1[r * MLP_H1 + c];
	if ((rc = hook_ready(h, MLP_T_B1)))
		return rc;
	for (int b = 0; b < MLP_W1_BLOCKS; b++) {
		/* dW1[block rows] = X[:, block]^T dH1 */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, W1_ROWS, MLP_H1, (int)n, 1.0f,
			    x + b * W1_ROWS, MLP_IN, ws->dh1, MLP_H1, 0.0f,
			    g.w1 + (size_t)b * W1_ROWS * MLP_H1, MLP_H1);
		if ((rc = hook_ready(h, b)))
			return rc;
	}
	return 0;
}

double mlp_accuracy(const float *params, const float *x, const uint8_t *y, size_t n,
		    struct mlp_ws *ws)
{
	struct views v = views_of((float *)params);
	size_t correct = 0;

	for (size_t off = 0; off < n; off += ws->batch) {
		size_t b = n - off < ws->batch ? n - off : ws->batch;

		forward(&v, x + off * MLP_IN, b, ws, NULL);
		for (size_t r = 0; r < b; r++) {
			const float *z = ws->z + r * MLP_OUT;
			int best = 0;

			for (int c = 1; c < MLP_OUT; c++)
				if (z[c] > z[best])
					best = c;
			correct += best == y[off + r];
		}
	}
	return n ? (double)correct / (double)n : 0.0;
}
