/* Optimizers: the BLAS/vectorised step against the double-precision scalar
 * reference for every optimizer x schedule x decay x clipping x size over
 * several steps, hand-computed values, schedules, option checking. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/optim.h>

#include "src/optim.h"
#include "src/util.h"

#define TOL 1e-6

static const enum rps_optim_kind kinds[] = {
    RPS_OPT_SGD, RPS_OPT_MOMENTUM, RPS_OPT_NESTEROV, RPS_OPT_ADAGRAD, RPS_OPT_ADAM, RPS_OPT_ADAMW,
};
static const enum rps_lr_schedule schedules[] = {
    RPS_LR_CONSTANT, RPS_LR_STEP, RPS_LR_EXP, RPS_LR_COSINE, RPS_LR_LINEAR,
};
static const size_t sizes[] = {1, 7, 1000, 4097};

static void near(double got, double want, double tol, const char *what)
{
	if (!(fabs(got - want) <= tol)) {
		print_error("%s: got %.9g, want %.9g (tol %g)\n", what, got, want, tol);
		fail();
	}
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

/* uniform in [-1, 1) */
static float frand(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float)((double)(rng_state >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

/* a gradient element: magnitude in [0.1, 3), either sign */
static float grad_elem(size_t i)
{
	float u = frand();

	return (u < 0 ? -1.0f : 1.0f) * (0.1f + 0.9f * fabsf(u)) * (1.0f + (float)(i % 3));
}

/* max |a - b| / max(max |b|, max |prev|, scale, 1e-6): the error of new
 * values a against the reference b, relative to the scale of the step's
 * operands (the values before the step, prev, after it, b, and the update,
 * scale): when w - lr g cancels, a float step is only accurate relative to
 * its terms, not to the result. */
static double rel_err(const float *a, const float *b, const float *prev, double scale, size_t n)
{
	double num = 0, den = scale;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);

		if (isnan(d))
			return INFINITY;
		num = RPS_MAX(num, d);
		den = RPS_MAX(den, fabs((double)b[i]));
		if (prev)
			den = RPS_MAX(den, fabs((double)prev[i]));
	}
	return num / RPS_MAX(den, 1e-6);
}

static double norm2(const float *x, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return sqrt(s);
}

static void base_opts(struct rps_optim_opts *o, enum rps_optim_kind k, enum rps_lr_schedule s)
{
	rps_optim_opts_default(o);
	o->kind = k;
	o->lr = 0.05f;
	o->schedule = s;
	o->step_size = 2;
	o->gamma = 0.8f;
	o->total_steps = 4;
	o->lr_min = 0.02f;
}

/* ---- apply vs reference ---- */

#define NSTEPS 6

struct bufs {
	float *w1, *m1, *v1, *g1; /* rps_optim_apply */
	float *w2, *m2, *v2, *g2; /* rps_optim_apply_ref */
	float *wa, *ma, *va, *ga; /* the reference on magnitudes (see run_case) */
	float *wprev1, *wprev, *mprev, *vprev;
	float *grads;
};

static void bufs_alloc(struct bufs *b, size_t n)
{
	float **all[] = {&b->w1,     &b->m1,	&b->v1,	   &b->g1,   &b->w2, &b->m2,
			 &b->v2,     &b->g2,	&b->wa,	   &b->ma,   &b->va, &b->ga,
			 &b->wprev1, &b->wprev, &b->mprev, &b->vprev};

	for (size_t i = 0; i < RPS_ARRAY_SIZE(all); i++) {
		*all[i] = calloc(n, sizeof(float));
		assert_non_null(*all[i]);
	}
	b->grads = calloc(n * NSTEPS, sizeof(float));
	assert_non_null(b->grads);
}

static void bufs_free(struct bufs *b)
{
	float *all[] = {b->w1,	   b->m1,    b->v1,    b->g1,	 b->w2,	  b->m2,
			b->v2,	   b->g2,    b->wa,    b->ma,	 b->va,	  b->ga,
			b->wprev1, b->wprev, b->mprev, b->vprev, b->grads};

	for (size_t i = 0; i < RPS_ARRAY_SIZE(all); i++)
		free(all[i]);
}

static double vmax(const float *x, size_t n)
{
	double d = 0;

	for (size_t i = 0; i < n; i++)
		d = RPS_MAX(d, fabs((double)x[i]));
	return d;
}

struct worst {
	double err;   /* relative error of w, m, v */
	double upd;   /* relative error of the update w_new - w_old */
	double moved; /* smallest max|update| / max|w| */
};

/* Run NSTEPS steps of apply and of the reference side by side. Per step:
 *  - w, m, v agree: max|a - b| / scale <= TOL, where scale is the magnitude of
 *    the terms the new values are made of: old and new values, and the same
 *    step run by the reference on magnitudes (|w|, |g|, |m|, v), which has no
 *    cancellation (m = mu m + g with m ~ -g is only accurate relative to |m|
 *    and |g| in any float implementation, and so is w after it). For the big
 *    vectors this is max|b| as usual;
 *  - the updates agree: max|dw_a - dw_b| <= TOL * that scale + 4 FLT_EPSILON
 *    max|w| (the float rounding of storing w, which nothing avoids);
 *  - w moved by at least 0.1% of its scale, so the update is resolved to
 *    better than 4 FLT_EPSILON / 1e-3 ~ 5e-4 even where the first term is
 *    not the binding one. */
