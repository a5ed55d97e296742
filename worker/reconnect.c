/* A worker loses and regains servers: connections marked dead and reaped
 * by the progress thread, callers held off while a reconnect swaps
 * connections, reconnecting to a restarted server (and SYNC of our clock),
 * and the reconnector thread. Connecting at create: conn.c. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/table.h"
#include "worker/worker_int.h"

void rps_wconn_mark_dead(struct rps_worker *w, struct rps_wconn *wc, int status)
{
	int zero = 0;

	if (!status)
		status = -ECONNRESET;
	if (atomic_compare_exchange_strong(&wc->dead, &zero, status)) {
		int lvl = atomic_load(&w->leaving) ? RPS_LOG_DEBUG : RPS_LOG_WARN;

		RPS_LOG(lvl, "server %u (%s:%u) channel %u: connection lost: %s", wc->srv->rank,
			wc->srv->host, wc->srv->port, wc->channel, rps_strerror(status));
	}
	atomic_store(&w->dead_pending, 1);
	if (!atomic_load(&w->leaving)) {
		atomic_store_explicit(&w->reconnect, 1, memory_order_release);
		if (w->rc_started) {
			pthread_mutex_lock(&w->rc_lock);
			pthread_cond_signal(&w->rc_cond);
			pthread_mutex_unlock(&w->rc_lock);
		}
	}
	rps_worker_wake(w);
}

int rps_wconn_reap(struct rps_worker *w)
{
	int waiting = 0;

	if (!atomic_exchange(&w->dead_pending, 0))
		return 0;
	for (uint32_t i = 0; i < w->num_servers; i++) {
		struct rps_wserver *s = &w->servers[i];

		for (uint32_t j = 0; s->conns && j < s->nconns; j++) {
			struct rps_wconn *wc = &s->conns[j];
			int why = atomic_load(&wc->dead);
			int n;

			if (!why || wc->closed || !wc->c)
				continue;
			if (atomic_load(&w->submitters)) {
				waiting = 1; /* a caller may be posting on it: next round */
				continue;
			}
			rps_tr_close(wc->c);
			wc->closed = 1;
			pthread_mutex_lock(&w->core.lock);
			n = rps_wcore_fail_conn_locked(&w->core, wc, why);
			pthread_mutex_unlock(&w->core.lock);
			if (n)
				RPS_WARN("server %u channel %u: %d request pieces failed: %s",
					 s->rank, wc->channel, n, rps_strerror(why));
		}
	}
	if (waiting)
		atomic_store(&w->dead_pending, 1);
	return waiting;
}

/* ---- reconnecting to a restarted server ---- */

void rps_wsubmit_wait(struct rps_worker *w)
{
	while (atomic_load(&w->publishing) && !pthread_equal(pthread_self(), w->reconn_thread)) {
		atomic_fetch_sub(&w->submitters, 1);
		while (atomic_load(&w->publishing))
			rps_sleep_ms(1);
		atomic_fetch_add(&w->submitters, 1);
	}
}

static int server_broken(const struct rps_wserver *s)
{
	for (uint32_t j = 0; s->conns && j < s->nconns; j++)
		if (atomic_load((_Atomic int *)&s->conns[j].dead))
			return 1;
	return 0;
}

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = rps_now_ns();

	return now >= deadline ? 0 : (int)((deadline - now) / 1000000u);
}

/* Check the restarted server's HELLO_ACK against what we know of it. */
static int parse_ack_again(struct rps_worker *w, struct rps_wserver *s, uint32_t channel,
			   const void *ack, size_t len, struct rps_shard_desc *desc)
{
	const struct rps_hello_ack *a = ack;

	if (len < sizeof(*a) || a->num_shards != s->nshards ||
	    len < sizeof(*a) + (size_t)a->num_shards * sizeof(*desc)) {
		RPS_ERR("server %u channel %u: hello ack of %zu bytes for %u shards, expected %u",
			s->rank, channel, len, len >= sizeof(*a) ? a->num_shards : 0, s->nshards);
		return -EPROTO;
	}
	if (a->server_rank != s->rank || a->consistency != s->consistency ||
	    a->staleness != s->staleness || a->chunk_bytes != s->chunk_bytes || !a->max_msg) {
		RPS_ERR("server %u came back as rank %u with consistency %u/%u, chunk %u (was %u/%u, "
			"%u): not the job's settings",
			s->rank, a->server_rank, a->consistency, a->staleness, a->chunk_bytes,
			s->consistency, s->staleness, s->chunk_bytes);
		return -EPROTO;
	}
	if (!channel) {
		memcpy(desc, a + 1, (size_t)s->nshards * sizeof(*desc));
		s->max_msg = a->max_msg;
	} else if (channel < s->nshards) {
		/* this connection's own key for the shard it reads (docs/rdma.md) */
		desc[channel].remote_key = ((const struct rps_shard_desc *)(a + 1))[channel].remote_key;
	}
	(void)w;
	return 0;
}

