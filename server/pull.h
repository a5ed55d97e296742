/* Pulls of a shard (pull.c): validation, the consistency condition, parked
 * pulls answered by the update thread. */
#ifndef RPS_SERVER_PULL_H
#define RPS_SERVER_PULL_H

#include "server/shard.h"

/* Pulls. Validation: 0 (with *meta_p, NULL for count == 0), -ENOENT, -EINVAL,
 * -EMSGSIZE (the answer would not fit a frame). */
int rps_shard_pull_check(const struct rps_shard *sh, const struct rps_pull *p,
			 struct rps_slice_meta **meta_p);
/* Does the consistency condition for min_clock hold for requester (any thread)? */
int rps_shard_pull_ready(const struct rps_shard *sh, uint32_t min_clock, uint32_t requester);
/* Park a pull unless its condition holds now: 1 = ready (not parked, the
 * caller answers), 0 = parked (the update thread answers it later). */
int rps_shard_pull_park(struct rps_shard *sh, struct rps_srv_req *req);
/* Update thread: answer every parked pull whose condition holds. */
void rps_shard_pull_release(struct rps_shard *sh);
/* Unpark the pulls of one connection (sc NULL: all); returns them as a list. */
struct rps_srv_req *rps_shard_pull_unpark(struct rps_shard *sh, const struct rps_srv_conn *sc);

#endif
