/* Workers joining a running job (issue 24, docs/scheduler.md "Growth"): the
 * job's worker count as the latest map says, and a generation counter that
 * tells a program the count changed (to split its data again). */
#include <errno.h>

#include <rdmaps/worker.h>

#include "src/log.h"
#include "worker/worker_int.h"

void rps_wgrow_on_map(struct rps_worker *w, const struct rps_map *map)
{
	uint32_t had = atomic_load(&w->grow_workers);

	if (!had)
		had = w->num_workers;
	if (!map->num_workers || map->num_workers <= had) {
		if (!atomic_load(&w->grow_workers) && map->num_workers)
			atomic_store(&w->grow_workers, map->num_workers);
		return;
	}
	atomic_store(&w->grow_workers, map->num_workers);
	if (had) {
		atomic_fetch_add(&w->grow_gen, 1);
		RPS_INFO("the job grows from %u to %u workers (map epoch %u)", had,
			 map->num_workers, map->epoch);
	}
}

int rps_worker_num_workers(const struct rps_worker *w)
{
	uint32_t n;

	if (!w)
		return -EINVAL;
	n = atomic_load(&w->grow_workers);
	return (int)(n > w->num_workers ? n : w->num_workers);
}

int rps_worker_num_workers_gen(const struct rps_worker *w)
{
	return w ? (int)atomic_load(&w->grow_gen) : -EINVAL;
}
