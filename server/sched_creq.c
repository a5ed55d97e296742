/* Scheduler: control requests (CHECKPOINT, EXPORT; src/proto.h).
 *
 * A requester (rdmaps-ctl, or a worker) asks; we send the request to every
 * live server and relay their DATA and RESULT frames unchanged. The request
 * ends with DONE once every server asked has answered, or at the first death
 * of one of them, or when the time is up: then DONE carries the failure and
 * names the server(s) (a death ends the request at once: the dead server's
 * part cannot come any more). One request at a time: another one meanwhile is
 * answered -EBUSY. Answers of an older request (another id) are dropped.
 *
 * EXPORT without a target clock gets one here: the largest shard clock the
 * servers' heartbeats reported (under BSP a shard below it takes its snapshot
 * when it gets there; ASP/SSP servers take theirs at once whatever it says).
 */
#include "server/sched_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

static void fail(struct rps_sched *s, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct rps_sched *s, int status, const char *fmt, ...)
{
	va_list ap;

	if (s->creq.status)
		return; /* the first failure is the one to tell */
	s->creq.status = status;
	va_start(ap, fmt);
	vsnprintf(s->creq.why, sizeof(s->creq.why), fmt, ap);
	va_end(ap);
}

static void answer_done(struct sched_peer *p, uint8_t op, uint32_t req_id, int status,
			const char *why)
{
	if (p)
		rps_sched_send_frame(p, op, req_id, status, RPS_CTLREQ_DONE, why,
				     why ? strlen(why) : 0, NULL, 0);
}

static void finish(struct rps_sched *s)
{
	struct sched_creq *q = &s->creq;

	if (q->status)
		RPS_WARN("%s request failed: %s", rps_proto_op_name(q->op), q->why);
	else
		RPS_INFO("%s request done: every server answered", rps_proto_op_name(q->op));
	answer_done(q->from, q->op, q->from_req, q->status, q->status ? q->why : NULL);
	if (q->from_dash)
		rps_sched_dash_creq_done(s, q->status, q->why);
	q->active = 0;
	q->from = NULL;
	q->from_dash = 0;
}

static int nwaiting(const struct rps_sched *s)
{
	int n = 0;

	for (int i = 0; i < s->num_servers; i++)
		n += s->creq.waiting[i] != 0;
	return n;
}

static uint32_t export_target(const struct rps_sched *s, int *have_p)
{
	uint32_t t = 0;

	*have_p = 0;
	for (int i = 0; i < s->num_servers; i++) {
		const struct sched_slot *sl = &s->slots[i];

		if (sl->state != SLOT_ALIVE || !sl->have_srv)
			continue;
		for (uint32_t k = 0; k < sl->srv.num_shards; k++) {
			t = RPS_MAX(t, sl->shards[k].clock);
			*have_p = 1;
		}
	}
	return t;
}

/* p NULL: asked from the dashboard (rps_sched_creq_start_dash). 0, or the
 * refusal (-EBUSY, -EAGAIN), answered to p. */
static int start(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h,
		 const struct rps_ctlreq *in)
{
	struct sched_creq *q = &s->creq;
	struct rps_ctlreq r = *in;
	const char *op = rps_proto_op_name(h->op);
	int asked = 0, have;

	if (q->active) {
		answer_done(p, h->op, h->req_id, -EBUSY,
			    "another checkpoint or export is running: try again when it ends");
		return -EBUSY;
	}
	if (s->state != SCHED_RUNNING) {
		answer_done(p, h->op, h->req_id, -EAGAIN,
			    s->state == SCHED_WAITING ? "the job has not started: the scheduler "
							"still waits for nodes"
						      : "the job is ending");
		return -EAGAIN;
	}
	memset(q->waiting, 0, (size_t)s->nslots);
	q->op = h->op;
	q->from = p;
	q->from_dash = !p;
	q->nfiles = 0;
	q->done_clock = 0;
	q->from_req = h->req_id;
	q->id = ++s->creq_seq;
	q->status = 0;
	q->why[0] = '\0';
	q->timeout_ms = r.timeout_ms ? (int)r.timeout_ms : s->cfg.timeout_ms;
	if (q->timeout_ms <= 0)
		q->timeout_ms = 30000;
	r.timeout_ms = (uint32_t)q->timeout_ms;
	q->deadline_ns = rps_now_ns() + (uint64_t)q->timeout_ms * 1000000ull;
	if (h->op == RPS_OP_EXPORT && !(r.flags & RPS_CTLREQ_CLOCK)) {
		r.clock = export_target(s, &have);
		if (have)
			r.flags |= RPS_CTLREQ_CLOCK;
	}
	q->active = 1;
	for (int i = 0; i < s->num_servers; i++) {
		struct sched_slot *sl = &s->slots[i];

		if (sl->state != SLOT_ALIVE || !sl->peer)
			continue;
		if (rps_sched_send_frame(sl->peer, h->op, q->id, 0, RPS_CTLREQ_REQ, &r, sizeof(r),
					 NULL, 0)) {
			fail(s, -EHOSTDOWN, "server %u (%s:%u): the request could not be sent",
			     sl->node.rank, sl->node.host, sl->node.port);
			continue;
		}
		q->waiting[i] = 1;
		asked++;
	}
	RPS_INFO("%s requested by %s %s: asked %d server(s)%s", op,
		 p ? rps_sched_role_name(p->role) : "the", p ? p->conn->peer : "dashboard", asked,
		 r.flags & RPS_CTLREQ_CLOCK ? " for a target clock" : "");
	if (!asked)
		fail(s, -EHOSTDOWN, "no live server to ask");
	if (!nwaiting(s))
		finish(s);
	return 0;
}

