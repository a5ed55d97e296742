/* Pull: PULL frames answered straight into the caller's buffer (recv_dest),
 * or the RDMA read path; pushpull. */
#include <errno.h>
#include <string.h>

#include "src/log.h"
#include "src/util.h"
#include "worker/worker_int.h"

#define PIECE_BATCH 64

static void pull_flush(struct rps_worker *w, struct rps_piece **batch, int nb)
{
	for (int i = 0; i < nb; i++) {
		atomic_fetch_add_explicit(&w->stat_pulls, 1, memory_order_relaxed);
		rps_wpost_piece(w, batch[i]);
	}
}

static int pull_frames(struct rps_worker *w, struct rps_req *req, const rps_key_t *keys,
		       float *vals, const size_t *lens, size_t n, uint32_t min_clock)
{
	struct rps_piece *batch[PIECE_BATCH];
	float *base = vals;
	int nb = 0;
	int rc = 0;

	pthread_mutex_lock(&w->core.lock);
	for (size_t i = 0; i < n && !rc; base += lens[i], i++) {
		const struct rps_wkey *k = rps_keytab_find(&w->keys, keys[i]);

		if (!k) {
			rc = -ENOENT;
			break;
		}
		for (uint32_t s = 0; s < k->nslices && !rc; s++) {
			const struct rps_wslice *sl = &k->slices[s];
			struct rps_wserver *srv = &w->servers[sl->server];
			uint64_t nfr = rps_wplan_nframes(sl->nelems, srv->pull_elems);

			for (uint64_t f = 0; f < nfr; f++) {
				struct rps_piece *p;
				uint64_t off, cnt;

				if (nb == PIECE_BATCH) {
					pthread_mutex_unlock(&w->core.lock);
					pull_flush(w, batch, nb);
					nb = 0;
					pthread_mutex_lock(&w->core.lock);
				}
				p = rps_piece_alloc_locked(&w->core, req, RPS_PK_PULL, RPS_PW_RESP);
				if (!p) {
					rc = -ENOMEM;
					break;
				}
				rps_wplan_frame(sl->nelems, srv->pull_elems, f, &off, &cnt);
				p->conn = srv->shards[sl->shard].conn;
				p->server = sl->server;
				p->shard = sl->shard;
				memset(&p->u.pull.fixed, 0, sizeof(p->u.pull.fixed));
				p->u.pull.fixed.key = k->key;
				p->u.pull.fixed.slice = s;
				p->u.pull.fixed.shard = sl->shard;
				p->u.pull.fixed.offset = off;
				p->u.pull.fixed.count = (uint32_t)cnt;
				p->u.pull.fixed.min_clock = min_clock;
				p->u.pull.dest = base + sl->offset + off;
				p->u.pull.receiving = 0;
				batch[nb++] = p;
			}
		}
	}
	if (rc)
		rps_wreq_fail_locked(req, rc);
	pthread_mutex_unlock(&w->core.lock);
	pull_flush(w, batch, nb);
	return rc;
}

static int pull_reads(struct rps_worker *w, struct rps_req *req, const rps_key_t *keys,
		      float *vals, const size_t *lens, size_t n, uint32_t min_clock)
{
	struct rps_wdest dd;
	float *base = vals;
	size_t total = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		total += lens[i];
	rps_wrdma_pin_dest(w, vals, total * sizeof(float), &dd);
	for (size_t i = 0; i < n && !rc; base += lens[i], i++) {
		const struct rps_wkey *k = rps_keytab_find(&w->keys, keys[i]);

		if (!k) {
			rc = -ENOENT;
			break;
		}
		for (uint32_t s = 0; s < k->nslices && !rc; s++) {
			const struct rps_wslice *sl = &k->slices[s];

			atomic_fetch_add_explicit(&w->stat_pulls, 1, memory_order_relaxed);
			rc = rps_wrdma_submit(w, req, sl->server, sl->shard, sl, base + sl->offset,
					      &dd, min_clock);
		}
	}
	if (rc) {
		pthread_mutex_lock(&w->core.lock);
		rps_wreq_fail_locked(req, rc);
		rps_wcore_unlock(&w->core);
	}
	return rc;
}

int rps_wpull_submit(struct rps_worker *w, struct rps_req *req, const rps_key_t *keys,
		     float *vals, const size_t *lens, size_t n, uint32_t min_clock)
{
	if (w->use_read)
		return pull_reads(w, req, keys, vals, lens, n, min_clock);
	return pull_frames(w, req, keys, vals, lens, n, min_clock);
}

static int pull_common(struct rps_worker *w, const rps_key_t *keys, float *vals,
		       const size_t *lens, size_t n, rps_done_cb cb, void *arg,
		       struct rps_req **req_p)
{
	const struct rps_wkey *k = NULL;
	struct rps_req *req;
	int rc;

	if (!w || (!cb && !req_p))
		return -EINVAL;
	if (req_p && n == 1 && w->use_read && keys && lens && vals) {
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
	if (k) {
		rc = rps_wrdma_pull1(w, k, vals, atomic_load(&w->clock), req_p);
		if (rc != -EAGAIN)
			return rc;
	}
	req = rps_wreq_new(&w->core, cb, arg);
	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	rps_wpull_submit(w, req, keys, vals, lens, n, atomic_load(&w->clock));
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
	rps_wpull_submit(w, req, keys, vals, lens, n, c1);
	rps_wsubmit_leave(w);
	*req_p = req;
	rps_wreq_seal(req);
	return 0;
}
