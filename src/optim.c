/* Optimizers (see optim.h for the formulas, which are the contract).
 *
 * BLAS does what BLAS has: saxpy (sgd, weight decay), snrm2 and sscal
 * (clipping). The rest is one fused element-wise pass per optimizer over
 * restrict pointers: the update is memory-bound, and one pass over (w, g, v)
 * moves 5 streams where BLAS needs 6 to 8 (saxpby or sscal + saxpy for
 * v = mu v + g, then saxpy for w); measured 2.4x faster than saxpby + saxpy
 * on 64 MiB. Passes that do nothing (no clipping, no decay) are skipped, so
 * plain SGD is exactly one saxpy with -lr.
 *
 * Adam uses the equivalent form with the bias corrections folded into two
 * scalars, which saves a division and a multiplication per element:
 *   w -= lr mhat / (sqrt(vhat) + eps)
 *      = (lr sqrt(bc2) / bc1) m / (sqrt(v) + eps sqrt(bc2))
 * with bc1 = 1 - b1^t, bc2 = 1 - b2^t computed in double (1 - b2^t cancels
 * badly in float for small t).
 */
#include "src/optim.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

/* The element-wise kernels need sqrt. GCC vectorises sqrtf only under
 * -fno-math-errno (which the optimize attribute cannot switch on: the errno
 * behaviour of builtins is fixed per translation unit), so on x86-64 the
 * loop body is written with SSE intrinsics (baseline ISA, same IEEE
 * operations in the same order as the scalar tail, so results do not depend
 * on which path an element took). Elsewhere: the plain loop. */
#if defined(__SSE2__)
#include <immintrin.h>
#define RPS_OPTIM_SSE 1
#endif

/* BLAS takes int lengths: larger vectors go in pieces. */
#define BLAS_CHUNK ((size_t)1 << 30)

static const char *const kind_names[] = {
    [RPS_OPT_SGD] = "sgd",	   [RPS_OPT_MOMENTUM] = "momentum", [RPS_OPT_NESTEROV] = "nesterov",
    [RPS_OPT_ADAGRAD] = "adagrad", [RPS_OPT_ADAM] = "adam",	    [RPS_OPT_ADAMW] = "adamw",
};

static const char *const schedule_names[] = {
    [RPS_LR_CONSTANT] = "constant", [RPS_LR_STEP] = "step",	[RPS_LR_EXP] = "exp",
    [RPS_LR_COSINE] = "cosine",	    [RPS_LR_LINEAR] = "linear",
};

/* ---- options ---- */

void rps_optim_opts_default(struct rps_optim_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->kind = RPS_OPT_SGD;
	o->lr = 0.01f;
	o->momentum = 0.9f;
	o->beta1 = 0.9f;
	o->beta2 = 0.999f;
	o->eps = 1e-8f;
	o->weight_decay = 0.0f;
	o->clip_norm = 0.0f;
	o->schedule = RPS_LR_CONSTANT;
	o->step_size = 1000;
	o->gamma = 0.1f;
	o->total_steps = 0; /* cosine needs it set */
	o->lr_min = 0.0f;
	o->staleness_lr = 0;
	o->warmup_steps = 0;
}

/* The first thing wrong with o, written into why. */
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			snprintf(why, len, __VA_ARGS__);                                           \
			return -EINVAL;                                                            \
		}                                                                                  \
	} while (0)

