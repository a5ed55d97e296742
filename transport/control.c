/* The control channel, client side: a node's connection to rdmaps-sched.
 *
 * rps_ctl_join() runs in the caller's thread: connect (retrying while the
 * scheduler is not up yet), REGISTER, wait for the MAP. Then a control thread
 * owns the transport's poll(): it sends heartbeats, applies map updates and
 * dead-node notices, releases barriers and passes SHUTDOWN on.
 *
 * Losing the scheduler (its connection closes without a SHUTDOWN) is logged
 * once; from then on rps_ctl_barrier() fails with -EHOSTDOWN and
 * rps_ctl_status() says -EHOSTDOWN. on_shutdown is NOT called for a lost
 * scheduler: the data path may go on (ASP needs no scheduler) and the caller
 * decides. rps_ctl_map() keeps returning the last map.
 *
 * Locking: ctl->lock guards the connection pointer, the map and the barrier
 * and heartbeat state. Frames are sent under it (control frames are rare);
 * callbacks run in the control thread without it, on copies. A callback may
 * call rps_ctl_map / rank / id / status / set_heartbeat, but must not block
 * in rps_ctl_barrier or call rps_ctl_leave (that joins the control thread).
 */
#include "transport/control.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/config.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/transport.h"

#include <rdmaps/status.h>

#define CTL_RETRY_MS	  150	     /* between connection attempts while no scheduler */
#define CTL_LEAVE_WAIT_MS 1000	     /* rps_ctl_leave: wait this long for the scheduler's close */
#define CTL_MAX_MSG	  (1u << 20) /* a MAP of RPS_MAX_NODES nodes is 80 KiB */
#define CTL_EVENTS	  16

/* Not in control.h yet: 0 while connected, -EHOSTDOWN once the scheduler
 * connection is lost, -ESHUTDOWN once the scheduler sent SHUTDOWN. */
int rps_ctl_status(const struct rps_ctl *ctl);

struct rps_ctl {
	struct rps_transport *tr;
	struct rps_conn *conn; /* NULL once closed */
	char sched[RPS_STR_MAX];
	uint8_t role;
	int heartbeat_ms;
	void (*on_dead)(void *arg, const struct rps_node *node);
	void (*on_shutdown)(void *arg);
	void (*on_map)(void *arg, const struct rps_map *map, const struct rps_node *nodes);
	void *arg;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* barrier releases, loss, close */
	pthread_t thread;
	int thread_started;
	atomic_int stop;

	struct rps_map map;
	struct rps_node *nodes; /* RPS_MAX_NODES */
	uint32_t id;
	uint32_t rank;
	int joined;	    /* MAP received */
	int join_status;    /* join: refusal / loss */
	char progress[256]; /* the scheduler's last progress text */

	uint32_t next_req;
	int barrier_waiting[2];
	int barrier_done[2];
	int barrier_status[2];
	uint32_t barrier_req[2];

	uint32_t hb_clock;
	uint64_t hb_counters[4];
	/* servers: rps_heartbeat_srv + rps_hb_shard[] after the heartbeat */
	char hb_tail[sizeof(struct rps_heartbeat_srv) + RPS_MAX_SHARDS * sizeof(struct rps_hb_shard)];
	size_t hb_tail_len;
	uint64_t last_hb_ns;

	int closed;   /* connection closed */
	int lost;     /* ... without SHUTDOWN and before leave */
	int shutdown; /* SHUTDOWN received */
	int leaving;  /* rps_ctl_leave() running */

	/* control thread's copies for the callbacks */
	struct rps_map cb_map;
	struct rps_node *cb_nodes;
};

static const char *role_name(uint8_t role)
{
	switch (role) {
	case RPS_ROLE_SERVER:
		return "server";
	case RPS_ROLE_WORKER:
		return "worker";
	case RPS_ROLE_CTL:
		return "ctl";
	case RPS_ROLE_SCHEDULER:
		return "scheduler";
	}
	return "?";
}

