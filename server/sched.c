/* The scheduler: rendezvous, ranks, barriers, heartbeats, dead nodes and the
 * end of a job. One thread polls one TCP transport instance; everything else
 * happens in reaction to its events or to the clock. See docs/scheduler.md.
 *
 * Nodes live in slots: slot i is node id i; servers are slots 0..S-1
 * (id = rank), workers S..S+W-1 (id = S + rank). Until the cluster is
 * complete, registered nodes wait as peers without a slot; when the last one
 * comes, ranks are assigned and every node gets the MAP.
 */
#include "server/sched.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/alloc.h"
#include "src/config.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/metrics.h"
#include "src/proto.h"
#include "src/util.h"
#include "http/http.h"
#include "transport/transport.h"

#include <rdmaps/status.h>

#define SCHED_POLL_MS		50	   /* longest poll: stop flag and heartbeat checks */
#define SCHED_REFUSED_LINGER_MS 2000	   /* a refused peer is closed after this at the latest */
#define SCHED_STOP_GRACE_MS	2000	   /* rps_sched_stop: wait this long for nodes to leave */
#define SCHED_MAX_MSG		(1u << 20) /* incoming frames are small; MAP / STATUS go out */
#define SCHED_EVENTS		64

enum sched_state {
	SCHED_WAITING, /* nodes register; no map yet */
	SCHED_RUNNING, /* map sent; barriers, heartbeats, rejoins */
	SCHED_ENDING,  /* SHUTDOWN sent; waiting for the nodes to leave */
};

enum slot_state {
	SLOT_EMPTY,
	SLOT_ALIVE,
	SLOT_LEFT, /* sent SHUTDOWN: a clean exit */
	SLOT_DEAD, /* silent too long, or closed without SHUTDOWN */
};

/* One accepted connection: a node (waiting or in a slot) or an rdmaps-ctl. */
struct sched_peer {
	struct rps_conn *conn;
	uint8_t role;	/* from the hello */
	int registered; /* REGISTER accepted: waiting (slot < 0) or in a slot */
	int slot;	/* index into slots, -1 if none */
	int closing;	/* close after this poll batch */
	int refused;	/* registration refused: ignore it, close soon */
	uint64_t refused_ns;
	uint64_t seq; /* registration order */
	struct rps_register reg;
	struct sched_peer *next;
	struct rps_metric *tx_bytes, *tx_msgs; /* the scheduler's counters (or NULL) */
};

struct sched_slot {
	struct rps_node node; /* as it goes into the map */
	enum slot_state state;
	struct sched_peer *peer;
	uint8_t transport;
	uint64_t joined_ns;
	uint64_t last_hb_ns;
	uint32_t clock;
	uint64_t counters[4];
	int in_barrier[2];
	uint32_t barrier_req[2];
	/* rates of counters[0] and [1] (pushes, pulls) between heartbeats */
	double rate[2];
	uint64_t rate_ns;
	uint64_t rate_base[2];
	/* servers: the heartbeat's tail */
	int have_srv;
	struct rps_heartbeat_srv srv;
	uint64_t srv_ns; /* when it came (ages the checkpoint age) */
	struct rps_hb_shard shards[RPS_MAX_SHARDS];
};

/* /metrics of the scheduler (RDMAPS_METRICS_PORT). */
struct sched_metrics {
	struct rps_metrics *reg;
	struct rps_http_server *http;
	struct rps_metric *nodes[2][3]; /* [server, worker][alive, dead, left] */
	struct rps_metric *missed[2];	/* nodes declared dead, per role */
	struct rps_metric *bytes[2];	/* rx, tx */
	struct rps_metric *msgs[2];
};

struct rps_sched {
	struct rps_transport *tr;
	char host[RPS_STR_MAX];
	char secret[64];
	uint16_t port;
	int num_servers;
	int num_workers;
	int hb_timeout_ms;
	int grace_ms;
	int nslots;
	struct sched_slot *slots;
	struct sched_peer *peers; /* every open connection, registration order irrelevant */
	int nwaiting[4];	  /* waiting registered nodes per role */
	uint64_t reg_seq;
	uint32_t epoch;
	enum sched_state state;
	uint64_t start_ns;
	uint64_t end_deadline_ns;
	atomic_int stop;
	int stopping; /* stop() seen, SHUTDOWN sent */
	void *mapbuf; /* rps_map + rps_node[nslots] */
	size_t mapbuf_len;
	struct sched_metrics m;	 /* reg NULL: no /metrics */
	struct rps_metric dummy; /* where metric updates go without a registry */
};

static inline struct rps_metric *met(struct rps_sched *s, struct rps_metric *m)
{
	return m ? m : &s->dummy;
}