static void run_case(const struct rps_optim_opts *o, size_t n, uint64_t step0, int clip_mode,
		     const char *label, struct worst *worst)
{
	struct rps_optim_opts opts = *o;
	struct bufs b;
	double gmin = INFINITY, gmax = 0;
	int nf = rps_optim_state_floats(o->kind);
	const size_t bytes = n * sizeof(float);

	bufs_alloc(&b, n);
	for (size_t i = 0; i < n; i++)
		b.w1[i] = b.w2[i] = 0.1f * frand();
	for (size_t i = 0; i < n * NSTEPS; i++)
		b.grads[i] = grad_elem(i);
	for (int s = 0; s < NSTEPS; s++) {
		double gn = norm2(b.grads + (size_t)s * n, n);

		gmin = RPS_MIN(gmin, gn);
		gmax = RPS_MAX(gmax, gn);
	}
	if (clip_mode == 1)
		opts.clip_norm = (float)(0.5 * gmin); /* clips every step */
	else if (clip_mode == 2)
		opts.clip_norm = (float)(2.0 * gmax); /* never clips */
	assert_int_equal(rps_optim_opts_check(&opts), 0);

	for (int s = 0; s < NSTEPS; s++) {
		uint64_t step = step0 + (uint64_t)s;
		uint32_t staleness = (uint32_t)(s % 3);
		double e, moved, du = 0, dmax = 0, wmax = 0, dabs = 0;

		memcpy(b.g1, b.grads + (size_t)s * n, bytes);
		memcpy(b.g2, b.g1, bytes);
		memcpy(b.wprev1, b.w1, bytes);
		memcpy(b.wprev, b.w2, bytes);
		memcpy(b.mprev, b.m2, bytes);
		memcpy(b.vprev, b.v2, bytes);
		for (size_t i = 0; i < n; i++) {
			b.wa[i] = fabsf(b.w2[i]);
			b.ga[i] = fabsf(b.g2[i]);
			b.ma[i] = fabsf(b.m2[i]);
			b.va[i] = b.v2[i];
		}

		rps_optim_apply(&opts, b.w1, b.g1, nf >= 1 ? b.m1 : NULL, nf >= 2 ? b.v1 : NULL, n,
				step, staleness);
		rps_optim_apply_ref(&opts, b.w2, b.g2, nf >= 1 ? b.m2 : NULL, nf >= 2 ? b.v2 : NULL,
				    n, step, staleness);
		rps_optim_apply_ref(&opts, b.wa, b.ga, nf >= 1 ? b.ma : NULL, nf >= 2 ? b.va : NULL,
				    n, step, staleness);

		for (size_t i = 0; i < n; i++) {
			double d1 = (double)b.w1[i] - b.wprev1[i];
			double d2 = (double)b.w2[i] - b.wprev[i];

			du = RPS_MAX(du, fabs(d1 - d2));
			dmax = RPS_MAX(dmax, fabs(d2));
			dabs = RPS_MAX(dabs, fabs((double)b.wa[i] - fabsf(b.wprev[i])));
			wmax =
			    RPS_MAX(wmax, RPS_MAX(fabs((double)b.w2[i]), fabs((double)b.wprev[i])));
		}
		dabs = RPS_MAX(dabs, dmax);

		e = rel_err(b.w1, b.w2, b.wprev, dabs, n);
		if (nf >= 1)
			e = RPS_MAX(e, rel_err(b.m1, b.m2, b.mprev, vmax(b.ma, n), n));
		if (nf >= 2)
			e = RPS_MAX(e, rel_err(b.v1, b.v2, b.vprev, vmax(b.va, n), n));
		if (!(e <= TOL)) {
			print_error("%s n=%zu step=%llu: relative error %.3g > %g\n", label, n,
				    (unsigned long long)step, e, TOL);
			fail();
		}
		worst->err = RPS_MAX(worst->err, e);

		if (!(du <= TOL * dabs + 4 * FLT_EPSILON * wmax)) {
			print_error(
			    "%s n=%zu step=%llu: update differs by %.3g (update scale %.3g, "
			    "max |w| %.3g)\n",
			    label, n, (unsigned long long)step, du, dabs, wmax);
			fail();
		}
		worst->upd = RPS_MAX(worst->upd, du / RPS_MAX(dabs, 1e-30));
		moved = dmax / RPS_MAX(wmax, 1e-6);
		worst->moved = RPS_MIN(worst->moved, moved);
		if (!(moved >= 1e-3)) {
			print_error("%s n=%zu step=%llu: w barely moved (%.3g)\n", label, n,
				    (unsigned long long)step, moved);
			fail();
		}
	}
	bufs_free(&b);
}

