/* The pull API: pull, pull_cb, pushpull. How a pull travels is the pull
 * strategy's (w->pull: pull_frame.c or read.c). */
#include <errno.h>
#include <string.h>

#include "src/log.h"
#include "src/util.h"
#include "worker/worker_int.h"

static int pull_common(struct rps_worker *w, const rps_key_t *keys, float *vals,
		       const size_t *lens, size_t n, rps_done_cb cb, void *arg,
		       struct rps_req **req_p)
{
	const struct rps_wkey *k = NULL;
	struct rps_req *req;
	int rc;

	if (!w || (!cb && !req_p))
		return -EINVAL;
	if (req_p && n == 1 && w->pull->pull1 && keys && lens && vals) {
		rc = rps_keytab_check1(&w->keys, keys[0], lens[0], &k); /* looked up once */
		if (rc)
			k = NULL;
	} else {
		rc = rps_keytab_check(&w->keys, keys, lens, n, vals, NULL);
	}
	if (!rc)
		rc = rps_wready(w);
	if (rc)
		return rc;
	if (k && !atomic_load(&k->pull_prec)) { /* low-precision: not direct */
		rc = w->pull->pull1(w, k, vals, atomic_load(&w->clock), req_p);
		if (rc != -EAGAIN)
			return rc;
	}
	req = rps_wreq_new(&w->core, cb, arg);
	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	w->pull->submit(w, req, keys, vals, lens, n, atomic_load(&w->clock));
	rps_wsubmit_leave(w);
	if (req_p)
		*req_p = req;
	rps_wreq_seal(req);
	return 0;
}

int rps_worker_pull(struct rps_worker *w, const rps_key_t *keys, float *vals, const size_t *lens,
		    size_t n, struct rps_req **req_p)
{
	return pull_common(w, keys, vals, lens, n, NULL, NULL, req_p);
}

int rps_worker_pull_cb(struct rps_worker *w, const rps_key_t *keys, float *vals,
		       const size_t *lens, size_t n, rps_done_cb cb, void *arg)
{
	if (!cb)
		return -EINVAL;
	return pull_common(w, keys, vals, lens, n, cb, arg, NULL);
}

int rps_worker_pushpull(struct rps_worker *w, const rps_key_t *keys, const float *grads,
			float *vals, const size_t *lens, size_t n, struct rps_req **req_p)
{
	struct rps_req *req;
	uint32_t c1 = 0;
	int rc;

	if (!w || !req_p)
		return -EINVAL;
	rc = rps_keytab_check(&w->keys, keys, lens, n, grads, NULL);
	if (!rc)
		rc = rps_keytab_check(&w->keys, keys, lens, n, vals, NULL);
	if (rc)
		return rc;
	rc = rps_wready(w);
	if (rc)
		return rc;
	rc = rps_wpush_post(w, keys, grads, lens, n, NULL, NULL, &req);
	if (rc)
		return rc;
	rc = rps_wclock_send(w, &c1);
	if (rc) {
		pthread_mutex_lock(&w->core.lock);
		rps_wreq_fail_locked(req, rc);
		pthread_mutex_unlock(&w->core.lock);
	}
	rps_wsubmit_enter(w);
	w->pull->submit(w, req, keys, vals, lens, n, c1);
	rps_wsubmit_leave(w);
	*req_p = req;
	rps_wreq_seal(req);
	return 0;
}
