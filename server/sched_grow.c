/* Scheduler: workers that join a running job beyond the initial count
 * (issue 24, docs/scheduler.md "Growth").
 *
 * Opt-in: RDMAPS_MAX_WORKERS = M > RDMAPS_NUM_WORKERS = W on the scheduler
 * (and on the servers, which size their per-worker state for M). While the
 * job runs, a worker that registers and replaces no one (no dead rank) gets
 * the next rank, W, W + 1, ... up to M - 1: the job's num_workers grows by
 * one, the map gets the new node (id S + rank), and every live node gets it
 * (MAP, epoch + 1). Servers wait for the new worker from the clock it joins
 * at, exactly as for a replacement (worker/worker.c join_clock, SYNC): BSP
 * sums count it from that clock on, never part of a clock. Without
 * RDMAPS_MAX_WORKERS (0), or once M workers are in the job, an extra worker
 * is refused (-EBUSY) and told which setting would let it in.
 */
#include "server/sched_int.h"

#include <errno.h>
#include <stdio.h>

#include "src/log.h"

int rps_sched_grow_init(struct rps_sched *s)
{
	int m = s->cfg.max_workers;

	if (m && m < s->num_workers) {
		RPS_ERR("scheduler: RDMAPS_MAX_WORKERS %d is below RDMAPS_NUM_WORKERS %d: set it to "
			"0 (no growth) or to at least %d",
			m, s->num_workers, s->num_workers);
		return -EINVAL;
	}
	s->max_workers = m > s->num_workers ? m : s->num_workers;
	if (s->num_servers + s->max_workers > RPS_MAX_NODES) {
		RPS_ERR("scheduler: %d server(s) and up to %d workers (RDMAPS_MAX_WORKERS) exceed "
			"%d nodes",
			s->num_servers, s->max_workers, RPS_MAX_NODES);
		return -EINVAL;
	}
	if (s->max_workers > s->num_workers)
		RPS_INFO("workers may join the running job: %d at first, up to %d "
			 "(RDMAPS_MAX_WORKERS)",
			 s->num_workers, s->max_workers);
	return 0;
}

int rps_sched_grow_slot(struct rps_sched *s, const struct rps_register *r, char *why, size_t len)
{
	uint32_t rank = (uint32_t)s->num_workers;
	int i = s->nslots;

	if (s->max_workers <= s->num_workers) {
		if (s->max_workers > s->cfg.num_workers)
			snprintf(why, len,
				 "cluster complete: %d workers, the most RDMAPS_MAX_WORKERS=%d "
				 "allows, and no dead worker to replace",
				 s->num_workers, s->max_workers);
		else
			snprintf(why, len,
				 "cluster complete (%d servers, %d workers) and no dead worker to "
				 "replace; to let workers join a running job, start the scheduler "
				 "and the servers with RDMAPS_MAX_WORKERS > %d",
				 s->num_servers, s->num_workers, s->num_workers);
		return -1;
	}
	if (r->want_rank != UINT32_MAX && r->want_rank != rank) {
		/* a live rank, or one beyond the next: a worker started twice
		 * or with another job's settings, not a new one */
		snprintf(why, len,
			 "worker rank %u is %s; a worker joining the running job gets rank %u "
			 "(unset RDMAPS_RANK)",
			 r->want_rank, r->want_rank < rank ? "alive" : "not the next one", rank);
		return -1;
	}
	s->num_workers++;
	s->nslots++;
	s->mapbuf_len = sizeof(struct rps_map) + (size_t)s->nslots * sizeof(struct rps_node);
	s->slots[i].node.rank = rank;
	s->slots[i].state = SLOT_EMPTY;
	return i;
}
