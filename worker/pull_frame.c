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

/* A PULL piece of shard (server, shard) for elements [off, off + count) of
 * key's slice, into dest (NULL: none, count 0); reg: dest's registration,
 * held by the piece. */
static inline void pull_piece_set(struct rps_worker *w, struct rps_piece *p, uint32_t server,
				  uint32_t shard, rps_key_t key, uint32_t slice, uint64_t off,
				  uint64_t count, uint32_t min_clock, float *dest,
				  struct rps_wreg *reg)
{
	p->conn = w->servers[server].shards[shard].conn;
	p->server = server;
	p->shard = shard;
	memset(&p->u.pull.fixed, 0, sizeof(p->u.pull.fixed));
	p->u.pull.fixed.key = key;
	p->u.pull.fixed.slice = slice;
	p->u.pull.fixed.shard = shard;
	p->u.pull.fixed.offset = off;
	p->u.pull.fixed.count = (uint32_t)count;
	p->u.pull.fixed.min_clock = min_clock;
	p->u.pull.dest = dest;
	p->u.pull.receiving = 0;
	p->u.pull.lp = 0;
	p->u.pull.reg = reg;
	if (reg)
		rps_wreg_hold(reg);
}

static int pull_frames(struct rps_worker *w, struct rps_req *req, const rps_key_t *keys,
		       float *vals, const size_t *lens, size_t n, uint32_t min_clock)
{
	struct rps_piece *batch[PIECE_BATCH];
	const struct rps_wslice *sl;
	struct rps_wslices it;
	struct rps_wreg *reg;
	int nb = 0;
	int rc = 0;

	/* only counted: frames land in any memory safely */
	reg = rps_wreg_get(w, vals, rps_wbatch_elems(lens, n) * sizeof(float));
	rps_wslices_init(&it, &w->keys, keys, lens, n);
	pthread_mutex_lock(&w->core.lock);
	while (!rc && (rc = rps_wslices_next(&it, &sl)) > 0) {
		struct rps_wserver *srv = &w->servers[sl->server];
		uint64_t nfr = rps_wplan_nframes(sl->nelems, srv->pull_elems);

		rc = 0;
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
			pull_piece_set(w, p, sl->server, sl->shard, it.k->key, it.s - 1, off, cnt,
				       min_clock, vals + it.base + sl->offset + off, reg);
			/* a low-precision pull (worker/lowprec.h) */
			p->u.pull.lp = (uint8_t)atomic_load(&it.k->pull_prec);
			batch[nb++] = p;
		}
	}
	if (rc)
		rps_wreq_fail_locked(req, rc);
	pthread_mutex_unlock(&w->core.lock);
	rps_wreg_put(reg);
	pull_flush(w, batch, nb);
	return rc;
}

/* A count-0 PULL of key's slice on (server, shard), answered when the shard
 * reaches clock c (key 0, c 0: at once, with the shard's clock). 0, or
 * -ENOMEM with req failed. */
static int frame_clock_wait(struct rps_worker *w, struct rps_req *req, rps_key_t key,
			    uint32_t slice, uint32_t server, uint32_t shard, uint32_t c)
{
	struct rps_piece *p;

	pthread_mutex_lock(&w->core.lock);
	p = rps_piece_alloc_locked(&w->core, req, RPS_PK_PULL, RPS_PW_RESP);
	if (!p) {
		rps_wreq_fail_locked(req, -ENOMEM);
		pthread_mutex_unlock(&w->core.lock);
		return -ENOMEM;
	}
	pull_piece_set(w, p, server, shard, key, slice, 0, 0, c, NULL, NULL);
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
		     (server == UINT32_MAX || server == i) && j < w->servers[i].nshards; j++)
			if (frame_clock_wait(w, req, 0, 0, i, j, 0))
				break;
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
