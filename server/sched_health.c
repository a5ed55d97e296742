/* Scheduler: heartbeats, nodes that leave and nodes declared dead. */
#include "server/sched_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "src/fault.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

void rps_sched_describe(const struct sched_slot *sl, char *buf, size_t len)
{
	snprintf(buf, len, "node %u (%s rank %u, %s:%u, pid %u)", sl->node.id,
		 rps_sched_role_name(sl->node.role), sl->node.rank, sl->node.host, sl->node.port,
		 sl->node.pid);
}

static void detach_peer(struct sched_slot *sl)
{
	if (sl->peer) {
		sl->peer->closing = 1;
		sl->peer->slot = -1;
		sl->peer->registered = 0;
		sl->peer = NULL;
	}
}

/* A node is gone: dead (status < 0, with why) or left cleanly (status 0).
 * Tell the others (NODE_DEAD: hdr.status says which, hdr.aux = new epoch),
 * shrink the barriers, and see whether the job is over. */
void rps_sched_node_gone(struct rps_sched *s, int i, int status, const char *why)
{
	struct sched_slot *sl = &s->slots[i];
	char who[160];

	rps_sched_describe(sl, who, sizeof(who));
	rps_sched_creq_node_gone(s, i); /* before the slot loses its peer */
	sl->state = status ? SLOT_DEAD : SLOT_LEFT;
	sl->node.alive = 0;
	sl->in_barrier[0] = sl->in_barrier[1] = 0;
	detach_peer(sl);
	s->epoch++;
	if (s->state == SCHED_ENDING) {
		RPS_INFO("%s %s", who, status ? why : "left");
		return;
	}
	if (status)
		RPS_WARN("%s declared dead: %s", who, why);
	else
		RPS_INFO("%s left", who);
	if (status && (sl->node.role == RPS_ROLE_SERVER || sl->node.role == RPS_ROLE_WORKER))
		rps_metric_inc(met(s, s->m.missed[sl->node.role - RPS_ROLE_SERVER]));
	for (int j = 0; j < s->nslots; j++)
		if (j != i && s->slots[j].state == SLOT_ALIVE)
			rps_sched_send_frame(s->slots[j].peer, RPS_OP_NODE_DEAD, 0, status,
					     s->epoch, &sl->node, sizeof(sl->node), NULL, 0);
	rps_sched_barriers_eval(s);
	rps_sched_check_end(s);
}

void rps_sched_on_heartbeat(struct rps_sched *s, struct sched_peer *p,
			    const struct rps_heartbeat *hb, const void *tail, size_t tail_len)
{
	struct rps_heartbeat_srv t;
	struct sched_slot *sl;
	uint64_t now = rps_now_ns();

	if (p->slot < 0)
		return; /* still waiting for the cluster: liveness is the connection */
	sl = &s->slots[p->slot];
	sl->last_hb_ns = now;
	sl->clock = hb->clock;
	memcpy(sl->counters, hb->counters, sizeof(sl->counters));
	if (!sl->rate_ns) {
		sl->rate_ns = now;
		sl->rate_base[0] = hb->counters[0];
		sl->rate_base[1] = hb->counters[1];
	} else if (now - sl->rate_ns >= 500000000ull) {
		double dt = (double)(now - sl->rate_ns) / 1e9;

		for (int i = 0; i < 2; i++) {
			sl->rate[i] = hb->counters[i] >= sl->rate_base[i]
					  ? (double)(hb->counters[i] - sl->rate_base[i]) / dt
					  : 0;
			sl->rate_base[i] = hb->counters[i];
		}
		sl->rate_ns = now;
	}
	if (tail_len < sizeof(t) || !tail)
		return;
	memcpy(&t, tail, sizeof(t));
	if (t.num_shards > RPS_MAX_SHARDS ||
	    tail_len != sizeof(t) + (size_t)t.num_shards * sizeof(struct rps_hb_shard)) {
		RPS_WARN("%s: heartbeat figures for %u shards in %zu bytes ignored", p->conn->peer,
			 t.num_shards, tail_len);
		return;
	}
	sl->have_srv = 1;
	sl->srv = t;
	sl->srv_ns = now;
	memcpy(sl->shards, (const char *)tail + sizeof(t),
	       (size_t)t.num_shards * sizeof(struct rps_hb_shard));
}

