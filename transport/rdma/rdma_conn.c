/* RDMA transport: connection resources (QP, send buffers), the qpn map,
 * failure and teardown (the slow path run by poll()), close(). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/rdma/rdma_int.h"

/* --------------------------------------------------------- qpn -> conn */

static uint32_t qp_hash(uint32_t qpn, uint32_t cap)
{
	return (uint32_t)(rps_hash64(qpn) & (cap - 1));
}

static int qpmap_grow(struct rps_rdma_transport *t)
{
	uint32_t ncap = t->qpmap_cap ? 2 * t->qpmap_cap : 64;
	struct rps_rdma_conn **n = rps_calloc(ncap, sizeof(*n));

	if (!n)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->qpmap_cap; i++) {
		struct rps_rdma_conn *c = t->qpmap[i];

		if (!c)
			continue;
		for (uint32_t j = qp_hash(c->qpn, ncap);; j = (j + 1) & (ncap - 1)) {
			if (!n[j]) {
				n[j] = c;
				break;
			}
		}
	}
	rps_free(t->qpmap);
	t->qpmap = n;
	t->qpmap_cap = ncap;
	return 0;
}

/* prog_lock held */
void rps_rdma_qpmap_add(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	if (2 * (t->qpmap_n + 1) > t->qpmap_cap && qpmap_grow(t)) {
		RPS_ERR("rdma: out of memory for the connection map");
		return;
	}
	for (uint32_t j = qp_hash(c->qpn, t->qpmap_cap);; j = (j + 1) & (t->qpmap_cap - 1)) {
		if (!t->qpmap[j]) {
			t->qpmap[j] = c;
			t->qpmap_n++;
			c->in_map = 1;
			return;
		}
	}
}

struct rps_rdma_conn *rps_rdma_qpmap_get(struct rps_rdma_transport *t, uint32_t qpn)
{
	if (!t->qpmap_cap)
		return NULL;
	for (uint32_t j = qp_hash(qpn, t->qpmap_cap);; j = (j + 1) & (t->qpmap_cap - 1)) {
		struct rps_rdma_conn *c = t->qpmap[j];

		if (!c)
			return NULL;
		if (c->qpn == qpn)
			return c;
	}
}

/* Linear probing deletion with backward shift. */
void rps_rdma_qpmap_del(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	uint32_t mask = t->qpmap_cap - 1, i, j;

	if (!c->in_map)
		return;
	for (i = qp_hash(c->qpn, t->qpmap_cap); t->qpmap[i] != c; i = (i + 1) & mask)
		;
	t->qpmap[i] = NULL;
	t->qpmap_n--;
	c->in_map = 0;
	for (j = (i + 1) & mask; t->qpmap[j]; j = (j + 1) & mask) {
		struct rps_rdma_conn *m = t->qpmap[j];
		uint32_t h = qp_hash(m->qpn, t->qpmap_cap);

		/* move m into the hole at i if its home is not in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			t->qpmap[i] = m;
			t->qpmap[j] = NULL;
			i = j;
		}
	}
}

/* ------------------------------------------------------- conn set-up */

void rps_rdma_peer_name(struct rdma_cm_id *id, char *buf, size_t len)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char ip[INET6_ADDRSTRLEN] = "?";
	uint16_t port = ntohs(rdma_get_dst_port(id));

	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, port);
}

/* QP on srq, send buffers and slots. c->t, c->base and c->grant fields are
 * set by the caller; window WQEs of srq are already reserved. Caller holds
 * prog_lock. */
int rps_rdma_conn_setup(struct rps_rdma_transport *t, struct rps_rdma_conn *c,
			struct rdma_cm_id *id, struct rps_rdma_srq *srq, uint32_t window)
{
	struct rps_rdma_dev *d = atomic_load(&t->dev);
	struct ibv_qp_init_attr qa = {0};
	uint64_t bytes;
	int rc;

