/* The RDMA transport (verbs + librdmacm): the ops table, create/destroy,
 * poll() and wake(). The rest: rdma_dev.c (device, SRQs), rdma_cm.c
 * (listen, CM events), rdma_connect.c (connect), rdma_conn.c (connections,
 * teardown), rdma_send.c (SENDs, credits, event queue), rdma_read.c (RDMA
 * READs), rdma_cq.c (completions), rdma_mr.c (registration, MR cache).
 * Deployment: docs/rdma.md. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/rdma/rdma_int.h"

#define SLOW_EVERY_NS 1000000ull /* CM and async events, teardown: every 1 ms */
#define EPOLL_CAP_MS  100
/* While callers reap their own completions (progress()), poll() leaves the
 * completion channel unarmed, so their completions wake no one, and looks
 * again every CALLER_HOLD_MS; wake() ends that at once (why 10:
 * docs/benchmarks.md). */
#define CALLER_HOLD_MS 10

static int rps_rdma_create(const struct rps_tr_params *p, struct rps_transport **t_p)
{
	struct rps_rdma_transport *t;
	uint64_t est;
	int rc;

	/* the settings as given (rps_tr_params_from_config): no defaults here */
	if (p->rdma.buf_bytes < 1024 || p->rdma.buf_bytes > (1u << 30) || !p->rdma.recv_bufs ||
	    !p->rdma.credits || p->rdma.max_rd < 1 || p->timeout_ms <= 0 || !p->max_msg) {
		RPS_ERR("rdma: transport parameters not set (buf_bytes %" PRIu64
			", recv_bufs %u, credits %u, max_rd %d, timeout %d ms, max_msg %" PRIu64 ")",
			p->rdma.buf_bytes, p->rdma.recv_bufs, p->rdma.credits, p->rdma.max_rd,
			p->timeout_ms, p->max_msg);
		return -EINVAL;
	}
	t = rps_calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->base.ops = &rps_rdma_ops;
	t->base.params = *p;
	snprintf(t->secret, sizeof(t->secret), "%s", p->secret ? p->secret : "");
	if (p->device && p->device[0])
		snprintf(t->device, sizeof(t->device), "%s", p->device);
	t->base.params.secret = t->secret;
	t->base.params.device = t->device;

	t->buf_bytes = (uint32_t)p->rdma.buf_bytes + RDMA_BUF_HEADROOM;
	t->recv_bufs = p->rdma.recv_bufs;
	t->credits = p->rdma.credits;
	if (t->credits < 2) {
		RPS_WARN("rdma: RDMAPS_RDMA_CREDITS=%u raised to 2 (credit frames need a window "
			 "of at least 2)",
			 t->credits);
		t->credits = 2;
	}
	t->max_rd = p->rdma.max_rd;
	t->event_mode = p->rdma.event_mode;
	t->poll_spin_ns = (uint64_t)RPS_MAX(p->rdma.poll_spin_us, 0) * 1000u;
	t->timeout_ms = p->timeout_ms;
	t->rnr_retry = RPS_MIN(RPS_MAX(p->rdma.rnr_retry, 0), 7);
	t->ack_timeout = RPS_MIN(RPS_MAX(p->rdma.ack_timeout, 0), 31);
	t->retry_count = RPS_MIN(RPS_MAX(p->rdma.retry_count, 0), 7);
	t->rnr_timer = RPS_MIN(RPS_MAX(p->rdma.rnr_timer, 0), 31);
	t->max_msg = p->max_msg;
	t->expect_peers = RPS_MAX(p->rdma.expect_peers, 1u);
	t->expect_out = RPS_MAX(p->rdma.expect_out, 1u);
	t->nsrqs = RPS_MAX(p->nchannels, 1u);
	t->base.caps = RPS_TR_CAP_READ | RPS_TR_CAP_CHANNELS | RPS_TR_CAP_PROGRESS |
		       RPS_TR_CAP_READ_NOTIFY;
	t->base.max_frame = t->buf_bytes;
	t->base.max_read_sge = RDMA_MAX_SGE;
	t->efd = -1;
	t->epfd = -1;
	atomic_store(&t->st_low_water, -1);
	pthread_mutex_init(&t->setup_lock, NULL);
	pthread_mutex_init(&t->prog_lock, NULL);
	pthread_mutex_init(&t->close_lock, NULL);
	pthread_mutex_init(&t->mrc_lock, NULL);
	pthread_mutex_init(&t->res_lock, NULL);
	pthread_mutex_init(&t->mw_lock, NULL);
	t->mw_mode = p->rdma.mw;
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&t->res_cv, &ca);
		pthread_condattr_destroy(&ca);
	}

	rc = -ENOMEM;
	t->srqs = rps_calloc(t->nsrqs, sizeof(*t->srqs));
	if (!t->srqs)
		goto err_free;
	t->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->efd < 0) {
		rc = -errno;
		RPS_ERR("rdma: eventfd: %m");
		goto err_free;
	}
	rc = rps_rdma_devices_probe(t);
	if (rc)
		goto err_free;
	/* the pools a listener (per shard) or a client (one) registers */
	est = (uint64_t)t->nsrqs * t->recv_bufs * t->buf_bytes +
	      (uint64_t)RPS_MIN(t->credits + 1, 32u) * t->buf_bytes;
	rc = rps_rdma_memlock_check(t, est, "the RDMA buffer pools");
	if (rc)
		goto err_dev;
	t->cm_ch = rdma_create_event_channel();
	if (!t->cm_ch) {
		rc = errno == ENODEV || errno == ENOENT ? -ENODEV : (errno ? -errno : -EIO);
		if (rc == -ENODEV)
			RPS_ERR("no RDMA device (see docs/softroce.md): rdma_cm is not available");
		else
			RPS_ERR("rdma: rdma_create_event_channel: %m");
		goto err_dev;
	}
	if (fcntl(t->cm_ch->fd, F_SETFL, fcntl(t->cm_ch->fd, F_GETFL) | O_NONBLOCK) < 0) {
		rc = -errno;
		goto err_ch;
	}
	if (t->event_mode) {
		struct epoll_event ee = {.events = EPOLLIN};
		struct rps_rdma_dev *d = atomic_load(&t->dev);

		t->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (t->epfd < 0) {
			rc = -errno;
			RPS_ERR("rdma: epoll_create1: %m");
			goto err_ch;
		}
		ee.data.u32 = 0;
		epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->efd, &ee);
		ee.data.u32 = 1;
		epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->cm_ch->fd, &ee);
		if (d) { /* created before epfd existed */
			ee.data.u32 = 2;
			epoll_ctl(t->epfd, EPOLL_CTL_ADD, d->cch->fd, &ee);
			ee.data.u32 = 3;
			epoll_ctl(t->epfd, EPOLL_CTL_ADD, d->ctx->async_fd, &ee);
		}
	}
	*t_p = &t->base;
	return 0;

