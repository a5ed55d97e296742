/* RDMA transport, listening side of connection management (librdmacm):
 * listen(), the listener's CM events (handled in poll()): a request's hello
 * in the private data is checked, answered with accept or reject, and the
 * HELLO_ACK frame follows once the connection is established. Also the CM
 * helpers both sides use. Connecting side: rdma_connect.c. */
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

int rps_rdma_cm_err(void)
{
	return errno ? -errno : -EIO;
}

int rps_rdma_port_check(struct rdma_cm_id *id, const char *what)
{
	struct ibv_port_attr pa;

	if (!id->verbs)
		return 0;
	if (ibv_query_port(id->verbs, id->port_num, &pa))
		return 0;
	if (pa.state != IBV_PORT_ACTIVE) {
		RPS_ERR("%s: port %u of %s is not ACTIVE (state %s): check the link (ibv_devinfo, "
			"rdma link)",
			what, id->port_num, ibv_get_device_name(id->verbs->device),
			ibv_port_state_str(pa.state));
		return -ENETDOWN;
	}
	return 0;
}

/* Create the listener's SRQs once the device is known. prog_lock held. */
static int listen_srqs(struct rps_rdma_transport *t)
{
	for (uint32_t i = 0; i < t->nsrqs; i++) {
		if (t->srqs[i])
			continue;
		int rc = rps_rdma_srq_create(t, (int)i, &t->srqs[i]);

		if (rc)
			return rc;
	}
	return 0;
}

/* Data frames in flight we grant one peer of srq: the configured credits,
 * cut so that `expect` peers fit. */
uint32_t rps_rdma_grant_want(struct rps_rdma_transport *t, struct rps_rdma_srq *s, uint32_t expect)
{
	uint32_t per = s->nbufs / RPS_MAX(expect, 1u);
	uint32_t g = RPS_MIN(t->credits, per > 1 ? per - 1 : 1);

	return RPS_MAX(g, 2u);
}

int rps_rdma_listen(struct rps_transport *tr, const char *host, uint16_t port, uint16_t *port_p)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);
	struct addrinfo hints = {0}, *res = NULL;
	struct rdma_cm_id *lid = NULL;
	char svc[8];
	int rc;

	if (t->lid) {
		RPS_ERR("rdma: listen called twice");
		return -EBUSY;
	}
	if (host && (!host[0] || !strcmp(host, "*")))
		host = NULL;
	snprintf(svc, sizeof(svc), "%u", port);
	hints.ai_flags = AI_PASSIVE;
	hints.ai_family = host ? AF_UNSPEC : AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, svc, &hints, &res);
	if (rc) {
		RPS_ERR("listen %s:%u: cannot resolve the address: %s", host ? host : "*", port,
			gai_strerror(rc));
		return -EINVAL;
	}
	if (rdma_create_id(t->cm_ch, &lid, NULL, RDMA_PS_TCP)) {
		rc = rps_rdma_cm_err();
		RPS_ERR("listen: rdma_create_id: %s", strerror(-rc));
		goto err_ai;
	}
	if (rdma_bind_addr(lid, res->ai_addr)) {
		rc = rps_rdma_cm_err();
		if (rc == -EADDRINUSE)
			RPS_ERR("listen %s:%u: address in use", host ? host : "*", port);
		else
			RPS_ERR(
			    "listen %s:%u: %s (is it the address of an RDMA device's netdev? see "
			    "rdma link, docs/softroce.md)",
			    host ? host : "*", port, strerror(-rc));
		goto err_id;
	}
	if (lid->verbs) {
		rc = rps_rdma_dev_ensure(t, lid->verbs, "listen");
		if (rc)
			goto err_id;
		rc = rps_rdma_port_check(lid, "listen");
		if (rc)
			goto err_id;
	}
	if (atomic_load(&t->dev)) {
		pthread_mutex_lock(&t->prog_lock);
		rc = listen_srqs(t);
		pthread_mutex_unlock(&t->prog_lock);
		if (rc)
			goto err_id;
	}
	if (rdma_listen(lid, 128)) {
		rc = rps_rdma_cm_err();
		RPS_ERR("listen %s:%u: rdma_listen: %s", host ? host : "*", port, strerror(-rc));
		goto err_id;
	}
	t->lid = lid;
	freeaddrinfo(res);
	if (port_p)
		*port_p = ntohs(rdma_get_src_port(lid));
	RPS_INFO("rdma: listening on %s:%u (%u shard receive queues of %u buffers)",
		 host ? host : "*", ntohs(rdma_get_src_port(lid)), t->nsrqs, t->recv_bufs);
	return 0;

