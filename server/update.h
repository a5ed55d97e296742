/* The shard's update thread (update.c): the only writer of its shard. It
 * applies pushes (optimizer, BSP sums), moves clocks, answers parked pulls
 * and writes checkpoints. The network thread validates and queues. */
#ifndef RPS_SERVER_UPDATE_H
#define RPS_SERVER_UPDATE_H

#include "server/shard.h"

/* Start the update thread, pinned to core (< 0: not pinned; a failed pin warns). */
int rps_shard_start(struct rps_shard *sh, int core);
/* Close the ring, let the thread drain it and join. Deferred pushes are
 * answered with -ECANCELED. */
void rps_shard_stop(struct rps_shard *sh);

/* Update thread: handle one popped entry (also answers parked pulls whose
 * condition now holds). Tests call it directly. */
void rps_shard_handle(struct rps_shard *sh, const struct rps_ring_entry *e);

/* Network thread: validate a push. 0 (with *meta_p), -ENOENT, -EINVAL. */
int rps_shard_push_check(const struct rps_shard *sh, const struct rps_push *p,
			 struct rps_slice_meta **meta_p);
/* Fill the ring entry of a push / declare / clock. */
void rps_shard_push_entry(const struct rps_shard *sh, struct rps_srv_req *req,
			  struct rps_ring_entry *e_p);

#endif
