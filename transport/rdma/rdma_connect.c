/* RDMA transport, connecting side: connect() resolves the address and the
 * route and connects on its own event channel, with the hello in the private
 * data, then waits for the HELLO_ACK frame (or the reject's reason). Depends
 * on the helpers in rdma_cm.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/auth.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/rdma/rdma_int.h"

/* ------------------------------------------------------ connecting side */

/* Next event of ch within the deadline: 0, -ETIMEDOUT or -errno. */
static int cm_wait(struct rdma_event_channel *ch, uint64_t deadline, struct rdma_cm_event **e_p)
{
	for (;;) {
		uint64_t now = rps_now_ns();
		struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
		int ms;

		if (!rdma_get_cm_event(ch, e_p))
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return rps_rdma_cm_err();
		if (now >= deadline)
			return -ETIMEDOUT;
		ms = (int)RPS_MIN((deadline - now) / 1000000 + 1, 100u);
		poll(&pfd, 1, ms);
	}
}

/* Wait for one expected event; anything else is an error with a message. */
static int cm_expect(struct rdma_event_channel *ch, uint64_t deadline, enum rdma_cm_event_type want,
		     const char *peer, const char *step, struct rdma_cm_event **e_p)
{
	struct rdma_cm_event *e;
	int rc = cm_wait(ch, deadline, &e);

	if (rc) {
		if (rc == -ETIMEDOUT)
			RPS_ERR("connect %s: timed out during %s", peer, step);
		else
			RPS_ERR("connect %s: %s: %s", peer, step, strerror(-rc));
		return rc;
	}
	if (e->event == want) {
		*e_p = e;
		return 0;
	}
	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
		RPS_ERR("connect %s: address resolution failed (status %d): no RDMA device "
			"reaches it, or no GID for the source address (ip route get; "
			"ibv_devinfo -v; docs/rdma.md 'GIDs')",
			peer, e->status);
		rc = -EHOSTUNREACH;
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		RPS_ERR("connect %s: route resolution failed (status %d)", peer, e->status);
		rc = -ENETUNREACH;
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		RPS_ERR("connect %s: peer unreachable (status %d: no answer to the connect "
			"request; firewall on UDP 4791, or wrong GID/path?)",
			peer, e->status);
		rc = e->status == -ETIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		RPS_ERR("connect %s: connection error (status %d: the queue pair could not be "
			"moved to RTR/RTS; rd_atomic or GID problem?)",
			peer, e->status);
		rc = -ECONNREFUSED;
		break;
	case RDMA_CM_EVENT_REJECTED: {
		const struct rdma_conn_param *cp = &e->param.conn;
		struct rps_rdma_rej rej;

		if (cp->private_data && cp->private_data_len >= 8) {
			memset(&rej, 0, sizeof(rej));
			memcpy(&rej, cp->private_data,
			       RPS_MIN((size_t)cp->private_data_len, sizeof(rej)));
			rej.reason[sizeof(rej.reason) - 1] = 0;
			if (rej.magic == RPS_RDMA_CM_MAGIC && rej.status < 0) {
				char why[RPS_LOG_ESC_BUF];

				RPS_ERR("connect %s: refused: %s", peer,
					rps_log_escape(rej.reason, strnlen(rej.reason, sizeof(rej.reason)),
						       why, sizeof(why)));
				rc = rej.status;
				break;
			}
		}
		RPS_ERR("connect %s: rejected (status %d%s)", peer, e->status,
			e->status == 8 ? ": nothing listens on that port" : "");
		rc = -ECONNREFUSED;
		break;
	}
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		RPS_ERR("connect %s: RDMA device removed", peer);
		rc = -ENODEV;
		break;
	default:
		RPS_ERR("connect %s: unexpected %s during %s", peer, rdma_event_str(e->event),
			step);
		rc = -EPROTO;
		break;
	}
	rdma_ack_cm_event(e);
	return rc;
}

static int ms_left(uint64_t deadline)
{
	uint64_t now = rps_now_ns();

	return now >= deadline ? 1 : (int)RPS_MIN((deadline - now) / 1000000 + 1, 60000u);
}

/* Address resolution in steps of at most a second, again while time is
 * left: a first resolution can sit out its whole timeout before it reports
 * success (seen with rxe on a veth pair), or fail while the neighbour is
 * still being resolved. */
