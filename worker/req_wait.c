/* Waiting for requests: rps_req_wait / rps_req_test, internal waits, the
 * quiesce of destroy; a waiting caller may reap completions itself (spin)
 * and a direct request is finished by its waiter. */
#include "worker/req.h"

#include <errno.h>
#include <time.h>

#include "src/util.h"

/* Wait on core->cv (core->lock held) until a broadcast or the deadline
 * (none if ts is NULL); counted, so completions broadcast only to someone.
 * 0 or ETIMEDOUT. */
static int cv_wait(struct rps_wcore *core, const struct timespec *ts)
{
	int rc;

	core->cv_waiters++;
	rc = ts ? pthread_cond_timedwait(&core->cv, &core->lock, ts)
		: pthread_cond_wait(&core->cv, &core->lock);
	core->cv_waiters--;
	return rc;
}

/* Reap completions from this thread for up to core->spin_ns (and within
 * timeout_ms) while req is not done, like perftest's busy-polling client: a
 * completion then wakes nobody. Called without the lock; returns whether
 * it spun. The progress thread never spins (it is the one that would
 * otherwise do the work). When the spinning ends with this request still
 * open, or others in flight, the progress thread is woken to take over
 * (wait_done). */
static int spin_wait(struct rps_req *req, int timeout_ms)
{
	struct rps_wcore *core = req->core;
	uint64_t start, limit = core->spin_ns;

	if (!core->spin || !limit || __atomic_load_n(&req->done, __ATOMIC_ACQUIRE) ||
	    rps_wcore_on_progress(core))
		return 0;
	if (timeout_ms >= 0 && (uint64_t)timeout_ms * 1000000u < limit)
		limit = (uint64_t)timeout_ms * 1000000u;
	/* the first reap often finishes it: read the clock only when it did not */
	core->spin(core->wake_arg);
	if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
		start = rps_now_ns();
		do {
			rps_cpu_relax();
			core->spin(core->wake_arg);
		} while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE) &&
			 rps_now_ns() - start < limit);
	}
	atomic_store_explicit(&core->spin_last_ns, rps_coarse_ns(), memory_order_relaxed);
	return 1;
}

/* A direct request's READ is out: sleep on cv until it ends (the READ_DONE
 * wake-up, direct_step's arm) or the deadline, at most DIRECT_NAP_NS at a
 * time (a wake-up can be lost with the connection). */
#define DIRECT_NAP_NS 10000000ull

static int direct_sleep(struct rps_req *req, const struct timespec *deadline)
{
	struct rps_wcore *core = req->core;
	struct timespec nap;

	if (core->direct_step(core->direct_arg, req, 1))
		return 1;
	rps_deadline_ms(&nap, (int)(DIRECT_NAP_NS / 1000000u));
	if (deadline && (deadline->tv_sec < nap.tv_sec ||
			 (deadline->tv_sec == nap.tv_sec && deadline->tv_nsec < nap.tv_nsec)))
		nap = *deadline;
	pthread_mutex_lock(&core->lock);
	if (atomic_load_explicit(&req->dr.done.state, memory_order_acquire) != RPS_TR_DONE) {
		atomic_fetch_add_explicit(&core->stat_direct_sleeps, 1, memory_order_relaxed);
		if (cv_wait(core, &nap) == ETIMEDOUT)
			atomic_fetch_add_explicit(&core->stat_direct_naps, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&core->lock);
	return core->direct_step(core->direct_arg, req, 0);
}

static int past(const struct timespec *ts)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > ts->tv_sec || (now.tv_sec == ts->tv_sec && now.tv_nsec >= ts->tv_nsec);
}

/* Wait until a direct request is finished: reap completions from this
 * thread for up to core->spin_ns (the progress thread is woken when that
 * ends), then sleep. 0, or -ETIMEDOUT (req stays the caller's). */