/* One case of every optimizer x schedule x decay x clipping x size. */
static void run_pair(size_t ki, size_t si, uint64_t warmup, size_t z0, int *cases,
		     struct worst *worst)
{
	for (int decay = 0; decay < 2; decay++)
		for (int clip = 0; clip < 3; clip++)
			for (size_t zi = z0; zi < RPS_ARRAY_SIZE(sizes); zi++) {
				struct rps_optim_opts o;
				char label[128];
				/* late steps too (adam bias correction) */
				uint64_t step0 =
				    schedules[si] == RPS_LR_CONSTANT && clip == 1 ? 100 : 0;

				base_opts(&o, kinds[ki], schedules[si]);
				o.weight_decay = decay ? 0.1f : 0.0f;
				o.staleness_lr = *cases % 2;
				o.warmup_steps = warmup;
				snprintf(label, sizeof(label),
					 "%s sched=%d decay=%d clip=%d stale_lr=%d warmup=%d",
					 rps_optim_kind_name(o.kind), (int)o.schedule, decay, clip,
					 o.staleness_lr, (int)warmup);
				run_case(&o, sizes[zi], step0, clip, label, worst);
				(*cases)++;
			}
}

/* The first five optimizers and four schedules (the older ones) come first,
 * in their old order; then adamw and linear; then the old ones again with a
 * warm-up of 2 of the schedules' 4 steps, on n > 1 (a single element in a
 * random stream that cancels is a float corner case, not news: pass 0 has it). */
static void test_apply_matches_ref(void **state)
{
	struct worst worst = {0, 0, INFINITY};
	const size_t nk = RPS_ARRAY_SIZE(kinds), ns = RPS_ARRAY_SIZE(schedules);
	int cases = 0;

	(void)state;
	for (int pass = 0; pass < 3; pass++)
		for (size_t ki = 0; ki < nk; ki++)
			for (size_t si = 0; si < ns; si++) {
				int old = ki < nk - 1 && si < ns - 1;

				if (pass == 1 && !old)
					run_pair(ki, si, (ki + si) % 2 ? 2 : 0, 0, &cases, &worst);
				else if (pass != 1 && old)
					run_pair(ki, si, pass ? 2 : 0, pass ? 1 : 0, &cases,
						 &worst);
			}
	assert_int_equal(cases, (5 * 4 + 10) * 2 * 3 * 4 + 5 * 4 * 2 * 3 * 3);
	print_message("%d cases x %d steps: worst relative error of w/m/v %.3g, of the update "
		      "%.3g; smallest update/|w| %.3g\n",
		      cases, NSTEPS, worst.err, worst.upd, worst.moved);
}

/* The metric is sensitive: a reference run with lr off by 1e-4 (relative) is
 * caught, for every optimizer. */
static void test_metric_detects_small_errors(void **state)
{
	(void)state;
	for (size_t ki = 0; ki < RPS_ARRAY_SIZE(kinds); ki++) {
		const size_t n = 1000;
		struct rps_optim_opts o, bad;
		struct bufs b;
		int nf = rps_optim_state_floats(kinds[ki]);
		double e;

		base_opts(&o, kinds[ki], RPS_LR_CONSTANT);
		bad = o;
		bad.lr = o.lr * (1.0f + 1e-4f);
		bufs_alloc(&b, n);
		for (size_t i = 0; i < n; i++) {
			b.w1[i] = b.w2[i] = frand();
			b.g1[i] = b.g2[i] = frand();
		}
		rps_optim_apply(&o, b.w1, b.g1, nf >= 1 ? b.m1 : NULL, nf >= 2 ? b.v1 : NULL, n, 0,
				0);
		rps_optim_apply_ref(&bad, b.w2, b.g2, nf >= 1 ? b.m2 : NULL, nf >= 2 ? b.v2 : NULL,
				    n, 0, 0);
		e = rel_err(b.w1, b.w2, NULL, 0, n);
		if (!(e > 2 * TOL)) {
			print_error("%s: lr error 1e-4 not detected (%.3g)\n",
				    rps_optim_kind_name(kinds[ki]), e);
			fail();
		}
		bufs_free(&b);
	}
}

/* ---- hand-computed steps ---- */

