/* rdmaps — aggregation on the host before the network
 * (docs/local-aggregation.md).
 *
 * When several workers of a job run on one machine, rps_worker_local_pushpull()
 * sums their gradients in shared memory, ONE of them (the host's leader: its
 * lowest rank) pushes the sum, ends the clock and pulls the next clock's
 * values into shared memory, and every worker of the host copies them from
 * there. The others send their CLOCK with no push, so the servers' accounting
 * is that of an ordinary step and, under BSP, the parameters are exactly
 * those of rps_worker_pushpull() on every worker (the servers add a clock's
 * pushes in rank order; the host adds its workers' gradients in rank order).
 *
 * The host's workers are found at the first call: those whose processes share
 * this machine's shared memory (/dev/shm) join a segment named after the job,
 * then a barrier of all the job's workers tells each host who is there.
 * RDMAPS_LOCAL_AGG=off (rps_config "local_agg") turns it off: the call is
 * then rps_worker_pushpull() and a wait.
 */
#ifndef RDMAPS_LOCAL_H
#define RDMAPS_LOCAL_H

#include <rdmaps/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rps_worker;

/* One synchronous training step: the gradients grads of n keys (lens
 * elements each, back to back) pushed at clock c, the clock ended, the
 * values of clock c + 1 pulled into vals. With local aggregation (on by
 * default when the host has several workers of the job) the gradients are
 * summed on the host first, as above. A collective: every worker of the job
 * calls it, step after step, with the same keys and lengths; the first call
 * is a barrier of all the job's workers. One thread of a worker at a time.
 * Where no shared memory segment can be made (no /dev/shm) the worker steps
 * alone, with a warning. Returns 0, or -EINVAL (bad
 * arguments, or keys or lengths other than the first call's or another local
 * worker's), -EHOSTDOWN (a worker of this host died: the message names its
 * rank; the group stays broken), -ETIMEDOUT (a worker of this host did not
 * contribute within the worker's timeout), or the push's, clock's or pull's
 * error (the leader's, on every worker of the host). */
RPS_API int rps_worker_local_pushpull(struct rps_worker *worker, const rps_key_t *keys,
				      const float *grads, float *vals, const size_t *lens,
				      size_t n);

/* After the first rps_worker_local_pushpull: the number of the job's
 * workers on this host that aggregate together (1: none, or turned off) and
 * the rank of the one that talks to the servers for them (its own rank when
 * alone). Before it: 1 and the worker's rank. -EINVAL for NULL. */
RPS_API int rps_worker_local_size(const struct rps_worker *worker);
RPS_API int rps_worker_local_leader(const struct rps_worker *worker);

#ifdef __cplusplus
}
#endif
#endif