	c->id = id;
	c->srq = srq;
	c->window = window;
	c->ctrl_thresh = RPS_MAX(2u, (window - 1) / 2);
	c->nsbuf = RPS_MIN(RPS_MAX(t->credits + 1, 4u), 32u);
	c->sig_every = RPS_MAX(1u, c->nsbuf / 2);
	c->nslots = c->nsbuf + RDMA_READ_SLOTS + 8 + 1;
	if ((int)c->nslots > d->attr.max_qp_wr)
		c->nslots = (uint32_t)d->attr.max_qp_wr;
	/* the ring a power of two, indexed by masking the free-running
	 * counters: no division per work request, and none that breaks when
	 * the counters wrap */
	c->slot_mask = 1;
	while (c->slot_mask < c->nslots)
		c->slot_mask <<= 1;
	c->slot_mask--;
	c->slots = rps_calloc(c->slot_mask + 1, sizeof(*c->slots));
	if (!c->slots)
		return -ENOMEM;
	for (uint32_t i = 0; i <= c->slot_mask; i++)
		c->slots[i].c = c;
	bytes = (uint64_t)c->nsbuf * t->buf_bytes;
	rc = rps_rdma_memlock_check(t, bytes, "send buffers of a connection");
	if (rc)
		goto err_slots;
	c->sbuf = rps_aligned_alloc(4096, bytes);
	if (!c->sbuf) {
		rc = -ENOMEM;
		goto err_slots;
	}
	c->smr = ibv_reg_mr(d->pd, c->sbuf, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!c->smr) {
		rc = errno ? -errno : -ENOMEM;
		RPS_ERR("send buffers for %s: ibv_reg_mr of %" PRIu64 " KiB: %s", c->base.peer,
			bytes >> 10, strerror(-rc));
		goto err_sbuf;
	}
	rps_rdma_locked_add(t, (int64_t)bytes);
	rc = rps_rdma_cq_reserve(d, (int)c->nslots);
	if (rc)
		goto err_mr;
	qa.qp_context = c;
	qa.send_cq = d->cq;
	qa.recv_cq = d->cq;
	qa.srq = srq->srq;
	qa.cap.max_send_wr = c->nslots;
	qa.cap.max_send_sge = (uint32_t)d->max_sge;
	qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 0;
	if (rdma_create_qp(id, d->pd, &qa)) {
		rc = errno ? -errno : -ENOMEM;
		RPS_ERR("connection to %s: rdma_create_qp (%u send WRs, %d sges): %s", c->base.peer,
			c->nslots, d->max_sge, strerror(-rc));
		goto err_cq;
	}
	c->qp = id->qp;
	c->qpn = id->qp->qp_num;
	c->ack = rps_malloc(RPS_TR_ACK_MAX);
	if (!c->ack) {
		rc = -ENOMEM;
		goto err_qp;
	}
	return 0;

err_qp:
	rdma_destroy_qp(id);
	c->qp = NULL;
err_cq:
	rps_rdma_cq_unreserve(d, (int)c->nslots);
err_mr:
	ibv_dereg_mr(c->smr);
	c->smr = NULL;
	rps_rdma_locked_add(t, -(int64_t)bytes);
err_sbuf:
	rps_free(c->sbuf);
	c->sbuf = NULL;
err_slots:
	rps_free(c->slots);
	c->slots = NULL;
	return rc;
}