static void test_sgd_by_hand(void **state)
{
	struct rps_optim_opts o;
	float w[3] = {1, 2, 3}, g[3] = {0.5f, -1, 2};
	float w2[3] = {1, 2, 3}, g2[3] = {0.5f, -1, 2};

	(void)state;
	rps_optim_opts_default(&o);
	o.lr = 0.1f;
	rps_optim_apply(&o, w, g, NULL, NULL, 3, 0, 0);
	near(w[0], 0.95, 1e-6, "sgd w0");
	near(w[1], 2.1, 1e-6, "sgd w1");
	near(w[2], 2.8, 1e-6, "sgd w2");

	/* decay: g + 0.1 w = { 0.6, -0.8, 2.3 } */
	o.weight_decay = 0.1f;
	rps_optim_apply(&o, w2, g2, NULL, NULL, 3, 0, 0);
	near(w2[0], 0.94, 1e-6, "sgd+wd w0");
	near(w2[1], 2.08, 1e-6, "sgd+wd w1");
	near(w2[2], 2.77, 1e-6, "sgd+wd w2");

	/* staleness 3 with staleness_lr: lr / 4 */
	{
		float ws[1] = {1}, gs[1] = {1};

		o.weight_decay = 0;
		o.staleness_lr = 1;
		rps_optim_apply(&o, ws, gs, NULL, NULL, 1, 0, 3);
		near(ws[0], 0.975, 1e-7, "staleness lr");
		o.staleness_lr = 0;
		gs[0] = 1;
		rps_optim_apply(&o, ws, gs, NULL, NULL, 1, 0, 3);
		near(ws[0], 0.875, 1e-7, "staleness ignored");
	}
	/* schedule: step at t = 3 with step_size 3 uses lr * gamma */
	{
		float ws[1] = {1}, gs[1] = {1};

		o.schedule = RPS_LR_STEP;
		o.step_size = 3;
		o.gamma = 0.5f;
		rps_optim_apply(&o, ws, gs, NULL, NULL, 1, 3, 0);
		near(ws[0], 0.95, 1e-7, "scheduled lr");
	}
}

static void test_clip_by_hand(void **state)
{
	struct rps_optim_opts o;
	float w[2] = {0, 0}, g[2] = {3, 4};

	(void)state;
	rps_optim_opts_default(&o);
	o.lr = 1.0f;
	o.clip_norm = 1.0f;
	rps_optim_apply(&o, w, g, NULL, NULL, 2, 0, 0);
	near(w[0], -0.6, 1e-6, "clipped w0");
	near(w[1], -0.8, 1e-6, "clipped w1");

	/* below the bound: untouched */
	w[0] = w[1] = 0;
	g[0] = 3;
	g[1] = 4;
	o.clip_norm = 10.0f;
	rps_optim_apply(&o, w, g, NULL, NULL, 2, 0, 0);
	near(w[0], -3, 1e-6, "unclipped w0");
	near(w[1], -4, 1e-6, "unclipped w1");

	/* clipping comes before decay: g = (0.6, 0.8) + 1 * w */
	w[0] = 1;
	w[1] = 1;
	g[0] = 3;
	g[1] = 4;
	o.clip_norm = 1.0f;
	o.weight_decay = 1.0f;
	rps_optim_apply(&o, w, g, NULL, NULL, 2, 0, 0);
	near(w[0], 1 - 1.6, 1e-6, "clip then decay w0");
	near(w[1], 1 - 1.8, 1e-6, "clip then decay w1");
}

static void test_momentum_nesterov_adagrad_by_hand(void **state)
{
	struct rps_optim_opts o;
	float w, g, m;

	(void)state;
	rps_optim_opts_default(&o);
	o.lr = 0.1f;
	o.momentum = 0.9f;

	o.kind = RPS_OPT_MOMENTUM; /* v = 1, w = 0.9; v = 1.9, w = 0.71 */
	w = 1;
	m = 0;
	g = 1;
	rps_optim_apply(&o, &w, &g, &m, NULL, 1, 0, 0);
	near(m, 1.0, 1e-7, "momentum v1");
	near(w, 0.9, 1e-7, "momentum w1");
	g = 1;
	rps_optim_apply(&o, &w, &g, &m, NULL, 1, 1, 0);
	near(m, 1.9, 1e-6, "momentum v2");
	near(w, 0.71, 1e-6, "momentum w2");

	o.kind = RPS_OPT_NESTEROV; /* w -= 0.1 (1 + 0.9); then 0.1 (1 + 0.9 * 1.9) */
	w = 1;
	m = 0;
	g = 1;
	rps_optim_apply(&o, &w, &g, &m, NULL, 1, 0, 0);
	near(w, 0.81, 1e-6, "nesterov w1");
	g = 1;
	rps_optim_apply(&o, &w, &g, &m, NULL, 1, 1, 0);
	near(m, 1.9, 1e-6, "nesterov v2");
	near(w, 0.539, 1e-6, "nesterov w2");

	o.kind = RPS_OPT_ADAGRAD; /* s = 4: w -= 0.1 * 2 / 2; s = 8: w -= 0.2 / sqrt(8) */
	w = 1;
	m = 0;
	g = 2;
	rps_optim_apply(&o, &w, &g, &m, NULL, 1, 0, 0);
	near(m, 4.0, 1e-6, "adagrad s1");
	near(w, 0.9, 1e-6, "adagrad w1");
	g = 2;
	rps_optim_apply(&o, &w, &g, &m, NULL, 1, 1, 0);
	near(m, 8.0, 1e-6, "adagrad s2");
	near(w, 0.9 - 0.2 / sqrt(8.0), 1e-6, "adagrad w2");
}