/* Under ctl->lock. */
static int send_locked(struct rps_ctl *ctl, uint8_t op, uint32_t req_id, uint32_t aux,
		       const void *payload, size_t len)
{
	struct rps_frame_hdr h;
	struct iovec iov = {.iov_base = (void *)payload, .iov_len = len};

	if (!ctl->conn)
		return -ECONNRESET;
	rps_proto_hdr_init(&h, op, (uint32_t)len, req_id);
	h.aux = aux;
	return rps_tr_post_send(ctl->conn, &h, &iov, len ? 1 : 0, 0);
}

static void send_heartbeat_locked(struct rps_ctl *ctl, uint64_t now)
{
	struct {
		struct rps_heartbeat hb;
		char tail[sizeof(ctl->hb_tail)];
	} f;

	memset(&f.hb, 0, sizeof(f.hb));
	f.hb.id = ctl->id;
	f.hb.clock = ctl->hb_clock;
	memcpy(f.hb.counters, ctl->hb_counters, sizeof(f.hb.counters));
	memcpy(f.tail, ctl->hb_tail, ctl->hb_tail_len);
	ctl->last_hb_ns = now;
	send_locked(ctl, RPS_OP_HEARTBEAT, 0, 0, &f, sizeof(f.hb) + ctl->hb_tail_len);
}

static void maybe_heartbeat(struct rps_ctl *ctl)
{
	uint64_t now = rps_now_ns();

	pthread_mutex_lock(&ctl->lock);
	if (ctl->conn && !ctl->leaving &&
	    now - ctl->last_hb_ns >= (uint64_t)ctl->heartbeat_ms * 1000000ull)
		send_heartbeat_locked(ctl, now);
	pthread_mutex_unlock(&ctl->lock);
}

/* What the control thread must do after an event, outside the lock. */
struct ctl_action {
	int map; /* call on_map with cb_map / cb_nodes */
	int dead;
	struct rps_node dead_node;
	int shutdown;
};

static void on_map_frame(struct rps_ctl *ctl, const struct rps_tr_event *ev, struct ctl_action *act)
{
	struct rps_map m;

	if (ev->hdr.len < sizeof(m) || !ev->fixed) {
		RPS_WARN("scheduler %s: short MAP frame (%u bytes) ignored", ctl->sched,
			 ev->hdr.len);
		return;
	}
	memcpy(&m, ev->fixed, sizeof(m));
	if (m.num_nodes > RPS_MAX_NODES ||
	    ev->data_len != (size_t)m.num_nodes * sizeof(struct rps_node) ||
	    (m.num_nodes && !ev->data)) {
		RPS_WARN("scheduler %s: MAP of %u nodes with %zu bytes of nodes ignored",
			 ctl->sched, m.num_nodes, ev->data_len);
		return;
	}
	pthread_mutex_lock(&ctl->lock);
	ctl->map = m;
	if (m.num_nodes)
		memcpy(ctl->nodes, ev->data, ev->data_len);
	ctl->id = m.your_id;
	ctl->rank = m.your_rank;
	if (ctl->joined && act) {
		ctl->cb_map = m;
		memcpy(ctl->cb_nodes, ctl->nodes, (size_t)m.num_nodes * sizeof(struct rps_node));
		act->map = 1;
	}
	ctl->joined = 1;
	pthread_mutex_unlock(&ctl->lock);
	RPS_DEBUG("scheduler %s: map epoch %u, %u nodes; we are node %u, %s rank %u", ctl->sched,
		  m.epoch, m.num_nodes, m.your_id, role_name(ctl->role), m.your_rank);
}

static void on_dead_frame(struct rps_ctl *ctl, const struct rps_tr_event *ev,
			  struct ctl_action *act)
{
	struct rps_node n;

