/* The control channel: frames from the scheduler (map, dead nodes, barrier
 * releases, shutdown, errors, progress), heartbeats, and the control thread
 * that polls the connection once the node joined. */
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

const char *rps_ctl_role_name(uint8_t role)
{
	switch (role) {
	case RPS_ROLE_SERVER:
		return "server";
	case RPS_ROLE_WORKER:
		return "worker";
	case RPS_ROLE_CTL:
		return "ctl";
	case RPS_ROLE_SCHEDULER:
		return "scheduler";
	}
	return "?";
}

/* Under ctl->lock: one frame, payload a then b. */
static int send_frame_locked(struct rps_ctl *ctl, uint8_t op, uint32_t req_id, int32_t status,
			     uint32_t aux, const void *a, size_t alen, const void *b, size_t blen)
{
	struct rps_frame_hdr h;
	struct iovec iov[2];
	int n = 0;

	if (!ctl->conn)
		return -ECONNRESET;
	if (alen)
		iov[n++] = (struct iovec){.iov_base = (void *)a, .iov_len = alen};
	if (blen)
		iov[n++] = (struct iovec){.iov_base = (void *)b, .iov_len = blen};
	rps_proto_hdr_init(&h, op, (uint32_t)(alen + blen), req_id);
	h.status = status;
	h.aux = aux;
	return rps_tr_post_send(ctl->conn, &h, iov, n, 0);
}

int rps_ctl_send(struct rps_ctl *ctl, uint8_t op, uint32_t req_id, int32_t status, uint32_t aux,
		 const void *a, size_t alen, const void *b, size_t blen)
{
	int rc;

	pthread_mutex_lock(&ctl->lock);
	rc = send_frame_locked(ctl, op, req_id, status, aux, a, alen, b, blen);
	pthread_mutex_unlock(&ctl->lock);
	return rc;
}

int rps_ctl_send_locked(struct rps_ctl *ctl, uint8_t op, uint32_t req_id, uint32_t aux,
			const void *payload, size_t len)
{
	return send_frame_locked(ctl, op, req_id, 0, aux, payload, len, NULL, 0);
}

/* The process's CPU use since the previous heartbeat, in thousandths of a
 * core plus 1 (HEARTBEAT hdr.aux, src/proto.h); 0 the first time. */
static uint32_t cpu_aux(struct rps_ctl *ctl, uint64_t now)
{
	struct timespec ts;
	uint64_t cpu, dw;
	uint32_t aux = RPS_HB_CPU_NONE;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return RPS_HB_CPU_NONE;
	cpu = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	dw = now - ctl->cpu_wall_ns;
	if (ctl->cpu_wall_ns && dw > 0 && cpu >= ctl->cpu_base_ns)
		aux = (uint32_t)RPS_MIN((cpu - ctl->cpu_base_ns) * 1000u / dw, 1000000u) + 1;
	ctl->cpu_base_ns = cpu;
	ctl->cpu_wall_ns = now;
	return aux;
}

static void send_heartbeat_locked(struct rps_ctl *ctl, uint64_t now)
{
	struct {
		struct rps_heartbeat hb;
		char tail[sizeof(ctl->hb_tail)];
	} f;

	memset(&f.hb, 0, sizeof(f.hb));
	f.hb.id = ctl->id;
	f.hb.clock = ctl->hb_clock;
	memcpy(f.hb.counters, ctl->hb_counters, sizeof(f.hb.counters));
	memcpy(f.tail, ctl->hb_tail, ctl->hb_tail_len);
	ctl->last_hb_ns = now;
	rps_ctl_send_locked(ctl, RPS_OP_HEARTBEAT, 0, cpu_aux(ctl, now), &f,
			    sizeof(f.hb) + ctl->hb_tail_len);
}

void rps_ctl_maybe_heartbeat(struct rps_ctl *ctl)
{
	uint64_t now = rps_now_ns();

	pthread_mutex_lock(&ctl->lock);
	if (ctl->conn && !ctl->leaving &&
	    now - ctl->last_hb_ns >= (uint64_t)ctl->heartbeat_ms * 1000000ull)
		send_heartbeat_locked(ctl, now);
	pthread_mutex_unlock(&ctl->lock);
}