static void test_adam_by_hand(void **state)
{
	/* with bias correction, a constant gradient moves every weight by lr *
	 * sign(g) per step (up to eps), from the very first step (t = 1) */
	struct rps_optim_opts o;
	float w[4] = {1, -1, 0.5f, 2}, gsrc[4] = {0.3f, -2, 1e-3f, -5}, g[4];
	float m[4] = {0}, v[4] = {0};
	const float w0[4] = {1, -1, 0.5f, 2};

	(void)state;
	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_ADAM;
	o.lr = 0.01f;
	for (uint64_t t = 0; t < 3; t++) {
		memcpy(g, gsrc, sizeof(g));
		rps_optim_apply(&o, w, g, m, v, 4, t, 0);
		for (int i = 0; i < 4; i++) {
			double want = w0[i] - (double)(t + 1) * o.lr * (gsrc[i] > 0 ? 1 : -1);

			near(w[i], want, 2e-6, "adam w");
		}
	}
	/* first moment and second moment after 3 steps: (1 - b^3) g, (1 - b2^3) g^2 */
	near(m[1], -2.0 * (1 - pow(0.9, 3)), 1e-6, "adam m");
	near(v[1], 4.0 * (1 - pow((double)0.999f, 3)), 1e-8, "adam v");
}

/* AdamW: the decay is decoupled (w shrinks by lr wd w; the moments see g
 * alone), and the adam step is exactly adam's on the decayed weights. */
static void test_adamw_by_hand(void **state)
{
	struct rps_optim_opts o;
	float w[2] = {2, -4}, g[2] = {0.5f, -1}, m[2] = {0}, v[2] = {0};
	float wa[2] = {2, -4}, ga[2] = {0.5f, -1}, ma[2] = {0}, va[2] = {0};

	(void)state;
	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_ADAMW;
	o.lr = 0.1f;
	o.weight_decay = 0.5f;
	/* t = 1: w *= 1 - 0.05, then adam moves by lr * sign(g) */
	rps_optim_apply(&o, w, g, m, v, 2, 0, 0);
	near(w[0], 2 * 0.95 - 0.1, 1e-6, "adamw w0");
	near(w[1], -4 * 0.95 + 0.1, 1e-6, "adamw w1");
	near(m[0], 0.1 * 0.5, 1e-7, "adamw m: g without decay");
	near(v[1], (1 - (double)0.999f) * 1.0, 1e-9, "adamw v: g^2 without decay");
	/* adam with the same decay puts it into g instead: different moments */
	o.kind = RPS_OPT_ADAM;
	rps_optim_apply(&o, wa, ga, ma, va, 2, 0, 0);
	near(ma[0], 0.1 * (0.5 + 0.5 * 2), 1e-7, "adam m: g + wd w");
	/* no decay: adamw == adam, bit for bit */
	{
		float w1[5] = {1, 2, 3, 4, 5}, w2[5] = {1, 2, 3, 4, 5};
		float g1[5] = {1, -1, 2, -2, 3}, g2[5] = {1, -1, 2, -2, 3};
		float m1[5] = {0}, v1[5] = {0}, m2[5] = {0}, v2[5] = {0};

		o.weight_decay = 0;
		o.kind = RPS_OPT_ADAM;
		rps_optim_apply(&o, w1, g1, m1, v1, 5, 0, 0);
		o.kind = RPS_OPT_ADAMW;
		rps_optim_apply(&o, w2, g2, m2, v2, 5, 0, 0);
		assert_memory_equal(w1, w2, sizeof(w1));
	}
}

/* ---- schedules ---- */