	if (ev->hdr.len < sizeof(n) || !ev->fixed)
		return;
	memcpy(&n, ev->fixed, sizeof(n));
	n.host[sizeof(n.host) - 1] = '\0';
	n.alive = 0;
	pthread_mutex_lock(&ctl->lock);
	if (n.id < ctl->map.num_nodes)
		ctl->nodes[n.id].alive = 0;
	if (ev->hdr.aux > ctl->map.epoch)
		ctl->map.epoch = ev->hdr.aux;
	pthread_mutex_unlock(&ctl->lock);
	if (ev->hdr.status)
		RPS_WARN("node %u (%s rank %u, %s:%u) declared dead by the scheduler", n.id,
			 role_name(n.role), n.rank, n.host, n.port);
	else
		RPS_INFO("node %u (%s rank %u, %s:%u) left", n.id, role_name(n.role), n.rank,
			 n.host, n.port);
	if (act) {
		act->dead = 1;
		act->dead_node = n;
	}
}

static void on_barrier_done(struct rps_ctl *ctl, const struct rps_frame_hdr *h)
{
	uint32_t g = h->aux;

	if (g > 1)
		return;
	pthread_mutex_lock(&ctl->lock);
	if (ctl->barrier_waiting[g] && ctl->barrier_req[g] == h->req_id) {
		ctl->barrier_done[g] = 1;
		ctl->barrier_status[g] = h->status;
		pthread_cond_broadcast(&ctl->cond);
	}
	pthread_mutex_unlock(&ctl->lock);
}

static void on_error_frame(struct rps_ctl *ctl, const struct rps_tr_event *ev)
{
	char why[256];
	size_t n = RPS_MIN(ev->data_len, sizeof(why) - 1);

	if (n && ev->data)
		memcpy(why, ev->data, n);
	why[n] = '\0';
	pthread_mutex_lock(&ctl->lock);
	if (!ctl->joined && !ctl->join_status)
		ctl->join_status = ev->hdr.status ? ev->hdr.status : -EPROTO;
	pthread_mutex_unlock(&ctl->lock);
	RPS_ERR("scheduler %s: %s (%s)", ctl->sched, why[0] ? why : "error",
		rps_strerror(ev->hdr.status));
}

static void on_progress(struct rps_ctl *ctl, const struct rps_tr_event *ev)
{
	size_t n = RPS_MIN(ev->data_len, sizeof(ctl->progress) - 1);

	pthread_mutex_lock(&ctl->lock);
	if (n && ev->data)
		memcpy(ctl->progress, ev->data, n);
	ctl->progress[n] = '\0';
	pthread_mutex_unlock(&ctl->lock);
	RPS_DEBUG("scheduler %s: %s", ctl->sched, ctl->progress);
}

static void on_closed(struct rps_ctl *ctl, const struct rps_tr_event *ev)
{
	int report;

	pthread_mutex_lock(&ctl->lock);
	if (ctl->conn) {
		rps_tr_close(ctl->conn);
		ctl->conn = NULL;
	}
	ctl->closed = 1;
	report = !ctl->shutdown && !ctl->leaving;
	if (report) {
		ctl->lost = 1;
		if (!ctl->joined && ctl->join_status)
			report = 0; /* refused: already said why */
		else if (!ctl->joined)
			ctl->join_status = -ECONNRESET;
	}
	pthread_cond_broadcast(&ctl->cond);
	pthread_mutex_unlock(&ctl->lock);
	if (report && ctl->joined)
		RPS_ERR("scheduler %s: connection lost (%s): no more barriers or dead-node notices",
			ctl->sched,
			ev->status ? rps_strerror(ev->status) : "closed by the scheduler");
	else if (report)
		RPS_ERR("scheduler %s closed the connection before sending the map", ctl->sched);
}

