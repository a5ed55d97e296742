/* The control channel: what a joined node asks of it (the map, its rank and
 * id, the channel's health, barriers, the figures its heartbeats carry). */
#include "control/control_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/transport.h"

#include <rdmaps/status.h>

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
	/* hdr.aux: the group, and above it this node's count of barriers of the
	 * group (1 = its first): the scheduler releases at once a barrier the
	 * job completed before this node joined (docs/scheduler.md) */
	ctl->barrier_seq[group] = (ctl->barrier_seq[group] + 1) & RPS_BARRIER_SEQ_MAX;
	if (!ctl->barrier_seq[group])
		ctl->barrier_seq[group] = 1;
	rc = rps_ctl_send_locked(ctl, RPS_OP_BARRIER, ctl->barrier_req[group],
				 group | (ctl->barrier_seq[group] << RPS_BARRIER_SEQ_SHIFT), NULL, 0);
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

/* Frames of the request this node waits for: RESULTs are counted (failed
 * shards logged), DONE ends it. */
void rps_ctl_on_creq(struct rps_ctl *ctl, const struct rps_tr_event *ev)
{
	const struct rps_frame_hdr *h = &ev->hdr;
	struct rps_ctlres res;
	struct rps_ctlres_shard sr;

	pthread_mutex_lock(&ctl->lock);
	if (!ctl->creq_waiting || h->req_id != ctl->creq_id || h->op != ctl->creq_op) {
		pthread_mutex_unlock(&ctl->lock);
		return;
	}
	if (h->aux == RPS_CTLREQ_RESULT && ev->data && ev->data_len >= sizeof(res)) {
		memcpy(&res, ev->data, sizeof(res));
		for (uint32_t k = 0; k < res.num_shards &&
				     sizeof(res) + (k + 1) * sizeof(sr) <= ev->data_len;
		     k++) {
			memcpy(&sr, (const char *)ev->data + sizeof(res) + k * sizeof(sr),
			       sizeof(sr));
			sr.text[sizeof(sr.text) - 1] = '\0';
			ctl->creq_shards++;
			if (sr.status) {
				ctl->creq_failed++;
				RPS_ERR("%s: server %u shard %u: %s", rps_proto_op_name(h->op),
					res.server, sr.shard, sr.text);
			} else {
				RPS_DEBUG("%s: server %u shard %u at clock %llu: %s",
					  rps_proto_op_name(h->op), res.server, sr.shard,
					  (unsigned long long)sr.clock, sr.text);
			}
		}
	} else if (h->aux == RPS_CTLREQ_DONE) {
		/* the scheduler's text: logged later, so made safe here */
		rps_log_escape(ev->data, ev->data_len, ctl->creq_why, sizeof(ctl->creq_why));
		ctl->creq_status = h->status;
		ctl->creq_done = 1;
		pthread_cond_broadcast(&ctl->cond);
	}
	pthread_mutex_unlock(&ctl->lock);
}

/* Less than margin_ms left until the CLOCK_MONOTONIC deadline? */
static int rps_deadline_passed(const struct timespec *until, int margin_ms)
{
	struct timespec now;
	int64_t left_ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left_ms = (int64_t)(until->tv_sec - now.tv_sec) * 1000 +
		  (until->tv_nsec - now.tv_nsec) / 1000000;
	return left_ms < margin_ms;
}

int rps_ctl_request(struct rps_ctl *ctl, uint8_t op, const struct rps_ctlreq *r)
{
	const char *name = rps_proto_op_name(op);
	struct timespec until;
	int rc;

	/* the scheduler answers at r->timeout_ms at the latest: wait a bit longer */
	rps_deadline_ms(&until, (int)r->timeout_ms + 5000);
	pthread_mutex_lock(&ctl->lock);
	if (ctl->lost || ctl->shutdown || !ctl->conn) {
		pthread_mutex_unlock(&ctl->lock);
		RPS_ERR("%s: no scheduler connection", name);
		return -EHOSTDOWN;
	}
	if (ctl->creq_waiting) {
		pthread_mutex_unlock(&ctl->lock);
		RPS_ERR("%s: another request of this node is waiting", name);
		return -EBUSY;
	}
	ctl->creq_waiting = 1;
	ctl->creq_op = op;
again:
	ctl->creq_id = ++ctl->next_req;
	ctl->creq_done = 0;
	ctl->creq_status = 0;
	ctl->creq_why[0] = '\0';
	ctl->creq_shards = ctl->creq_failed = 0;
	rc = rps_ctl_send_locked(ctl, op, ctl->creq_id, RPS_CTLREQ_REQ, r, sizeof(*r));
	if (rc) {
		RPS_ERR("%s: sending to scheduler %s: %s", name, ctl->sched, rps_strerror(rc));
		rc = -EHOSTDOWN;
		goto out;
	}
	while (!ctl->creq_done && !ctl->lost && !ctl->shutdown) {
		if (pthread_cond_timedwait(&ctl->cond, &ctl->lock, &until) == ETIMEDOUT &&
		    !ctl->creq_done) {
			RPS_ERR("%s: no answer from scheduler %s within %u ms", name, ctl->sched,
				r->timeout_ms + 5000);
			rc = -ETIMEDOUT;
			goto out;
		}
	}
	if (ctl->creq_done && ctl->creq_status == -EBUSY && !rps_deadline_passed(&until, 1000)) {
		/* another node's checkpoint or export is running: the scheduler
		 * takes one at a time, so wait for it to end and ask again (an
		 * operator's export must not fail the job's checkpoint) */
		RPS_DEBUG("%s: the scheduler is busy (%s): asking again", name, ctl->creq_why);
		pthread_mutex_unlock(&ctl->lock);
		rps_sleep_ms(100);
		pthread_mutex_lock(&ctl->lock);
		if (!ctl->lost && !ctl->shutdown && ctl->conn)
			goto again;
	}
	if (!ctl->creq_done) {
		RPS_ERR("%s: %s", name,
			ctl->lost ? "scheduler connection lost" : "scheduler shut down");
		rc = -EHOSTDOWN;
	} else if (ctl->creq_status) {
		rc = ctl->creq_status < 0 ? ctl->creq_status : -EIO;
		RPS_ERR("%s failed: %s", name,
			ctl->creq_why[0] ? ctl->creq_why : rps_strerror(rc));
	} else if (ctl->creq_failed) {
		rc = -EIO;
		RPS_ERR("%s: %u of %u shard(s) failed (see above)", name, ctl->creq_failed,
			ctl->creq_shards);
	} else {
		RPS_INFO("%s: %u shard(s) done", name, ctl->creq_shards);
	}
out:
	ctl->creq_waiting = 0;
	pthread_mutex_unlock(&ctl->lock);
	return rc;
}