/* QP, send buffers, CQ and SRQ reservations (not the cm_id). */
void rps_rdma_conn_free_res(struct rps_rdma_conn *c)
{
	struct rps_rdma_transport *t = c->t;
	struct rps_rdma_dev *d = atomic_load(&t->dev);

	rps_rdma_mw_conn_gone(c); /* its windows die with it */
	if (c->qp) {
		rdma_destroy_qp(c->id);
		c->qp = NULL;
		rps_rdma_cq_unreserve(d, (int)c->nslots);
	}
	if (c->smr) {
		ibv_dereg_mr(c->smr);
		c->smr = NULL;
		rps_rdma_locked_add(t, -(int64_t)((uint64_t)c->nsbuf * t->buf_bytes));
	}
	for (uint32_t i = 0; c->slots && i <= c->slot_mask; i++) {
		for (int k = 0; k < c->slots[i].ntmp && c->slots[i].tmp_mr; k++)
			ibv_dereg_mr(c->slots[i].tmp_mr[k]);
		rps_free(c->slots[i].tmp_mr);
	}
	rps_free(c->sbuf);
	c->sbuf = NULL;
	rps_free(c->slots);
	c->slots = NULL;
	if (c->window) {
		rps_rdma_srq_unreserve(c->srq, c->window);
		c->window = 0;
	}
}

void rps_rdma_conn_put(struct rps_rdma_conn *c)
{
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	rps_free(c->ack);
	pthread_spin_destroy(&c->lock);
	pthread_mutex_destroy(&c->post_lock);
	rps_free(c);
}

void rps_rdma_all_add(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	c->all_prev = NULL;
	c->all_next = t->all;
	if (t->all)
		t->all->all_prev = c;
	t->all = c;
}

void rps_rdma_all_del(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else if (t->all == c)
		t->all = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	c->all_next = c->all_prev = NULL;
}

/* ------------------------------------------------------ failure, close */

static void conn_closed_event(struct rps_rdma_conn *c)
{
	struct rps_tr_event ev;

	if (!c->handed || c->closed_sent || atomic_load(&c->user_closed))
		return;
	c->closed_sent = 1;
	memset(&ev, 0, sizeof(ev));
	ev.type = RPS_TR_EV_CLOSED;
	ev.conn = &c->base;
	ev.status = c->reason ? c->reason : -ECONNRESET;
	rps_rdma_evq_push(c->t, &ev);
}

static void close_list_add(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	pthread_mutex_lock(&t->close_lock);
	if (!c->on_close_list) {
		c->on_close_list = 1;
		c->close_next = t->closing;
		t->closing = c;
		atomic_fetch_add(&t->closing_n, 1);
	}
	pthread_mutex_unlock(&t->close_lock);
}

/* The drain marker came back: every work request of c is done. */
void rps_rdma_conn_drained(struct rps_rdma_conn *c)
{
	atomic_store(&c->drained, 1);
	if (atomic_load(&c->state) == C_DEAD)
		conn_closed_event(c);
}

/* The connection is dead: disconnect, flush its send queue (the drain
 * marker's completion says every earlier work request is done), then a
 * CLOSED event. Caller holds prog_lock. why == NULL: no log line. */
void rps_rdma_conn_fail(struct rps_rdma_conn *c, int status, const char *why)
{
	int prev = atomic_load(&c->state);

	if (prev == C_DEAD)
		return;
	/* under the send lock: no post slips in after the drain marker */
	if (c->slots)
		pthread_spin_lock(&c->lock);
	atomic_store(&c->state, C_DEAD);
	if (c->slots)
		pthread_spin_unlock(&c->lock);
	c->reason = status ? status : -ECONNRESET;
	if (why && !atomic_load(&c->user_closed))
		RPS_ERR("connection to %s (qp 0x%x) closed: %s", c->base.peer, c->qpn, why);
	if (prev == C_CONNECTING) {
		int zero = 0;

		atomic_compare_exchange_strong(&c->ack_state, &zero, c->reason);
		return;
	}
	if (prev == C_ACCEPTING) {
		/* nobody knows it yet; nothing was posted on it */
		atomic_store(&c->user_closed, 1);
		atomic_store(&c->drained, 1);
		close_list_add(c->t, c);
		return;
	}
	if (!c->disconnected) {
		c->disconnected = 1;
		if (rdma_disconnect(c->id)) {
			struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};

			ibv_modify_qp(c->qp, &qa, IBV_QP_STATE);
		}
	}
	c->drain_deadline = rps_now_ns() + RDMA_DRAIN_TIMEOUT_NS;
	if (!c->drain_posted) {
		c->drain_posted = 1;
		if (rps_rdma_post_drain(c) && !atomic_load(&c->drained))
			RPS_WARN(
			    "connection to %s: could not post the drain marker; waiting %llu s "
			    "for its send queue",
			    c->base.peer, RDMA_DRAIN_TIMEOUT_NS / 1000000000ull);
	}
	if (atomic_load(&c->drained))
		conn_closed_event(c);
	if (prev == C_PROVING) {
		/* nobody knows it yet: freed once drained */
		atomic_store(&c->user_closed, 1);
		close_list_add(c->t, c);
	}
}

