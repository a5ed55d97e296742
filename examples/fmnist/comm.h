/* The communication thread of a distributed fmnist-train step.
 *
 * The compute thread only queues work: "push tensor t from gradient buffer b",
 * "end the step" (clock, then pull every tensor in the order the next forward
 * pass uses it). The communication thread posts them in that order through
 * the worker API, so the kernel copies of the sends run beside the next
 * computation instead of inside it (the scheme BytePS calls a scheduler).
 * Gradients are double-buffered: step s writes buffer s % 2 while the pushes
 * of step s - 1 may still be in flight. */
#ifndef FMNIST_COMM_H
#define FMNIST_COMM_H

#include <stddef.h>
#include <rdmaps/rdmaps.h>

struct comm;

/* keys, lens, off: per tensor; params: where pulls land; grad[2]: the two
 * gradient buffers; order: the tensors in pull order. */
int comm_start(struct rps_worker *w, int ntensors, const rps_key_t *keys, const size_t *lens,
	       const size_t *off, float *params, float *const grad[2], const int *order,
	       struct comm **c_p);
/* Queue a push of tensor t from gradient buffer buf. */
int comm_push(struct comm *c, int t, int buf);
/* Queue the end of the step: clock, then the pulls. */
int comm_end_step(struct comm *c);
/* Wait until tensor t of params holds the last queued step's pull. */
int comm_wait_param(struct comm *c, int t);
/* Wait until every push queued from buffer buf completed (it may be rewritten). */
int comm_wait_pushes(struct comm *c, int buf);
/* Wait for everything queued; then stop the thread and free. */
int comm_stop(struct comm *c);

#endif
