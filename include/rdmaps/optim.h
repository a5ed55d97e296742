/* rdmaps — the servers' optimizers, run locally.
 *
 * The update a server applies to a key on every push (RDMAPS_OPTIMIZER,
 * RDMAPS_LR, ...: struct rps_optim_opts in types.h, the `optim` of
 * struct rps_server_opts), as a program can run it on its own arrays: a
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