int rps_optim_opts_why(const struct rps_optim_opts *o, char *why, size_t len)
{
	CHECK(o, "no optimizer options");
	CHECK((unsigned)o->kind < RPS_ARRAY_SIZE(kind_names), "unknown optimizer kind %d",
	      (int)o->kind);
	CHECK(isfinite(o->lr) && o->lr > 0, "lr %g must be > 0", o->lr);
	CHECK(isfinite(o->momentum) && o->momentum >= 0 && o->momentum < 1,
	      "momentum %g outside [0, 1)", o->momentum);
	CHECK(isfinite(o->beta1) && o->beta1 >= 0 && o->beta1 < 1, "beta1 %g outside [0, 1)",
	      o->beta1);
	CHECK(isfinite(o->beta2) && o->beta2 >= 0 && o->beta2 < 1, "beta2 %g outside [0, 1)",
	      o->beta2);
	CHECK(isfinite(o->eps) && o->eps >= 0, "eps %g must be >= 0", o->eps);
	CHECK(o->eps > 0 || (o->kind != RPS_OPT_ADAGRAD && o->kind != RPS_OPT_ADAM &&
			     o->kind != RPS_OPT_ADAMW),
	      "%s needs eps > 0", kind_names[o->kind]);
	CHECK(isfinite(o->weight_decay) && o->weight_decay >= 0, "weight_decay %g must be >= 0",
	      o->weight_decay);
	CHECK(isfinite(o->clip_norm) && o->clip_norm >= 0, "clip_norm %g must be >= 0 (0: off)",
	      o->clip_norm);

	switch (o->schedule) {
	case RPS_LR_CONSTANT:
		break;
	case RPS_LR_STEP:
		CHECK(o->step_size >= 1, "step schedule needs step_size >= 1");
		/* fall through */
	case RPS_LR_EXP:
		CHECK(isfinite(o->gamma) && o->gamma > 0 && o->gamma <= 1,
		      "gamma %g outside (0, 1]", o->gamma);
		break;
	case RPS_LR_COSINE:
	case RPS_LR_LINEAR:
		CHECK(o->total_steps >= 1, "%s schedule needs total_steps >= 1",
		      schedule_names[o->schedule]);
		CHECK(o->warmup_steps < o->total_steps,
		      "warmup_steps %llu must be below total_steps %llu (the whole run)",
		      (unsigned long long)o->warmup_steps, (unsigned long long)o->total_steps);
		CHECK(isfinite(o->lr_min) && o->lr_min >= 0 && o->lr_min <= o->lr,
		      "lr_min %g outside [0, lr]", o->lr_min);
		break;
	default:
		CHECK(0, "unknown lr schedule %d", (int)o->schedule);
	}
	return 0;
}

#undef CHECK

int rps_optim_opts_check(const struct rps_optim_opts *o)
{
	char why[160];
	int rc = rps_optim_opts_why(o, why, sizeof(why));

	if (rc)
		RPS_ERR("optim: %s", why);
	return rc;
}

int rps_optim_opts_same(const struct rps_optim_opts *a, const struct rps_optim_opts *b)
{
	return a->kind == b->kind && a->lr == b->lr && a->momentum == b->momentum &&
	       a->beta1 == b->beta1 && a->beta2 == b->beta2 && a->eps == b->eps &&
	       a->weight_decay == b->weight_decay && a->clip_norm == b->clip_norm &&
	       a->schedule == b->schedule && a->step_size == b->step_size && a->gamma == b->gamma &&
	       a->total_steps == b->total_steps && a->lr_min == b->lr_min &&
	       !a->staleness_lr == !b->staleness_lr && a->warmup_steps == b->warmup_steps;
}

int rps_optim_describe(const struct rps_optim_opts *o, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s lr %g", rps_optim_kind_name(o->kind), (double)o->lr);

	if (n >= 0 && (size_t)n < len && o->schedule != RPS_LR_CONSTANT)
		n +=
		    snprintf(buf + n, len - (size_t)n, " %s", rps_optim_schedule_name(o->schedule));
	if (n >= 0 && (size_t)n < len &&
	    (o->schedule == RPS_LR_COSINE || o->schedule == RPS_LR_LINEAR))
		n += snprintf(buf + n, len - (size_t)n, " over %llu",
			      (unsigned long long)o->total_steps);
	if (n >= 0 && (size_t)n < len && o->warmup_steps)
		n += snprintf(buf + n, len - (size_t)n, " warmup %llu",
			      (unsigned long long)o->warmup_steps);
	if (n >= 0 && (size_t)n < len && o->weight_decay > 0)
		n += snprintf(buf + n, len - (size_t)n, " wd %g", (double)o->weight_decay);
	if (n >= 0 && (size_t)n < len && o->clip_norm > 0)
		n += snprintf(buf + n, len - (size_t)n, " clip %g", (double)o->clip_norm);
	return n;
}

int rps_optim_kind_parse(const char *s)
{
	return rps_name_index(kind_names, RPS_ARRAY_SIZE(kind_names), s);
}

int rps_optim_schedule_parse(const char *s)
{
	return rps_name_index(schedule_names, RPS_ARRAY_SIZE(schedule_names), s);
}

const char *rps_optim_kind_name(enum rps_optim_kind k)
{
	if ((unsigned)k < RPS_ARRAY_SIZE(kind_names))
		return kind_names[k];
	return "unknown";
}

const char *rps_optim_schedule_name(enum rps_lr_schedule s)
{
	if ((unsigned)s < RPS_ARRAY_SIZE(schedule_names))
		return schedule_names[s];
	return "unknown";
}