void rps_sched_on_shutdown(struct rps_sched *s, struct sched_peer *p)
{
	if (p->slot >= 0) {
		rps_sched_node_gone(s, p->slot, 0, NULL);
	} else if (p->registered) {
		s->nwaiting[p->reg.role]--;
		p->registered = 0;
		RPS_INFO("%s %s left before the cluster was complete",
			 rps_sched_role_name(p->reg.role), p->conn->peer);
		if (s->state == SCHED_WAITING)
			rps_sched_send_progress(s);
	}
	p->closing = 1;
}

void rps_sched_check_timers(struct rps_sched *s, uint64_t now)
{
	uint64_t limit = (uint64_t)s->hb_timeout_ms * 1000000ull;

	for (int i = 0; i < s->nslots; i++) {
		struct sched_slot *sl = &s->slots[i];

		if (sl->state == SLOT_ALIVE && now - sl->last_hb_ns > limit) {
			char why[96];

			snprintf(why, sizeof(why), "no heartbeat for %" PRIu64 " ms",
				 (uint64_t)((now - sl->last_hb_ns) / 1000000u));
			rps_sched_node_gone(s, i, -EHOSTDOWN, why);
		}
	}
	rps_sched_creq_check(s, now);
	for (struct sched_peer *p = s->peers; p; p = p->next) {
		uint64_t limit_ns = (uint64_t)s->cfg.register_timeout_ms * 1000000ull;

		if (p->refused && now - p->refused_ns > SCHED_REFUSED_LINGER_MS * 1000000ull)
			p->closing = 1;
		if (p->closing || p->refused)
			continue;
		/* A peer past its hello holds a descriptor and a peer entry: a node
		 * must register within the timeout, an rdmaps-ctl keep asking (or
		 * wait for its CHECKPOINT / EXPORT); registered nodes are watched
		 * by their heartbeats (or wait for the map, which may take long). */
		if (p->role != RPS_ROLE_CTL && !p->registered && now - p->since_ns > limit_ns) {
			RPS_LOG_RATELIMITED(RPS_LOG_WARN,
					    "closing %s: a %s that did not register within %d ms "
					    "(RDMAPS_REGISTER_TIMEOUT_MS)",
					    p->conn->peer, rps_sched_role_name(p->role),
					    s->cfg.register_timeout_ms);
			p->closing = 1;
		} else if (p->role == RPS_ROLE_CTL && now - p->last_rx_ns > limit_ns &&
			   !(s->creq.active && s->creq.from == p)) {
			RPS_LOG_RATELIMITED(RPS_LOG_INFO,
					    "closing %s: rdmaps-ctl silent for %d ms "
					    "(RDMAPS_REGISTER_TIMEOUT_MS)",
					    p->conn->peer, s->cfg.register_timeout_ms);
			p->closing = 1;
		}
	}
	if (RPS_UNLIKELY(rps_fault_on) && s->state == SCHED_RUNNING) {
		/* kill_at_clock: the scheduler's clock is the smallest clock the
		 * live workers report in their heartbeats */
		uint64_t min = UINT64_MAX;

		for (int i = s->num_servers; i < s->nslots; i++)
			if (s->slots[i].state == SLOT_ALIVE && s->slots[i].clock < min)
				min = s->slots[i].clock;
		if (min != UINT64_MAX && RPS_FAULT_SHOULD_KILL("scheduler", 0, min)) {
			char why[64];

			snprintf(why, sizeof(why), "the workers reached clock %llu (kill_at_clock)",
				 (unsigned long long)min);
			rps_fault_kill(why);
		}
	}
}
