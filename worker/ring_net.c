/* Ring all-reduce: the worker's ring listener, its poller, the queue of the
 * left neighbour's frames and the connection to the right neighbour
 * (worker/ring.h). */
#include "worker/ring.h"

#include <errno.h>
#include <string.h>

#include "control/control.h"
#include "src/alloc.h"
#include "src/auth.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/worker_int.h"

#define RING_POLL_MS 200

static int ring_on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
			 size_t *ack_len_p, const char **why_p)
{
	struct rps_wring *r = arg;
	int busy;

	(void)c;
	(void)ack;
	*ack_len_p = 0;
	if (h->role != RPS_ROLE_WORKER) {
		*why_p = "a worker's ring port takes only its left ring neighbour (a worker)";
		return -EACCES;
	}
	pthread_mutex_lock(&r->lock);
	busy = r->left != NULL && !r->left_status;
	pthread_mutex_unlock(&r->lock);
	if (busy) {
		*why_p = "this worker's left ring neighbour is connected already";
		return -EBUSY;
	}
	return 0;
}

static void on_event(struct rps_wring *r, const struct rps_tr_event *ev)
{
	struct rps_wring_frame *f;

	switch (ev->type) {
	case RPS_TR_EV_ACCEPTED:
		pthread_mutex_lock(&r->lock);
		if (r->left) {
			pthread_mutex_unlock(&r->lock);
			RPS_WARN("allreduce: a second ring neighbour from %s refused", ev->conn->peer);
			rps_tr_close(ev->conn);
			return;
		}
		r->left = ev->conn;
		r->left_status = 0;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		RPS_DEBUG("allreduce: worker rank %u connected from %s", ev->conn->hello.rank,
			  ev->conn->peer);
		return;
	case RPS_TR_EV_RECV:
		if (ev->conn != r->left || (ev->hdr.op != RPS_OP_RING_DATA &&
					    ev->hdr.op != RPS_OP_RING_ABORT)) {
			RPS_LOG_RATELIMITED(RPS_LOG_WARN, "allreduce: unexpected %s from %s",
					    rps_proto_op_name(ev->hdr.op), ev->conn->peer);
			rps_tr_release(r->tr, ev->token);
			return;
		}
		f = rps_calloc(1, sizeof(*f));
		if (!f) {
			rps_tr_release(r->tr, ev->token);
			pthread_mutex_lock(&r->lock);
			r->left_status = -ENOMEM;
			pthread_cond_broadcast(&r->cond);
			pthread_mutex_unlock(&r->lock);
			return;
		}
		f->hdr = ev->hdr;
		memcpy(&f->d, ev->fixed, sizeof(f->d));
		f->data = ev->data;
		f->data_len = ev->data_len;
		f->token = ev->token;
		pthread_mutex_lock(&r->lock);
		if (r->tail)
			r->tail->next = f;
		else
			r->head = f;
		r->tail = f;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		return;
	case RPS_TR_EV_SEND_DONE:
		pthread_mutex_lock(&r->lock);
		r->sends_done++;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		return;
	case RPS_TR_EV_CLOSED:
		pthread_mutex_lock(&r->lock);
		if (ev->conn == r->left) {
			r->left_status = ev->status ? ev->status : -ECONNRESET;
			r->left = NULL;
			pthread_cond_broadcast(&r->cond);
			pthread_mutex_unlock(&r->lock);
			rps_tr_close(ev->conn);
			return;
		}
		/* not the left one: our own connection to the right neighbour
		 * (its CLOSED may come before connect() returned); the caller
		 * owns it and closes it */
		r->right_status = ev->status ? ev->status : -ECONNRESET;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		return;
	default:
		return;
	}
}

static void *ring_poller(void *arg)
{
	struct rps_wring *r = arg;
	struct rps_tr_event ev[16];

	while (!atomic_load(&r->stop)) {
		int n = rps_tr_poll(r->tr, ev, 16, RING_POLL_MS);

		for (int i = 0; i < n; i++)
			on_event(r, &ev[i]);
	}
	return NULL;
}

int rps_wring_create(struct rps_worker *w, const struct rps_tr_params *base, const char *host,
		     struct rps_wring **ring_p, uint16_t *port_p)
{
	struct rps_tr_params tp = *base;
	struct rps_wring *r;
	char ring_cred[RPS_TOKEN_MAX + 1]; /* issue 20: the ring's own key domain */
	int rc;