int rps_sched_creq_start_dash(struct rps_sched *s, uint8_t op)
{
	struct rps_frame_hdr h = {.op = op};
	struct rps_ctlreq r = {0};

	return start(s, NULL, &h, &r);
}

/* A dashboard request: the files a CHECKPOINT wrote, the clock. */
static void note_result(struct sched_creq *q, const void *data, size_t len)
{
	struct rps_ctlres res;
	struct rps_ctlres_shard sh;

	memcpy(&res, data, sizeof(res));
	for (uint32_t k = 0; k < res.num_shards; k++) {
		size_t off = sizeof(res) + (size_t)k * sizeof(sh);

		if (off + sizeof(sh) > len)
			break;
		memcpy(&sh, (const char *)data + off, sizeof(sh));
		sh.text[sizeof(sh.text) - 1] = '\0';
		if (sh.status)
			continue;
		q->done_clock = RPS_MAX(q->done_clock, sh.clock);
		if (q->op == RPS_OP_CHECKPOINT && q->nfiles < (int)(sizeof(q->files) / sizeof(q->files[0])))
			snprintf(q->files[q->nfiles++], sizeof(q->files[0]), "%s", sh.text);
	}
}

/* A server's DATA or RESULT frame. */
static void from_server(struct rps_sched *s, struct sched_peer *p, const struct rps_tr_event *ev)
{
	struct sched_creq *q = &s->creq;
	const struct rps_frame_hdr *h = &ev->hdr;
	struct sched_slot *sl;
	struct rps_ctlres res;

	if (!q->active || h->req_id != q->id || h->op != q->op || p->slot < 0 ||
	    p->slot >= s->num_servers || !q->waiting[p->slot])
		return; /* of an older request, or not asked */
	sl = &s->slots[p->slot];
	if (h->aux == RPS_CTLREQ_DATA || h->aux == RPS_CTLREQ_ROWS) {
		if (q->from)
			rps_sched_send_frame(q->from, h->op, q->from_req, 0, h->aux,
					     ev->data, h->len, NULL, 0);
		return;
	}
	if (h->aux != RPS_CTLREQ_RESULT)
		return;
	q->waiting[p->slot] = 0;
	if (h->len < sizeof(res) || !ev->data) {
		fail(s, -EPROTO, "server %u: short result (%u bytes)", sl->node.rank, h->len);
	} else {
		memcpy(&res, ev->data, sizeof(res));
		res.why[sizeof(res.why) - 1] = '\0';
		if (res.status)
			fail(s, res.status, "server %u (%s:%u): %s", sl->node.rank, sl->node.host,
			     sl->node.port, res.why[0] ? res.why : rps_strerror(res.status));
		if (q->from)
			rps_sched_send_frame(q->from, h->op, q->from_req, 0, RPS_CTLREQ_RESULT,
					     ev->data, h->len, NULL, 0);
		if (q->from_dash)
			note_result(q, ev->data, h->len);
	}
	if (!nwaiting(s))
		finish(s);
}

void rps_sched_on_creq(struct rps_sched *s, struct sched_peer *p, const struct rps_tr_event *ev)
{
	const struct rps_frame_hdr *h = &ev->hdr;
	struct rps_ctlreq r;

	if (p->role == RPS_ROLE_SERVER) {
		from_server(s, p, ev);
		return;
	}
	if (h->aux != RPS_CTLREQ_REQ || h->len != sizeof(r) || !ev->data) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN, "%s: malformed %s request (aux %u, %u bytes) ignored", p->conn->peer,
			 rps_proto_op_name(h->op), h->aux, h->len);
		answer_done(p, h->op, h->req_id, -EPROTO, "malformed request");
		return;
	}
	if (p->role == RPS_ROLE_WORKER && p->slot < 0) {
		answer_done(p, h->op, h->req_id, -EAGAIN, "the worker is not in the cluster yet");
		return;
	}
	memcpy(&r, ev->data, sizeof(r));
	(void)start(s, p, h, &r);
}

void rps_sched_creq_node_gone(struct rps_sched *s, int i)
{
	struct sched_creq *q = &s->creq;
	const struct sched_slot *sl = &s->slots[i];

	if (q->active && q->from && q->from == sl->peer)
		q->from = NULL;
	if (!q->active || i >= s->num_servers || !q->waiting[i])
		return;
	q->waiting[i] = 0;
	fail(s, -EHOSTDOWN,
	     "server %u (%s:%u, pid %u) went away before it answered: see its log; "
	     "restart it (--restore) and ask again",
	     sl->node.rank, sl->node.host, sl->node.port, sl->node.pid);
	/* its shards' part can never come: no use waiting for the others */
	finish(s);
}

void rps_sched_creq_check(struct rps_sched *s, uint64_t now)
{
	struct sched_creq *q = &s->creq;
	char who[160];
	size_t n = 0;

	if (!q->active || now < q->deadline_ns)
		return;
	who[0] = '\0';
	for (int i = 0; i < s->num_servers; i++) {
		if (!q->waiting[i])
			continue;
		q->waiting[i] = 0;
		if (n < sizeof(who))
			n += (size_t)snprintf(who + n, sizeof(who) - n, "%s%u", n ? ", " : "",
					      s->slots[i].node.rank);
	}
	fail(s, -ETIMEDOUT,
	     "server(s) %s did not answer within %d ms (under BSP a target clock is reached "
	     "only while the workers train; check the servers' logs)",
	     who, q->timeout_ms);
	finish(s);
}

void rps_sched_creq_peer_closing(struct rps_sched *s, struct sched_peer *p)
{
	if (s->creq.from == p)
		s->creq.from = NULL;
}
