/* The scheduler: rendezvous, ranks, barriers, heartbeats, dead nodes and the
 * end of a job. One thread polls one TCP transport instance; everything else
 * happens in reaction to its events or to the clock. See docs/scheduler.md.
 *
 * Nodes live in slots: slot i is node id i; servers are slots 0..S-1
 * (id = rank), workers S..S+W-1 (id = S + rank). Until the cluster is
 * complete, registered nodes wait as peers without a slot; when the last one
 * comes, ranks are assigned and every node gets the MAP.
 *
 * This file: options, create / destroy, the poll loop and frame dispatch.
 */
#include "server/sched_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "control/control.h"
#include "src/alloc.h"
#include "src/auth.h"
#include "src/config.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

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
		rps_sched_on_register(s, p, h, &u.reg);
		break;
	case RPS_OP_HEARTBEAT:
		if (h->len < sizeof(u.hb) || !ev->fixed)
			goto short_frame;
		memcpy(&u.hb, ev->fixed, sizeof(u.hb));
		rps_sched_on_heartbeat(s, p, h->aux, &u.hb, ev->data, ev->data_len);
		break;
	case RPS_OP_BARRIER:
		rps_sched_on_barrier(s, p, h);
		break;
	case RPS_OP_SHUTDOWN:
		rps_sched_on_shutdown(s, p);
		break;
	case RPS_OP_STATUS:
		rps_sched_on_status(s, p, h);
		break;
	case RPS_OP_REPL_MAP:
		rps_sched_on_repl_map(s, p, h);
		break;
	case RPS_OP_CHECKPOINT:
	case RPS_OP_EXPORT:
		rps_sched_on_creq(s, p, ev);
		break;
	case RPS_OP_REPORT:
		rps_sched_dash_report(s, p, ev);
		break;
	default:
		RPS_LOG_RATELIMITED(RPS_LOG_WARN, "%s: unexpected %s frame ignored", p->conn->peer,
			 rps_proto_op_name(h->op));
		break;
	}
	return;
short_frame:
	RPS_LOG_RATELIMITED(RPS_LOG_WARN, "closing %s: short %s frame (%u bytes)", p->conn->peer, rps_proto_op_name(h->op),
		 h->len);
	p->closing = 1;
	if (p->slot >= 0)
		rps_sched_node_gone(s, p->slot, -EPROTO, "protocol error");
}

static void on_closed(struct rps_sched *s, struct sched_peer *p, int status)
{
	if (p->slot >= 0) {
		char why[128];

		snprintf(why, sizeof(why), "connection closed without SHUTDOWN (%s)",
			 status ? rps_strerror(status) : "end of stream");
		rps_sched_node_gone(s, p->slot, -ECONNRESET, why);
	} else if (p->registered) {
		s->nwaiting[p->reg.role]--;
		p->registered = 0;
		RPS_LOG(s->stopping ? RPS_LOG_INFO : RPS_LOG_WARN,
			"%s %s (pid %u) went away before the cluster was complete",
			rps_sched_role_name(p->reg.role), p->conn->peer, p->reg.pid);
		rps_sched_waiting_gone(s, p->reg.role);
		if (s->state == SCHED_WAITING)
			rps_sched_send_progress(s);
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
		p->since_ns = p->last_rx_ns = rps_now_ns();
		p->slot = -1;
		p->tx_bytes = s->m.bytes[1];
		p->tx_msgs = s->m.msgs[1];
		p->next = s->peers;
		s->peers = p;
		ev->conn->user = p;
		RPS_DEBUG("%s connected as %s", ev->conn->peer, rps_sched_role_name(p->role));
		break;
	case RPS_TR_EV_RECV:
		rps_metric_add(met(s, s->m.bytes[0]), sizeof(ev->hdr) + ev->hdr.len);
		rps_metric_inc(met(s, s->m.msgs[0]));
		if (p) {
			p->last_rx_ns = rps_now_ns();
			on_recv(s, p, ev);
		}
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
		rps_sched_creq_peer_closing(s, p);
		if (p->slot >= 0 && s->slots[p->slot].peer == p)
			s->slots[p->slot].peer = NULL;
		rps_tr_close(p->conn);
		rps_free(p);
	}
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
			rps_sched_begin_stop(s);
		n = rps_tr_poll(s->tr, ev, SCHED_EVENTS, SCHED_POLL_MS);
		if (n < 0 && n != -EINTR && n != -EAGAIN) {
			RPS_ERR("poll: %s", rps_strerror(n));
			return n;
		}
		for (int i = 0; i < n; i++)
			on_event(s, &ev[i]);
		flush_closes(s);
		now = rps_now_ns();
		rps_sched_check_timers(s, now);
		flush_closes(s);
		if (s->m.reg)
			rps_sched_metrics_update(s);
		rps_sched_dash_tick(s, now);
		if (s->state != SCHED_ENDING)
			continue;
		if (!rps_sched_nodes_remaining(s)) {
			RPS_INFO("every node left: exiting");
			break;
		}
		if (now >= s->end_deadline_ns) {
			RPS_WARN("%d node(s) did not leave in time: exiting anyway",
				 rps_sched_nodes_remaining(s));
			break;
		}
	}
	return s->abandoned ? -ECANCELED : 0;
}

