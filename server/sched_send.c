/* Scheduler: frames to peers, refusals, rendezvous progress. */
#include "server/sched_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "control/control.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

const char *rps_sched_role_name(uint8_t role)
{
	return rps_ctl_role_name(role); /* one table of role names */
}

int rps_sched_send_frame(struct sched_peer *p, uint8_t op, uint32_t req_id, int32_t status,
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
void rps_sched_refuse(struct rps_sched *s, struct sched_peer *p, uint32_t req_id, int status,
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
	RPS_LOG_RATELIMITED(RPS_LOG_WARN, "refusing %s %s: %s", rps_sched_role_name(p->role), p->conn->peer, why);
	rps_sched_send_frame(p, RPS_OP_ERROR, req_id, status, 0, why, (size_t)n, NULL, 0);
	p->refused = 1;
	p->refused_ns = rps_now_ns();
}

void rps_sched_progress_text(const struct rps_sched *s, char *buf, size_t len)
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
void rps_sched_send_progress(struct rps_sched *s)
{
	char text[256];

	rps_sched_progress_text(s, text, sizeof(text));
	for (struct sched_peer *p = s->peers; p; p = p->next)
		if (p->registered && p->slot < 0 && !p->closing)
			rps_sched_send_frame(p, RPS_OP_STATUS, 0, 0, 0, text, strlen(text), NULL,
					     0);
}