int rps_optim_state_floats(enum rps_optim_kind k)
{
	switch (k) {
	case RPS_OPT_SGD:
		return 0;
	case RPS_OPT_MOMENTUM:
	case RPS_OPT_NESTEROV:
	case RPS_OPT_ADAGRAD:
		return 1;
	case RPS_OPT_ADAM:
	case RPS_OPT_ADAMW:
		return 2;
	}
	return -EINVAL;
}

/* ---- learning rate ---- */

/* The schedule at step t (0-based) of a run of T steps (after any warm-up). */
static double schedule_at(const struct rps_optim_opts *o, uint64_t t, uint64_t T)
{
	double lr = o->lr;

	switch (o->schedule) {
	case RPS_LR_STEP:
		if (o->step_size)
			return lr * pow(o->gamma, (double)(t / o->step_size));
		return lr;
	case RPS_LR_EXP:
		return lr * pow(o->gamma, (double)t);
	case RPS_LR_COSINE: {
		double tt = (double)RPS_MIN(t, T);

		if (!T)
			return lr;
		return o->lr_min + (lr - o->lr_min) *
				       (1.0 + cos(3.14159265358979323846 * tt / (double)T)) / 2.0;
	}
	case RPS_LR_LINEAR: {
		double tt = (double)RPS_MIN(t, T);

		if (!T)
			return lr;
		return lr - (lr - o->lr_min) * tt / (double)T;
	}
	case RPS_LR_CONSTANT:
	default:
		return lr;
	}
}

static double lr_at(const struct rps_optim_opts *o, uint64_t t)
{
	uint64_t W = o->warmup_steps;

	if (t < W)
		return (double)o->lr * (double)(t + 1) / (double)W;
	return schedule_at(o, t - W, o->total_steps > W ? o->total_steps - W : 0);
}

float rps_optim_lr_at(const struct rps_optim_opts *o, uint64_t t)
{
	return (float)lr_at(o, t);
}

/* lr_t of the step, staleness included */
static double step_lr(const struct rps_optim_opts *o, uint64_t step, uint32_t staleness)
{
	double lr = lr_at(o, step);

	if (o->staleness_lr)
		lr /= 1.0 + (double)staleness;
	return lr;
}

/* ---- state ---- */

int rps_optim_state_init(struct rps_optim_state *st, const struct rps_optim_opts *o, size_t n)
{
	int nf = rps_optim_state_floats(o->kind);
	float *m = NULL, *v = NULL;
	size_t bytes;

	if (nf < 0 || n > SIZE_MAX / sizeof(float)) {
		RPS_ERR("optim: bad state request (kind %d, %zu floats)", (int)o->kind, n);
		return -EINVAL;
	}
	bytes = n * sizeof(float);
	if (nf >= 1) {
		m = rps_aligned_alloc(RPS_CACHELINE, bytes);
		if (!m)
			goto err_nomem;
		memset(m, 0, bytes);
	}
	if (nf >= 2) {
		v = rps_aligned_alloc(RPS_CACHELINE, bytes);
		if (!v)
			goto err_free_m;
		memset(v, 0, bytes);
	}
	st->m = m;
	st->v = v;
	st->step = 0;
	return 0;

err_free_m:
	rps_free(m);
err_nomem:
	RPS_ERR("optim: cannot allocate state for %zu parameters", n);
	return -ENOMEM;
}

void rps_optim_state_free(struct rps_optim_state *st)
{
	if (!st)
		return;
	rps_free(st->m);
	rps_free(st->v);
	st->m = NULL;
	st->v = NULL;
	st->step = 0;
}

/* ---- BLAS wrappers for any length ---- */

static void blas_axpy(size_t n, float a, const float *x, float *y)
{
	while (n) {
		size_t c = RPS_MIN(n, BLAS_CHUNK);

		cblas_saxpy((int)c, a, x, 1, y, 1);
		x += c;
		y += c;
		n -= c;
	}
}

static void blas_scal(size_t n, float a, float *x)
{
	while (n) {
		size_t c = RPS_MIN(n, BLAS_CHUNK);

		cblas_sscal((int)c, a, x, 1);
		x += c;
		n -= c;
	}
}

