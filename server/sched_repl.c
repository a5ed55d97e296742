/* Scheduler: the map for a replacement server that joins as a backup
 * (RDMAPS_REPLICAS > 1, server/repl_join.c). It holds no rank of its own, so
 * it asks over a control connection (role ctl) with REPL_MAP: where every
 * server rank is served now and which are alive. */
#include "server/sched_int.h"

#include <errno.h>
#include <string.h>

#include "src/alloc.h"

void rps_sched_on_repl_map(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h)
{
	size_t len = sizeof(struct rps_map) + (size_t)s->nslots * sizeof(struct rps_node);
	struct rps_map *m;
	struct rps_node *nodes;

	if (s->state != SCHED_RUNNING) {
		/* forming: the servers join normally; ending: nothing to back up */
		rps_sched_send_frame(p, RPS_OP_REPL_MAP, h->req_id,
				     s->state == SCHED_ENDING ? -ECANCELED : -EAGAIN, 0, NULL, 0,
				     NULL, 0);
		return;
	}
	m = rps_calloc(1, len);
	if (!m) {
		rps_sched_send_frame(p, RPS_OP_REPL_MAP, h->req_id, -ENOMEM, 0, NULL, 0, NULL, 0);
		return;
	}
	nodes = (struct rps_node *)(m + 1);
	m->your_id = UINT32_MAX;
	m->your_rank = UINT32_MAX;
	m->num_servers = (uint32_t)s->num_servers;
	m->num_workers = (uint32_t)s->num_workers;
	m->num_nodes = (uint32_t)s->nslots;
	m->epoch = s->epoch;
	for (int i = 0; i < s->nslots; i++) {
		nodes[i] = s->slots[i].node;
		nodes[i].alive = s->slots[i].state == SLOT_ALIVE;
	}
	rps_sched_send_frame(p, RPS_OP_REPL_MAP, h->req_id, 0, 0, m, len, NULL, 0);
	rps_free(m);
}