err_ch:
	rdma_destroy_event_channel(t->cm_ch);
err_dev:
	rps_rdma_dev_destroy(t);
err_free:
	if (t->efd >= 0)
		close(t->efd);
	rps_free(t->srqs);
	rps_free(t);
	return rc;
}

static void rps_rdma_destroy(struct rps_transport *tr)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);

	rps_rdma_teardown_all(t);
	if (t->lid)
		rdma_destroy_id(t->lid);
	for (uint32_t i = 0; i < t->nsrqs; i++)
		rps_rdma_srq_destroy(t->srqs[i]);
	rps_rdma_srq_destroy(t->csrq);
	rps_rdma_mw_destroy(t);
	rps_rdma_mrc_destroy(t);
	rps_rdma_dev_destroy(t);
	rdma_destroy_event_channel(t->cm_ch);
	if (t->epfd >= 0)
		close(t->epfd);
	close(t->efd);
	rps_free(t->evq.ev);
	rps_free(t->qpmap);
	rps_free(t->srqs);
	pthread_mutex_destroy(&t->setup_lock);
	pthread_mutex_destroy(&t->prog_lock);
	pthread_mutex_destroy(&t->close_lock);
	pthread_mutex_destroy(&t->mrc_lock);
	pthread_mutex_destroy(&t->res_lock);
	pthread_mutex_destroy(&t->mw_lock);
	pthread_cond_destroy(&t->res_cv);
	rps_free(t);
}