err_id:
	rdma_destroy_id(lid);
err_ai:
	freeaddrinfo(res);
	return rc;
}

/* ------------------------------------------------------ listening side */

static void reject(struct rdma_cm_id *id, const char *peer, int status, const char *why)
{
	struct rps_rdma_rej rej;

	memset(&rej, 0, sizeof(rej));
	rej.magic = RPS_RDMA_CM_MAGIC;
	rej.status = status;
	snprintf(rej.reason, sizeof(rej.reason), "%s", why);
	RPS_LOG_RATELIMITED(RPS_LOG_WARN, "refusing %s: %s", peer, why);
	if (rdma_reject(id, &rej, sizeof(rej)))
		RPS_ERR("refusing %s: rdma_reject: %m", peer);
}

/* CONNECT_REQUEST. Returns 1 when id must be destroyed after the ack. */
static int handle_request(struct rps_rdma_transport *t, struct rdma_cm_event *e)
{
	struct rdma_cm_id *id = e->id;
	const struct rdma_conn_param *cp = &e->param.conn;
	struct rps_rdma_req_ext ext = {0};
	struct rdma_conn_param acp = {0};
	struct rps_rdma_rep rep = {0};
	struct rps_hello h;
	struct rps_rdma_conn *c = NULL;
	struct rps_rdma_srq *s;
	struct rps_rdma_dev *d;
	const char *why = NULL;
	char peer[64], msg[128];
	size_t ack_len = 0;
	uint32_t got;
	int rc;

	rps_rdma_peer_name(id, peer, sizeof(peer));
	if (!cp->private_data || cp->private_data_len < sizeof(h)) {
		reject(id, peer, -EPROTO, "no hello in the connect request");
		return 1;
	}
	if (cp->private_data_len >= sizeof(h) + sizeof(ext))
		memcpy(&ext, (const char *)cp->private_data + sizeof(h), sizeof(ext));
	rc = rps_proto_hello_decode(cp->private_data, sizeof(h), &h, &why);
	if (rc) {
		reject(id, peer, rc, why);
		return 1;
	}
	if (ext.version != RPS_RDMA_CM_VERSION || ext.credits < 2 || ext.buf_bytes < 1024) {
		snprintf(msg, sizeof(msg),
			 "rdma handshake version %u (credits %u, buffer %u) where %d is spoken",
			 ext.version, ext.credits, ext.buf_bytes, RPS_RDMA_CM_VERSION);
		reject(id, peer, -EPROTO, msg);
		return 1;
	}
	if (h.channel >= t->nsrqs) {
		snprintf(msg, sizeof(msg), "channel %u but this server has %u shards", h.channel,
			 t->nsrqs);
		reject(id, peer, -EINVAL, msg);
		return 1;
	}
	rc = rps_rdma_admit(t, id, msg, sizeof(msg));
	if (rc) {
		reject(id, peer, rc, msg);
		return 1;
	}
	rc = rps_rdma_dev_ensure(t, id->verbs, "connection request");
	if (!rc)
		rc = rps_rdma_port_check(id, "connection request");
	if (!rc)
		rc = listen_srqs(t);
	if (rc) {
		reject(id, peer, rc, "server-side RDMA set-up failed (see its log)");
		return 1;
	}
	d = atomic_load(&t->dev);
	s = t->srqs[h.channel];
	c = rps_calloc(1, sizeof(*c));
	if (!c) {
		reject(id, peer, -ENOMEM, "out of memory");
		return 1;
	}
	c->t = t;
	c->base.tr = &t->base;
	c->base.hello = h;
	c->born_ns = rps_now_ns();
	snprintf(c->base.peer, sizeof(c->base.peer), "%s", peer);
	atomic_store(&c->refs, 1);
	atomic_store(&c->state, C_ACCEPTING);
	pthread_spin_init(&c->lock, PTHREAD_PROCESS_PRIVATE);
	pthread_mutex_init(&c->post_lock, NULL);
	if (rps_auth_challenge_make(t->secret, &h, &c->chal)) {
		reject(id, peer, -EIO, "server error: no random bytes");
		goto err_conn;
	}
	c->grant = ext.credits;
	c->peer_window = (uint32_t)ext.credits + 1;
	c->peer_buf = ext.buf_bytes;
	rc = rps_rdma_srq_reserve(s, rps_rdma_grant_want(t, s, t->expect_peers) + 1, 3, &got);
	if (rc) {
		snprintf(msg, sizeof(msg),
			 "shard %u receive queue full (%u buffers promised to other connections; "
			 "raise RDMAPS_RDMA_RECV_BUFS)",
			 h.channel, atomic_load(&s->reserved));
		reject(id, peer, -ENOBUFS, msg);
		goto err_conn;
	}
	rc = rps_rdma_conn_setup(t, c, id, s, got);
	if (rc) {
		rps_rdma_srq_unreserve(s, got);
		reject(id, peer, rc, "server could not set up the connection (see its log)");
		goto err_conn;
	}
	why = NULL;
	if (t->base.params.on_hello) {
		rc = t->base.params.on_hello(t->base.params.arg, &c->base, &h, c->ack, &ack_len,
					     &why);
		if (rc) {
			reject(id, peer, rc, why ? why : "refused by the server");
			goto err_res;
		}
	}
	if (ack_len > RPS_TR_ACK_MAX || RDMA_HDR_LEN + ack_len > t->buf_bytes ||
	    RDMA_HDR_LEN + ack_len > c->peer_buf) {
		snprintf(msg, sizeof(msg), "HELLO_ACK of %zu bytes does not fit a frame", ack_len);
		reject(id, peer, -EMSGSIZE, msg);
		goto err_res;
	}
	c->ack_len = (uint32_t)ack_len;
	rep.magic = RPS_RDMA_CM_MAGIC;
	rep.credits = (uint16_t)RPS_MIN(c->window - 1, 65535u);
	rep.version = RPS_RDMA_CM_VERSION;
	acp.responder_resources =
	    (uint8_t)RPS_MIN(RPS_MIN((int)cp->initiator_depth, d->attr.max_qp_rd_atom), t->max_rd);
	acp.initiator_depth = (uint8_t)RPS_MIN(
	    RPS_MIN((int)cp->responder_resources, d->attr.max_qp_init_rd_atom), t->max_rd);
	rep.rd_atomic = acp.responder_resources;
	rep.buf_bytes = t->buf_bytes;
	rep.ack_len = c->ack_len;
	memcpy(rep.nonce, c->chal.nonce, sizeof(rep.nonce));
	memcpy(rep.mac, c->chal.mac, sizeof(rep.mac));
	acp.private_data = &rep;
	acp.private_data_len = sizeof(rep);
	acp.flow_control = 1;
	acp.retry_count = (uint8_t)t->retry_count;
	acp.rnr_retry_count = (uint8_t)t->rnr_retry;
	c->max_rd = acp.initiator_depth;
	id->context = c;
	rps_rdma_qpmap_add(t, c);
	rps_rdma_all_add(t, c);
	rps_rdma_qpopt_pre(t, id, peer);
	if (rdma_accept(id, &acp)) {
		rc = rps_rdma_cm_err();
		RPS_ERR("accepting %s: rdma_accept: %s", peer, strerror(-rc));
		rps_rdma_qpmap_del(t, c);
		rps_rdma_all_del(t, c);
		id->context = NULL;
		goto err_res;
	}
	RPS_DEBUG("rdma: accepting %s on shard %u (qp 0x%x, credits %u/%u, reads %u/%u)", peer,
		  h.channel, c->qpn, rep.credits, c->grant, acp.responder_resources,
		  acp.initiator_depth);
	return 0;

err_res:
	rps_rdma_conn_free_res(c);
err_conn:
	rps_free(c->ack);
	pthread_spin_destroy(&c->lock);
	pthread_mutex_destroy(&c->post_lock);
	rps_free(c);
	return 1;
}