static void on_map_frame(struct rps_ctl *ctl, const struct rps_tr_event *ev, struct ctl_action *act)
{
	struct rps_map m;

	if (ev->hdr.len < sizeof(m) || !ev->fixed) {
		RPS_WARN("scheduler %s: short MAP frame (%u bytes) ignored", ctl->sched,
			 ev->hdr.len);
		return;
	}
	memcpy(&m, ev->fixed, sizeof(m));
	if (m.num_nodes > RPS_MAX_NODES ||
	    ev->data_len != (size_t)m.num_nodes * sizeof(struct rps_node) ||
	    (m.num_nodes && !ev->data)) {
		RPS_WARN("scheduler %s: MAP of %u nodes with %zu bytes of nodes ignored",
			 ctl->sched, m.num_nodes, ev->data_len);
		return;
	}
	pthread_mutex_lock(&ctl->lock);
	ctl->map = m;
	if (m.num_nodes)
		memcpy(ctl->nodes, ev->data, ev->data_len);
	ctl->id = m.your_id;
	ctl->rank = m.your_rank;
	if (ctl->joined && act) {
		ctl->cb_map = m;
		memcpy(ctl->cb_nodes, ctl->nodes, (size_t)m.num_nodes * sizeof(struct rps_node));
		act->map = 1;
	}
	ctl->joined = 1;
	pthread_mutex_unlock(&ctl->lock);
	RPS_DEBUG("scheduler %s: map epoch %u, %u nodes; we are node %u, %s rank %u", ctl->sched,
		  m.epoch, m.num_nodes, m.your_id, rps_ctl_role_name(ctl->role), m.your_rank);
}

static void on_dead_frame(struct rps_ctl *ctl, const struct rps_tr_event *ev,
			  struct ctl_action *act)
{
	struct rps_node n;

	if (ev->hdr.len < sizeof(n) || !ev->fixed)
		return;
	memcpy(&n, ev->fixed, sizeof(n));
	n.host[sizeof(n.host) - 1] = '\0';
	n.alive = 0;
	pthread_mutex_lock(&ctl->lock);
	if (n.id < ctl->map.num_nodes)
		ctl->nodes[n.id].alive = 0;
	if (ev->hdr.aux > ctl->map.epoch)
		ctl->map.epoch = ev->hdr.aux;
	pthread_mutex_unlock(&ctl->lock);
	if (ev->hdr.status)
		RPS_WARN("node %u (%s rank %u, %s:%u) declared dead by the scheduler", n.id,
			 rps_ctl_role_name(n.role), n.rank, n.host, n.port);
	else
		RPS_INFO("node %u (%s rank %u, %s:%u) left", n.id, rps_ctl_role_name(n.role),
			 n.rank, n.host, n.port);
	if (act) {
		act->dead = 1;
		act->dead_node = n;
	}
}

static void on_barrier_done(struct rps_ctl *ctl, const struct rps_frame_hdr *h)
{
	uint32_t g = h->aux;

	if (g > 1)
		return;
	pthread_mutex_lock(&ctl->lock);
	if (ctl->barrier_waiting[g] && ctl->barrier_req[g] == h->req_id) {
		ctl->barrier_done[g] = 1;
		ctl->barrier_status[g] = h->status;
		pthread_cond_broadcast(&ctl->cond);
	}
	pthread_mutex_unlock(&ctl->lock);
}

static void on_error_frame(struct rps_ctl *ctl, const struct rps_tr_event *ev)
{
	char why[RPS_LOG_ESC_BUF];

	rps_log_escape(ev->data, ev->data_len, why, sizeof(why));
	pthread_mutex_lock(&ctl->lock);
	if (!ctl->joined && !ctl->join_status)
		ctl->join_status = ev->hdr.status ? ev->hdr.status : -EPROTO;
	pthread_mutex_unlock(&ctl->lock);
	RPS_ERR("scheduler %s: %s (%s)", ctl->sched, why[0] ? why : "error",
		rps_strerror(ev->hdr.status));
}

static void on_progress(struct rps_ctl *ctl, const struct rps_tr_event *ev)
{
	size_t n = RPS_MIN(ev->data_len, sizeof(ctl->progress) - 1);

	pthread_mutex_lock(&ctl->lock);
	if (n && ev->data)
		memcpy(ctl->progress, ev->data, n);
	ctl->progress[n] = '\0';
	pthread_mutex_unlock(&ctl->lock);
	RPS_DEBUG("scheduler %s: %s", ctl->sched, ctl->progress);
}