void rps_rdma_close(struct rps_conn *conn)
{
	struct rps_rdma_conn *c = rps_rdma_c(conn);
	struct rps_rdma_transport *t = c->t;
	uint64_t one = 1;

	if (atomic_exchange(&c->user_closed, 1))
		return;
	close_list_add(t, c);
	if (write(t->efd, &one, sizeof(one)) < 0)
		RPS_DEBUG("rdma: eventfd write: %m");
}

/* Free everything of c. prog_lock held. */
static void conn_destroy(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	int leak = !atomic_load(&c->drained);

	rps_rdma_qpmap_del(t, c);
	rps_rdma_all_del(t, c);
	rps_rdma_evq_purge(t, c);
	if (c->handed)
		atomic_fetch_sub(&t->st_conns, 1);
	if (leak) {
		/* work requests may still complete into our memory: keep it */
		rps_rdma_notify_abandon(c, c->reason ? c->reason : -ECONNRESET);
		RPS_WARN("connection to %s: send queue did not drain in time; leaking its "
			 "resources",
			 c->base.peer);
		return;
	}
	rps_rdma_conn_free_res(c);
	if (c->id)
		rdma_destroy_id(c->id);
	c->id = NULL;
	rps_rdma_conn_put(c);
}

static void handle_async(struct rps_rdma_transport *t)
{
	struct rps_rdma_dev *d = atomic_load(&t->dev);
	struct ibv_async_event ae;

	if (!d)
		return;
	while (!ibv_get_async_event(d->ctx, &ae)) {
		struct rps_rdma_conn *c;
		char why[96];

		switch (ae.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_PATH_MIG_ERR:
			c = rps_rdma_qpmap_get(t, ae.element.qp->qp_num);
			if (c && c->qp == ae.element.qp) {
				snprintf(why, sizeof(why), "queue pair error: %s",
					 ibv_event_type_str(ae.event_type));
				rps_rdma_conn_fail(
				    c, ae.event_type == IBV_EVENT_QP_ACCESS_ERR ? -EACCES : -EIO,
				    why);
			}
			break;
		case IBV_EVENT_SRQ_ERR:
			RPS_ERR("rdma device %s: shared receive queue error", d->name);
			break;
		case IBV_EVENT_DEVICE_FATAL:
			RPS_ERR("rdma device %s: fatal device error", d->name);
			for (c = t->all; c; c = c->all_next)
				rps_rdma_conn_fail(c, -ENODEV, "device fatal error");
			break;
		case IBV_EVENT_PORT_ERR:
			RPS_WARN("rdma device %s port %d went down (its connections close if it "
				 "stays down for %d ms)",
				 d->name, ae.element.port_num, t->timeout_ms);
			if (ae.element.port_num <= RDMA_MAX_PORTS &&
			    !t->port_down_ns[ae.element.port_num])
				t->port_down_ns[ae.element.port_num] = rps_now_ns();
			break;
		case IBV_EVENT_PORT_ACTIVE:
			RPS_INFO("rdma device %s port %d is active", d->name, ae.element.port_num);
			if (ae.element.port_num <= RDMA_MAX_PORTS)
				t->port_down_ns[ae.element.port_num] = 0;
			break;
		default:
			RPS_DEBUG("rdma device %s: async event %s", d->name,
				  ibv_event_type_str(ae.event_type));
			break;
		}
		ibv_ack_async_event(&ae);
	}
}

