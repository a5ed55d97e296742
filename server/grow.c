/* Server side of workers joining a running job beyond the initial count
 * (issue 24, RDMAPS_MAX_WORKERS, docs/scheduler.md "Growth").
 *
 * The server sizes its per-worker state for RDMAPS_MAX_WORKERS (server.c);
 * ranks the map does not have yet are not waited for (cluster.c queues them
 * dead and marks them gone). A map with more workers names the new ones:
 * cluster.c's on_map waits for each from the shard's clock (REVIVE), and the
 * worker's SYNC sets the clock it joins at (update.c handle_sync), as for a
 * worker that replaces a dead one. Here: the count the hello answers with,
 * and a clear error when the job grew past what this server can hold.
 */
#include "server/server_int.h"

#include "src/log.h"

void rps_srv_grow_on_map(struct rps_server *srv, const struct rps_map *map)
{
	uint32_t had = atomic_load(&srv->map_workers);

	if (!map->num_workers || map->num_workers <= had)
		return;
	atomic_store(&srv->map_workers, map->num_workers);
	if (map->num_workers > srv->nworkers)
		RPS_ERR("the job grew to %u workers, this server holds state for %u "
			"(RDMAPS_MAX_WORKERS): workers of rank >= %u are refused here; start every "
			"server with the scheduler's RDMAPS_MAX_WORKERS",
			map->num_workers, srv->nworkers, srv->nworkers);
	else if (had)
		RPS_INFO("the job grows from %u to %u workers (map epoch %u)", had,
			 map->num_workers, map->epoch);
}
