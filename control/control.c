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
#include "control/control_int.h"

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

	rps_proto_hello_init(&hello, ctl->role, want_rank);
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
		rps_sleep_ms(RPS_MIN(left, CTL_RETRY_MS));
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
	rc = rps_ctl_send_locked(ctl, RPS_OP_REGISTER, ++ctl->next_req, 0, &r, sizeof(r));
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
			rps_ctl_handle_event(ctl, &ev[i], NULL);
		rps_ctl_maybe_heartbeat(ctl);
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

int rps_ctl_transport_create(const struct rps_config *cfg, const char *secret, uint64_t max_msg,
			     int timeout_ms, void *arg,
			     int (*on_hello)(void *arg, struct rps_conn *c,
					     const struct rps_hello *h, void *ack,
					     size_t *ack_len_p, const char **why_p),
			     struct rps_transport **tr_p)
{
	struct rps_tr_params tp;

	rps_tr_params_from_config(cfg, &tp);
	tp.secret = secret ? secret : "";
	tp.max_msg = max_msg;
	/* control frames are small: a peer that lets 16 of the largest pile up
	 * unread is cut (the scheduler must never wait on one peer) */
	if (tp.sq_max > 16 * max_msg)
		tp.sq_max = 16 * max_msg;
	/* nodes waiting for the map are silent for as long as the rendezvous
	 * takes: the scheduler has deadlines of its own (register_timeout_ms,
	 * heartbeats) instead of the data connections' idle timeout */
	tp.idle_timeout_ms = 0;
	if (timeout_ms > 0)
		tp.timeout_ms = timeout_ms;
	tp.arg = arg;
	tp.on_hello = on_hello;
	return rps_transport_create("tcp", &tp, tr_p);
}

void rps_ctl_join_opts_init(struct rps_ctl_join_opts *o, const struct rps_config *cfg, uint8_t role)
{
	memset(o, 0, sizeof(*o));
	o->scheduler = cfg->scheduler;
	o->secret = cfg->secret;
	o->role = role;
	o->transport = 0; /* the caller knows its data path: rps_tr_has(tr, RPS_TR_CAP_READ) */
	o->host = cfg->host;
	o->want_rank = cfg->rank >= 0 ? (uint32_t)cfg->rank : UINT32_MAX;
	o->timeout_ms = cfg->timeout_ms;
	o->heartbeat_ms = cfg->heartbeat_ms;
	o->cfg = cfg;
}

int rps_ctl_join(const struct rps_ctl_join_opts *o, struct rps_ctl **ctl_p)
{
	const struct rps_config *cfg = o->cfg;
	struct rps_config dflt;
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
	if (!cfg) {
		rc = rps_config_init(&dflt); /* defaults and RDMAPS_* */
		if (rc)
			return rc;
		cfg = &dflt;
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
	if (o->events)
		ctl->ev = *o->events;
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

	rc = rps_ctl_transport_create(cfg, o->secret, CTL_MAX_MSG, timeout_ms, ctl, NULL, &ctl->tr);
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
		 ctl->sched, ctl->id, rps_ctl_role_name(ctl->role), ctl->rank, ctl->map.num_servers,
		 ctl->map.num_workers);
	ctl->last_hb_ns = 0; /* first heartbeat right away */
	rc = pthread_create(&ctl->thread, NULL, rps_ctl_thread, ctl);
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
	if (ctl->conn &&
	    rps_ctl_send_locked(ctl, RPS_OP_SHUTDOWN, ++ctl->next_req, 0, NULL, 0) == 0) {
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