/* Connect every channel of server s to host:port. 0 with conns[], or -errno
 * (nothing left open). */
static int connect_again(struct rps_worker *w, struct rps_wserver *s, uint64_t deadline,
			 struct rps_conn **conns, struct rps_shard_desc *desc)
{
	char *ack = rps_malloc(RPS_TR_ACK_MAX);
	size_t ack_len = 0;
	int rc = 0;

	if (!ack)
		return -ENOMEM;
	for (uint32_t j = 0; j < s->nconns && !rc; j++) {
		conns[j] = NULL;
		rc = rps_wconn_connect_one(w, s, j, deadline, ack, &ack_len, &conns[j]);
		if (!rc) {
			rc = parse_ack_again(w, s, j, ack, ack_len, desc);
			if (rc) {
				rps_tr_close(conns[j]);
				conns[j] = NULL;
			}
		}
	}
	if (rc) {
		for (uint32_t j = 0; j < s->nconns; j++)
			if (conns[j])
				rps_tr_close(conns[j]);
	}
	rps_free(ack);
	return rc;
}

/* While the map still names the incarnation we lost (its death notice may be
 * on its way), wait this long before trying its address again: a server
 * that was killed refuses, and retrying it is noise, not recovery. */
#define RECONNECT_SAME_MS 1000
#define RECONNECT_POLL_MS 20