static double blas_nrm2(size_t n, const float *x)
{
	double ss = 0.0;

	if (n <= BLAS_CHUNK)
		return cblas_snrm2((int)n, x, 1);
	while (n) {
		size_t c = RPS_MIN(n, BLAS_CHUNK);
		double p = cblas_snrm2((int)c, x, 1);

		ss += p * p;
		x += c;
		n -= c;
	}
	return sqrt(ss);
}

/* ---- element-wise kernels ---- */

/* Loops in blocks of BLOCK with a fixed-length inner loop: GCC at -O2 (cost
 * model "very-cheap") vectorises only loops that need no run-time trip-count
 * checks, and a fixed inner loop is that (16-byte vectors on baseline
 * x86-64, 32-byte with AVX). */
#define BLOCK 8

/* v = mu v + g; w -= lr v */
static void momentum_kernel(size_t n, float *restrict w, const float *restrict g, float *restrict v,
			    float mu, float lr)
{
	size_t i = 0;

	for (; i + BLOCK <= n; i += BLOCK)
		for (size_t j = i; j < i + BLOCK; j++) {
			float vj = mu * v[j] + g[j];

			v[j] = vj;
			w[j] -= lr * vj;
		}
	for (; i < n; i++) {
		float vi = mu * v[i] + g[i];

		v[i] = vi;
		w[i] -= lr * vi;
	}
}

/* v = mu v + g; w -= lr (g + mu v) */
static void nesterov_kernel(size_t n, float *restrict w, const float *restrict g, float *restrict v,
			    float mu, float lr)
{
	size_t i = 0;

	for (; i + BLOCK <= n; i += BLOCK)
		for (size_t j = i; j < i + BLOCK; j++) {
			float gj = g[j];
			float vj = mu * v[j] + gj;

			v[j] = vj;
			w[j] -= lr * (gj + mu * vj);
		}
	for (; i < n; i++) {
		float gi = g[i];
		float vi = mu * v[i] + gi;

		v[i] = vi;
		w[i] -= lr * (gi + mu * vi);
	}
}

static void adagrad_kernel(size_t n, float *restrict w, const float *restrict g, float *restrict s,
			   float lr, float eps)
{
	size_t i = 0;

#ifdef RPS_OPTIM_SSE
	const __m128 vlr = _mm_set1_ps(lr), veps = _mm_set1_ps(eps);

	for (; i + 4 <= n; i += 4) {
		__m128 gi = _mm_loadu_ps(g + i);
		__m128 si = _mm_add_ps(_mm_loadu_ps(s + i), _mm_mul_ps(gi, gi));
		__m128 up = _mm_div_ps(_mm_mul_ps(vlr, gi), _mm_add_ps(_mm_sqrt_ps(si), veps));

		_mm_storeu_ps(s + i, si);
		_mm_storeu_ps(w + i, _mm_sub_ps(_mm_loadu_ps(w + i), up));
	}
#endif
	for (; i < n; i++) {
		float gi = g[i];
		float si = s[i] + gi * gi;

		s[i] = si;
		w[i] -= lr * gi / (sqrtf(si) + eps);
	}
}

static void adam_kernel(size_t n, float *restrict w, const float *restrict g, float *restrict m,
			float *restrict v, float b1, float b2, float step_size, float eps_hat)
{
	const float c1 = 1.0f - b1, c2 = 1.0f - b2;
	size_t i = 0;

#ifdef RPS_OPTIM_SSE
	const __m128 vb1 = _mm_set1_ps(b1), vb2 = _mm_set1_ps(b2);
	const __m128 vc1 = _mm_set1_ps(c1), vc2 = _mm_set1_ps(c2);
	const __m128 vstep = _mm_set1_ps(step_size), veps = _mm_set1_ps(eps_hat);

	for (; i + 4 <= n; i += 4) {
		__m128 gi = _mm_loadu_ps(g + i);
		__m128 mi = _mm_add_ps(_mm_mul_ps(vb1, _mm_loadu_ps(m + i)), _mm_mul_ps(vc1, gi));
		__m128 vi = _mm_add_ps(_mm_mul_ps(vb2, _mm_loadu_ps(v + i)),
				       _mm_mul_ps(vc2, _mm_mul_ps(gi, gi)));
		__m128 up = _mm_div_ps(_mm_mul_ps(vstep, mi), _mm_add_ps(_mm_sqrt_ps(vi), veps));

		_mm_storeu_ps(m + i, mi);
		_mm_storeu_ps(v + i, vi);
		_mm_storeu_ps(w + i, _mm_sub_ps(_mm_loadu_ps(w + i), up));
	}
#endif
	for (; i < n; i++) {
		float gi = g[i];
		float mi = b1 * m[i] + c1 * gi;
		float vi = b2 * v[i] + c2 * (gi * gi);

		m[i] = mi;
		v[i] = vi;
		w[i] -= step_size * mi / (sqrtf(vi) + eps_hat);
	}
}