static int resolve_addr(struct rps_rdma_conn *c, struct rdma_event_channel *ch,
			struct sockaddr *src, struct sockaddr *dst, uint64_t deadline)
{
	for (;;) {
		struct rdma_cm_event *e;
		int step = RPS_MIN(ms_left(deadline), 1000), rc, ev, st;

		if (rdma_resolve_addr(c->id, src, dst, step)) {
			rc = rps_rdma_cm_err();
			RPS_ERR("connect %s: rdma_resolve_addr: %s", c->base.peer, strerror(-rc));
			return rc;
		}
		rc = cm_wait(ch, deadline, &e);
		if (rc) {
			RPS_ERR("connect %s: address resolution: %s", c->base.peer,
				rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
			return rc;
		}
		ev = e->event;
		st = e->status;
		if (ev == RDMA_CM_EVENT_ADDR_RESOLVED) {
			rdma_ack_cm_event(e);
			return 0;
		}
		if (ev != RDMA_CM_EVENT_ADDR_ERROR || rps_now_ns() >= deadline) {
			/* let cm_expect's messages speak: put nothing back, just explain */
			rdma_ack_cm_event(e);
			if (ev == RDMA_CM_EVENT_ADDR_ERROR)
				RPS_ERR(
				    "connect %s: address resolution failed (status %d): no RDMA "
				    "device reaches it, or no GID for the source address (ip "
				    "route get; ibv_devinfo -v; docs/rdma.md 'GIDs')",
				    c->base.peer, st);
			else
				RPS_ERR("connect %s: unexpected %s during address resolution",
					c->base.peer, rdma_event_str(ev));
			return ev == RDMA_CM_EVENT_ADDR_ERROR ? -EHOSTUNREACH : -EPROTO;
		}
		rdma_ack_cm_event(e);
		RPS_DEBUG("connect %s: address resolution: status %d, again", c->base.peer, st);
	}
}

/* Undo a connect that never reached the owner (nothing was posted on the
 * send queue). */
static void connect_undo(struct rps_rdma_transport *t, struct rps_rdma_conn *c, int established)
{
	pthread_mutex_lock(&t->prog_lock);
	rps_rdma_qpmap_del(t, c);
	rps_rdma_all_del(t, c);
	pthread_mutex_unlock(&t->prog_lock);
	if (established)
		rdma_disconnect(c->id);
	rps_rdma_conn_free_res(c);
	if (c->id)
		rdma_destroy_id(c->id);
	c->id = NULL;
	rps_rdma_conn_put(c);
}

int rps_rdma_connect(struct rps_transport *tr, const char *host, uint16_t port,
		     const struct rps_hello *hello, void *ack, size_t ack_cap, size_t *ack_len_p,
		     int timeout_ms, struct rps_conn **conn_p)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);
	struct addrinfo hints = {0}, *res = NULL;
	struct rdma_event_channel *ch;
	struct rdma_conn_param cp = {0};
	struct rdma_cm_event *e;
	struct rps_rdma_conn *c;
	struct rps_rdma_dev *d;
	struct sockaddr_in src;
	struct sockaddr *srcp = NULL;
	char pdata[sizeof(struct rps_hello) + sizeof(struct rps_rdma_req_ext)];
	struct rps_rdma_req_ext ext = {0};
	struct rps_rdma_rep rep;
	struct rps_hello mine = *hello;
	struct rps_auth_challenge chal;
	struct rps_auth_proof proof;
	struct rps_frame_hdr phdr;
	uint64_t deadline;
	uint32_t got;
	char svc[8];
	int rc, established = 0;

	if (timeout_ms <= 0)
		timeout_ms = t->timeout_ms;
	deadline = rps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	rc = rps_auth_nonce(&mine);
	if (rc)
		return rc;
	ch = rdma_create_event_channel();
	if (!ch) {
		rc = rps_rdma_cm_err();
		RPS_ERR("connect %s:%u: rdma_create_event_channel: %s", host, port, strerror(-rc));
		return rc == -ENODEV ? -ENODEV : rc;
	}
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	c = rps_calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		goto err_ch;
	}
	c->t = t;
	c->base.tr = tr;
	snprintf(c->base.peer, sizeof(c->base.peer), "%s:%u", host, port);
	atomic_store(&c->refs, 1);
	atomic_store(&c->state, C_CONNECTING);
	pthread_spin_init(&c->lock, PTHREAD_PROCESS_PRIVATE);
	pthread_mutex_init(&c->post_lock, NULL);
	if (rdma_create_id(ch, &c->id, c, RDMA_PS_TCP)) {
		rc = rps_rdma_cm_err();
		RPS_ERR("connect %s: rdma_create_id: %s", c->base.peer, strerror(-rc));
		c->id = NULL;
		goto err_conn;
	}
	snprintf(svc, sizeof(svc), "%u", port);
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, svc, &hints, &res);
	if (rc) {
		RPS_ERR("connect %s: cannot resolve the address: %s", c->base.peer,
			gai_strerror(rc));
		rc = -EHOSTUNREACH;
		goto err_conn;
	}
	d = atomic_load(&t->dev);
	if (d && t->device[0] && !rps_rdma_gid_ipv4(d, 1, &src))
		srcp = (struct sockaddr *)&src; /* leave through the named device */
	rc = resolve_addr(c, ch, srcp, res->ai_addr, deadline);
	if (rc)
		goto err_ai;
	rc = rps_rdma_dev_ensure(t, c->id->verbs, "connect");
	if (!rc)
		rc = rps_rdma_port_check(c->id, "connect");
	if (rc)
		goto err_ai;
	d = atomic_load(&t->dev);
	if (rdma_resolve_route(c->id, ms_left(deadline))) {
		rc = rps_rdma_cm_err();
		RPS_ERR("connect %s: rdma_resolve_route: %s", c->base.peer, strerror(-rc));
		goto err_ai;
	}
	rc = cm_expect(ch, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED, c->base.peer, "route resolution",
		       &e);
	if (rc)
		goto err_ai;
	rdma_ack_cm_event(e);

	pthread_mutex_lock(&t->prog_lock);
	rc = 0;
	if (!t->csrq)
		rc = rps_rdma_srq_create(t, -1, &t->csrq);
	if (!rc) {
		rc = rps_rdma_srq_reserve(
		    t->csrq, rps_rdma_grant_want(t, t->csrq, t->expect_out) + 1, 3, &got);
		if (rc)
			RPS_ERR("connect %s: receive queue of outgoing connections full (%u "
				"buffers promised; raise RDMAPS_RDMA_RECV_BUFS)",
				c->base.peer, atomic_load(&t->csrq->reserved));
		else if ((rc = rps_rdma_conn_setup(t, c, c->id, t->csrq, got)))
			rps_rdma_srq_unreserve(t->csrq, got);
	}
	if (!rc) {
		rps_rdma_qpmap_add(t, c);
		rps_rdma_all_add(t, c);
	}
	pthread_mutex_unlock(&t->prog_lock);
	if (rc)
		goto err_ai;

	ext.credits = (uint16_t)RPS_MIN(c->window - 1, 65535u);
	ext.version = RPS_RDMA_CM_VERSION;
	ext.buf_bytes = t->buf_bytes;
	memcpy(pdata, &mine, sizeof(mine));
	memcpy(pdata + sizeof(mine), &ext, sizeof(ext));
	c->base.hello = mine;
	cp.private_data = pdata;
	cp.private_data_len = sizeof(pdata);
	cp.responder_resources = (uint8_t)RPS_MIN(t->max_rd, d->attr.max_qp_rd_atom);
	cp.initiator_depth = (uint8_t)RPS_MIN(t->max_rd, d->attr.max_qp_init_rd_atom);
	cp.flow_control = 1;
	cp.retry_count = (uint8_t)t->retry_count;
	cp.rnr_retry_count = (uint8_t)t->rnr_retry;
	rps_rdma_qpopt_pre(t, c->id, c->base.peer);
	if (rdma_connect(c->id, &cp)) {
		rc = rps_rdma_cm_err();
		RPS_ERR("connect %s: rdma_connect: %s", c->base.peer, strerror(-rc));
		goto err_undo;
	}
	rc = cm_expect(ch, deadline, RDMA_CM_EVENT_ESTABLISHED, c->base.peer, "connection", &e);
	if (rc)
		goto err_undo;
	established = 1;
	rps_rdma_qpopt_rts(t, c->qp, c->base.peer);
	memset(&rep, 0, sizeof(rep));
	if (e->param.conn.private_data && e->param.conn.private_data_len >= sizeof(rep))
		memcpy(&rep, e->param.conn.private_data, sizeof(rep));
	rdma_ack_cm_event(e);
	if (rep.magic != RPS_RDMA_CM_MAGIC || rep.version != RPS_RDMA_CM_VERSION ||
	    rep.credits < 2 || rep.buf_bytes < 1024) {
		RPS_ERR("connect %s: the peer is not an rdmaps RDMA server of handshake version "
			"%d",
			c->base.peer, RPS_RDMA_CM_VERSION);
		rc = -EPROTO;
		goto err_undo;
	}
	memcpy(chal.nonce, rep.nonce, sizeof(chal.nonce));
	memcpy(chal.mac, rep.mac, sizeof(chal.mac));
	pthread_spin_lock(&c->lock);
	c->grant = rep.credits;
	c->peer_window = (uint32_t)rep.credits + 1;
	c->peer_buf = rep.buf_bytes;
	c->max_rd = rep.rd_atomic;
	pthread_spin_unlock(&c->lock);
	if (rps_auth_challenge_answer(t->secret, &mine, &chal, &proof)) {
		/* say so (an ERROR without text), so that the listener logs us */
		rps_proto_hdr_init(&phdr, RPS_OP_ERROR, 0, 0);
		phdr.status = -EACCES;
		rps_rdma_send_frame(c, &phdr, NULL, 0, RPS_MAX(ms_left(deadline), 1));
		RPS_ERR("connect %s: wrong secret: the listener does not know our job secret "
			"(another RDMAPS_SECRET, or not an rdmaps process of this job)",
			c->base.peer);
		rc = -EACCES;
		goto err_undo;
	}

	/* our PROOF: the first frame; the server grants nothing before it */
	rps_proto_hdr_init(&phdr, RPS_OP_PROOF, sizeof(proof), 0);
	rc = rps_rdma_send_frame(c, &phdr, &proof, sizeof(proof), RPS_MAX(ms_left(deadline), 1));
	if (rc) {
		RPS_ERR("connect %s: cannot send the handshake's proof: %s", c->base.peer,
			strerror(-rc));
		goto err_undo;
	}

	/* the HELLO_ACK frame follows */
	while (atomic_load(&c->ack_state) == 0) {
		if (!rdma_get_cm_event(ch, &e)) {
			int ev = e->event;

			rdma_ack_cm_event(e);
			if (ev == RDMA_CM_EVENT_DISCONNECTED ||
			    ev == RDMA_CM_EVENT_DEVICE_REMOVAL) {
				pthread_mutex_lock(&t->prog_lock);
				rps_rdma_conn_fail(c, -ECONNRESET,
						   "peer disconnected during the handshake");
				pthread_mutex_unlock(&t->prog_lock);
				break;
			}
		}
		if (rps_now_ns() > deadline) {
			RPS_ERR("connect %s: no HELLO_ACK within %d ms", c->base.peer, timeout_ms);
			rc = -ETIMEDOUT;
			break;
		}
		rps_rdma_progress_or_yield(t);
	}
	pthread_mutex_lock(&t->prog_lock);
	if (atomic_load(&c->ack_state) <= 0) {
		/* still connecting: make late frames orphans */
		int st = atomic_load(&c->ack_state);

		if (atomic_load(&c->state) == C_CONNECTING)
			atomic_store(&c->state, C_DEAD);
		pthread_mutex_unlock(&t->prog_lock);
		if (!rc)
			rc = st < 0 ? st : -ECONNRESET;
		goto err_undo;
	}
	pthread_mutex_unlock(&t->prog_lock);

	/* UP now (or dead through the drain path): hand the id to poll() */
	if (rdma_migrate_id(c->id, t->cm_ch)) {
		rc = rps_rdma_cm_err();
		RPS_ERR("connect %s: rdma_migrate_id: %s", c->base.peer, strerror(-rc));
		pthread_mutex_lock(&t->prog_lock);
		rps_rdma_conn_fail(c, rc, NULL);
		pthread_mutex_unlock(&t->prog_lock);
		rps_rdma_close(&c->base);
		freeaddrinfo(res);
		return rc; /* ch stays: the id is still on it */
	}
	rdma_destroy_event_channel(ch);
	freeaddrinfo(res);
	pthread_mutex_lock(&t->prog_lock);
	if (atomic_load(&c->state) != C_UP) {
		rc = c->reason ? c->reason : -ECONNRESET;
	} else if (c->ack_len > ack_cap) {
		RPS_ERR("connect %s: HELLO_ACK of %u bytes, room for %zu", c->base.peer, c->ack_len,
			ack_cap);
		rc = -EMSGSIZE;
	} else {
		c->handed = 1;
		atomic_fetch_add(&t->st_conns, 1);
		if (c->ack_len)
			memcpy(ack, c->ack, c->ack_len);
		if (ack_len_p)
			*ack_len_p = c->ack_len;
	}
	pthread_mutex_unlock(&t->prog_lock);
	if (rc) {
		rps_rdma_close(&c->base);
		return rc;
	}
	RPS_DEBUG("rdma: connected to %s (qp 0x%x, credits %u out / %u in, reads %u)", c->base.peer,
		  c->qpn, c->grant, c->window - 1, c->max_rd);
	*conn_p = &c->base;
	return 0;

err_undo:
	freeaddrinfo(res);
	connect_undo(t, c, established);
	rdma_destroy_event_channel(ch);
	return rc;
err_ai:
	freeaddrinfo(res);
err_conn:
	if (c->id)
		rdma_destroy_id(c->id);
	pthread_spin_destroy(&c->lock);
	pthread_mutex_destroy(&c->post_lock);
	rps_free(c);
err_ch:
	rdma_destroy_event_channel(ch);
	return rc;
}
