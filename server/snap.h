/* Control requests in a shard (snap.c): a checkpoint or an EXPORT snapshot
 * on request, now or, under BSP, when the shard's clock reaches a target
 * clock (rdmaps-ctl checkpoint / export, rps_worker_checkpoint). The update
 * thread runs them; the server's network thread (ctlreq.c) collects. */
#ifndef RPS_SERVER_SNAP_H
#define RPS_SERVER_SNAP_H

#include "server/shard.h"

/* Update thread: an RPS_ENT_CTLREQ entry. Runs it now (ASP/SSP, no target,
 * or the clock is at or past the target) or keeps it for the target. A newer
 * request replaces one still waiting. */
void rps_shard_creq_take(struct rps_shard *sh, const struct rps_ring_entry *e);
/* Update thread, each time the clock moves by one (BSP): run the waiting
 * request if the clock reached its target. */
static inline void rps_shard_creq_at_clock(struct rps_shard *sh);
void rps_shard_creq_run(struct rps_shard *sh);

static inline void rps_shard_creq_at_clock(struct rps_shard *sh)
{
	if (sh->creq_wait && sh->clock >= sh->creq_target)
		rps_shard_creq_run(sh);
}

#endif
