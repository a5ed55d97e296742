/* Push: gradients out as PUSH frames; clocks; the BSP pre-push wait. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "src/alloc.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/compress.h"
#include "worker/worker_int.h"

#define PIECE_BATCH 64 /* pieces built under one lock acquisition */

static void push_flush(struct rps_worker *w, struct rps_piece **batch, int nb)
{
	for (int i = 0; i < nb; i++) {
		struct rps_piece *p = batch[i];
		uint32_t count = p->u.push.fixed.count;

		if (!p->u.push.assign) {
			p->u.push.fixed.timestamp_ns = rps_wall_ns();
			/* a piece that is its whole tensor already has its norm
			 * (push_submit) */
			if (p->u.push.fixed.norm == 0.0f && count)
				p->u.push.fixed.norm = cblas_snrm2((int)count, p->u.push.data, 1);
			atomic_fetch_add_explicit(&w->stat_pushes, 1, memory_order_relaxed);
			rps_wstat_push_wire(w, p);
		}
		rps_wpost_piece(w, p);
	}
}

/* Append the push pieces of n keys to req, at the current clock; assign:
 * ASSIGN pieces instead (no norms, not counted for the CLOCK). Caller holds
 * clock_rw for reading and is inside rps_wsubmit_enter. An error also fails
 * req. */
static int push_submit(struct rps_worker *w, struct rps_req *req, const rps_key_t *keys,
		       const float *grads, const size_t *lens, size_t n, int assign)
{
	struct rps_piece *batch[PIECE_BATCH];
	uint32_t clk = atomic_load(&w->clock); /* stable: clock_rw is held */
	const struct rps_wslice *sl;
	struct rps_wslices it;
	float tnorm = 0.0f; /* of the whole tensor: the server clips by it (docs/protocol.md) */
	struct rps_cblob *blob = NULL; /* the key's compressed frames (worker/compress.h) */
	int nb = 0;
	int rc = 0;

	rps_wslices_init(&it, &w->keys, keys, lens, n);
	pthread_mutex_lock(&w->core.lock);
	while (!rc && (rc = rps_wslices_next(&it, &sl)) > 0) {
		struct rps_wserver *srv = &w->servers[sl->server];
		struct rps_wshard *sh = &srv->shards[sl->shard];
		uint64_t nfr = rps_wplan_nframes(sl->nelems, srv->push_elems);
		size_t len = lens[it.i];

		rc = 0;
		if (it.s == 1 && !assign) { /* the key's first slice: a pass over the
					     * caller's gradient, which needs no lock */
			pthread_mutex_unlock(&w->core.lock);
			tnorm = len ? cblas_snrm2((int)len, grads + it.base, 1) : 0.0f;
			rps_cblob_put(blob); /* the previous key's: its pieces hold theirs */
			rc = rps_wcomp_encode(w, it.k, grads + it.base, &blob);
			pthread_mutex_lock(&w->core.lock);
			if (rc)
				break;
		}
		for (uint64_t f = 0; f < nfr; f++) {
			struct rps_piece *p;
			uint64_t off, cnt;

			if (nb == PIECE_BATCH) {
				pthread_mutex_unlock(&w->core.lock);
				push_flush(w, batch, nb);
				nb = 0;
				pthread_mutex_lock(&w->core.lock);
			}
			p = rps_piece_alloc_locked(&w->core, req, RPS_PK_PUSH,
						   RPS_PW_RESP | RPS_PW_SEND);
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			rps_wplan_frame(sl->nelems, srv->push_elems, f, &off, &cnt);
			p->conn = sh->conn;
			p->server = sl->server;
			p->shard = sl->shard;
			memset(&p->u.push.fixed, 0, sizeof(p->u.push.fixed));
			p->u.push.fixed.key = it.k->key;
			p->u.push.fixed.slice = it.s - 1;
			p->u.push.fixed.shard = sl->shard;
			p->u.push.fixed.offset = off;
			p->u.push.fixed.count = (uint32_t)cnt;
			p->u.push.fixed.clock = clk;
			p->u.push.fixed.tensor_norm = tnorm;
			if (cnt == len) /* one piece: its norm is the tensor's, no second pass */
				p->u.push.fixed.norm = tnorm;
			p->u.push.data = grads + it.base + sl->offset + off;
			p->u.push.assign = (uint8_t)assign;
			p->u.push.wkey = (struct rps_wkey *)it.k;
			p->u.push.codec = 0;
			p->u.push.blob = NULL;
			if (blob) {
				const void *cd;
				uint32_t cl;

				rc = rps_cblob_next(blob, cnt, &cd, &cl);
				if (!rc) {
					p->u.push.codec = (uint8_t)blob->codec;
					p->u.push.cdata = cd;
					p->u.push.clen = cl;
					p->u.push.blob = blob;
				}
			}
			p->u.push.seq = !assign && w->core.keep_pushes ? ++sh->seq : 0;
			if (!assign)
				sh->pushes++;
			batch[nb++] = p;
		}
	}
	if (rc)
		rps_wreq_fail_locked(req, rc);
	pthread_mutex_unlock(&w->core.lock);
	push_flush(w, batch, nb);
	rps_cblob_put(blob);
	return rc;
}