/* Proven and established: the HELLO_ACK (shard addresses and keys) and the
 * ACCEPTED event, only now. */
static void accept_up(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	struct rps_frame_hdr hdr;
	struct rps_tr_event ev;
	int rc;

	atomic_store(&c->state, C_UP);
	/* the windows whose keys the ack carries, bound on this QP first */
	rc = rps_rdma_mw_bind_pending(c);
	rps_proto_hdr_init(&hdr, RPS_OP_HELLO_ACK, c->ack_len, 0);
	if (!rc)
		rc = rps_rdma_send_frame(c, &hdr, c->ack, c->ack_len, 0);
	if (rc) {
		RPS_ERR("connection to %s: cannot send HELLO_ACK: %s", c->base.peer, strerror(-rc));
		rps_rdma_conn_fail(c, rc, NULL);
		rps_rdma_close(&c->base);
		return;
	}
	c->handed = 1;
	atomic_fetch_add(&t->st_conns, 1);
	memset(&ev, 0, sizeof(ev));
	ev.type = RPS_TR_EV_ACCEPTED;
	ev.conn = &c->base;
	rps_rdma_evq_push(t, &ev);
}

static void handle_established(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	if (atomic_load(&c->state) != C_ACCEPTING)
		return;
	rps_rdma_qpopt_rts(t, c->qp, c->base.peer);
	if (c->proof_ok)
		accept_up(t, c);
	else
		atomic_store(&c->state, C_PROVING);
}