static int direct_wait(struct rps_req *req, int timeout_ms)
{
	struct rps_wcore *core = req->core;
	struct timespec ts;
	uint64_t start, limit = core->spin_ns;
	int spin = core->spin && limit && !rps_wcore_on_progress(core);

	/* the first reap often finishes it: read the clock only when it did not */
	if (spin) {
		core->spin(core->wake_arg);
		if (core->direct_step(core->direct_arg, req, 0))
			return 0;
	}
	if (timeout_ms >= 0)
		rps_deadline_ms(&ts, timeout_ms);
	if (spin) {
		if (timeout_ms >= 0 && (uint64_t)timeout_ms * 1000000u < limit)
			limit = (uint64_t)timeout_ms * 1000000u;
		start = rps_now_ns();
		do {
			rps_cpu_relax();
			core->spin(core->wake_arg);
			if (core->direct_step(core->direct_arg, req, 0))
				return 0;
		} while (rps_now_ns() - start < limit);
		atomic_store_explicit(&core->spin_last_ns, rps_coarse_ns(), memory_order_relaxed);
		if (core->wake)
			core->wake(core->wake_arg); /* it reaps from now on */
	}
	for (;;) {
		if (core->direct_step(core->direct_arg, req, 0))
			return 0;
		if (rps_wcore_on_progress(core)) {
			/* a callback waits: nobody else reaps */
			if (!core->spin)
				return -EDEADLK;
			rps_cpu_relax();
			core->spin(core->wake_arg);
		} else if (direct_sleep(req, timeout_ms >= 0 ? &ts : NULL)) {
			return 0;
		}
		if (timeout_ms >= 0 && past(&ts))
			return -ETIMEDOUT;
	}
}

/* Wait until req is done: 0, or -ETIMEDOUT. Takes core->lock and returns
 * with it held. */
static int wait_done(struct rps_req *req, int timeout_ms)
{
	struct rps_wcore *core = req->core;
	struct timespec ts;
	int spun;

	if (timeout_ms >= 0)
		rps_deadline_ms(&ts, timeout_ms);
	spun = spin_wait(req, timeout_ms);
	pthread_mutex_lock(&core->lock);
	/* while callers spin, the progress thread sleeps without completion
	 * events (rps_tr_ops.progress): wake it if anyone now depends on it */
	if (spun && (!req->done || core->reqs_inflight) && core->wake)
		core->wake(core->wake_arg);
	while (!req->done) {
		if (cv_wait(core, timeout_ms >= 0 ? &ts : NULL) == ETIMEDOUT && !req->done)
			return -ETIMEDOUT;
	}
	return 0;
}

int rps_wreq_wait_internal(struct rps_req *req, int timeout_ms)
{
	struct rps_wcore *core = req->core;
	int rc;

	rc = wait_done(req, timeout_ms);
	if (rc) {
		req->orphan = 1; /* the progress thread frees it when it completes */
	} else {
		rc = req->status;
		rps_wreq_free_locked(req);
	}
	pthread_mutex_unlock(&core->lock);
	return rc;
}

int rps_wcore_quiesce(struct rps_wcore *core, int timeout_ms)
{
	struct timespec ts;
	int rc = 0;

	if (timeout_ms >= 0)
		rps_deadline_ms(&ts, timeout_ms);
	pthread_mutex_lock(&core->lock);
	while (core->reqs_inflight) {
		if (cv_wait(core, timeout_ms >= 0 ? &ts : NULL) == ETIMEDOUT) {
			rc = core->reqs_inflight ? -ETIMEDOUT : 0;
			break;
		}
	}
	pthread_mutex_unlock(&core->lock);
	return rc;
}

/* ---- public: handles ---- */

int rps_req_wait(struct rps_req *req, int timeout_ms)
{
	struct rps_wcore *core;
	int rc;

	if (!req || !req->core || req->cb)
		return -EINVAL;
	core = req->core;
	if (req->direct) {
		rc = direct_wait(req, timeout_ms);
		if (rc)
			return rc;
		rc = req->status;
		rps_wreq_free_direct(req);
		return rc;
	}
	rc = wait_done(req, timeout_ms);
	if (!rc) {
		rc = req->status;
		rps_wreq_free_locked(req);
	}
	pthread_mutex_unlock(&core->lock);
	return rc;
}

int rps_req_test(struct rps_req *req, int *done_p)
{
	struct rps_wcore *core;
	int rc = 0;

	if (!req || !req->core || req->cb || !done_p)
		return -EINVAL;
	core = req->core;
	if (req->direct) {
		*done_p = core->direct_step(core->direct_arg, req, 0);
		if (!*done_p && core->spin && !rps_wcore_on_progress(core)) {
			core->spin(core->wake_arg); /* reap on the way, as below */
			*done_p = core->direct_step(core->direct_arg, req, 0);
		}
		if (*done_p) {
			rc = req->status;
			rps_wreq_free_direct(req);
		}
		return rc;
	}
	/* a caller that polls its request reaps completions on the way */
	if (core->spin && !__atomic_load_n(&req->done, __ATOMIC_ACQUIRE) &&
	    !rps_wcore_on_progress(core))
		core->spin(core->wake_arg);
	pthread_mutex_lock(&core->lock);
	*done_p = req->done;
	if (req->done) {
		rc = req->status;
		rps_wreq_free_locked(req);
	}
	pthread_mutex_unlock(&core->lock);
	return rc;
}