/* ---- BSP: wait for the shards' clock before pushing into it ---- */

struct wait_target {
	rps_key_t key;
	uint32_t slice;
	uint32_t server;
	uint32_t shard;
};

/* Shards the keys push to that are not known to have reached clock c. */
static int bsp_targets(struct rps_worker *w, const rps_key_t *keys, size_t n, uint32_t c,
		       struct wait_target **t_p, size_t *nt_p)
{
	struct wait_target *t = NULL;
	size_t nt = 0, cap = 0;
	uint32_t tag;

	pthread_mutex_lock(&w->core.lock);
	tag = ++w->wait_tag;
	for (size_t i = 0; i < n; i++) {
		const struct rps_wkey *k = rps_keytab_find(&w->keys, keys[i]);

		for (uint32_t s = 0; k && s < k->nslices; s++) {
			const struct rps_wslice *sl = &k->slices[s];
			struct rps_wshard *sh = rps_wshard_get(w, sl->server, sl->shard);

			if (atomic_load(&sh->clock_seen) >= c || sh->wait_tag == tag)
				continue;
			sh->wait_tag = tag;
			if (nt == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct wait_target *nt2 = rps_realloc(t, nc * sizeof(*t));

				if (!nt2) {
					pthread_mutex_unlock(&w->core.lock);
					rps_free(t);
					return -ENOMEM;
				}
				t = nt2;
				cap = nc;
			}
			t[nt].key = k->key;
			t[nt].slice = s;
			t[nt].server = sl->server;
			t[nt].shard = sl->shard;
			nt++;
		}
	}
	pthread_mutex_unlock(&w->core.lock);
	*t_p = t;
	*nt_p = nt;
	return 0;
}

/* Wait until each target shard's clock reached c: a count-0 PULL with
 * min_clock c (frames), or reading the shard's clock word (reads). */
static int bsp_wait(struct rps_worker *w, const struct wait_target *t, size_t nt, uint32_t c)
{
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);
	int rc = 0;

	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	for (size_t i = 0; i < nt && !rc; i++)
		rc = w->pull->clock_wait(w, req, t[i].key, t[i].slice, t[i].server, t[i].shard, c);
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	/* No timeout: a straggler may legitimately take long; a dead server
	 * completes the wait with an error (CLOSED or the scheduler). */
	rc = rps_wreq_wait_internal(req, -1);
	if (rc)
		RPS_ERR("waiting for the shards to reach clock %u before pushing: %s", c,
			rps_strerror(rc));
	return rc;
}

