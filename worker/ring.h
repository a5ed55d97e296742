/* Ring all-reduce among the job's workers (docs/allreduce.md).
 *
 * Every worker listens on a port of its own (registered with the scheduler,
 * so the cluster map carries it) from create on; the first
 * rps_worker_allreduce connects it to its right neighbour (rank + 1 mod W)
 * with the same authenticated hello as every other connection. Frames flow
 * one way round the ring: RING_DATA pieces of the flattened tensor, in order,
 * and RING_ABORT when a rank fails (forwarded until it is back at its origin).
 *
 * Threads
 * - The ring's poller (its own transport instance: TCP) accepts the left
 *   neighbour, queues its frames and records a lost connection; it owns and
 *   closes the left connection.
 * - The caller of rps_worker_allreduce (one at a time: call_lock) connects
 *   and owns the right connection, sends on it and consumes the queue.
 */
#ifndef RPS_WORKER_RING_H
#define RPS_WORKER_RING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "src/proto.h"
#include "transport/transport.h"

struct rps_worker;

struct rps_wring_frame {
	struct rps_wring_frame *next;
	struct rps_frame_hdr hdr;
	struct rps_ring_data d;
	const float *data; /* d.count elements (ABORT: reason text, data_len bytes) */
	size_t data_len;
	void *token;
};

struct rps_wring {
	struct rps_worker *w;
	struct rps_transport *tr;
	uint16_t port;
	uint32_t rank, nworkers, left_rank, right_rank;
	pthread_t thread;
	int started;
	_Atomic int stop;

	pthread_mutex_t lock; /* the members below, up to call_lock */
	pthread_cond_t cond;
	struct rps_conn *left; /* poller's */
	int left_status;       /* 0, or -errno: the left neighbour was lost */
	int right_status;      /* 0, or -errno: the right connection was lost */
	struct rps_wring_frame *head, *tail;
	uint64_t sends_done; /* SEND_DONE events of RING_DATA frames to the right */

	pthread_mutex_t call_lock; /* one allreduce at a time; the members below */
	struct rps_conn *right;
	char right_peer[96];
	uint64_t seq;
	uint64_t sends_posted; /* RING_DATA frames posted zero-copy (ctx 1) */
	int broken; /* a call failed: the ring is not used again (that error) */
	char broken_why[400]; /* its reason, as logged (rps_worker_allreduce_error) */
};

/* Listen (cfg host, any port) and start the poller; *port_p gets the port
 * to register with the scheduler. rank/nworkers are set later
 * (rps_wring_set_rank), once the scheduler has given them. */
int rps_wring_create(struct rps_worker *w, const struct rps_tr_params *base,
		     const char *host, struct rps_wring **ring_p, uint16_t *port_p);
void rps_wring_set_rank(struct rps_wring *r, uint32_t rank, uint32_t nworkers);
void rps_wring_destroy(struct rps_wring *r);

/* The queue (ring_net.c): the next frame from the left neighbour, waiting
 * up to deadline_ns; 0 with *f_p, or the neighbour's loss (-EHOSTDOWN ...),
 * -ETIMEDOUT. rps_wring_frame_done gives it back. */
int rps_wring_next(struct rps_wring *r, uint64_t deadline_ns, struct rps_wring_frame **f_p);
void rps_wring_frame_done(struct rps_wring *r, struct rps_wring_frame *f);
/* Connect to the right neighbour from the cluster map (caller, under
 * call_lock), until deadline_ns. */
int rps_wring_connect_right(struct rps_wring *r, uint64_t deadline_ns);
/* Wait until every frame posted to the right left this process (its memory
 * is free again), the connection was lost or deadline_ns: 0, -errno. */
int rps_wring_flush(struct rps_wring *r, uint64_t deadline_ns);
/* " (the scheduler reports worker rank 2 dead)" into buf when its map has
 * dead workers, else "". */
void rps_wring_dead_text(struct rps_wring *r, char *buf, size_t cap);
/* 0, or -errno once the right connection was lost. */
int rps_wring_right_status(struct rps_wring *r);

#endif