static void handle_event(struct rps_ctl *ctl, struct rps_tr_event *ev, struct ctl_action *act)
{
	switch (ev->type) {
	case RPS_TR_EV_RECV:
		switch (ev->hdr.op) {
		case RPS_OP_MAP:
			on_map_frame(ctl, ev, act);
			break;
		case RPS_OP_NODE_DEAD:
			on_dead_frame(ctl, ev, act);
			break;
		case RPS_OP_BARRIER_DONE:
			on_barrier_done(ctl, &ev->hdr);
			break;
		case RPS_OP_SHUTDOWN:
			pthread_mutex_lock(&ctl->lock);
			ctl->shutdown = 1;
			if (!ctl->joined && !ctl->join_status)
				ctl->join_status = -ECANCELED;
			pthread_cond_broadcast(&ctl->cond);
			pthread_mutex_unlock(&ctl->lock);
			if (ctl->joined)
				RPS_INFO("scheduler %s: shutdown", ctl->sched);
			else
				RPS_ERR("scheduler %s shut down before the cluster was complete",
					ctl->sched);
			if (act)
				act->shutdown = 1;
			break;
		case RPS_OP_ERROR:
			on_error_frame(ctl, ev);
			break;
		case RPS_OP_STATUS:
			on_progress(ctl, ev);
			break;
		default:
			RPS_WARN("scheduler %s: unexpected %s frame ignored", ctl->sched,
				 rps_proto_op_name(ev->hdr.op));
			break;
		}
		if (ev->token)
			rps_tr_release(ctl->tr, ev->token);
		break;
	case RPS_TR_EV_CLOSED:
		on_closed(ctl, ev);
		break;
	default:
		break;
	}
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void *ctl_thread(void *arg)
{
	struct rps_ctl *ctl = arg;
	struct rps_tr_event ev[CTL_EVENTS];
	int wait_ms = RPS_MAX(5, RPS_MIN(ctl->heartbeat_ms / 2, 100));

	while (!atomic_load(&ctl->stop)) {
		int n = rps_tr_poll(ctl->tr, ev, CTL_EVENTS, wait_ms);

		if (n < 0 && n != -EINTR && n != -EAGAIN) {
			RPS_ERR("control channel poll: %s", rps_strerror(n));
			sleep_ms(50);
			continue;
		}
		for (int i = 0; i < n; i++) {
			struct ctl_action act;

			memset(&act, 0, sizeof(act));
			handle_event(ctl, &ev[i], &act);
			if (act.map && ctl->on_map)
				ctl->on_map(ctl->arg, &ctl->cb_map, ctl->cb_nodes);
			if (act.dead && ctl->on_dead)
				ctl->on_dead(ctl->arg, &act.dead_node);
			if (act.shutdown && ctl->on_shutdown)
				ctl->on_shutdown(ctl->arg);
		}
		maybe_heartbeat(ctl);
	}
	return NULL;
}

static int retryable(int rc)
{
	switch (-rc) {
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EAGAIN:
	case EPIPE:
		return 1;
	}
	return 0;
}

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = rps_now_ns();

	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

static int ctl_connect(struct rps_ctl *ctl, const char *host, uint16_t port, uint32_t want_rank,
		       const char *secret, uint64_t deadline, int timeout_ms)
{
	struct rps_hello hello;
	char ack[64];
	size_t ack_len = 0;
	int rc, tries = 0;

	rps_proto_hello_init(&hello, ctl->role, want_rank, secret ? secret : "");
	for (;;) {
		int left = remaining_ms(deadline);

		rc = rps_tr_connect(ctl->tr, host, port, &hello, ack, sizeof(ack), &ack_len,
					   RPS_MAX(left, 1), &ctl->conn);
		if (!rc)
			return 0;
		tries++;
		left = remaining_ms(deadline);
		if (!retryable(rc) || left <= 0)
			break;
		if (tries == 1)
			RPS_INFO("scheduler %s not reachable yet (%s): retrying for up to %d ms",
				 ctl->sched, rps_strerror(rc), left);
		sleep_ms(RPS_MIN(left, CTL_RETRY_MS));
	}
	if (rc == -EACCES)
		RPS_ERR("scheduler %s refused us: wrong secret (RDMAPS_SECRET)", ctl->sched);
	else if (retryable(rc))
		RPS_ERR("no scheduler at %s after %d ms (%d attempts): %s", ctl->sched, timeout_ms,
			tries, rps_strerror(rc));
	else
		RPS_ERR("connect to scheduler %s: %s", ctl->sched, rps_strerror(rc));
	return rc;
}

static int ctl_register(struct rps_ctl *ctl, const struct rps_ctl_join_opts *o)
{
	struct rps_register r;
	int rc;

	memset(&r, 0, sizeof(r));
	r.role = o->role;
	r.transport = o->transport;
	r.port = o->port;
	r.want_rank = o->want_rank;
	r.pid = (uint32_t)getpid();
	if (o->host && o->host[0])
		snprintf(r.host, sizeof(r.host), "%s", o->host);
	else if (gethostname(r.host, sizeof(r.host) - 1) != 0)
		r.host[0] = '\0';
	r.host[sizeof(r.host) - 1] = '\0';
	pthread_mutex_lock(&ctl->lock);
	rc = send_locked(ctl, RPS_OP_REGISTER, ++ctl->next_req, 0, &r, sizeof(r));
	pthread_mutex_unlock(&ctl->lock);
	if (rc)
		RPS_ERR("scheduler %s: sending REGISTER: %s", ctl->sched, rps_strerror(rc));
	return rc;
}

/* Poll in the caller's thread until the MAP, a refusal, or the deadline. */
static int ctl_wait_map(struct rps_ctl *ctl, uint64_t deadline, int timeout_ms)
{
	struct rps_tr_event ev[CTL_EVENTS];

	for (;;) {
		int left = remaining_ms(deadline), n, rc;

		pthread_mutex_lock(&ctl->lock);
		rc = ctl->joined ? 0 : ctl->join_status;
		if (ctl->joined || rc) {
			pthread_mutex_unlock(&ctl->lock);
			return rc;
		}
		pthread_mutex_unlock(&ctl->lock);
		if (left <= 0)
			break;
		n = rps_tr_poll(ctl->tr, ev, CTL_EVENTS,
				       RPS_MIN(left, RPS_MAX(5, ctl->heartbeat_ms / 2)));
		if (n < 0 && n != -EINTR && n != -EAGAIN) {
			RPS_ERR("control channel poll: %s", rps_strerror(n));
			return n;
		}
		for (int i = 0; i < n; i++)
			handle_event(ctl, &ev[i], NULL);
		maybe_heartbeat(ctl);
	}
	pthread_mutex_lock(&ctl->lock);
	RPS_ERR("scheduler %s: no cluster map after %d ms: %s", ctl->sched, timeout_ms,
		ctl->progress[0]
		    ? ctl->progress
		    : "the scheduler is still waiting for nodes (check "
		      "RDMAPS_NUM_SERVERS / RDMAPS_NUM_WORKERS and that every node started)");
	pthread_mutex_unlock(&ctl->lock);
	return -ETIMEDOUT;
}

static void ctl_free(struct rps_ctl *ctl)
{
	if (ctl->conn)
		rps_tr_close(ctl->conn);
	if (ctl->tr)
		rps_transport_destroy(ctl->tr);
	pthread_cond_destroy(&ctl->cond);
	pthread_mutex_destroy(&ctl->lock);
	rps_free(ctl->cb_nodes);
	rps_free(ctl->nodes);
	rps_free(ctl);
}

int rps_ctl_join(const struct rps_ctl_join_opts *o, struct rps_ctl **ctl_p)
{
	const struct rps_config *cfg = rps_config_get();
	struct rps_tr_params tp;
	pthread_condattr_t ca;
	struct rps_ctl *ctl;
	char host[RPS_STR_MAX];
	uint16_t port;
	uint64_t deadline;
	int timeout_ms, rc;

	if (!o->scheduler || !o->scheduler[0]) {
		RPS_ERR("no scheduler address (set RDMAPS_SCHEDULER=host:port)");
		return -EINVAL;
	}
	if (o->role != RPS_ROLE_SERVER && o->role != RPS_ROLE_WORKER) {
		RPS_ERR("control channel: role %u cannot join (server or worker)", o->role);
		return -EINVAL;
	}
	if (rps_config_parse_hostport(o->scheduler, host, sizeof(host), &port) != 0 || !port) {
		RPS_ERR("scheduler address '%s': expected host:port", o->scheduler);
		return -EINVAL;
	}
	timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : cfg->timeout_ms;
	if (timeout_ms <= 0)
		timeout_ms = 30000;
	deadline = rps_now_ns() + (uint64_t)timeout_ms * 1000000ull;

	ctl = rps_calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	snprintf(ctl->sched, sizeof(ctl->sched), "%s", o->scheduler);
	ctl->role = o->role;
	ctl->heartbeat_ms = o->heartbeat_ms > 0 ? o->heartbeat_ms : cfg->heartbeat_ms;
	if (ctl->heartbeat_ms <= 0)
		ctl->heartbeat_ms = 1000;
	ctl->on_dead = o->on_dead;
	ctl->on_shutdown = o->on_shutdown;
	ctl->on_map = o->on_map;
	ctl->arg = o->arg;
	atomic_init(&ctl->stop, 0);
	pthread_mutex_init(&ctl->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ctl->cond, &ca);
	pthread_condattr_destroy(&ca);
	ctl->nodes = rps_calloc(RPS_MAX_NODES, sizeof(struct rps_node));
	ctl->cb_nodes = rps_calloc(RPS_MAX_NODES, sizeof(struct rps_node));
	if (!ctl->nodes || !ctl->cb_nodes) {
		rc = -ENOMEM;
		goto err_free;
	}

	rps_tr_params_from_config(cfg, &tp);
	tp.secret = o->secret ? o->secret : "";
	tp.max_msg = CTL_MAX_MSG;
	tp.timeout_ms = timeout_ms;
	tp.arg = ctl;
	rc = rps_transport_create("tcp", &tp, &ctl->tr);
	if (rc)
		goto err_free;
	rc = ctl_connect(ctl, host, port, o->want_rank, o->secret, deadline, timeout_ms);
	if (rc)
		goto err_free;
	rc = ctl_register(ctl, o);
	if (rc)
		goto err_free;
	rc = ctl_wait_map(ctl, deadline, timeout_ms);
	if (rc)
		goto err_free;
	RPS_INFO("joined via scheduler %s: node %u, %s rank %u of %u servers + %u workers",
		 ctl->sched, ctl->id, role_name(ctl->role), ctl->rank, ctl->map.num_servers,
		 ctl->map.num_workers);
	ctl->last_hb_ns = 0; /* first heartbeat right away */
	rc = pthread_create(&ctl->thread, NULL, ctl_thread, ctl);
	if (rc) {
		RPS_ERR("control thread: %s", strerror(rc));
		rc = -rc;
		goto err_free;
	}
	ctl->thread_started = 1;
	pthread_setname_np(ctl->thread, "rps-control");
	*ctl_p = ctl;
	return 0;

err_free:
	ctl_free(ctl);
	return rc;
}

int rps_ctl_map(struct rps_ctl *ctl, struct rps_map *map_p, struct rps_node *nodes, int max)
{
	int n;

	pthread_mutex_lock(&ctl->lock);
	n = (int)ctl->map.num_nodes;
	if (map_p)
		*map_p = ctl->map;
	if (nodes && max > 0)
		memcpy(nodes, ctl->nodes, (size_t)RPS_MIN(n, max) * sizeof(*nodes));
	pthread_mutex_unlock(&ctl->lock);
	return n;
}

uint32_t rps_ctl_rank(const struct rps_ctl *ctl)
{
	return ctl->rank;
}

uint32_t rps_ctl_id(const struct rps_ctl *ctl)
{
	return ctl->id;
}

int rps_ctl_status(const struct rps_ctl *ctl)
{
	struct rps_ctl *c = (struct rps_ctl *)ctl;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = c->lost ? -EHOSTDOWN : c->shutdown ? -ESHUTDOWN : 0;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rps_ctl_barrier(struct rps_ctl *ctl, uint32_t group, int timeout_ms)
{
	struct timespec until;
	int rc;

	if (group > 1)
		return -EINVAL;
	if (timeout_ms > 0)
		rps_deadline_ms(&until, timeout_ms);
	pthread_mutex_lock(&ctl->lock);
	if (ctl->lost || ctl->shutdown || !ctl->conn) {
		pthread_mutex_unlock(&ctl->lock);
		return -EHOSTDOWN;
	}
	if (ctl->barrier_waiting[group]) {
		pthread_mutex_unlock(&ctl->lock);
		RPS_ERR("barrier %u: already waited for by another thread", group);
		return -EBUSY;
	}
	ctl->barrier_waiting[group] = 1;
	ctl->barrier_done[group] = 0;
	ctl->barrier_req[group] = ++ctl->next_req;
	rc = send_locked(ctl, RPS_OP_BARRIER, ctl->barrier_req[group], group, NULL, 0);
	if (rc) {
		RPS_ERR("barrier %u: sending to scheduler %s: %s", group, ctl->sched,
			rps_strerror(rc));
		rc = -EHOSTDOWN;
		goto out;
	}
	while (!ctl->barrier_done[group] && !ctl->lost && !ctl->shutdown) {
		if (timeout_ms > 0) {
			if (pthread_cond_timedwait(&ctl->cond, &ctl->lock, &until) == ETIMEDOUT &&
			    !ctl->barrier_done[group]) {
				RPS_ERR("barrier %u: not released after %d ms", group, timeout_ms);
				rc = -ETIMEDOUT;
				goto out;
			}
		} else {
			pthread_cond_wait(&ctl->cond, &ctl->lock);
		}
	}
	if (ctl->barrier_done[group]) {
		rc = ctl->barrier_status[group];
		if (rc)
			RPS_ERR("barrier %u: refused by the scheduler: %s", group,
				rps_strerror(rc));
	} else {
		rc = -EHOSTDOWN;
		RPS_ERR("barrier %u: %s", group,
			ctl->lost ? "scheduler connection lost" : "scheduler shut down");
	}
out:
	ctl->barrier_waiting[group] = 0;
	pthread_mutex_unlock(&ctl->lock);
	return rc;
}

void rps_ctl_set_heartbeat(struct rps_ctl *ctl, uint32_t clock, const uint64_t counters[4])
{
	pthread_mutex_lock(&ctl->lock);
	ctl->hb_clock = clock;
	if (counters)
		memcpy(ctl->hb_counters, counters, sizeof(ctl->hb_counters));
	pthread_mutex_unlock(&ctl->lock);
}

int rps_ctl_set_heartbeat_tail(struct rps_ctl *ctl, const void *tail, size_t len)
{
	if (len > sizeof(ctl->hb_tail) || (len && !tail))
		return -EINVAL;
	pthread_mutex_lock(&ctl->lock);
	if (len)
		memcpy(ctl->hb_tail, tail, len);
	ctl->hb_tail_len = len;
	pthread_mutex_unlock(&ctl->lock);
	return 0;
}

/* SHUTDOWN to the scheduler, then wait (briefly) for it to close the
 * connection: that close says it has read everything we sent. */
void rps_ctl_leave(struct rps_ctl *ctl)
{
	struct timespec until;

	if (!ctl)
		return;
	if (ctl->thread_started && pthread_equal(pthread_self(), ctl->thread)) {
		RPS_ERR("rps_ctl_leave called from a control callback: ignored (it would "
			"wait for itself)");
		return;
	}
	pthread_mutex_lock(&ctl->lock);
	ctl->leaving = 1;
	if (ctl->conn && send_locked(ctl, RPS_OP_SHUTDOWN, ++ctl->next_req, 0, NULL, 0) == 0) {
		rps_deadline_ms(&until, CTL_LEAVE_WAIT_MS);
		while (!ctl->closed && ctl->thread_started)
			if (pthread_cond_timedwait(&ctl->cond, &ctl->lock, &until) == ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&ctl->lock);
	atomic_store(&ctl->stop, 1);
	if (ctl->thread_started) {
		rps_tr_wake(ctl->tr);
		pthread_join(ctl->thread, NULL);
	}
	ctl_free(ctl);
}