void rps_rdma_proof_in(struct rps_rdma_conn *c, const struct rps_frame_hdr *hdr,
		       const void *payload)
{
	struct rps_auth_proof proof;
	const char *why = "expected the proof of the handshake";
	char claim[64];
	int rc = -EACCES;

	if (hdr->magic == RPS_PROTO_MAGIC && hdr->op == RPS_OP_ERROR && hdr->len == 0)
		why = "wrong secret: it says our challenge does not match its secret";
	else if (hdr->magic == RPS_PROTO_MAGIC && hdr->version == RPS_PROTO_VERSION &&
		 hdr->op == RPS_OP_PROOF &&
		 !rps_auth_proof_decode(payload, hdr->len, &proof, &why)) {
		rc = rps_auth_proof_check(c->t->secret, &c->base.hello, &c->chal, &proof);
		why = rps_auth_refusal(c->t->secret, &c->base.hello);
	}
	if (rc) {
		RPS_WARN("refusing %s, %s: %s", c->base.peer,
			 rps_proto_claim_text(c->base.hello.role, c->base.hello.rank, claim,
					      sizeof(claim)),
			 why);
		rps_rdma_conn_fail(c, rc, NULL);
		return;
	}
	if (atomic_load(&c->state) == C_PROVING)
		accept_up(c->t, c);
	else
		c->proof_ok = 1;
}

/* The transport's CM channel: listener events and established connections
 * (outgoing ones are migrated here after their handshake). poll() only,
 * prog_lock held. */
void rps_rdma_cm_events(struct rps_rdma_transport *t)
{
	struct rdma_cm_event *e;

	while (!rdma_get_cm_event(t->cm_ch, &e)) {
		struct rdma_cm_id *id = e->id, *destroy = NULL;
		struct rps_rdma_conn *c = id->context;
		char why[128];

		switch (e->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (handle_request(t, e))
				destroy = id;
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c)
				handle_established(t, c);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			if (c) {
				if (atomic_load(&c->state) != C_DEAD &&
				    !atomic_load(&c->user_closed))
					RPS_INFO("connection to %s (qp 0x%x): peer disconnected",
						 c->base.peer, c->qpn);
				rps_rdma_conn_fail(c, -ECONNRESET, NULL);
			}
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			if (c)
				rps_rdma_conn_fail(c, -ENODEV, "RDMA device removed");
			else
				RPS_ERR("rdma: listener: RDMA device removed");
			break;
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
			if (c) {
				snprintf(why, sizeof(why), "%s (status %d)",
					 rdma_event_str(e->event), e->status);
				rps_rdma_conn_fail(c,
						   e->event == RDMA_CM_EVENT_UNREACHABLE
						       ? -ETIMEDOUT
						       : -ECONNREFUSED,
						   why);
			}
			break;
		case RDMA_CM_EVENT_ADDR_CHANGE:
			if (c)
				rps_rdma_conn_fail(c, -ENETRESET, "local address changed");
			break;
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			break;
		default:
			RPS_DEBUG("rdma: cm event %s ignored", rdma_event_str(e->event));
			break;
		}
		rdma_ack_cm_event(e);
		if (destroy)
			rdma_destroy_id(destroy);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		RPS_DEBUG("rdma: rdma_get_cm_event: %m");
}