static void test_lr_schedules(void **state)
{
	struct rps_optim_opts o;

	(void)state;
	rps_optim_opts_default(&o);
	o.lr = 1.0f;
	near(rps_optim_lr_at(&o, 0), 1.0, 0, "constant 0");
	near(rps_optim_lr_at(&o, 123456), 1.0, 0, "constant t");

	o.schedule = RPS_LR_STEP;
	o.step_size = 3;
	o.gamma = 0.5f;
	near(rps_optim_lr_at(&o, 0), 1.0, 1e-7, "step 0");
	near(rps_optim_lr_at(&o, 2), 1.0, 1e-7, "step 2");
	near(rps_optim_lr_at(&o, 3), 0.5, 1e-7, "step 3");
	near(rps_optim_lr_at(&o, 5), 0.5, 1e-7, "step 5");
	near(rps_optim_lr_at(&o, 6), 0.25, 1e-7, "step 6");
	near(rps_optim_lr_at(&o, 30), pow(0.5, 10), 1e-9, "step 30");

	o.schedule = RPS_LR_EXP;
	o.gamma = 0.9f;
	near(rps_optim_lr_at(&o, 0), 1.0, 1e-7, "exp 0");
	near(rps_optim_lr_at(&o, 1), 0.9, 1e-7, "exp 1");
	near(rps_optim_lr_at(&o, 2), 0.81, 1e-6, "exp 2");
	near(rps_optim_lr_at(&o, 10), pow(0.9f, 10), 1e-6, "exp 10");

	o.schedule = RPS_LR_COSINE;
	o.total_steps = 10;
	o.lr_min = 0.1f;
	near(rps_optim_lr_at(&o, 0), 1.0, 1e-7, "cosine 0");
	near(rps_optim_lr_at(&o, 1), 0.97797543, 1e-6, "cosine 1");
	near(rps_optim_lr_at(&o, 5), 0.55, 1e-6, "cosine T/2");
	near(rps_optim_lr_at(&o, 10), 0.1, 1e-7, "cosine T");
	near(rps_optim_lr_at(&o, 20), 0.1, 1e-7, "cosine after T");

	o.schedule = RPS_LR_LINEAR; /* 1 -> 0.1 over 10 steps */
	near(rps_optim_lr_at(&o, 0), 1.0, 1e-7, "linear 0");
	near(rps_optim_lr_at(&o, 1), 0.91, 1e-7, "linear 1");
	near(rps_optim_lr_at(&o, 5), 0.55, 1e-7, "linear T/2");
	near(rps_optim_lr_at(&o, 10), 0.1, 1e-7, "linear T");
	near(rps_optim_lr_at(&o, 99), 0.1, 1e-7, "linear after T");

	/* warm-up 4 of 10 steps: 0.25, 0.5, 0.75, 1, then linear over 6 */
	o.warmup_steps = 4;
	near(rps_optim_lr_at(&o, 0), 0.25, 1e-7, "warmup 0");
	near(rps_optim_lr_at(&o, 1), 0.5, 1e-7, "warmup 1");
	near(rps_optim_lr_at(&o, 3), 1.0, 1e-7, "warmup 3");
	near(rps_optim_lr_at(&o, 4), 1.0, 1e-7, "after warmup: linear 0");
	near(rps_optim_lr_at(&o, 7), 1.0 - 0.9 * 3 / 6, 1e-7, "after warmup: linear 3 of 6");
	near(rps_optim_lr_at(&o, 10), 0.1, 1e-7, "after warmup: linear end");
	o.schedule = RPS_LR_COSINE;
	near(rps_optim_lr_at(&o, 7), 0.1 + 0.9 * (1 + cos(M_PI * 3 / 6)) / 2, 1e-6,
	     "after warmup: cosine 3 of 6");
	o.schedule = RPS_LR_STEP; /* the steps count from the end of the warm-up */
	o.step_size = 3;
	o.gamma = 0.5f;
	near(rps_optim_lr_at(&o, 6), 1.0, 1e-7, "after warmup: step 2");
	near(rps_optim_lr_at(&o, 7), 0.5, 1e-7, "after warmup: step 3");
	o.schedule = RPS_LR_CONSTANT;
	near(rps_optim_lr_at(&o, 2), 0.75, 1e-7, "warmup of constant");
	near(rps_optim_lr_at(&o, 1000), 1.0, 0, "constant after warmup");
	/* the step uses it: sgd at step 0 with warm-up 4 moves by lr / 4 */
	{
		float w = 1, g = 1;

		rps_optim_apply(&o, &w, &g, NULL, NULL, 1, 0, 0);
		near(w, 0.75, 1e-7, "sgd in warm-up");
		g = 1;
		rps_optim_apply_ref(&o, &w, &g, NULL, NULL, 1, 1, 0);
		near(w, 0.25, 1e-7, "ref in warm-up");
	}
}

/* ---- options, names, state ---- */