/* Pending events into ev[], skipping those of closed connections. */
static int drain(struct rps_rdma_transport *t, struct rps_tr_event *ev, int max)
{
	int n = 0;

	while (n < max && rps_rdma_evq_pop(t, &ev[n])) {
		struct rps_rdma_conn *c = ev[n].conn ? rps_rdma_c(ev[n].conn) : NULL;

		if (c && atomic_load(&c->user_closed)) {
			if (ev[n].type == RPS_TR_EV_RECV)
				rps_rdma_release(&t->base, ev[n].token);
			continue;
		}
		n++;
	}
	return n;
}

/* prog_lock held: pending events, then what the completion queue holds. */
static int take_events(struct rps_rdma_transport *t, struct rps_tr_event *ev, int max)
{
	int n = t->evq.head != t->evq.tail ? drain(t, ev, max) : 0;

	/* a queue drained empty gets only what this reap adds (often nothing:
	 * a direct READ's completion is no event) */
	if (n < max && rps_rdma_progress_cq(t) > 0)
		n += drain(t, ev + n, max - n);
	return n;
}

static void drain_efd(struct rps_rdma_transport *t)
{
	uint64_t v;

	if (read(t->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		RPS_DEBUG("rdma: eventfd read: %m");
}

static int rps_rdma_poll(struct rps_transport *tr, struct rps_tr_event *ev, int max, int timeout_ms)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);
	uint64_t start = rps_now_ns();
	uint64_t deadline = timeout_ms > 0 ? start + (uint64_t)timeout_ms * 1000000ull : 0;
	int slow_due = 0, callers, n;

	if (max <= 0)
		return 0;
	for (;;) {
		uint64_t now = rps_now_ns();
		struct rps_rdma_dev *d;

		pthread_mutex_lock(&t->prog_lock);
		n = take_events(t, ev, max);
		if (slow_due || atomic_load(&t->closing_n) ||
		    now - t->last_slow_ns >= SLOW_EVERY_NS) {
			slow_due = 0;
			t->last_slow_ns = now;
			if (!t->event_mode)
				drain_efd(t);
			rps_rdma_slow_path(t);
			n += drain(t, ev + n, max - n);
		}
		if (n > 0)
			atomic_store_explicit(&t->last_active_ns, now, memory_order_relaxed);
		if (n > 0 || atomic_exchange(&t->woken, 0) || timeout_ms == 0 ||
		    (deadline && now >= deadline)) {
			pthread_mutex_unlock(&t->prog_lock);
			return n;
		}
		d = atomic_load(&t->dev);
		callers = t->event_mode &&
			  now - atomic_load_explicit(&t->caller_poll_ns, memory_order_relaxed) <
			      CALLER_HOLD_MS * 1000000ull;
		/* busy-poll always, or for poll_spin_ns after the last activity
		 * before sleeping (unless callers do the polling) */
		if (!t->event_mode ||
		    (!callers &&
		     now - atomic_load_explicit(&t->last_active_ns, memory_order_relaxed) <
			 t->poll_spin_ns)) {
			pthread_mutex_unlock(&t->prog_lock);
			for (int i = 0; i < 64; i++)
				rps_cpu_relax();
			continue;
		}
		/* event mode: arm, look once more, then sleep */
		if (!callers && d && ibv_req_notify_cq(d->cq, 0))
			RPS_ERR("rdma: ibv_req_notify_cq failed");
		if (d && rps_rdma_progress_cq(t) > 0) {
			n = drain(t, ev, max);
			if (n > 0) {
				pthread_mutex_unlock(&t->prog_lock);
				return n;
			}
		}
		atomic_store(&t->poll_sleeping, 1);
		pthread_mutex_unlock(&t->prog_lock);
		{
			struct epoll_event ee[4];
			int ms = callers ? CALLER_HOLD_MS : EPOLL_CAP_MS, k;

			if (deadline) {
				uint64_t left = deadline > now ? deadline - now : 0;

				ms = (int)RPS_MIN(left / 1000000 + 1, (uint64_t)ms);
			}
			k = epoll_wait(t->epfd, ee, 4, ms);
			atomic_store(&t->poll_sleeping, 0);
			for (int i = 0; i < k; i++) {
				switch (ee[i].data.u32) {
				case 0:
					drain_efd(t);
					break;
				case 2: {
					struct ibv_cq *cq;
					void *cctx;

					while (d && !ibv_get_cq_event(d->cch, &cq, &cctx))
						ibv_ack_cq_events(cq, 1);
					break;
				}
				default:
					slow_due = 1;
					break;
				}
			}
			if (k == 0 && !callers)
				slow_due = 1;
		}
	}
}

