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
	rps_sched_dash_event(s, status ? "death" : "left", "%s %s%s%s (clock %u)", who,
			     status ? "declared dead" : "left", status ? ": " : "",
			     status ? why : "", sl->clock);
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

/* Rates between heartbeats at least 0.5 s apart. */
static void update_rates(struct sched_slot *sl, const struct rps_heartbeat *hb, uint64_t now)
{
	double dt;

	if (!sl->rate_ns) {
		sl->rate_ns = now;
		memcpy(sl->rate_base, hb->counters, sizeof(sl->rate_base));
		return;
	}
	if (now - sl->rate_ns < 500000000ull)
		return;
	dt = (double)(now - sl->rate_ns) / 1e9;
	for (int i = 0; i < 4; i++) {
		sl->rate[i] = hb->counters[i] >= sl->rate_base[i]
				  ? (double)(hb->counters[i] - sl->rate_base[i]) / dt
				  : 0;
		sl->rate_base[i] = hb->counters[i];
	}
	if (sl->have_ext)
		for (uint32_t k = 0; k < sl->srv.num_shards; k++) {
			uint64_t v[2] = {sl->shards[k].pushes_applied, sl->shards[k].pulls_served};

			for (int j = 0; j < 2; j++) {
				sl->shard_rate[k][j] =
				    v[j] >= sl->shard_base[k][j]
					? (float)((double)(v[j] - sl->shard_base[k][j]) / dt)
					: 0.0f;
				sl->shard_base[k][j] = v[j];
			}
		}
	sl->rate_ns = now;
}

/* A server's tail: rps_heartbeat_srv + its shard entries (8 or 32 bytes). */
static void on_srv_tail(struct rps_sched *s, struct sched_peer *p, struct sched_slot *sl,
			const void *tail, size_t tail_len, uint64_t now)
{
	struct rps_heartbeat_srv t;
	uint64_t old_ckpts = sl->srv.ckpts;
	int had = sl->have_srv;
	size_t el;

	memcpy(&t, tail, sizeof(t));
	el = t.shard_len ? t.shard_len : sizeof(struct rps_hb_shard);
	if (t.num_shards > RPS_MAX_SHARDS ||
	    (el != sizeof(struct rps_hb_shard) && el != sizeof(struct rps_hb_shard_ext)) ||
	    tail_len != sizeof(t) + (size_t)t.num_shards * el) {
		RPS_WARN("%s: heartbeat figures for %u shards of %zu bytes in %zu bytes ignored",
			 p->conn->peer, t.num_shards, el, tail_len);
		return;
	}
	sl->have_srv = 1;
	sl->have_ext = el == sizeof(struct rps_hb_shard_ext);
	sl->srv = t;
	sl->srv_ns = now;
	for (uint32_t k = 0; k < t.num_shards; k++) {
		const char *e = (const char *)tail + sizeof(t) + k * el;

		if (sl->have_ext) {
			memcpy(&sl->shards[k], e, sizeof(sl->shards[k]));
		} else {
			struct rps_hb_shard o;

			memcpy(&o, e, sizeof(o));
			memset(&sl->shards[k], 0, sizeof(sl->shards[k]));
			sl->shards[k].ring_depth = o.ring_depth;
			sl->shards[k].clock = o.clock;
		}
	}
	if (had && t.ckpts > old_ckpts) {
		uint64_t c = 0;

		for (uint32_t k = 0; k < t.num_shards; k++)
			c = RPS_MAX(c, sl->shards[k].ckpt_clock);
		rps_sched_dash_event(s, "checkpoint",
				     "server %u wrote %" PRIu64 " checkpoint file(s), clock %" PRIu64
				     ", oldest shard's age %.1f s",
				     sl->node.rank, t.ckpts - old_ckpts, c,
				     t.ckpt_age_ms >= 0 ? (double)t.ckpt_age_ms / 1e3 : 0.0);
	}
}

void rps_sched_on_heartbeat(struct rps_sched *s, struct sched_peer *p, uint32_t aux,
			    const struct rps_heartbeat *hb, const void *tail, size_t tail_len)
{
	struct sched_slot *sl;
	uint64_t now = rps_now_ns();

	if (p->slot < 0)
		return; /* still waiting for the cluster: liveness is the connection */
	sl = &s->slots[p->slot];
	sl->last_hb_ns = now;
	sl->clock = hb->clock;
	sl->cpu = aux;
	memcpy(sl->counters, hb->counters, sizeof(sl->counters));
	if (tail_len >= sizeof(struct rps_heartbeat_srv) && tail)
		on_srv_tail(s, p, sl, tail, tail_len, now);
	update_rates(sl, hb, now);
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
		rps_sched_waiting_gone(s, p->reg.role);
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
	rps_sched_check_abandoned(s, now);
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