/* poll() only, prog_lock held. */
void rps_rdma_slow_path(struct rps_rdma_transport *t)
{
	struct rps_rdma_conn *list, *c, *next, *keep = NULL;
	uint64_t now = rps_now_ns();

	rps_rdma_cm_events(t);
	handle_async(t);
	rps_rdma_handshake_deadlines(t, now);
	/* a port down for longer than the timeout: its connections are gone
	 * (retries need not fail on every device; SoftRoCE never does) */
	for (int p = 1; p <= RDMA_MAX_PORTS; p++) {
		uint64_t since = t->port_down_ns[p];
		char why[96];

		if (!since || since == UINT64_MAX || now < since ||
		    now - since < (uint64_t)t->timeout_ms * 1000000ull)
			continue;
		t->port_down_ns[p] = UINT64_MAX; /* once per outage */
		snprintf(why, sizeof(why), "port %d down for more than %d ms", p, t->timeout_ms);
		for (c = t->all; c; c = c->all_next)
			if (c->id && c->id->port_num == p)
				rps_rdma_conn_fail(c, -ENETDOWN, why);
	}
	/* dead connections whose drain marker never came back */
	for (c = t->all; c; c = c->all_next)
		if (atomic_load(&c->state) == C_DEAD && !atomic_load(&c->drained) &&
		    c->drain_deadline && now > c->drain_deadline && !c->closed_sent) {
			int handed = c->handed;

			rps_rdma_notify_abandon(c, c->reason ? c->reason : -ECONNRESET);
			conn_closed_event(c);
			c->closed_sent = c->closed_sent || !handed;
		}
	if (!atomic_load(&t->closing_n))
		return;
	pthread_mutex_lock(&t->close_lock);
	list = t->closing;
	t->closing = NULL;
	atomic_store(&t->closing_n, 0);
	pthread_mutex_unlock(&t->close_lock);
	for (c = list; c; c = next) {
		next = c->close_next;
		if (atomic_load(&c->state) != C_DEAD)
			rps_rdma_conn_fail(c, -ECONNRESET, NULL);
		if (atomic_load(&c->drained) || (c->drain_deadline && now > c->drain_deadline)) {
			c->on_close_list = 0;
			conn_destroy(t, c);
		} else {
			c->close_next = keep;
			keep = c;
		}
	}
	if (keep) {
		pthread_mutex_lock(&t->close_lock);
		for (c = keep; c; c = next) {
			next = c->close_next;
			c->close_next = t->closing;
			t->closing = c;
			atomic_fetch_add(&t->closing_n, 1);
		}
		pthread_mutex_unlock(&t->close_lock);
	}
}

/* destroy(): no other thread uses the transport any more. */
void rps_rdma_teardown_all(struct rps_rdma_transport *t)
{
	struct rps_rdma_conn *c, *next;

	pthread_mutex_lock(&t->prog_lock);
	for (c = t->all; c; c = c->all_next) {
		if (!c->disconnected && c->id && atomic_load(&c->state) != C_ACCEPTING) {
			c->disconnected = 1;
			rdma_disconnect(c->id);
		}
	}
	for (c = t->all; c; c = next) {
		next = c->all_next;
		rps_rdma_qpmap_del(t, c);
		rps_rdma_conn_free_res(c);
		if (c->id)
			rdma_destroy_id(c->id);
		rps_free(c->ack);
		pthread_spin_destroy(&c->lock);
		pthread_mutex_destroy(&c->post_lock);
		rps_free(c);
	}
	t->all = NULL;
	t->closing = NULL;
	pthread_mutex_unlock(&t->prog_lock);
}
