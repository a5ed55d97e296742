/* The frame strategy (struct rps_wpull_ops rps_wpull_frame): a pull is
 * PULL frames, each answered by the server with a snapshot of the slice's
 * elements, received straight into the caller's buffer (recv_dest) where the
 * transport can. Any transport. */
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
	struct rps_wreg *reg;
	float *base = vals;
	size_t total = 0;
	int nb = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		total += lens[i];
	/* only counted: frames land in any memory safely */
	reg = rps_wreg_get(w, vals, total * sizeof(float));
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
				p->u.pull.reg = reg;
				if (reg)
					rps_wreg_hold(reg);
				batch[nb++] = p;
			}
		}
	}
	if (rc)
		rps_wreq_fail_locked(req, rc);
	pthread_mutex_unlock(&w->core.lock);
	rps_wreg_put(reg);
	pull_flush(w, batch, nb);
	return rc;
}

static int frame_clock_wait(struct rps_worker *w, struct rps_req *req, rps_key_t key,
			    uint32_t slice, uint32_t server, uint32_t shard, uint32_t c)
{
	struct rps_wshard *sh = rps_wshard_get(w, server, shard);
	struct rps_piece *p;

	pthread_mutex_lock(&w->core.lock);
	p = rps_piece_alloc_locked(&w->core, req, RPS_PK_PULL, RPS_PW_RESP);
	if (!p) {
		rps_wreq_fail_locked(req, -ENOMEM);
		pthread_mutex_unlock(&w->core.lock);
		return -ENOMEM;
	}
	p->conn = sh->conn;
	p->server = server;
	p->shard = shard;
	memset(&p->u.pull.fixed, 0, sizeof(p->u.pull.fixed));
	p->u.pull.fixed.key = key;
	p->u.pull.fixed.slice = slice;
	p->u.pull.fixed.shard = shard;
	p->u.pull.fixed.min_clock = c;
	p->u.pull.dest = NULL;
	p->u.pull.receiving = 0;
	p->u.pull.reg = NULL;
	pthread_mutex_unlock(&w->core.lock);
	rps_wpost_piece(w, p);
	return 0;
}

/* Every shard's clock of server (UINT32_MAX: all) as of now into
 * clock_seen: count-0 PULLs, min_clock 0, answered at once. */
static int frame_read_clocks(struct rps_worker *w, uint32_t server)
{
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);

	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	for (uint32_t i = 0; i < w->num_servers; i++) {
		for (uint32_t j = 0;
		     (server == UINT32_MAX || server == i) && j < w->servers[i].nshards; j++) {
			struct rps_piece *p;

			pthread_mutex_lock(&w->core.lock);
			p = rps_piece_alloc_locked(&w->core, req, RPS_PK_PULL, RPS_PW_RESP);
			if (!p) {
				rps_wreq_fail_locked(req, -ENOMEM);
				pthread_mutex_unlock(&w->core.lock);
				break;
			}
			p->conn = w->servers[i].shards[j].conn;
			p->server = i;
			p->shard = j;
			memset(&p->u.pull.fixed, 0, sizeof(p->u.pull.fixed));
			p->u.pull.fixed.shard = j; /* count 0, min_clock 0: answered at once */
			p->u.pull.dest = NULL;
			p->u.pull.receiving = 0;
			p->u.pull.reg = NULL;
			pthread_mutex_unlock(&w->core.lock);
			rps_wpost_piece(w, p);
		}
	}
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	return rps_wreq_wait_internal(req, w->timeout_ms);
}

static int frame_init(struct rps_worker *w)
{
	(void)w;
	return 0;
}

static void frame_fini(struct rps_worker *w)
{
	(void)w;
}

/* Frames need nothing of a server's stores. */
static int frame_attach(struct rps_worker *w, uint32_t server)
{
	(void)w;
	(void)server;
	return 0;
}

static void frame_read_done(struct rps_worker *w, const struct rps_tr_event *ev)
{
	(void)w;
	(void)ev;
}

static int frame_timers(struct rps_worker *w)
{
	(void)w;
	return -1;
}

static void frame_piece_fini_locked(struct rps_worker *w, struct rps_piece *p)
{
	(void)w;
	if (p->kind == RPS_PK_PULL && p->u.pull.reg) {
		rps_wreg_put(p->u.pull.reg);
		p->u.pull.reg = NULL;
	}
}

const struct rps_wpull_ops rps_wpull_frame = {
    .name = "frame",
    .init = frame_init,
    .fini = frame_fini,
    .pull1 = NULL,
    .submit = pull_frames,
    .clock_wait = frame_clock_wait,
    .read_clocks = frame_read_clocks,
    .attach = frame_attach,
    .read_done = frame_read_done,
    .timers = frame_timers,
    .piece_fini_locked = frame_piece_fini_locked,
};
