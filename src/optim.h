/* Optimizers applied in place by a shard's update thread.
 *
 * State (momentum / second moments) lives beside the parameters but outside the
 * RDMA-readable store. Vector work goes through OpenBLAS (saxpy, sscal, snrm2)
 * where BLAS has the operation; the element-wise rest is plain loops the
 * compiler vectorises.
 *
 * One step on parameters w[0..n) with gradient g[0..n) (g may be modified):
 *   t     = state->step + 1 (per slice; the schedule uses t - 1)
 *   lr_t  = sched(t - 1) / (staleness_lr ? 1 + staleness : 1), with warm-up W
 *           (warmup_steps) and T = total_steps:
 *     s < W:   sched(s) = lr * (s + 1) / W
 *     s >= W:  sched(s) = schedule(s - W) over T' = T - W steps:
 *       constant lr; step lr gamma^floor(u / step_size); exp lr gamma^u;
 *       cosine lr_min + (lr - lr_min) (1 + cos(pi min(u, T') / T')) / 2;
 *       linear lr - (lr - lr_min) min(u, T') / T'          (u = s - W)
 *   clip: if clip_norm > 0 and ||g|| > clip_norm: g *= clip_norm / ||g||
 *   decay: g += weight_decay * w         (adamw: w -= lr_t * weight_decay * w
 *                                          instead, before the adam step)
 *   sgd:       w -= lr_t * g
 *   momentum:  v = mu * v + g;           w -= lr_t * v
 *   nesterov:  v = mu * v + g;           w -= lr_t * (g + mu * v)
 *   adagrad:   s += g^2;                 w -= lr_t * g / (sqrt(s) + eps)
 *   adam:      m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *              mhat = m / (1 - b1^t); vhat = v / (1 - b2^t);
 *              w -= lr_t * mhat / (sqrt(vhat) + eps)
 *   adamw:     adam on g without decay, w decayed as above (decoupled)
 * Clipping applies to the piece of gradient given (one push frame).
 */
#ifndef RPS_OPTIM_H
#define RPS_OPTIM_H

#include <stddef.h>
#include <stdint.h>
#include <rdmaps/types.h>

struct rps_optim_state {
	float *m;       /* momentum / adam first moment / adagrad sum (n floats or NULL) */
	float *v;       /* adam second moment (n floats or NULL) */
	uint64_t step;  /* updates applied so far */
};

/* Defaults: sgd, lr 0.01, momentum 0.9, betas 0.9/0.999, eps 1e-8, no decay/clip,
 * constant schedule, no warm-up (the public rps_optim_opts_init). */
void rps_optim_opts_default(struct rps_optim_opts *o);
/* -EINVAL for nonsense (lr <= 0, betas outside [0,1), ...), logged. */
int rps_optim_opts_check(const struct rps_optim_opts *o);
/* The same check, not logged: the reason goes into why[len]. */
int rps_optim_opts_why(const struct rps_optim_opts *o, char *why, size_t len);
/* 1 if a and b are the same spec (every field; staleness_lr as a boolean). */
int rps_optim_opts_same(const struct rps_optim_opts *a, const struct rps_optim_opts *b);
/* "adam lr 0.001 cosine over 1000 warmup 10" into buf (snprintf's result). */
int rps_optim_describe(const struct rps_optim_opts *o, char *buf, size_t len);
/* Parse names: "sgd" ... -> kind / "constant" ... -> schedule, or -EINVAL. */
int rps_optim_kind_parse(const char *s);
int rps_optim_schedule_parse(const char *s);
const char *rps_optim_kind_name(enum rps_optim_kind k);
const char *rps_optim_schedule_name(enum rps_lr_schedule s);
/* Floats of state per parameter the optimizer needs (0, 1 or 2). */
int rps_optim_state_floats(enum rps_optim_kind k);
/* Learning rate at step t (0-based). */
float rps_optim_lr_at(const struct rps_optim_opts *o, uint64_t t);

/* Allocate zeroed state for n parameters (64-byte aligned); free it. */
int rps_optim_state_init(struct rps_optim_state *st, const struct rps_optim_opts *o, size_t n);
void rps_optim_state_free(struct rps_optim_state *st);

/* Apply one step to w[0..n). `m`, `v` point at the state for exactly these n
 * elements (state arrays offset by the caller for partial updates); `step` is
 * the step count used for the schedule and bias correction (0-based).
 * g is scratch: it may be clipped / decayed in place. */
void rps_optim_apply(const struct rps_optim_opts *o, float *w, float *g, float *m, float *v,
		     size_t n, uint64_t step, uint32_t staleness);

/* Reference scalar implementation of the same step (tests and benchmarks). */
void rps_optim_apply_ref(const struct rps_optim_opts *o, float *w, float *g, float *m,
			 float *v, size_t n, uint64_t step, uint32_t staleness);

#endif
