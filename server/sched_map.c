/* Scheduler: registration, rank assignment, rejoins and the cluster map. */
#include "server/sched_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

static int role_count(const struct rps_sched *s, uint8_t role)
{
	return role == RPS_ROLE_SERVER ? s->num_servers : s->num_workers;
}

static int slot_of(const struct rps_sched *s, uint8_t role, uint32_t rank)
{
	return role == RPS_ROLE_SERVER ? (int)rank : s->num_servers + (int)rank;
}

static void fill_map_nodes(struct rps_sched *s)
{
	struct rps_map *m = s->mapbuf;
	struct rps_node *nodes = (struct rps_node *)(m + 1);

	m->num_servers = (uint32_t)s->num_servers;
	m->num_workers = (uint32_t)s->num_workers;
	m->num_nodes = (uint32_t)s->nslots;
	m->epoch = s->epoch;
	for (int i = 0; i < s->nslots; i++)
		nodes[i] = s->slots[i].node;
}

static void send_map_to(struct rps_sched *s, int i, uint32_t req_id)
{
	struct rps_map *m = s->mapbuf;

	m->your_id = s->slots[i].node.id;
	m->your_rank = s->slots[i].node.rank;
	if (s->slots[i].peer)
		rps_sched_send_frame(s->slots[i].peer, RPS_OP_MAP, req_id, 0, 0, s->mapbuf,
				     s->mapbuf_len, NULL, 0);
}

/* Map (new epoch) to every live node. */
static void broadcast_map(struct rps_sched *s)
{
	fill_map_nodes(s);
	for (int i = 0; i < s->nslots; i++)
		if (s->slots[i].state == SLOT_ALIVE)
			send_map_to(s, i, 0);
}