	rc = rps_auth_ring_credential(base->secret, ring_cred, sizeof(ring_cred));
	if (rc) {
		RPS_ERR("allreduce: this worker's RDMAPS_TOKEN has no ring key: give it the token "
			"rdmaps-launch or `rdmaps-ctl token worker RANK` makes, or RDMAPS_SECRET");
		return rc;
	}
	tp.secret = ring_cred;

	r = rps_calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->w = w;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_mutex_init(&r->call_lock, NULL);
	tp.arg = r;
	tp.on_hello = ring_on_hello;
	tp.recv_dest = NULL;
	tp.nchannels = 1;
	/* RDMAPS_RING_TRANSPORT: tcp (default) or rdma, the transport layer's
	 * frames (RDMA SENDs) either way; one peer each way */
	tp.rdma.expect_peers = 1;
	tp.rdma.expect_out = 1;
	rc = rps_transport_create(w->cfg->ring_transport[0] ? w->cfg->ring_transport : "tcp", &tp,
				  &r->tr);
	if (rc)
		goto err_free;
	rc = rps_tr_listen(r->tr, host, 0, &r->port);
	if (rc) {
		RPS_ERR("allreduce: listen on %s: %s", host ? host : "*", rps_strerror(rc));
		goto err_tr;
	}
	r->started = 1;
	rc = pthread_create(&r->thread, NULL, ring_poller, r);
	if (rc) {
		r->started = 0;
		rc = -rc;
		RPS_ERR("allreduce: poller thread: %s", strerror(-rc));
		goto err_tr;
	}
	pthread_setname_np(r->thread, "rps-ring");
	*port_p = r->port;
	*ring_p = r;
	return 0;

err_tr:
	rps_transport_destroy(r->tr);
err_free:
	pthread_mutex_destroy(&r->call_lock);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	rps_free(r);
	return rc;
}

void rps_wring_set_rank(struct rps_wring *r, uint32_t rank, uint32_t nworkers)
{
	r->rank = rank;
	r->nworkers = nworkers;
	r->right_rank = nworkers ? (rank + 1) % nworkers : 0;
	r->left_rank = nworkers ? (rank + nworkers - 1) % nworkers : 0;
}

void rps_wring_destroy(struct rps_wring *r)
{
	struct rps_wring_frame *f;

	if (!r)
		return;
	if (r->started) {
		atomic_store(&r->stop, 1);
		rps_tr_wake(r->tr);
		pthread_join(r->thread, NULL);
	}
	while ((f = r->head)) {
		r->head = f->next;
		rps_tr_release(r->tr, f->token);
		rps_free(f);
	}
	if (r->left)
		rps_tr_close(r->left);
	if (r->right)
		rps_tr_close(r->right);
	rps_transport_destroy(r->tr);
	pthread_mutex_destroy(&r->call_lock);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	rps_free(r);
}

