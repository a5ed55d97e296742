/* fmnist-train --sync ps|ring (docs/allreduce.md).
 *
 * ps (default): the servers hold the parameters and apply the optimizer.
 * ring: the workers all-reduce the gradients among themselves
 * (rps_worker_allreduce, the sum of each worker's gradient scaled by 1 / W:
 * the mean over the global batch) and every worker applies the same
 * optimizer (rps_optimizer_step, the servers' code) to the same bits, so
 * their parameters stay identical; no key is declared on the servers. Every
 * worker starts from the same parameters (--seed, as --local, or
 * --init-model). One optimizer step per step, as BSP. */
#ifndef FMNIST_SYNC_H
#define FMNIST_SYNC_H

#include <stddef.h>
#include <rdmaps/rdmaps.h>

enum sync_mode { SYNC_PS = 0, SYNC_RING = 1 };

/* "ps" or "ring" into *mode_p: 0, or -EINVAL with a message on stderr. */
int sync_parse(const char *arg, enum sync_mode *mode_p);
const char *sync_name(enum sync_mode m);

/* One ring step after the gradient: grad (n tensors back to back, keys and
 * lens) all-reduced, then opt applied to params. 0 or the all-reduce's error
 * (reported). */
int sync_ring_step(struct rps_worker *w, struct rps_optimizer *opt, const rps_key_t *keys,
		   const size_t *lens, int n, float *params, float *grad);

#endif