static int cmp_seq(const void *a, const void *b)
{
	const struct sched_peer *x = *(struct sched_peer *const *)a;
	const struct sched_peer *y = *(struct sched_peer *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void slot_fill(struct rps_sched *s, int i, struct sched_peer *p, uint32_t rank)
{
	struct sched_slot *sl = &s->slots[i];
	uint64_t now = rps_now_ns();

	memset(sl, 0, sizeof(*sl));
	sl->node.id = (uint32_t)i;
	sl->node.role = p->reg.role;
	sl->node.alive = 1;
	sl->node.port = p->reg.port;
	sl->node.rank = rank;
	sl->node.pid = p->reg.pid;
	memcpy(sl->node.host, p->reg.host, sizeof(sl->node.host));
	sl->node.host[sizeof(sl->node.host) - 1] = '\0';
	sl->state = SLOT_ALIVE;
	sl->peer = p;
	sl->transport = p->reg.transport;
	sl->joined_ns = now;
	sl->last_hb_ns = now;
	p->slot = i;
}

/* Assign ranks of one role: wanted ranks first (in registration order), the
 * others take the lowest free rank in registration order. */
static void assign_role(struct rps_sched *s, uint8_t role, struct sched_peer **v, int n)
{
	int count = role_count(s, role);
	char *taken = rps_calloc((size_t)count + 1, 1);
	int *rank = rps_calloc((size_t)n + 1, sizeof(int));
	int next = 0;

	if (!taken || !rank) {
		/* tiny allocations; if they fail, registration order alone */
		for (int k = 0; k < n; k++)
			slot_fill(s, slot_of(s, role, (uint32_t)k), v[k], (uint32_t)k);
		goto out;
	}
	for (int k = 0; k < n; k++) {
		uint32_t w = v[k]->reg.want_rank;

		rank[k] = -1;
		if (w < (uint32_t)count && !taken[w]) {
			taken[w] = 1;
			rank[k] = (int)w;
		} else if (w != UINT32_MAX) {
			RPS_WARN("%s %s wants rank %u: %s; it gets another",
				 rps_sched_role_name(role), v[k]->conn->peer, w,
				 w < (uint32_t)count ? "taken" : "out of range");
		}
	}
	for (int k = 0; k < n; k++) {
		if (rank[k] < 0) {
			while (taken[next])
				next++;
			taken[next] = 1;
			rank[k] = next;
		}
		slot_fill(s, slot_of(s, role, (uint32_t)rank[k]), v[k], (uint32_t)rank[k]);
	}
out:
	rps_free(taken);
	rps_free(rank);
}

/* Every node came: ranks, ids, MAP to everyone. */
static void form_cluster(struct rps_sched *s)
{
	struct sched_peer **v = rps_calloc((size_t)s->nslots + 1, sizeof(*v));
	int n[2] = {0, 0};

	if (!v) {
		RPS_ERR("cluster map: out of memory");
		return;
	}
	for (uint8_t role = RPS_ROLE_SERVER; role <= RPS_ROLE_WORKER; role++) {
		int k = 0;

		for (struct sched_peer *p = s->peers; p; p = p->next)
			if (p->registered && p->slot < 0 && !p->closing && p->reg.role == role)
				v[k++] = p;
		qsort(v, (size_t)k, sizeof(*v), cmp_seq);
		assign_role(s, role, v, k);
		n[role - RPS_ROLE_SERVER] = k;
	}
	rps_free(v);
	s->nwaiting[RPS_ROLE_SERVER] = s->nwaiting[RPS_ROLE_WORKER] = 0;
	s->epoch = 1;
	s->state = SCHED_RUNNING;
	RPS_INFO("cluster complete: %d server(s), %d worker(s); sending the map", n[0], n[1]);
	for (int i = 0; i < s->nslots; i++) {
		char who[160];

		rps_sched_describe(&s->slots[i], who, sizeof(who));
		RPS_INFO("  %s", who);
		rps_sched_dash_event(s, "join", "%s joined", who);
	}
	broadcast_map(s);
}

/* A late worker takes the rank of a dead one: the wanted rank if that one is
 * dead, else the lowest dead rank. */
static int rejoin_slot(const struct rps_sched *s, const struct rps_register *r)
{
	if (r->want_rank < (uint32_t)s->num_workers) {
		int i = slot_of(s, RPS_ROLE_WORKER, r->want_rank);

		if (s->slots[i].state == SLOT_DEAD)
			return i;
	}
	for (int i = s->num_servers; i < s->nslots; i++)
		if (s->slots[i].state == SLOT_DEAD)
			return i;
	return -1;
}

/* A restarted server (rdmaps-server --restore) takes the rank of a server
 * that is gone: the one it asks for (its checkpoints' rank) if that one is
 * dead or left, else the lowest dead one, else the lowest one that left. */
static int rejoin_server_slot(const struct rps_sched *s, const struct rps_register *r)
{
	if (r->want_rank < (uint32_t)s->num_servers) {
		enum slot_state st = s->slots[r->want_rank].state;

		if (st == SLOT_DEAD || st == SLOT_LEFT)
			return (int)r->want_rank;
		return -1; /* its rank is alive: do not hand it another one's */
	}
	for (int i = 0; i < s->num_servers; i++)
		if (s->slots[i].state == SLOT_DEAD)
			return i;
	for (int i = 0; i < s->num_servers; i++)
		if (s->slots[i].state == SLOT_LEFT)
			return i;
	return -1;
}

void rps_sched_on_register(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h,
			   const struct rps_register *r)
{
	if (p->role != RPS_ROLE_SERVER && p->role != RPS_ROLE_WORKER) {
		rps_sched_refuse(s, p, h->req_id, -EINVAL,
				 "a %s cannot register (only servers and workers)",
				 rps_sched_role_name(p->role));
		return;
	}
	if (r->role != p->role) {
		rps_sched_refuse(s, p, h->req_id, -EPROTO, "REGISTER says %s but the hello said %s",
				 rps_sched_role_name(r->role), rps_sched_role_name(p->role));
		return;
	}
	/* issue 20 (tokens): a node proved one rank in its hello; it gets no other */
	if (p->conn->hello.rank != UINT32_MAX && r->want_rank != p->conn->hello.rank) {
		rps_sched_refuse(s, p, h->req_id, -EACCES,
				 "REGISTER asks for %s rank %u but the hello proved rank %u",
				 rps_sched_role_name(p->role), r->want_rank, p->conn->hello.rank);
		return;
	}
	if (p->registered) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN, "%s: second REGISTER ignored", p->conn->peer);
		return;
	}
	p->reg = *r;
	p->reg.host[sizeof(p->reg.host) - 1] = '\0';
	if (s->state == SCHED_ENDING) {
		rps_sched_refuse(s, p, h->req_id, -ECANCELED,
				 "the job is ending (scheduler shutting down)");
		return;
	}
	if (s->state == SCHED_RUNNING) {
		int i = r->role == RPS_ROLE_WORKER ? rejoin_slot(s, r) : rejoin_server_slot(s, r);
		char who[160], why[320];

		if (i < 0 && r->role == RPS_ROLE_WORKER) {
			/* replaces no one: a new rank if RDMAPS_MAX_WORKERS allows (sched_grow.c) */
			i = rps_sched_grow_slot(s, r, why, sizeof(why));
			if (i < 0) {
				rps_sched_refuse(s, p, h->req_id, -EBUSY, "%s", why);
				return;
			}
			p->registered = 1;
			slot_fill(s, i, p, s->slots[i].node.rank);
			s->epoch++;
			rps_sched_describe(&s->slots[i], who, sizeof(who));
			RPS_INFO("%s joined the running job: %d workers now (RDMAPS_MAX_WORKERS %d); "
				 "map epoch %u",
				 who, s->num_workers, s->max_workers, s->epoch);
			rps_sched_dash_event(s, "join", "%s joined the running job: %d workers now",
					     who, s->num_workers);
			broadcast_map(s);
			return;
		}
		if (i < 0) {
			if (r->role == RPS_ROLE_SERVER && r->want_rank < (uint32_t)s->num_servers)
				rps_sched_refuse(s, p, h->req_id, -EBUSY,
						 "cluster complete and server rank %u is alive",
						 r->want_rank);
			else
				rps_sched_refuse(
				    s, p, h->req_id, -EBUSY,
				    "cluster complete (%d servers, %d workers) and no dead %s to "
				    "replace",
				    s->num_servers, s->num_workers, rps_sched_role_name(r->role));
			return;
		}
		p->registered = 1;
		slot_fill(s, i, p, s->slots[i].node.rank);
		s->slots[i].rejoined = 1;
		s->epoch++;
		rps_sched_describe(&s->slots[i], who, sizeof(who));
		RPS_INFO("%s rejoined; map epoch %u", who, s->epoch);
		rps_sched_dash_event(s, r->role == RPS_ROLE_SERVER ? "restore" : "rejoin",
				     "%s rejoined%s; map epoch %u", who,
				     r->role == RPS_ROLE_SERVER ? " (restored)" : "", s->epoch);
		broadcast_map(s);
		return;
	}
	/* waiting for the cluster */
	if (s->nwaiting[r->role] >= role_count(s, r->role)) {
		rps_sched_refuse(s, p, h->req_id, -EBUSY, "already have %d of %d %ss",
				 s->nwaiting[r->role], role_count(s, r->role),
				 rps_sched_role_name(r->role));
		return;
	}
	p->registered = 1;
	p->seq = ++s->reg_seq;
	s->nwaiting[r->role]++;
	if (r->role == RPS_ROLE_WORKER) {
		s->workers_seen++;
		s->workers_gone_ns = 0;
	}
	RPS_INFO("%s %s:%u (pid %u%s) registered: %d/%d servers, %d/%d workers",
		 rps_sched_role_name(r->role), p->reg.host, p->reg.port, p->reg.pid,
		 r->want_rank != UINT32_MAX ? ", wants a rank" : "", s->nwaiting[RPS_ROLE_SERVER],
		 s->num_servers, s->nwaiting[RPS_ROLE_WORKER], s->num_workers);
	if (s->nwaiting[RPS_ROLE_SERVER] == s->num_servers &&
	    s->nwaiting[RPS_ROLE_WORKER] == s->num_workers)
		form_cluster(s);
	else
		rps_sched_send_progress(s);
}