/* ---- one step ---- */

void rps_optim_apply(const struct rps_optim_opts *o, float *w, float *g, float *m, float *v,
		     size_t n, uint64_t step, uint32_t staleness)
{
	const float lr = (float)step_lr(o, step, staleness);

	if (RPS_UNLIKELY(n == 0))
		return;
	if (o->clip_norm > 0) {
		double norm = blas_nrm2(n, g);

		if (norm > o->clip_norm)
			blas_scal(n, (float)(o->clip_norm / norm), g);
	}
	if (o->weight_decay > 0) {
		if (o->kind == RPS_OPT_ADAMW) /* decoupled: w -= lr_t wd w */
			blas_scal(n, (float)(1.0 - (double)lr * o->weight_decay), w);
		else
			blas_axpy(n, o->weight_decay, w, g);
	}

	switch (o->kind) {
	case RPS_OPT_SGD:
		blas_axpy(n, -lr, g, w);
		break;
	case RPS_OPT_MOMENTUM:
		momentum_kernel(n, w, g, m, o->momentum, lr);
		break;
	case RPS_OPT_NESTEROV:
		nesterov_kernel(n, w, g, m, o->momentum, lr);
		break;
	case RPS_OPT_ADAGRAD:
		adagrad_kernel(n, w, g, m, lr, o->eps);
		break;
	case RPS_OPT_ADAM:
	case RPS_OPT_ADAMW: {
		const double t = (double)step + 1.0;
		const double bc1 = 1.0 - pow(o->beta1, t);
		const double sbc2 = sqrt(1.0 - pow(o->beta2, t));

		adam_kernel(n, w, g, m, v, o->beta1, o->beta2, (float)((double)lr * sbc2 / bc1),
			    (float)(o->eps * sbc2));
		break;
	}
	}
}

/* ---- reference: scalar, double precision, the header's formulas as written ---- */

void rps_optim_apply_ref(const struct rps_optim_opts *o, float *w, float *g, float *m, float *v,
			 size_t n, uint64_t step, uint32_t staleness)
{
	const double lr = step_lr(o, step, staleness);
	const double t = (double)step + 1.0;
	const double mu = o->momentum, b1 = o->beta1, b2 = o->beta2, eps = o->eps;
	const double wd = o->weight_decay;
	const double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
	double scale = 1.0;

	if (o->clip_norm > 0) {
		double ss = 0.0, norm;

		for (size_t i = 0; i < n; i++)
			ss += (double)g[i] * g[i];
		norm = sqrt(ss);
		if (norm > o->clip_norm)
			scale = o->clip_norm / norm;
	}

	for (size_t i = 0; i < n; i++) {
		double wi = w[i];
		double gi = g[i] * scale;
		double mi, vi;

		if (o->kind == RPS_OPT_ADAMW)
			wi -= lr * wd * wi; /* decoupled weight decay */
		else
			gi += wd * wi;

		switch (o->kind) {
		case RPS_OPT_SGD:
			wi -= lr * gi;
			break;
		case RPS_OPT_MOMENTUM:
			mi = mu * m[i] + gi;
			wi -= lr * mi;
			m[i] = (float)mi;
			break;
		case RPS_OPT_NESTEROV:
			mi = mu * m[i] + gi;
			wi -= lr * (gi + mu * mi);
			m[i] = (float)mi;
			break;
		case RPS_OPT_ADAGRAD:
			mi = m[i] + gi * gi;
			wi -= lr * gi / (sqrt(mi) + eps);
			m[i] = (float)mi;
			break;
		case RPS_OPT_ADAM:
		case RPS_OPT_ADAMW: {
			double mhat, vhat;

			mi = b1 * m[i] + (1.0 - b1) * gi;
			vi = b2 * v[i] + (1.0 - b2) * gi * gi;
			mhat = mi / bc1;
			vhat = vi / bc2;
			wi -= lr * mhat / (sqrt(vhat) + eps);
			m[i] = (float)mi;
			v[i] = (float)vi;
			break;
		}
		}
		g[i] = (float)gi;
		w[i] = (float)wi;
	}
}