static const char *role_name(uint8_t role)
{
	switch (role) {
	case RPS_ROLE_SCHEDULER:
		return "scheduler";
	case RPS_ROLE_SERVER:
		return "server";
	case RPS_ROLE_WORKER:
		return "worker";
	case RPS_ROLE_CTL:
		return "ctl";
	}
	return "?";
}

static int role_count(const struct rps_sched *s, uint8_t role)
{
	return role == RPS_ROLE_SERVER ? s->num_servers : s->num_workers;
}

static int slot_of(const struct rps_sched *s, uint8_t role, uint32_t rank)
{
	return role == RPS_ROLE_SERVER ? (int)rank : s->num_servers + (int)rank;
}

static int send_frame(struct sched_peer *p, uint8_t op, uint32_t req_id, int32_t status,
		      uint32_t aux, const void *a, size_t alen, const void *b, size_t blen)
{
	struct rps_frame_hdr h;
	struct iovec iov[2];
	int n = 0, rc;

	if (p->closing || !p->conn)
		return -ECONNRESET;
	rps_proto_hdr_init(&h, op, (uint32_t)(alen + blen), req_id);
	h.status = status;
	h.aux = aux;
	if (alen)
		iov[n++] = (struct iovec){.iov_base = (void *)a, .iov_len = alen};
	if (blen)
		iov[n++] = (struct iovec){.iov_base = (void *)b, .iov_len = blen};
	rc = rps_tr_post_send(p->conn, &h, iov, n, 0);
	if (rc) {
		RPS_DEBUG("send %s to %s: %s", rps_proto_op_name(op), p->conn->peer,
			  rps_strerror(rc));
	} else if (p->tx_bytes) {
		rps_metric_add(p->tx_bytes, sizeof(h) + alen + blen);
		rps_metric_inc(p->tx_msgs);
	}
	return rc;
}

/* Refuse a registration: ERROR frame with the reason; the peer closes (we
 * close it ourselves after a while so that the ERROR is not lost in a reset). */
static void refuse(struct rps_sched *s, struct sched_peer *p, uint32_t req_id, int status,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void refuse(struct rps_sched *s, struct sched_peer *p, uint32_t req_id, int status,
		   const char *fmt, ...)
{
	char why[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(why))
		n = sizeof(why) - 1;
	RPS_WARN("refusing %s %s: %s", role_name(p->role), p->conn->peer, why);
	send_frame(p, RPS_OP_ERROR, req_id, status, 0, why, (size_t)n, NULL, 0);
	p->refused = 1;
	p->refused_ns = rps_now_ns();
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
		send_frame(s->slots[i].peer, RPS_OP_MAP, req_id, 0, 0, s->mapbuf, s->mapbuf_len,
			   NULL, 0);
}

/* Map (new epoch) to every live node. */
static void broadcast_map(struct rps_sched *s)
{
	fill_map_nodes(s);
	for (int i = 0; i < s->nslots; i++)
		if (s->slots[i].state == SLOT_ALIVE)
			send_map_to(s, i, 0);
}

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
	RPS_DEBUG("barrier %u: all %d live members entered: releasing", g, members);
	for (int i = 0; i < s->nslots; i++) {
		struct sched_slot *sl = &s->slots[i];

		if (sl->state != SLOT_ALIVE || !sl->in_barrier[g])
			continue;
		sl->in_barrier[g] = 0;
		send_frame(sl->peer, RPS_OP_BARRIER_DONE, sl->barrier_req[g], 0, g, NULL, 0, NULL,
			   0);
	}
}

static void barriers_eval(struct rps_sched *s)
{
	barrier_eval(s, 0);
	barrier_eval(s, 1);
}

static void send_shutdown(struct sched_peer *p)
{
	send_frame(p, RPS_OP_SHUTDOWN, 0, 0, 0, NULL, 0, NULL, 0);
}

static void begin_end(struct rps_sched *s, int grace_ms)
{
	s->state = SCHED_ENDING;
	s->end_deadline_ns = rps_now_ns() + (uint64_t)grace_ms * 1000000ull;
}

/* Every worker left or died: tell the servers, then wait for them. */
static void check_end(struct rps_sched *s)
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

