/* rdmaps — the servers' optimizers, run locally.
 *
 * The update a server applies to a key on every push (the key's spec given by
 * the job, or the servers' default: RDMAPS_OPTIMIZER, RDMAPS_LR, ...: struct
 * rps_optim_opts in types.h, the `optim` of struct rps_server_opts), as a
 * program can run it on its own arrays: a
 * single-process reference to compare a distributed run against runs exactly
 * the servers' code.
 */
#ifndef RDMAPS_OPTIM_H
#define RDMAPS_OPTIM_H

#include <stddef.h>

#include <rdmaps/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An optimizer spec (struct rps_optim_opts, types.h) for the job to give
 * keys (rps_worker_declare_opt, rps_worker_set_optimizer) or to run locally:
 * fill it with the defaults (sgd, lr 0.01, momentum 0.9, betas 0.9 / 0.999,
 * eps 1e-8, no weight decay, no clipping, constant schedule, step_size 1000,
 * gamma 0.1, total_steps 0, lr_min 0, no warm-up), then set what you need. */
RPS_API void rps_optim_opts_init(struct rps_optim_opts *opts);
/* 0, or -EINVAL with the reason logged (lr <= 0, unknown kind or schedule,
 * a cosine / linear schedule without total_steps or with warmup_steps >=
 * total_steps, ...): what the servers would refuse. */
RPS_API int rps_optim_opts_validate(const struct rps_optim_opts *opts);

struct rps_optimizer; /* opaque: the options and the state of n parameters */

/* -EINVAL for options the servers would refuse, -ENOMEM. */
RPS_API int rps_optimizer_create(const struct rps_optim_opts *opts, size_t n,
				 struct rps_optimizer **opt_p);
/* One step on w[0..n) with gradient g[0..n) (g is scratch: it may be clipped
 * or decayed in place), as a server applies one push of staleness 0. */
RPS_API void rps_optimizer_step(struct rps_optimizer *opt, float *w, float *g);
/* NULL is allowed. */
RPS_API void rps_optimizer_destroy(struct rps_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
