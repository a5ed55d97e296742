/* Scheduler: barriers and the end of the job. */
#include "server/sched_int.h"

#include <stdio.h>
#include <string.h>

#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

static int is_member(const struct sched_slot *sl, uint32_t group)
{
	return group == 1 || sl->node.role == RPS_ROLE_WORKER;
}

/* Release a barrier group when every live member has entered it. */
static void barrier_eval(struct rps_sched *s, uint32_t g)
{
	int members = 0, entered = 0;

	for (int i = 0; i < s->nslots; i++) {
		struct sched_slot *sl = &s->slots[i];

		if (sl->state != SLOT_ALIVE || !is_member(sl, g))
			continue;
		members++;
		entered += sl->in_barrier[g] != 0;
	}
	if (!members || entered < members)
		return;
	s->barrier_gen[g] = (s->barrier_gen[g] + 1) & RPS_BARRIER_SEQ_MAX;
	RPS_DEBUG("barrier %u #%u: all %d live members entered: releasing", g, s->barrier_gen[g],
		  members);
	for (int i = 0; i < s->nslots; i++) {
		struct sched_slot *sl = &s->slots[i];

		if (sl->state != SLOT_ALIVE || !sl->in_barrier[g])
			continue;
		sl->in_barrier[g] = 0;
		rps_sched_send_frame(sl->peer, RPS_OP_BARRIER_DONE, sl->barrier_req[g], 0, g, NULL,
				     0, NULL, 0);
	}
}

void rps_sched_barriers_eval(struct rps_sched *s)
{
	barrier_eval(s, 0);
	barrier_eval(s, 1);
}

/* Barrier seq (1-based) was released already when gen barriers were,
 * counting modulo 2^24 (a node far behind is no case: it is at most the job's
 * next one, gen + 1). */
int rps_sched_barrier_passed(uint32_t gen, uint32_t seq)
{
	return ((gen - seq) & RPS_BARRIER_SEQ_MAX) < (RPS_BARRIER_SEQ_MAX >> 1);
}

static void send_shutdown(struct sched_peer *p)
{
	rps_sched_send_frame(p, RPS_OP_SHUTDOWN, 0, 0, 0, NULL, 0, NULL, 0);
}

static void begin_end(struct rps_sched *s, int grace_ms)
{
	s->state = SCHED_ENDING;
	s->end_deadline_ns = rps_now_ns() + (uint64_t)grace_ms * 1000000ull;
}

/* Every worker left or died: tell the servers, then wait for them. */
void rps_sched_check_end(struct rps_sched *s)
{
	int left = 0, dead = 0, servers = 0;

	if (s->state != SCHED_RUNNING)
		return;
	for (int i = s->num_servers; i < s->nslots; i++) {
		if (s->slots[i].state == SLOT_ALIVE)
			return;
		left += s->slots[i].state == SLOT_LEFT;
		dead += s->slots[i].state == SLOT_DEAD;
	}
	for (int i = 0; i < s->num_servers; i++) {
		if (s->slots[i].state != SLOT_ALIVE)
			continue;
		servers++;
		send_shutdown(s->slots[i].peer);
	}
	if (dead)
		RPS_WARN("job over: %d worker(s) left, %d died; shutting down %d server(s)", left,
			 dead, servers);
	else
		RPS_INFO("job over: every worker left; shutting down %d server(s)", servers);
	begin_end(s, s->grace_ms);
}

void rps_sched_on_barrier(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h)
{
	struct sched_slot *sl;
	uint32_t g = h->aux & 0xffu;
	uint32_t seq = h->aux >> RPS_BARRIER_SEQ_SHIFT;

	if (p->slot < 0) {
		rps_sched_send_frame(p, RPS_OP_BARRIER_DONE, h->req_id, -EINVAL, g, NULL, 0, NULL,
				     0);
		RPS_WARN("%s: barrier before it is in the cluster", p->conn->peer);
		return;
	}
	sl = &s->slots[p->slot];
	if (g > 1 || !is_member(sl, g)) {
		RPS_WARN("%s rank %u: barrier group %u: %s", rps_sched_role_name(sl->node.role),
			 sl->node.rank, g, g > 1 ? "no such group" : "servers are not in group 0");
		rps_sched_send_frame(p, RPS_OP_BARRIER_DONE, h->req_id, -EINVAL, g, NULL, 0, NULL,
				     0);
		return;
	}
	if (seq && rps_sched_barrier_passed(s->barrier_gen[g], seq)) {
		/* the job released this barrier before this node joined (a worker
		 * that replaced a dead one, or joined a running job, passes its
		 * start-up barrier): nobody else will enter it again */
		RPS_INFO("%s rank %u: barrier %u #%u released at once: the job passed it "
			 "before this node joined (%u so far)",
			 rps_sched_role_name(sl->node.role), sl->node.rank, g, seq,
			 s->barrier_gen[g]);
		rps_sched_send_frame(p, RPS_OP_BARRIER_DONE, h->req_id, 0, g, NULL, 0, NULL, 0);
		return;
	}
	sl->in_barrier[g] = 1;
	sl->barrier_req[g] = h->req_id;
	barrier_eval(s, g);
}

void rps_sched_waiting_gone(struct rps_sched *s, uint8_t role)
{
	if (role == RPS_ROLE_WORKER && s->state == SCHED_WAITING &&
	    !s->nwaiting[RPS_ROLE_WORKER])
		s->workers_gone_ns = rps_now_ns();
}

void rps_sched_check_abandoned(struct rps_sched *s, uint64_t now)
{
	int n = 0;

	if (s->state != SCHED_WAITING || s->stopping || !s->workers_seen ||
	    s->nwaiting[RPS_ROLE_WORKER] || !s->workers_gone_ns ||
	    now - s->workers_gone_ns < (uint64_t)s->cfg.register_timeout_ms * 1000000ull)
		return;
	for (struct sched_peer *p = s->peers; p; p = p->next) {
		if (!p->registered || p->closing)
			continue;
		send_shutdown(p);
		n++;
	}
	RPS_ERR("job over before it began: every worker that registered (%d) went away before "
		"the cluster was complete (%d needed) and none came within %d ms "
		"(RDMAPS_REGISTER_TIMEOUT_MS); shutting down %d waiting node(s) and exiting",
		s->workers_seen, s->num_workers, s->cfg.register_timeout_ms, n);
	s->abandoned = 1;
	begin_end(s, s->grace_ms);
}

void rps_sched_begin_stop(struct rps_sched *s)
{
	int n = 0;

	s->stopping = 1;
	for (struct sched_peer *p = s->peers; p; p = p->next) {
		if (!p->registered || p->closing)
			continue;
		send_shutdown(p);
		n++;
	}
	RPS_INFO("stopping: shutdown sent to %d node(s)", n);
	begin_end(s, RPS_MIN(s->grace_ms, SCHED_STOP_GRACE_MS));
}

int rps_sched_nodes_remaining(const struct rps_sched *s)
{
	int n = 0;

	for (const struct sched_peer *p = s->peers; p; p = p->next)
		n += p->registered && !p->closing;
	return n;
}