void rps_sched_stop(struct rps_sched *s)
{
	atomic_store(&s->stop, 1);
}

uint16_t rps_sched_port(const struct rps_sched *s)
{
	return s->port;
}

void rps_sched_opts_init(struct rps_sched_opts *o, const struct rps_config *cfg)
{
	struct rps_config def;
	uint16_t port = 0;

	if (!cfg) {
		rps_config_init(&def); /* defaults and RDMAPS_*; a bad variable was reported */
		cfg = &def;
	}
	memset(o, 0, sizeof(*o));
	if (rps_config_parse_hostport(cfg->scheduler, o->host_buf, sizeof(o->host_buf), &port)) {
		o->host_buf[0] = '\0';
		port = (uint16_t)cfg->port;
	}
	o->host = o->host_buf;
	o->port = port;
	snprintf(o->secret_buf, sizeof(o->secret_buf), "%s", cfg->secret);
	o->secret = o->secret_buf;
	o->num_servers = cfg->num_servers;
	o->num_workers = cfg->num_workers;
	o->heartbeat_timeout_ms = cfg->heartbeat_timeout_ms;
	o->shutdown_grace_ms = 5000;
	o->metrics_port = cfg->metrics_port;
	o->cfg = cfg == &def ? NULL : cfg;
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
	if (rps_auth_is_token(o->secret)) { /* issue 20: it checks every node's key */
		RPS_ERR("rdmaps-sched needs the job's secret (RDMAPS_SECRET), not a node's token "
			"(RDMAPS_TOKEN)");
		return -EINVAL;
	}
	s = rps_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	/* our own copy: the transport keeps a pointer to it */
	if (o->cfg) {
		s->cfg = *o->cfg;
	} else {
		rc = rps_config_init(&s->cfg);
		if (rc)
			goto err;
	}
	if (s->cfg.fault[0] && !rps_fault_on) {
		rc = rps_fault_init(s->cfg.fault);
		if (rc)
			goto err;
	}
	snprintf(s->host, sizeof(s->host), "%s", o->host ? o->host : "");
	snprintf(s->secret, sizeof(s->secret), "%s", o->secret ? o->secret : "");
	s->num_servers = o->num_servers;
	s->num_workers = o->num_workers;
	s->hb_timeout_ms = o->heartbeat_timeout_ms;
	s->grace_ms = o->shutdown_grace_ms > 0 ? o->shutdown_grace_ms : 5000;
	s->nslots = o->num_servers + o->num_workers;
	s->start_ns = rps_now_ns();
	atomic_init(&s->stop, 0);
	rc = rps_sched_grow_init(s); /* RDMAPS_MAX_WORKERS: room for workers that join later */
	if (rc)
		goto err;
	s->slots = rps_calloc((size_t)s->num_servers + (size_t)s->max_workers, sizeof(*s->slots));
	s->mapbuf_len = sizeof(struct rps_map) + (size_t)s->nslots * sizeof(struct rps_node);
	s->mapbuf = rps_calloc(1, sizeof(struct rps_map) + ((size_t)s->num_servers +
							    (size_t)s->max_workers) *
								   sizeof(struct rps_node));
	s->creq.waiting = rps_calloc((size_t)s->num_servers + (size_t)s->max_workers, 1);
	if (!s->slots || !s->mapbuf || !s->creq.waiting) {
		rc = -ENOMEM;
		goto err;
	}
	rc = rps_ctl_transport_create(&s->cfg, s->secret, SCHED_MAX_MSG, 0, s, sched_on_hello,
				      &s->tr);
	if (rc)
		goto err;
	if (sizeof(struct rps_frame_hdr) + sizeof(struct rps_map) +
		(size_t)(s->num_servers + s->max_workers) * sizeof(struct rps_node) >
	    s->tr->max_frame) {
		RPS_ERR("scheduler: a map of %d nodes exceeds the frame limit %" PRIu64,
			s->num_servers + s->max_workers, s->tr->max_frame);
		rc = -EMSGSIZE;
		goto err;
	}
	rc = rps_tr_listen(s->tr, s->host[0] ? s->host : "0.0.0.0", o->port, &s->port);
	if (rc)
		goto err; /* the transport said why */
	if (o->metrics_port > 0) {
		rc = rps_sched_metrics_start(s, s->cfg.http_host, o->metrics_port);
		if (rc)
			goto err;
	}
	*sched_p = s;
	return 0;

err:
	rps_sched_destroy(s); /* undoes what was done */
	return rc;
}

/* Also the unwind of a failed rps_sched_create (only what was done). */
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
	rps_sched_dash_destroy(s);
	rps_metrics_destroy(s->m.reg);
	if (s->tr)
		rps_transport_destroy(s->tr);
	rps_free(s->creq.waiting);
	rps_free(s->mapbuf);
	rps_free(s->slots);
	rps_free(s);
}