/* A caller reaping its own completions: never waits for prog_lock. */
static int rps_rdma_progress(struct rps_transport *tr, struct rps_tr_event *ev, int max)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);
	int n;

	if (max <= 0)
		return 0;
	atomic_store_explicit(&t->caller_poll_ns, rps_coarse_ns(), memory_order_relaxed);
	if (pthread_mutex_trylock(&t->prog_lock))
		return 0;
	n = take_events(t, ev, max);
	if (t->evq.head != t->evq.tail)
		rps_rdma_notify_poller(t); /* more than max: the poll() thread takes the rest */
	pthread_mutex_unlock(&t->prog_lock);
	return n;
}

static void rps_rdma_wake(struct rps_transport *tr)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);
	uint64_t one = 1;

	atomic_store(&t->caller_poll_ns, 0); /* poll() arms completions again */
	atomic_store(&t->woken, 1);
	if (write(t->efd, &one, sizeof(one)) < 0)
		RPS_DEBUG("rdma: eventfd write: %m");
}

void rps_rdma_get_stats(struct rps_transport *tr, struct rps_rdma_stats *st_p)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);

	memset(st_p, 0, sizeof(*st_p));
	st_p->frames_sent = atomic_load(&t->st_frames_sent);
	st_p->frames_recv = atomic_load(&t->st_frames_recv);
	st_p->ctrl_sent = atomic_load(&t->st_ctrl_sent);
	st_p->ctrl_recv = atomic_load(&t->st_ctrl_recv);
	st_p->credit_waits = atomic_load(&t->st_credit_waits);
	st_p->reads = atomic_load(&t->st_reads);
	st_p->mr_cache_hits = atomic_load(&t->st_mrc_hits);
	st_p->mr_cache_regs = atomic_load(&t->st_mrc_regs);
	st_p->mr_tmp_regs = atomic_load(&t->st_tmp_regs);
	st_p->srq_low_water = atomic_load(&t->st_low_water);
	st_p->conns = atomic_load(&t->st_conns);
	pthread_mutex_lock(&t->mw_lock);
	st_p->mw = t->mw_state;
	pthread_mutex_unlock(&t->mw_lock);
	st_p->mws = rps_rdma_mw_count(t, NULL);
}

const struct rps_transport_ops rps_rdma_ops = {
    .name = "rdma",
    .create = rps_rdma_create,
    .destroy = rps_rdma_destroy,
    .listen = rps_rdma_listen,
    .connect = rps_rdma_connect,
    .post_send = rps_rdma_post_send,
    .read_remote = rps_rdma_read_remote,
    .read_notify = rps_rdma_read_notify,
    .poll = rps_rdma_poll,
    .progress = rps_rdma_progress,
    .release = rps_rdma_release,
    .reg_mem = rps_rdma_reg_mem,
    .dereg_mem = rps_rdma_dereg_mem,
    .grant = rps_rdma_grant,
    .close = rps_rdma_close,
    .wake = rps_rdma_wake,
};