/* Wait as BSP requires, then return with clock_rw held for reading: every
 * shard the keys push to has reached the current clock (a push of clock c
 * must not reach a shard still accumulating c - 1). No-op wait under ASP/SSP. */
static int push_begin(struct rps_worker *w, const rps_key_t *keys, size_t n)
{
	for (;;) {
		struct wait_target *t = NULL;
		size_t nt = 0;
		uint32_t c;
		int rc;

		pthread_rwlock_rdlock(&w->clock_rw);
		c = atomic_load(&w->clock);
		if (w->consistency != RPS_BSP || c == 0)
			return 0;
		rc = bsp_targets(w, keys, n, c, &t, &nt);
		if (rc) {
			pthread_rwlock_unlock(&w->clock_rw);
			return rc;
		}
		if (!nt)
			return 0; /* every shard is at c already, lock held */
		/* wait without the lock: rps_worker_clock must not block on us */
		pthread_rwlock_unlock(&w->clock_rw);
		rc = bsp_wait(w, t, nt, c);
		rps_free(t);
		if (rc && w->core.keep_pushes && rps_wrepl_lost(rc)) {
			/* replicated shards: a clock read on a dead primary (one-sided
			 * READs are not kept): wait again on its promoted backup */
			rc = rps_wready(w);
			if (!rc)
				continue;
		}
		if (rc)
			return rc;
		/* the clock may have moved meanwhile: check again under the lock */
	}
}

/* ---- clock ---- */

int rps_wclock_send(struct rps_worker *w, uint32_t *new_clock_p)
{
	struct {
		struct rps_clock c;
		uint32_t pushes[RPS_MAX_SHARDS];
	} f;
	uint64_t counters[4];
	uint32_t c;
	int first = 0;

	pthread_rwlock_wrlock(&w->clock_rw); /* no push is being built now */
	c = atomic_load(&w->clock);
	rps_wsubmit_enter(w);
	for (uint32_t i = 0; i < w->num_servers; i++) {
		struct rps_wserver *s = &w->servers[i];
		struct rps_frame_hdr h;
		struct iovec iov;
		uint32_t len = (uint32_t)(sizeof(f.c) + s->nshards * sizeof(uint32_t));

		f.c.clock = c;
		f.c.num_shards = s->nshards;
		pthread_mutex_lock(&w->core.lock);
		for (uint32_t j = 0; j < s->nshards; j++) {
			f.pushes[j] = s->shards[j].pushes;
			s->shards[j].pushes = 0;
		}
		pthread_mutex_unlock(&w->core.lock);
		rps_proto_hdr_init(&h, RPS_OP_CLOCK, len, 0);
		iov.iov_base = &f;
		iov.iov_len = len;
		if (w->core.keep_pushes) /* for a failover (worker/repl.c) */
			rps_wrepl_keep_clock(s, &f, len);
		/* One connection: after this clock's pushes on it. One per shard
		 * (RPS_TR_CAP_CHANNELS): the same frame on every shard's
		 * connection, each after that shard's pushes (a connection keeps
		 * order); a shard takes its own pushes[shard] from the copy on
		 * its channel. */
		for (uint32_t j = 0; j < s->nconns; j++) {
			struct rps_wconn *wc = &s->conns[j];
			int rc = rps_wconn_dead(wc);

			if (!rc)
				rc = rps_tr_post_send(wc->c, &h, &iov, 1, 0);
			if (rc && w->core.keep_pushes && rps_wrepl_lost(rc))
				rc = 0; /* kept: sent again to the promoted backup */
			if (rc) {
				if (rc != -ECONNRESET && rc != -EHOSTDOWN && rc != -ENOTCONN)
					RPS_ERR("server %u channel %u: send clock %u: %s", s->rank,
						j, c, rps_strerror(rc));
				if (!first)
					first = rc;
			}
		}
	}
	rps_wsubmit_leave(w);
	atomic_store(&w->clock, c + 1);
	rps_wstat_push_step(w);
	pthread_rwlock_unlock(&w->clock_rw);
	if (w->ctl) {
		counters[0] = atomic_load(&w->stat_pushes);
		counters[1] = atomic_load(&w->stat_pulls);
		counters[2] = atomic_load(&w->stat_bytes_out);
		counters[3] = atomic_load(&w->stat_bytes_in);
		rps_ctl_set_heartbeat(w->ctl, c + 1, counters);
	}
	if (RPS_FAULT_SHOULD_KILL("worker", (int)w->rank, c + 1)) {
		char why[64];

		snprintf(why, sizeof(why), "worker %u reached clock %u (kill_at_clock)", w->rank,
			 c + 1);
		rps_fault_kill(why);
	}
	if (new_clock_p)
		*new_clock_p = c + 1;
	return first;
}