static void on_closed(struct rps_ctl *ctl, const struct rps_tr_event *ev)
{
	int report;

	pthread_mutex_lock(&ctl->lock);
	if (ctl->conn) {
		rps_tr_close(ctl->conn);
		ctl->conn = NULL;
	}
	ctl->closed = 1;
	report = !ctl->shutdown && !ctl->leaving;
	if (report) {
		ctl->lost = 1;
		if (!ctl->joined && ctl->join_status)
			report = 0; /* refused: already said why */
		else if (!ctl->joined)
			ctl->join_status = -ECONNRESET;
	}
	pthread_cond_broadcast(&ctl->cond);
	pthread_mutex_unlock(&ctl->lock);
	if (report && ctl->joined)
		RPS_ERR("scheduler %s: connection lost (%s): no more barriers or dead-node notices",
			ctl->sched,
			ev->status ? rps_strerror(ev->status) : "closed by the scheduler");
	else if (report)
		RPS_ERR("scheduler %s closed the connection before sending the map", ctl->sched);
}

void rps_ctl_handle_event(struct rps_ctl *ctl, struct rps_tr_event *ev, struct ctl_action *act)
{
	switch (ev->type) {
	case RPS_TR_EV_RECV:
		switch (ev->hdr.op) {
		case RPS_OP_MAP:
			on_map_frame(ctl, ev, act);
			break;
		case RPS_OP_NODE_DEAD:
			on_dead_frame(ctl, ev, act);
			break;
		case RPS_OP_BARRIER_DONE:
			on_barrier_done(ctl, &ev->hdr);
			break;
		case RPS_OP_SHUTDOWN:
			pthread_mutex_lock(&ctl->lock);
			ctl->shutdown = 1;
			if (!ctl->joined && !ctl->join_status)
				ctl->join_status = -ECANCELED;
			pthread_cond_broadcast(&ctl->cond);
			pthread_mutex_unlock(&ctl->lock);
			if (ctl->joined)
				RPS_INFO("scheduler %s: shutdown", ctl->sched);
			else
				RPS_ERR("scheduler %s shut down before the cluster was complete",
					ctl->sched);
			if (act)
				act->shutdown = 1;
			break;
		case RPS_OP_ERROR:
			on_error_frame(ctl, ev);
			break;
		case RPS_OP_STATUS:
			on_progress(ctl, ev);
			break;
		case RPS_OP_CHECKPOINT:
		case RPS_OP_EXPORT:
			if (ctl->role == RPS_ROLE_SERVER && ev->hdr.aux == RPS_CTLREQ_REQ) {
				if (ctl->ev.on_request)
					ctl->ev.on_request(ctl->arg, &ev->hdr, ev->data,
							   ev->data_len);
			} else {
				rps_ctl_on_creq(ctl, ev);
			}
			break;
		default:
			RPS_WARN("scheduler %s: unexpected %s frame ignored", ctl->sched,
				 rps_proto_op_name(ev->hdr.op));
			break;
		}
		if (ev->token)
			rps_tr_release(ctl->tr, ev->token);
		break;
	case RPS_TR_EV_CLOSED:
		on_closed(ctl, ev);
		break;
	default:
		break;
	}
}

void *rps_ctl_thread(void *arg)
{
	struct rps_ctl *ctl = arg;
	struct rps_tr_event ev[CTL_EVENTS];
	int wait_ms = RPS_MAX(5, RPS_MIN(ctl->heartbeat_ms / 2, 100));

	while (!atomic_load(&ctl->stop)) {
		int n = rps_tr_poll(ctl->tr, ev, CTL_EVENTS, wait_ms);

		if (n < 0 && n != -EINTR && n != -EAGAIN) {
			RPS_ERR("control channel poll: %s", rps_strerror(n));
			rps_sleep_ms(50);
			continue;
		}
		for (int i = 0; i < n; i++) {
			struct ctl_action act;

			memset(&act, 0, sizeof(act));
			rps_ctl_handle_event(ctl, &ev[i], &act);
			if (act.map && ctl->ev.on_map)
				ctl->ev.on_map(ctl->arg, &ctl->cb_map, ctl->cb_nodes);
			if (act.dead && ctl->ev.on_dead)
				ctl->ev.on_dead(ctl->arg, &act.dead_node);
			if (act.shutdown && ctl->ev.on_shutdown)
				ctl->ev.on_shutdown(ctl->arg);
		}
		rps_ctl_maybe_heartbeat(ctl);
	}
	return NULL;
}