static void test_opts_check(void **state)
{
	struct rps_optim_opts o, bad;

	(void)state;
	rps_optim_opts_default(&o);
	assert_int_equal(o.kind, RPS_OPT_SGD);
	near(o.lr, 0.01, 1e-9, "default lr");
	near(o.momentum, 0.9, 1e-7, "default momentum");
	near(o.beta1, 0.9, 1e-7, "default beta1");
	near(o.beta2, 0.999, 1e-7, "default beta2");
	near(o.eps, 1e-8, 1e-12, "default eps");
	assert_true(o.weight_decay == 0 && o.clip_norm == 0);
	assert_int_equal(o.schedule, RPS_LR_CONSTANT);
	assert_int_equal(rps_optim_opts_check(&o), 0);
	for (size_t k = 0; k < RPS_ARRAY_SIZE(kinds); k++) {
		bad = o;
		bad.kind = kinds[k];
		assert_int_equal(rps_optim_opts_check(&bad), 0);
	}
	assert_int_equal(rps_optim_opts_check(NULL), -EINVAL);

#define REJECT(stmt)                                                                               \
	do {                                                                                       \
		bad = o;                                                                           \
		stmt;                                                                              \
		if (rps_optim_opts_check(&bad) != -EINVAL) {                                       \
			print_error("accepted: %s\n", #stmt);                                      \
			fail();                                                                    \
		}                                                                                  \
	} while (0)
#define ACCEPT(stmt)                                                                               \
	do {                                                                                       \
		bad = o;                                                                           \
		stmt;                                                                              \
		if (rps_optim_opts_check(&bad) != 0) {                                             \
			print_error("rejected: %s\n", #stmt);                                      \
			fail();                                                                    \
		}                                                                                  \
	} while (0)

	REJECT(bad.kind = (enum rps_optim_kind)99);
	REJECT(bad.lr = 0);
	REJECT(bad.lr = -0.1f);
	REJECT(bad.lr = NAN);
	REJECT(bad.lr = INFINITY);
	REJECT(bad.momentum = 1.0f);
	REJECT(bad.momentum = -0.1f);
	REJECT(bad.beta1 = 1.0f);
	REJECT(bad.beta1 = -0.1f);
	REJECT(bad.beta2 = 1.0f);
	REJECT(bad.beta2 = 1.5f);
	REJECT(bad.beta2 = NAN);
	REJECT(bad.eps = -1e-8f);
	REJECT(bad.kind = RPS_OPT_ADAM; bad.eps = 0);
	REJECT(bad.kind = RPS_OPT_ADAGRAD; bad.eps = 0);
	REJECT(bad.weight_decay = -0.1f);
	REJECT(bad.clip_norm = -1.0f);
	REJECT(bad.clip_norm = NAN);
	REJECT(bad.schedule = (enum rps_lr_schedule)7);
	REJECT(bad.schedule = RPS_LR_STEP; bad.step_size = 0);
	REJECT(bad.schedule = RPS_LR_STEP; bad.gamma = 0);
	REJECT(bad.schedule = RPS_LR_EXP; bad.gamma = -0.5f);
	REJECT(bad.schedule = RPS_LR_EXP; bad.gamma = 1.5f);
	REJECT(bad.schedule = RPS_LR_COSINE; bad.total_steps = 0);
	REJECT(bad.schedule = RPS_LR_COSINE; bad.total_steps = 10; bad.lr_min = 1.0f);
	REJECT(bad.schedule = RPS_LR_COSINE; bad.total_steps = 10; bad.lr_min = -0.1f);
	REJECT(bad.kind = RPS_OPT_ADAMW; bad.eps = 0);
	REJECT(bad.schedule = RPS_LR_LINEAR; bad.total_steps = 0);
	REJECT(bad.schedule = RPS_LR_LINEAR; bad.total_steps = 10; bad.lr_min = 1.0f);
	REJECT(bad.schedule = RPS_LR_LINEAR; bad.total_steps = 10; bad.warmup_steps = 10);
	REJECT(bad.schedule = RPS_LR_COSINE; bad.total_steps = 10; bad.warmup_steps = 11);

	ACCEPT(bad.momentum = 0);
	ACCEPT(bad.eps = 0); /* sgd does not divide */
	ACCEPT(bad.weight_decay = 1e-4f; bad.clip_norm = 5);
	ACCEPT(bad.schedule = RPS_LR_STEP; bad.step_size = 100; bad.gamma = 0.1f);
	ACCEPT(bad.schedule = RPS_LR_EXP; bad.gamma = 1.0f);
	ACCEPT(bad.schedule = RPS_LR_COSINE; bad.total_steps = 10; bad.lr_min = 0.001f);
	ACCEPT(bad.schedule = RPS_LR_COSINE; bad.total_steps = 10; bad.lr_min = bad.lr);
	ACCEPT(bad.schedule = RPS_LR_LINEAR; bad.total_steps = 10; bad.warmup_steps = 9);
	ACCEPT(bad.warmup_steps = 1000); /* constant: no length to fit in */
	ACCEPT(bad.kind = RPS_OPT_ADAMW; bad.weight_decay = 0.01f);
	/* the public names of the same */
	{
		struct rps_optim_opts p;

		memset(&p, 0x5a, sizeof(p));
		rps_optim_opts_init(&p);
		assert_memory_equal(&p, &o, sizeof(p));
		assert_int_equal(p.warmup_steps, 0);
		assert_int_equal(rps_optim_opts_validate(&p), 0);
		p.lr = 0;
		assert_int_equal(rps_optim_opts_validate(&p), -EINVAL);
		assert_int_equal(rps_optim_opts_validate(NULL), -EINVAL);
	}
	/* sameness: every field; descriptions */
	{
		struct rps_optim_opts a = o, b2 = o;
		char d[128];

		assert_true(rps_optim_opts_same(&a, &b2));
		b2.warmup_steps = 1;
		assert_false(rps_optim_opts_same(&a, &b2));
		b2 = o;
		b2.staleness_lr = 7;
		a.staleness_lr = 1;
		assert_true(rps_optim_opts_same(&a, &b2));
		a.kind = RPS_OPT_ADAMW;
		a.lr = 0.001f;
		a.schedule = RPS_LR_LINEAR;
		a.total_steps = 100;
		a.warmup_steps = 5;
		rps_optim_describe(&a, d, sizeof(d));
		assert_string_equal(d, "adamw lr 0.001 linear over 100 warmup 5");
	}
#undef REJECT
#undef ACCEPT
}

static void test_names_and_state(void **state)
{
	static const char *const knames[] = {"sgd",	"momentum", "nesterov",
					     "adagrad", "adam",	    "adamw"};
	static const char *const snames[] = {"constant", "step", "exp", "cosine", "linear"};
	static const int floats[] = {0, 1, 1, 1, 2, 2};

	(void)state;
	for (int k = 0; k < 6; k++) {
		struct rps_optim_opts o;
		struct rps_optim_state st;
		const size_t n = 1001;

		assert_int_equal(rps_optim_kind_parse(knames[k]), k);
		assert_string_equal(rps_optim_kind_name((enum rps_optim_kind)k), knames[k]);
		assert_int_equal(rps_optim_state_floats((enum rps_optim_kind)k), floats[k]);

		rps_optim_opts_default(&o);
		o.kind = (enum rps_optim_kind)k;
		memset(&st, 0xa5, sizeof(st));
		assert_int_equal(rps_optim_state_init(&st, &o, n), 0);
		assert_int_equal(st.step, 0);
		if (floats[k] >= 1) {
			assert_non_null(st.m);
			assert_int_equal((uintptr_t)st.m % 64, 0);
			for (size_t i = 0; i < n; i++)
				assert_true(st.m[i] == 0.0f);
		} else {
			assert_null(st.m);
		}
		if (floats[k] >= 2) {
			assert_non_null(st.v);
			assert_int_equal((uintptr_t)st.v % 64, 0);
			for (size_t i = 0; i < n; i++)
				assert_true(st.v[i] == 0.0f);
		} else {
			assert_null(st.v);
		}
		rps_optim_state_free(&st);
		assert_null(st.m);
		assert_null(st.v);
	}
	for (int s = 0; s < 5; s++) {
		assert_int_equal(rps_optim_schedule_parse(snames[s]), s);
		assert_string_equal(rps_optim_schedule_name((enum rps_lr_schedule)s), snames[s]);
	}
	assert_int_equal(rps_optim_kind_parse("ADAM"), RPS_OPT_ADAM);
	assert_int_equal(rps_optim_kind_parse("rmsprop"), -EINVAL);
	assert_int_equal(rps_optim_kind_parse(""), -EINVAL);
	assert_int_equal(rps_optim_schedule_parse("poly"), -EINVAL);
	assert_string_equal(rps_optim_kind_name((enum rps_optim_kind)42), "unknown");
	assert_int_equal(rps_optim_state_floats((enum rps_optim_kind)42), -EINVAL);

	/* n = 0 is a no-op */
	{
		struct rps_optim_opts o;
		float w = 1, g = 1;

		rps_optim_opts_default(&o);
		rps_optim_apply(&o, &w, &g, NULL, NULL, 0, 0, 0);
		rps_optim_apply_ref(&o, &w, &g, NULL, NULL, 0, 0, 0);
		assert_true(w == 1.0f);
	}
}

/* The public local optimizer runs rps_optim_apply with its own step count. */
static void test_public_optimizer(void **state)
{
	struct rps_optim_opts o;
	struct rps_optim_state st;
	struct rps_optimizer *opt;
	float w1[33], w2[33], g1[33], g2[33];

	rps_optim_opts_default(&o);
	o.kind = RPS_OPT_ADAM;
	o.schedule = RPS_LR_EXP;
	o.gamma = 0.9f;
	assert_int_equal(rps_optimizer_create(&o, 33, &opt), 0);
	assert_int_equal(rps_optim_state_init(&st, &o, 33), 0);
	for (int i = 0; i < 33; i++)
		w1[i] = w2[i] = (float)i / 10.0f;
	for (uint64_t s = 0; s < 5; s++) {
		for (int i = 0; i < 33; i++)
			g1[i] = g2[i] = (float)((i * 7 + (int)s) % 11) - 5.0f;
		rps_optimizer_step(opt, w1, g1);
		rps_optim_apply(&o, w2, g2, st.m, st.v, 33, s, 0);
		assert_memory_equal(w1, w2, sizeof(w1));
	}
	rps_optimizer_destroy(opt);
	rps_optim_state_free(&st);
	o.lr = -1;
	assert_int_equal(rps_optimizer_create(&o, 33, &opt), -EINVAL);
	assert_null(opt);
	rps_optimizer_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_public_optimizer),
	    cmocka_unit_test(test_apply_matches_ref),
	    cmocka_unit_test(test_metric_detects_small_errors),
	    cmocka_unit_test(test_sgd_by_hand),
	    cmocka_unit_test(test_clip_by_hand),
	    cmocka_unit_test(test_momentum_nesterov_adagrad_by_hand),
	    cmocka_unit_test(test_adam_by_hand),
	    cmocka_unit_test(test_adamw_by_hand),
	    cmocka_unit_test(test_lr_schedules),
	    cmocka_unit_test(test_opts_check),
	    cmocka_unit_test(test_names_and_state),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