int rps_wring_next(struct rps_wring *r, uint64_t deadline_ns, struct rps_wring_frame **f_p)
{
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	while (!r->head) {
		uint64_t now = rps_now_ns();
		struct timespec ts;
		uint64_t wall;

		if (r->left_status) {
			rc = r->left_status;
			break;
		}
		/* a lost right neighbour is seen when sending (and from the
		 * ABORT that comes round): the last pieces may come after it
		 * finished and left */
		if (now >= deadline_ns) {
			rc = -ETIMEDOUT;
			break;
		}
		/* wait in slices of at most 100 ms on the realtime clock */
		wall = rps_wall_ns() + RPS_MIN(deadline_ns - now, 100000000ull);
		ts.tv_sec = (time_t)(wall / 1000000000ull);
		ts.tv_nsec = (long)(wall % 1000000000ull);
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	if (!rc) {
		*f_p = r->head;
		r->head = r->head->next;
		if (!r->head)
			r->tail = NULL;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

static void wait_until(struct rps_wring *r, uint64_t deadline_ns)
{
	uint64_t now = rps_now_ns(), wall;
	struct timespec ts;

	wall = rps_wall_ns() + RPS_MIN(deadline_ns > now ? deadline_ns - now : 0, 100000000ull);
	ts.tv_sec = (time_t)(wall / 1000000000ull);
	ts.tv_nsec = (long)(wall % 1000000000ull);
	pthread_cond_timedwait(&r->cond, &r->lock, &ts);
}

int rps_wring_flush(struct rps_wring *r, uint64_t deadline_ns)
{
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	while (r->sends_done < r->sends_posted) {
		if (r->right_status) {
			rc = r->right_status;
			break;
		}
		if (rps_now_ns() >= deadline_ns) {
			rc = -ETIMEDOUT;
			break;
		}
		wait_until(r, deadline_ns);
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void rps_wring_frame_done(struct rps_wring *r, struct rps_wring_frame *f)
{
	rps_tr_release(r->tr, f->token);
	rps_free(f);
}

int rps_wring_right_status(struct rps_wring *r)
{
	int rc;

	pthread_mutex_lock(&r->lock);
	rc = r->right_status;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void rps_wring_dead_text(struct rps_wring *r, char *buf, size_t cap)
{
	struct rps_node *nodes;
	struct rps_map map;
	size_t k = 0;
	int n, ndead = 0;

	buf[0] = '\0';
	if (!r->w->ctl || !(nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes))))
		return;
	n = rps_ctl_map(r->w->ctl, &map, nodes, RPS_MAX_NODES);
	for (int i = 0; i < n && k + 16 < cap; i++) {
		if (nodes[i].role != RPS_ROLE_WORKER || nodes[i].alive)
			continue;
		k += (size_t)snprintf(buf + k, cap - k, "%s%u",
				      ndead++ ? ", " : " (the scheduler reports worker rank ",
				      nodes[i].rank);
	}
	if (ndead && k + 7 < cap)
		snprintf(buf + k, cap - k, " dead)");
	rps_free(nodes);
}

/* The right neighbour's address from the scheduler's map. */
static int right_addr(struct rps_wring *r, char *host, size_t cap, uint16_t *port_p)
{
	struct rps_node *nodes;
	struct rps_map map;
	int n, rc = -ENOENT;

	if (!r->w->ctl)
		return -ENOTCONN;
	nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	n = rps_ctl_map(r->w->ctl, &map, nodes, RPS_MAX_NODES);
	for (int i = 0; i < n; i++) {
		if (nodes[i].role != RPS_ROLE_WORKER || nodes[i].rank != r->right_rank)
			continue;
		if (!nodes[i].alive) {
			rc = -EHOSTDOWN;
			continue;
		}
		if (!nodes[i].port) {
			rc = -EPROTONOSUPPORT; /* a worker of an older version: no ring port */
			continue;
		}
		snprintf(host, cap, "%s", nodes[i].host);
		*port_p = nodes[i].port;
		rc = 0;
		break;
	}
	rps_free(nodes);
	return rc;
}

int rps_wring_connect_right(struct rps_wring *r, uint64_t deadline_ns)
{
	struct rps_hello hello;
	uint8_t ack[RPS_TR_ACK_MAX];
	size_t ack_len = 0;
	char host[64];
	uint16_t port = 0;
	int rc;

	rc = right_addr(r, host, sizeof(host), &port);
	if (rc) {
		RPS_ERR("allreduce: worker rank %u (this worker's right ring neighbour) %s",
			r->right_rank,
			rc == -EHOSTDOWN	  ? "is dead (scheduler's map)"
			: rc == -EPROTONOSUPPORT ? "has no ring port (an older rdmaps?)"
						 : "is not in the cluster map");
		return rc;
	}
	snprintf(r->right_peer, sizeof(r->right_peer), "%s:%u", host, port);
	rps_proto_hello_init(&hello, RPS_ROLE_WORKER, r->rank);
	for (;;) {
		struct rps_conn *c = NULL;

		uint64_t now = rps_now_ns();
		int left_ms = now >= deadline_ns ? 1 : (int)((deadline_ns - now) / 1000000u) + 1;

		rc = rps_tr_connect(r->tr, host, port, &hello, ack, sizeof(ack), &ack_len, left_ms,
				    &c);
		if (!rc) {
			c->user = r;
			pthread_mutex_lock(&r->lock);
			r->right = c;
			pthread_mutex_unlock(&r->lock);
		}
		if (rc != -EBUSY || rps_now_ns() >= deadline_ns)
			break;
		/* it still holds our previous connection (a restarted ring) */
		rps_sleep_ms(50);
	}
	if (rc) {
		RPS_ERR("allreduce: connect to worker rank %u (right ring neighbour, %s): %s",
			r->right_rank, r->right_peer, rps_strerror(rc));
		return rc;
	}
	RPS_DEBUG("allreduce: connected to worker rank %u at %s", r->right_rank, r->right_peer);
	return 0;
}