static int reconnect_server(struct rps_worker *w, struct rps_wserver *s)
{
	uint64_t start = rps_now_ns();
	uint64_t deadline = start + (uint64_t)w->timeout_ms * 1000000u;
	struct rps_shard_desc desc[RPS_MAX_SHARDS];
	struct rps_conn *conns[RPS_MAX_SHARDS];
	struct rps_node *nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes));
	struct rps_node node;
	uint32_t c;
	int rc = -EHOSTDOWN, tries = 0;

	if (!nodes)
		return -ENOMEM;
	if (s->lost) {
		/* lost for good already: only a replacement in the map now (no wait) */
		int n = w->ctl ? rps_ctl_map(w->ctl, NULL, nodes, RPS_MAX_NODES) : 0;

		if (s->node_id >= (uint32_t)n || !nodes[s->node_id].alive ||
		    nodes[s->node_id].pid == s->node_pid) {
			rps_free(nodes);
			return -EHOSTDOWN;
		}
		s->lost = 0;
		RPS_WARN("server %u: a replacement joined after all: reconnecting", s->rank);
	}
	RPS_WARN("server %u (%s:%u) lost: waiting up to %d ms (RDMAPS_TIMEOUT_MS) for it or its "
		 "replacement",
		 s->rank, s->host, s->port, w->timeout_ms);
	/* the progress thread closes the dead connections (and fails their pieces) */
	for (;;) {
		int open = 0;

		for (uint32_t j = 0; j < s->nconns; j++)
			open += s->conns[j].c && !s->conns[j].closed;
		if (!open)
			break;
		if (!remaining_ms(deadline) || atomic_load(&w->leaving))
			goto out;
		atomic_store(&w->dead_pending, 1);
		rps_worker_wake(w);
		rps_sleep_ms(2);
	}
	/* the scheduler's map names the server's current incarnation */
	while (remaining_ms(deadline) > 0 && !atomic_load(&w->leaving)) {
		int n = w->ctl ? rps_ctl_map(w->ctl, NULL, nodes, RPS_MAX_NODES) : 0;

		if (s->node_id >= (uint32_t)n || !nodes[s->node_id].alive ||
		    nodes[s->node_id].role != RPS_ROLE_SERVER ||
		    (nodes[s->node_id].pid == s->node_pid &&
		     rps_now_ns() - start < RECONNECT_SAME_MS * 1000000ull)) {
			rps_sleep_ms(RECONNECT_POLL_MS);
			continue;
		}
		node = nodes[s->node_id];
		memcpy(s->host, node.host, sizeof(s->host));
		s->host[sizeof(s->host) - 1] = 0;
		s->port = node.port;
		rc = connect_again(w, s, RPS_MIN(deadline, rps_now_ns() + 2000000000ull), conns,
				   desc);
		if (!rc)
			break;
		if (rc == -EPROTO || rc == -EACCES)
			goto out;
		if (!tries++)
			RPS_INFO("server %u: %s:%u not reachable yet (%s); retrying", s->rank, s->host,
				 s->port, rps_strerror(rc));
		rps_sleep_ms(100);
		rc = -EHOSTDOWN;
	}
	if (rc) {
		if (!atomic_load(&w->leaving)) {
			s->lost = 1;
			RPS_ERR("server %u lost for good: neither it nor a replacement came back "
				"within %d ms (RDMAPS_TIMEOUT_MS); every call that needs it fails "
				"with -EHOSTDOWN from now on",
				s->rank, w->timeout_ms);
		}
		goto out;
	}

	/* swap the connections in while nobody posts, and tell it our clock:
	 * under the clock lock, so that SYNC c and our count of clock-c pushes
	 * to it (0 now) agree */
	pthread_rwlock_wrlock(&w->clock_rw);
	atomic_store(&w->publishing, 1);
	while (atomic_load(&w->submitters))
		rps_sleep_ms(1);
	pthread_mutex_lock(&w->core.lock);
	for (uint32_t j = 0; j < s->nshards; j++) {
		struct rps_wshard *sh = &s->shards[j];

		sh->desc = desc[j];
		if (!w->core.keep_pushes) /* a restarted server counts afresh (SYNC) */
			sh->pushes = 0;
		atomic_store(&sh->clock_seen, 0);
		atomic_store(&sh->wclock_seen, 0);
	}
	pthread_mutex_unlock(&w->core.lock);
	s->node_pid = node.pid;
	s->push_elems = rps_wplan_push_elems(s->max_msg, w->tr->max_frame);
	for (uint32_t j = 0; j < s->nconns; j++) {
		struct rps_wconn *wc = &s->conns[j];

		wc->c = conns[j];
		conns[j]->user = wc;
		wc->closed = 0;
		atomic_store(&wc->dead, 0);
	}
	c = atomic_load(&w->clock);
	if (w->core.keep_pushes) /* a promoted backup: it knows our clocks */
		rc = rps_wrepl_resend(w, s);
	else
		rc = rps_wsync_send(w, (uint32_t)(s - w->servers), c);
	pthread_rwlock_unlock(&w->clock_rw);
	/* what the pull strategy needs of the new stores, and our keys'
	 * places in them; others wait */
	if (!rc)
		rc = w->pull->attach(w, (uint32_t)(s - w->servers));
	if (!rc)
		rc = rps_wdeclare_server(w, (uint32_t)(s - w->servers));
	if (!rc) /* and our tables (worker/table.c) */
		rc = rps_wtables_redeclare(w, (uint32_t)(s - w->servers));
	atomic_store(&w->publishing, 0);
	if (rc) {
		RPS_ERR("server %u: set-up after reconnecting failed: %s", s->rank,
			rps_strerror(rc));
		for (uint32_t j = 0; j < s->nconns; j++)
			rps_wconn_mark_dead(w, &s->conns[j], -ECONNRESET);
		goto out;
	}
	RPS_WARN("server %u reconnected at %s:%u (pid %u) at clock %u", s->rank, s->host, s->port,
		 s->node_pid, c);
out:
	if (rc && w->core.keep_pushes && (!remaining_ms(deadline) || atomic_load(&w->leaving))) {
		size_t n;

		pthread_mutex_lock(&w->core.lock);
		n = rps_wrepl_kept_locked(w, s, rc, NULL, 0);
		pthread_mutex_unlock(&w->core.lock);
		if (n)
			RPS_ERR("server %u: %zu pushes lost with it: no backup took over", s->rank,
				n);
	}
	rps_free(nodes);
	return rc;
}