static void describe(const struct sched_slot *sl, char *buf, size_t len)
{
	snprintf(buf, len, "node %u (%s rank %u, %s:%u, pid %u)", sl->node.id,
		 role_name(sl->node.role), sl->node.rank, sl->node.host, sl->node.port,
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
static void node_gone(struct rps_sched *s, int i, int status, const char *why)
{
	struct sched_slot *sl = &s->slots[i];
	char who[160];

	describe(sl, who, sizeof(who));
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
			send_frame(s->slots[j].peer, RPS_OP_NODE_DEAD, 0, status, s->epoch,
				   &sl->node, sizeof(sl->node), NULL, 0);
	barriers_eval(s);
	check_end(s);
}

static void progress_text(const struct rps_sched *s, char *buf, size_t len)
{
	int ms = s->num_servers - s->nwaiting[RPS_ROLE_SERVER];
	int mw = s->num_workers - s->nwaiting[RPS_ROLE_WORKER];

	snprintf(buf, len,
		 "scheduler waits for %d more server(s) and %d more worker(s) "
		 "(%d/%d servers, %d/%d workers registered)",
		 ms, mw, s->nwaiting[RPS_ROLE_SERVER], s->num_servers, s->nwaiting[RPS_ROLE_WORKER],
		 s->num_workers);
}

/* Tell the waiting nodes how far the rendezvous is (a STATUS frame with
 * text); rps_ctl_join() quotes it when it times out. */
static void send_progress(struct rps_sched *s)
{
	char text[256];

	progress_text(s, text, sizeof(text));
	for (struct sched_peer *p = s->peers; p; p = p->next)
		if (p->registered && p->slot < 0 && !p->closing)
			send_frame(p, RPS_OP_STATUS, 0, 0, 0, text, strlen(text), NULL, 0);
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
			RPS_WARN("%s %s wants rank %u: %s; it gets another", role_name(role),
				 v[k]->conn->peer, w,
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

		describe(&s->slots[i], who, sizeof(who));
		RPS_INFO("  %s", who);
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

static void on_register(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h,
			const struct rps_register *r)
{
	if (p->role != RPS_ROLE_SERVER && p->role != RPS_ROLE_WORKER) {
		refuse(s, p, h->req_id, -EINVAL, "a %s cannot register (only servers and workers)",
		       role_name(p->role));
		return;
	}
	if (r->role != p->role) {
		refuse(s, p, h->req_id, -EPROTO, "REGISTER says %s but the hello said %s",
		       role_name(r->role), role_name(p->role));
		return;
	}
	if (p->registered) {
		RPS_WARN("%s: second REGISTER ignored", p->conn->peer);
		return;
	}
	p->reg = *r;
	p->reg.host[sizeof(p->reg.host) - 1] = '\0';
	if (s->state == SCHED_ENDING) {
		refuse(s, p, h->req_id, -ECANCELED, "the job is ending (scheduler shutting down)");
		return;
	}
	if (s->state == SCHED_RUNNING) {
		int i = r->role == RPS_ROLE_WORKER ? rejoin_slot(s, r) : rejoin_server_slot(s, r);
		char who[160];

		if (i < 0) {
			if (r->role == RPS_ROLE_SERVER && r->want_rank < (uint32_t)s->num_servers)
				refuse(s, p, h->req_id, -EBUSY,
				       "cluster complete and server rank %u is alive",
				       r->want_rank);
			else
				refuse(
				    s, p, h->req_id, -EBUSY,
				    "cluster complete (%d servers, %d workers) and no dead %s to "
				    "replace",
				    s->num_servers, s->num_workers, role_name(r->role));
			return;
		}
		p->registered = 1;
		slot_fill(s, i, p, s->slots[i].node.rank);
		s->epoch++;
		describe(&s->slots[i], who, sizeof(who));
		RPS_INFO("%s rejoined; map epoch %u", who, s->epoch);
		broadcast_map(s);
		return;
	}
	/* waiting for the cluster */
	if (s->nwaiting[r->role] >= role_count(s, r->role)) {
		refuse(s, p, h->req_id, -EBUSY, "already have %d of %d %ss", s->nwaiting[r->role],
		       role_count(s, r->role), role_name(r->role));
		return;
	}
	p->registered = 1;
	p->seq = ++s->reg_seq;
	s->nwaiting[r->role]++;
	RPS_INFO("%s %s:%u (pid %u%s) registered: %d/%d servers, %d/%d workers", role_name(r->role),
		 p->reg.host, p->reg.port, p->reg.pid,
		 r->want_rank != UINT32_MAX ? ", wants a rank" : "", s->nwaiting[RPS_ROLE_SERVER],
		 s->num_servers, s->nwaiting[RPS_ROLE_WORKER], s->num_workers);
	if (s->nwaiting[RPS_ROLE_SERVER] == s->num_servers &&
	    s->nwaiting[RPS_ROLE_WORKER] == s->num_workers)
		form_cluster(s);
	else
		send_progress(s);
}

static void on_barrier(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h)
{
	struct sched_slot *sl;
	uint32_t g = h->aux;

	if (p->slot < 0) {
		send_frame(p, RPS_OP_BARRIER_DONE, h->req_id, -EINVAL, g, NULL, 0, NULL, 0);
		RPS_WARN("%s: barrier before it is in the cluster", p->conn->peer);
		return;
	}
	sl = &s->slots[p->slot];
	if (g > 1 || !is_member(sl, g)) {
		RPS_WARN("%s rank %u: barrier group %u: %s", role_name(sl->node.role),
			 sl->node.rank, g, g > 1 ? "no such group" : "servers are not in group 0");
		send_frame(p, RPS_OP_BARRIER_DONE, h->req_id, -EINVAL, g, NULL, 0, NULL, 0);
		return;
	}
	sl->in_barrier[g] = 1;
	sl->barrier_req[g] = h->req_id;
	barrier_eval(s, g);
}

static void on_heartbeat(struct rps_sched *s, struct sched_peer *p, const struct rps_heartbeat *hb,
			 const void *tail, size_t tail_len)
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

/* A node says it leaves (or answers our SHUTDOWN). We close the connection:
 * the node waits for that close, so nothing it sent before is lost. */
static void on_shutdown(struct rps_sched *s, struct sched_peer *p)
{
	if (p->slot >= 0) {
		node_gone(s, p->slot, 0, NULL);
	} else if (p->registered) {
		s->nwaiting[p->reg.role]--;
		p->registered = 0;
		RPS_INFO("%s %s left before the cluster was complete", role_name(p->reg.role),
			 p->conn->peer);
		if (s->state == SCHED_WAITING)
			send_progress(s);
	}
	p->closing = 1;
}

static void on_status(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h)
{
	/* a line per node, and per server one of shard figures (up to 64 shards) */
	size_t cap = 1024 + 200 * ((size_t)s->nslots + 16) + 1600 * (size_t)s->num_servers;
	uint64_t lim = p->conn->tr->max_frame;
	char *buf;
	size_t n;

	if (lim > sizeof(struct rps_frame_hdr) && cap > lim - sizeof(struct rps_frame_hdr))
		cap = lim - sizeof(struct rps_frame_hdr);
	buf = rps_malloc(cap);
	if (!buf) {
		send_frame(p, RPS_OP_STATUS, h->req_id, -ENOMEM, 0, NULL, 0, NULL, 0);
		return;
	}
	n = rps_sched_status_text(s, buf, cap);
	send_frame(p, RPS_OP_STATUS, h->req_id, 0, 0, buf, n, NULL, 0);
	rps_free(buf);
}

static void on_recv(struct rps_sched *s, struct sched_peer *p, const struct rps_tr_event *ev)
{
	const struct rps_frame_hdr *h = &ev->hdr;
	union {
		struct rps_register reg;
		struct rps_heartbeat hb;
	} u;

	if (p->closing || p->refused)
		return;
	switch (h->op) {
	case RPS_OP_REGISTER:
		if (h->len < sizeof(u.reg) || !ev->fixed)
			goto short_frame;
		memcpy(&u.reg, ev->fixed, sizeof(u.reg));
		on_register(s, p, h, &u.reg);
		break;
	case RPS_OP_HEARTBEAT:
		if (h->len < sizeof(u.hb) || !ev->fixed)
			goto short_frame;
		memcpy(&u.hb, ev->fixed, sizeof(u.hb));
		on_heartbeat(s, p, &u.hb, ev->data, ev->data_len);
		break;
	case RPS_OP_BARRIER:
		on_barrier(s, p, h);
		break;
	case RPS_OP_SHUTDOWN:
		on_shutdown(s, p);
		break;
	case RPS_OP_STATUS:
		on_status(s, p, h);
		break;
	default:
		RPS_WARN("%s: unexpected %s frame ignored", p->conn->peer,
			 rps_proto_op_name(h->op));
		break;
	}
	return;
short_frame:
	RPS_WARN("closing %s: short %s frame (%u bytes)", p->conn->peer, rps_proto_op_name(h->op),
		 h->len);
	p->closing = 1;
	if (p->slot >= 0)
		node_gone(s, p->slot, -EPROTO, "protocol error");
}

static void on_closed(struct rps_sched *s, struct sched_peer *p, int status)
{
	if (p->slot >= 0) {
		char why[128];

		snprintf(why, sizeof(why), "connection closed without SHUTDOWN (%s)",
			 status ? rps_strerror(status) : "end of stream");
		node_gone(s, p->slot, -ECONNRESET, why);
	} else if (p->registered) {
		s->nwaiting[p->reg.role]--;
		p->registered = 0;
		RPS_LOG(s->stopping ? RPS_LOG_INFO : RPS_LOG_WARN,
			"%s %s (pid %u) went away before the cluster was complete",
			role_name(p->reg.role), p->conn->peer, p->reg.pid);
		if (s->state == SCHED_WAITING)
			send_progress(s);
	}
	p->closing = 1;
}

static void on_event(struct rps_sched *s, struct rps_tr_event *ev)
{
	struct sched_peer *p = ev->conn ? ev->conn->user : NULL;

	switch (ev->type) {
	case RPS_TR_EV_ACCEPTED:
		p = rps_calloc(1, sizeof(*p));
		if (!p) {
			RPS_ERR("%s: out of memory: closing", ev->conn->peer);
			rps_tr_close(ev->conn);
			return;
		}
		p->conn = ev->conn;
		p->role = ev->conn->hello.role;
		p->slot = -1;
		p->tx_bytes = s->m.bytes[1];
		p->tx_msgs = s->m.msgs[1];
		p->next = s->peers;
		s->peers = p;
		ev->conn->user = p;
		RPS_DEBUG("%s connected as %s", ev->conn->peer, role_name(p->role));
		break;
	case RPS_TR_EV_RECV:
		rps_metric_add(met(s, s->m.bytes[0]), sizeof(ev->hdr) + ev->hdr.len);
		rps_metric_inc(met(s, s->m.msgs[0]));
		if (p)
			on_recv(s, p, ev);
		if (ev->token)
			rps_tr_release(s->tr, ev->token);
		break;
	case RPS_TR_EV_CLOSED:
		if (p && !p->closing)
			on_closed(s, p, ev->status);
		else if (!p)
			rps_tr_close(ev->conn);
		break;
	default:
		break;
	}
}

/* Close what this batch marked for closing (never inside the batch: a later
 * event of the same batch may still name the connection). */
static void flush_closes(struct rps_sched *s)
{
	struct sched_peer **pp = &s->peers;

	while (*pp) {
		struct sched_peer *p = *pp;

		if (!p->closing) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (p->slot >= 0 && s->slots[p->slot].peer == p)
			s->slots[p->slot].peer = NULL;
		rps_tr_close(p->conn);
		rps_free(p);
	}
}

static void check_timers(struct rps_sched *s, uint64_t now)
{
	uint64_t limit = (uint64_t)s->hb_timeout_ms * 1000000ull;

	for (int i = 0; i < s->nslots; i++) {
		struct sched_slot *sl = &s->slots[i];

		if (sl->state == SLOT_ALIVE && now - sl->last_hb_ns > limit) {
			char why[96];

			snprintf(why, sizeof(why), "no heartbeat for %" PRIu64 " ms",
				 (uint64_t)((now - sl->last_hb_ns) / 1000000u));
			node_gone(s, i, -EHOSTDOWN, why);
		}
	}
	for (struct sched_peer *p = s->peers; p; p = p->next)
		if (p->refused && now - p->refused_ns > SCHED_REFUSED_LINGER_MS * 1000000ull)
			p->closing = 1;
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

/* stop(): SHUTDOWN to every node (waiting ones too), then wait briefly. */
static void begin_stop(struct rps_sched *s)
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

static int nodes_remaining(const struct rps_sched *s)
{
	int n = 0;

	for (const struct sched_peer *p = s->peers; p; p = p->next)
		n += p->registered && !p->closing;
	return n;
}

/* Node gauges, from the loop (the HTTP thread only renders). */
static void metrics_update(struct rps_sched *s)
{
	int n[2][3] = {{0}};

	for (int i = 0; i < s->nslots; i++) {
		const struct sched_slot *sl = &s->slots[i];
		int r = sl->node.role == RPS_ROLE_SERVER ? 0 : 1, st;

		if (sl->state == SLOT_EMPTY)
			continue;
		st = sl->state == SLOT_ALIVE ? 0 : sl->state == SLOT_DEAD ? 1 : 2;
		n[r][st]++;
	}
	for (int r = 0; r < 2; r++)
		for (int st = 0; st < 3; st++)
			rps_metric_set(s->m.nodes[r][st], n[r][st]);
}

static int metrics_start(struct rps_sched *s, const char *host, int port)
{
	static const char *const roles[2] = {"server", "worker"};
	static const char *const states[3] = {"alive", "dead", "left"};
	static const char *const dirs[2] = {"rx", "tx"};
	char lab[96];
	int rc;

	rc = rps_metrics_create(&s->m.reg);
	if (rc)
		return rc;
	for (int r = 0; r < 2 && !rc; r++) {
		for (int st = 0; st < 3 && !rc; st++) {
			snprintf(lab, sizeof(lab), "role=\"%s\",state=\"%s\"", roles[r],
				 states[st]);
			rc = rps_metrics_gauge(s->m.reg, "rdmaps_nodes",
					       "nodes by role and liveness", lab,
					       &s->m.nodes[r][st]);
		}
		snprintf(lab, sizeof(lab), "role=\"%s\"", roles[r]);
		if (!rc)
			rc = rps_metrics_counter(s->m.reg, "rdmaps_heartbeats_missed_total",
						 "nodes declared dead (silent, or closed without "
						 "SHUTDOWN)",
						 lab, &s->m.missed[r]);
	}
	for (int d = 0; d < 2 && !rc; d++) {
		snprintf(lab, sizeof(lab), "transport=\"tcp\",dir=\"%s\"", dirs[d]);
		rc = rps_metrics_counter(s->m.reg, "rdmaps_bytes_total",
					 "bytes of frames sent / received (headers included)", lab,
					 &s->m.bytes[d]);
		if (!rc)
			rc = rps_metrics_counter(s->m.reg, "rdmaps_messages_total",
						 "frames sent / received", lab, &s->m.msgs[d]);
	}
	if (!rc)
		rc = rps_http_start(host, (uint16_t)port, NULL, rps_http_metrics_handler, s->m.reg,
				    &s->m.http);
	if (rc) {
		RPS_ERR("scheduler: /metrics on %s:%d: %s", host, port, rps_strerror(rc));
		rps_metrics_destroy(s->m.reg);
		memset(&s->m, 0, sizeof(s->m));
		return rc;
	}
	RPS_INFO("metrics on http://%s:%u/metrics", host, rps_http_port(s->m.http));
	return 0;
}

int rps_sched_run(struct rps_sched *s)
{
	struct rps_tr_event ev[SCHED_EVENTS];

	RPS_INFO("listening on %s:%u: waiting for %d server(s) and %d worker(s)",
		 s->host[0] ? s->host : "0.0.0.0", s->port, s->num_servers, s->num_workers);
	for (;;) {
		uint64_t now;
		int n;

		if (atomic_load(&s->stop) && !s->stopping)
			begin_stop(s);
		n = rps_tr_poll(s->tr, ev, SCHED_EVENTS, SCHED_POLL_MS);
		if (n < 0 && n != -EINTR && n != -EAGAIN) {
			RPS_ERR("poll: %s", rps_strerror(n));
			return n;
		}
		for (int i = 0; i < n; i++)
			on_event(s, &ev[i]);
		flush_closes(s);
		now = rps_now_ns();
		check_timers(s, now);
		flush_closes(s);
		if (s->m.reg)
			metrics_update(s);
		if (s->state != SCHED_ENDING)
			continue;
		if (!nodes_remaining(s)) {
			RPS_INFO("every node left: exiting");
			break;
		}
		if (now >= s->end_deadline_ns) {
			RPS_WARN("%d node(s) did not leave in time: exiting anyway",
				 nodes_remaining(s));
			break;
		}
	}
	return 0;
}

void rps_sched_stop(struct rps_sched *s)
{
	atomic_store(&s->stop, 1);
}

uint16_t rps_sched_port(const struct rps_sched *s)
{
	return s->port;
}

static const char *slot_state_name(enum slot_state st)
{
	switch (st) {
	case SLOT_EMPTY:
		return "empty";
	case SLOT_ALIVE:
		return "alive";
	case SLOT_LEFT:
		return "left";
	case SLOT_DEAD:
		return "dead";
	}
	return "?";
}

static const char *state_name(enum sched_state st)
{
	switch (st) {
	case SCHED_WAITING:
		return "waiting for nodes";
	case SCHED_RUNNING:
		return "running";
	case SCHED_ENDING:
		return "ending";
	}
	return "?";
}

struct textbuf {
	char *buf;
	size_t len;
	size_t n;
};

static void tb_printf(struct textbuf *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tb_printf(struct textbuf *t, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (t->n + 1 >= t->len)
		return;
	va_start(ap, fmt);
	k = vsnprintf(t->buf + t->n, t->len - t->n, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	t->n += (size_t)k;
	if (t->n >= t->len)
		t->n = t->len - 1;
}

size_t rps_sched_status_text(struct rps_sched *s, char *buf, size_t len)
{
	struct textbuf t = {.buf = buf, .len = len, .n = 0};
	uint64_t now = rps_now_ns();
	int alive[4] = {0}, dead = 0, left = 0;

	if (!len)
		return 0;
	buf[0] = '\0';
	for (int i = 0; i < s->nslots; i++) {
		alive[s->slots[i].node.role & 3] += s->slots[i].state == SLOT_ALIVE;
		dead += s->slots[i].state == SLOT_DEAD;
		left += s->slots[i].state == SLOT_LEFT;
	}
	tb_printf(&t, "scheduler %s:%u  %s  map epoch %u  up %.1f s  heartbeat timeout %d ms\n",
		  s->host[0] ? s->host : "0.0.0.0", s->port, state_name(s->state), s->epoch,
		  (double)(now - s->start_ns) / 1e9, s->hb_timeout_ms);
	if (s->state == SCHED_WAITING) {
		char text[256];

		progress_text(s, text, sizeof(text));
		tb_printf(&t, "%s\n", text);
	} else {
		tb_printf(&t, "servers %d/%d alive, workers %d/%d alive, %d dead, %d left\n",
			  alive[RPS_ROLE_SERVER], s->num_servers, alive[RPS_ROLE_WORKER],
			  s->num_workers, dead, left);
	}
	tb_printf(&t, "%-5s %-7s %-5s %-28s %-8s %-7s %-9s %-5s %-10s %-9s %-9s %s\n", "ID", "ROLE",
		  "RANK", "HOST:PORT", "PID", "STATE", "HB_AGE_MS", "TR", "CLOCK", "PUSHES/S",
		  "PULLS/S", "COUNTERS (pushes pulls bytes_in bytes_out)");
	for (int i = 0; i < s->nslots; i++) {
		const struct sched_slot *sl = &s->slots[i];
		char hp[96], age[24];

		if (sl->state == SLOT_EMPTY)
			continue;
		snprintf(hp, sizeof(hp), "%s:%u", sl->node.host, sl->node.port);
		if (sl->state == SLOT_ALIVE)
			snprintf(age, sizeof(age), "%" PRIu64,
				 (uint64_t)((now - sl->last_hb_ns) / 1000000u));
		else
			snprintf(age, sizeof(age), "-");
		tb_printf(&t,
			  "%-5u %-7s %-5u %-28s %-8u %-7s %-9s %-5s %-10u %-9.0f %-9.0f %" PRIu64
			  " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
			  sl->node.id, role_name(sl->node.role), sl->node.rank, hp, sl->node.pid,
			  slot_state_name(sl->state), age, sl->transport ? "rdma" : "tcp",
			  sl->clock, sl->state == SLOT_ALIVE ? sl->rate[0] : 0.0,
			  sl->state == SLOT_ALIVE ? sl->rate[1] : 0.0, sl->counters[0],
			  sl->counters[1], sl->counters[2], sl->counters[3]);
		if (sl->have_srv && sl->state == SLOT_ALIVE) {
			/* servers: per shard ring depth and clock, checkpoint age */
			tb_printf(&t, "      shards %u: ring depth", sl->srv.num_shards);
			for (uint32_t k = 0; k < sl->srv.num_shards; k++)
				tb_printf(&t, " %u", sl->shards[k].ring_depth);
			tb_printf(&t, " | clock");
			for (uint32_t k = 0; k < sl->srv.num_shards; k++)
				tb_printf(&t, " %u", sl->shards[k].clock);
			if (sl->srv.ckpt_age_ms >= 0)
				tb_printf(&t,
					  " | checkpoint age %.1f s (%" PRIu64 " written, %" PRIu64
					  " failed)\n",
					  (double)sl->srv.ckpt_age_ms / 1e3 +
					      (double)(now - sl->srv_ns) / 1e9,
					  sl->srv.ckpts, sl->srv.ckpt_fails);
			else
				tb_printf(&t, " | checkpoint none (%" PRIu64 " failed)\n",
					  sl->srv.ckpt_fails);
		}
	}
	for (const struct sched_peer *p = s->peers; p; p = p->next) {
		char hp[96];

		if (!p->registered || p->slot >= 0 || p->closing)
			continue;
		snprintf(hp, sizeof(hp), "%s:%u", p->reg.host, p->reg.port);
		tb_printf(&t, "%-5s %-7s %-5s %-28s %-8u %-7s %-9s %-5s %-10s %-9s %-9s %s\n", "-",
			  role_name(p->reg.role), "-", hp, p->reg.pid, "waiting", "-",
			  p->reg.transport ? "rdma" : "tcp", "-", "-", "-", "-");
	}
	return t.n;
}

void rps_sched_opts_init(struct rps_sched_opts *o, const struct rps_config *cfg)
{
	uint16_t port = 0;

	if (!cfg)
		cfg = rps_config_get();
	memset(o, 0, sizeof(*o));
	if (rps_config_parse_hostport(cfg->scheduler, o->host_buf, sizeof(o->host_buf), &port)) {
		o->host_buf[0] = '\0';
		port = (uint16_t)cfg->port;
	}
	o->host = o->host_buf;
	o->port = port;
	o->secret = cfg->secret;
	o->num_servers = cfg->num_servers;
	o->num_workers = cfg->num_workers;
	o->heartbeat_timeout_ms = cfg->heartbeat_timeout_ms;
	o->shutdown_grace_ms = 5000;
	o->metrics_port = cfg->metrics_port;
	o->cfg = cfg;
}

static int sched_on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
			  size_t *ack_len_p, const char **why_p)
{
	*ack_len_p = 0;
	switch (h->role) {
	case RPS_ROLE_SERVER:
	case RPS_ROLE_WORKER:
	case RPS_ROLE_CTL:
		return 0;
	default:
		*why_p = "only servers, workers and rdmaps-ctl talk to the scheduler";
		return -EPROTO;
	}
}

int rps_sched_create(const struct rps_sched_opts *o, struct rps_sched **sched_p)
{
	struct rps_tr_params tp;
	struct rps_sched *s;
	int rc;

	if (o->num_servers < 0 || o->num_workers < 1 ||
	    o->num_servers + o->num_workers > RPS_MAX_NODES || o->num_workers > RPS_MAX_WORKERS) {
		RPS_ERR(
		    "scheduler: bad cluster size: %d server(s), %d worker(s) (need >= 1 worker, "
		    "<= %d workers, <= %d nodes)",
		    o->num_servers, o->num_workers, RPS_MAX_WORKERS, RPS_MAX_NODES);
		return -EINVAL;
	}
	if (o->heartbeat_timeout_ms <= 0) {
		RPS_ERR("scheduler: heartbeat timeout %d ms: must be > 0", o->heartbeat_timeout_ms);
		return -EINVAL;
	}
	if (o->cfg && o->cfg->fault[0] && !rps_fault_on) {
		rc = rps_fault_init(o->cfg->fault);
		if (rc)
			return rc;
	}
	s = rps_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	snprintf(s->host, sizeof(s->host), "%s", o->host ? o->host : "");
	snprintf(s->secret, sizeof(s->secret), "%s", o->secret ? o->secret : "");
	s->num_servers = o->num_servers;
	s->num_workers = o->num_workers;
	s->hb_timeout_ms = o->heartbeat_timeout_ms;
	s->grace_ms = o->shutdown_grace_ms > 0 ? o->shutdown_grace_ms : 5000;
	s->nslots = o->num_servers + o->num_workers;
	s->start_ns = rps_now_ns();
	atomic_init(&s->stop, 0);
	s->slots = rps_calloc((size_t)s->nslots, sizeof(*s->slots));
	s->mapbuf_len = sizeof(struct rps_map) + (size_t)s->nslots * sizeof(struct rps_node);
	s->mapbuf = rps_calloc(1, s->mapbuf_len);
	if (!s->slots || !s->mapbuf) {
		rc = -ENOMEM;
		goto err_free;
	}
	rps_tr_params_from_config(o->cfg ? o->cfg : rps_config_get(), &tp);
	tp.secret = s->secret;
	tp.max_msg = SCHED_MAX_MSG;
	tp.arg = s;
	tp.on_hello = sched_on_hello;
	rc = rps_transport_create("tcp", &tp, &s->tr);
	if (rc)
		goto err_free;
	if (sizeof(struct rps_frame_hdr) + s->mapbuf_len > s->tr->max_frame) {
		RPS_ERR("scheduler: a map of %d nodes (%zu bytes) exceeds the frame limit %" PRIu64,
			s->nslots, s->mapbuf_len, s->tr->max_frame);
		rc = -EMSGSIZE;
		goto err_transport;
	}
	rc = rps_tr_listen(s->tr, s->host[0] ? s->host : "0.0.0.0", o->port, &s->port);
	if (rc)
		goto err_transport; /* the transport said why */
	if (o->metrics_port > 0) {
		rc = metrics_start(s, s->host[0] ? s->host : "0.0.0.0", o->metrics_port);
		if (rc)
			goto err_transport;
	}
	*sched_p = s;
	return 0;

err_transport:
	rps_transport_destroy(s->tr);
err_free:
	rps_free(s->mapbuf);
	rps_free(s->slots);
	rps_free(s);
	return rc;
}

void rps_sched_destroy(struct rps_sched *s)
{
	if (!s)
		return;
	while (s->peers) {
		struct sched_peer *p = s->peers;

		s->peers = p->next;
		rps_tr_close(p->conn);
		rps_free(p);
	}
	rps_http_stop(s->m.http);
	rps_metrics_destroy(s->m.reg);
	rps_transport_destroy(s->tr);
	rps_free(s->mapbuf);
	rps_free(s->slots);
	rps_free(s);
}