int rps_worker_clock(struct rps_worker *w)
{
	int rc;

	if (!w)
		return -EINVAL;
	rc = rps_wready(w);
	if (rc)
		return rc;
	RPS_FAULT_SLOW_DOWN("worker", (int)w->rank); /* slow_rank: a straggler, for tests */
	return rps_wclock_send(w, NULL);
}

/* ---- public push ---- */

int rps_wpush_post(struct rps_worker *w, const rps_key_t *keys, const float *grads,
		   const size_t *lens, size_t n, rps_done_cb cb, void *arg,
		   struct rps_req **req_p)
{
	struct rps_req *req;
	int rc = push_begin(w, keys, n);

	if (rc)
		return rc;
	req = rps_wreq_new(&w->core, cb, arg);
	if (!req) {
		pthread_rwlock_unlock(&w->clock_rw);
		return -ENOMEM;
	}
	rps_wsubmit_enter(w);
	(void)push_submit(w, req, keys, grads, lens, n, 0); /* a failure fails req */
	rps_wsubmit_leave(w);
	pthread_rwlock_unlock(&w->clock_rw);
	*req_p = req;
	return 0;
}

int rps_wassign_post(struct rps_worker *w, const rps_key_t *keys, const float *vals,
		     const size_t *lens, size_t n, struct rps_req **req_p)
{
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);

	if (!req)
		return -ENOMEM;
	/* no clock wait: an assignment belongs to no clock; the read side only
	 * keeps the clock stable while the pieces are built */
	pthread_rwlock_rdlock(&w->clock_rw);
	rps_wsubmit_enter(w);
	(void)push_submit(w, req, keys, vals, lens, n, 1); /* a failure fails req */
	rps_wsubmit_leave(w);
	pthread_rwlock_unlock(&w->clock_rw);
	*req_p = req;
	return 0;
}

static int push_common(struct rps_worker *w, const rps_key_t *keys, const float *grads,
		       const size_t *lens, size_t n, rps_done_cb cb, void *arg,
		       struct rps_req **req_p)
{
	struct rps_req *req;
	int rc;

	if (!w || (!cb && !req_p))
		return -EINVAL;
	rc = rps_keytab_check(&w->keys, keys, lens, n, grads, NULL);
	if (rc)
		return rc;
	rc = rps_wready(w);
	if (rc)
		return rc;
	rc = rps_wpush_post(w, keys, grads, lens, n, cb, arg, &req);
	if (rc)
		return rc;
	if (req_p)
		*req_p = req;
	rps_wreq_seal(req);
	return 0;
}

int rps_worker_push(struct rps_worker *w, const rps_key_t *keys, const float *grads,
		    const size_t *lens, size_t n, struct rps_req **req_p)
{
	return push_common(w, keys, grads, lens, n, NULL, NULL, req_p);
}

int rps_worker_push_cb(struct rps_worker *w, const rps_key_t *keys, const float *grads,
		       const size_t *lens, size_t n, rps_done_cb cb, void *arg)
{
	if (!cb)
		return -EINVAL;
	return push_common(w, keys, grads, lens, n, cb, arg, NULL);
}