int rps_wreconnect(struct rps_worker *w)
{
	int rc = 0;

	if (!w->servers || !w->tr)
		return 0;
	pthread_mutex_lock(&w->reconn_lock);
	/* the flag stays set until it is done: callers meanwhile wait here */
	if (!atomic_load(&w->reconnect))
		goto out; /* another thread did it */
	w->reconn_thread = pthread_self();
	for (uint32_t i = 0; i < w->num_servers && !rc; i++)
		if (server_broken(&w->servers[i]))
			rc = reconnect_server(w, &w->servers[i]);
	w->reconn_thread = (pthread_t)0;
	if (!rc) {
		atomic_store(&w->reconnect, 0);
		for (uint32_t i = 0; i < w->num_servers; i++)
			if (server_broken(&w->servers[i]))
				atomic_store(&w->reconnect, 1); /* died again meanwhile */
	}
out:
	pthread_mutex_unlock(&w->reconn_lock);
	return rc;
}

int rps_wretry_lost(struct rps_worker *w, int rc)
{
	if (rc != -ECONNRESET && rc != -EHOSTDOWN && rc != -EPIPE && rc != -ENOTCONN)
		return rc;
	if (!w->servers || !w->tr)
		return rc; /* an offline worker: nothing to reconnect to */
	/* the progress thread marks the connection dead when it reads the close */
	for (int i = 0; i < 100 && !atomic_load(&w->reconnect) && !atomic_load(&w->leaving); i++) {
		atomic_store(&w->dead_pending, 1);
		rps_worker_wake(w);
		rps_sleep_ms(2);
	}
	if (!atomic_load(&w->reconnect))
		return rc; /* nothing to reconnect: the error stands */
	return rps_wreconnect(w);
}

int rps_wsync_send(struct rps_worker *w, uint32_t server, uint32_t c)
{
	struct rps_sync y = { .clock = c, .pid = (uint32_t)getpid() };
	int first = 0;

	rps_wsubmit_enter(w);
	for (uint32_t i = 0; i < w->num_servers; i++) {
		struct rps_wserver *s = &w->servers[i];

		if (server != UINT32_MAX && server != i)
			continue;
		for (uint32_t j = 0; j < s->nconns; j++) {
			struct rps_wconn *wc = &s->conns[j];
			struct rps_frame_hdr h;
			struct iovec iov = { &y, sizeof(y) };
			int rc = rps_wconn_dead(wc);

			rps_proto_hdr_init(&h, RPS_OP_SYNC, sizeof(y), 0);
			if (!rc)
				rc = rps_tr_post_send(wc->c, &h, &iov, 1, 0);
			if (rc && !first) {
				RPS_ERR("server %u channel %u: sync at clock %u: %s", s->rank, j, c,
					rps_strerror(rc));
				first = rc;
			}
		}
	}
	rps_wsubmit_leave(w);
	return first;
}

/* ---- the reconnector thread ---- */

static void *reconnector(void *arg)
{
	struct rps_worker *w = arg;

	pthread_mutex_lock(&w->rc_lock);
	while (!w->rc_stop) {
		if (!atomic_load(&w->reconnect) || atomic_load(&w->leaving)) {
			pthread_cond_wait(&w->rc_cond, &w->rc_lock);
			continue;
		}
		pthread_mutex_unlock(&w->rc_lock);
		if (rps_wreconnect(w))
			rps_sleep_ms(200); /* not back yet: try again */
		pthread_mutex_lock(&w->rc_lock);
	}
	pthread_mutex_unlock(&w->rc_lock);
	return NULL;
}

int rps_wreconnector_start(struct rps_worker *w)
{
	int rc;

	pthread_mutex_init(&w->rc_lock, NULL);
	pthread_cond_init(&w->rc_cond, NULL);
	w->rc_stop = 0;
	rc = pthread_create(&w->rc_thread, NULL, reconnector, w);
	if (rc) {
		RPS_ERR("worker: reconnector thread: %s", strerror(rc));
		pthread_cond_destroy(&w->rc_cond);
		pthread_mutex_destroy(&w->rc_lock);
		return -rc;
	}
	pthread_setname_np(w->rc_thread, "rps-reconnect");
	w->rc_started = 1;
	return 0;
}

void rps_wreconnector_stop(struct rps_worker *w)
{
	if (!w->rc_started)
		return;
	pthread_mutex_lock(&w->rc_lock);
	w->rc_stop = 1;
	pthread_cond_signal(&w->rc_cond);
	pthread_mutex_unlock(&w->rc_lock);
	pthread_join(w->rc_thread, NULL);
	pthread_cond_destroy(&w->rc_cond);
	pthread_mutex_destroy(&w->rc_lock);
	w->rc_started = 0;
}
