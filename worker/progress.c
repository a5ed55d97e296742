/* The worker's progress thread: polls the transport, hands answers to
 * their pieces and the pull strategy, reaps dead connections, runs
 * completion callbacks; and the same event handling for a waiting caller
 * that reaps completions itself. */
#include <errno.h>
#include <time.h>

#include "src/log.h"
#include "src/util.h"
#include "worker/table.h"
#include "worker/worker_int.h"

#define PROGRESS_EVENTS	 64
#define PROGRESS_IDLE_MS 200 /* bound on a poll, even when nothing is due */
#define CALLER_EVENTS	 16  /* events a spinning caller takes at once */

static void handle_closed(struct rps_worker *w, const struct rps_tr_event *ev)
{
	struct rps_wconn *wc = ev->conn ? ev->conn->user : NULL;

	if (!wc)
		return;
	if (ev->status && ev->status != -ECONNRESET)
		RPS_INFO("server %u channel %u closed: %s", wc->srv->rank, wc->channel,
			 rps_strerror(ev->status));
	/* what the caller sees is the documented -ECONNRESET, whatever the cause */
	rps_wconn_mark_dead(w, wc, -ECONNRESET);
}

static void handle_events(struct rps_worker *w, struct rps_tr_event *ev, int n)
{
	int locked = 0;

	for (int i = 0; i < n; i++) {
		struct rps_tr_event *e = &ev[i];
		struct rps_wconn *wc = e->conn ? e->conn->user : NULL;

		switch (e->type) {
		case RPS_TR_EV_RECV:
			if (!locked) {
				pthread_mutex_lock(&w->core.lock);
				locked = 1;
			}
			if (wc)
				rps_wrecv_locked(w, wc, e);
			if (e->token)
				rps_tr_release(w->tr, e->token);
			break;
		case RPS_TR_EV_SEND_DONE: {
			struct rps_piece *p = rps_piece_by_ctx(&w->core, e->ctx);

			if (!locked) {
				pthread_mutex_lock(&w->core.lock);
				locked = 1;
			}
			if (p && p->kind == RPS_PK_PUSH && (p->waits & RPS_PW_SEND) &&
			    w->core.keep_pushes && rps_wkept_send_done_locked(w, p, e))
				break; /* replicated shards: kept for the promoted backup */
			if (p && p->kind == RPS_PK_PUSH && (p->waits & RPS_PW_SEND)) {
				rps_piece_clear_locked(&w->core, p, RPS_PW_SEND, e->status);
				if (p->kind && p->req && p->req->aborted)
					rps_piece_detach_locked(&w->core, p);
			}
			break;
		}
		case RPS_TR_EV_READ_DONE:
			if (locked) {
				pthread_mutex_unlock(&w->core.lock);
				locked = 0;
			}
			if (!rps_wtable_read_done(w, e)) /* a table's row READ? */
				w->pull->read_done(w, e);
			break;
		case RPS_TR_EV_CLOSED:
			if (locked) {
				pthread_mutex_unlock(&w->core.lock);
				locked = 0;
			}
			handle_closed(w, e);
			break;
		case RPS_TR_EV_ACCEPTED:
		default:
			RPS_DEBUG("unexpected transport event %d", (int)e->type);
			break;
		}
	}
	if (locked)
		pthread_mutex_unlock(&w->core.lock);
}

/* A waiting caller reaps completions itself (RPS_TR_CAP_PROGRESS). Its
 * loop pauses between calls, not this: a direct request's READ completes
 * here without an event, and its waiter stops at once. */
void rps_wprogress_spin(void *arg)
{
	struct rps_worker *w = arg;
	struct rps_tr_event ev[CALLER_EVENTS];
	int n = rps_tr_progress(w->tr, ev, CALLER_EVENTS);

	if (n > 0)
		handle_events(w, ev, n);
}

void *rps_wprogress_main(void *arg)
{
	struct rps_worker *w = arg;
	struct rps_tr_event ev[PROGRESS_EVENTS];
	int errors = 0;

	rps_wcore_be_progress(&w->core);

	while (!atomic_load(&w->stop)) {
		int timeout = PROGRESS_IDLE_MS;
		int t, n;

		if (rps_wconn_reap(w))
			timeout = 1;
		t = w->pull->timers(w);
		if (t >= 0 && t < timeout)
			timeout = t;
		n = rps_tr_poll(w->tr, ev, PROGRESS_EVENTS, timeout);
		if (n < 0) {
			if (n != -EINTR && n != -EAGAIN && errors++ < 3)
				RPS_ERR("transport poll: %s", rps_strerror(n));
			if (n != -EINTR && n != -EAGAIN)
				rps_sleep_ms(1);
			continue;
		}
		if (n > 0)
			handle_events(w, ev, n);
		pthread_mutex_lock(&w->core.lock);
		rps_wcore_abort_scan_locked(&w->core);
		pthread_mutex_unlock(&w->core.lock);
		rps_wcore_drain(&w->core);
	}
	return NULL;
}
