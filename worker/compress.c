/* Compressed pushes on the worker: rps_worker_set_compression, the encoding
 * of one key's push frame by frame (src/codec.h), per-key wire counters. */
#include "worker/compress.h"

#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/codec.h"
#include "src/log.h"
#include "worker/worker_int.h"

#define ALIGN8(x) (((x) + 7u) & ~(size_t)7u)

int rps_worker_set_compression(struct rps_worker *w, const rps_key_t *keys, size_t n,
			       const struct rps_compress_opts *opts)
{
	struct rps_wcomp **made;
	int rc = 0;

	if (!w || !keys || !n || !opts) {
		RPS_ERR("set_compression: %s", !w ? "NULL worker" : !opts ? "NULL options"
							: "no keys");
		return -EINVAL;
	}
	rc = rps_compress_opts_validate(opts);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (!rps_keytab_find(&w->keys, keys[i])) {
			RPS_ERR("set_compression: key %llu was not declared through this worker "
				"(declare it first); nothing changed",
				(unsigned long long)keys[i]);
			return -ENOENT;
		}
	}
	made = rps_calloc(n, sizeof(*made));
	if (!made)
		return -ENOMEM;
	/* everything allocated and kept first: then publishing cannot fail */
	for (size_t i = 0; i < n && !rc; i++) {
		const struct rps_wkey *k = rps_keytab_find(&w->keys, keys[i]);
		size_t rbytes = opts->kind != RPS_CODEC_NONE && opts->error_feedback
					? (size_t)k->nelems * sizeof(float)
					: 0;
		size_t vbytes = rbytes && opts->momentum != 0.0f ? rbytes : 0;
		struct rps_wcomp *c = rps_calloc(1, sizeof(*c) + rbytes + vbytes);

		if (!c || rps_worker_keep(w, c)) {
			rps_free(c);
			rc = -ENOMEM;
			break;
		}
		c->o = *opts;
		pthread_mutex_init(&c->lock, NULL);
		/* a different draw per worker and key, the same on every run */
		c->rng = opts->seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)w->rank << 32) ^ k->key;
		c->rng = c->rng ? c->rng : 1;
		c->residual = rbytes ? (float *)(c + 1) : NULL;
		c->velocity = vbytes ? c->residual + k->nelems : NULL;
		made[i] = c;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		struct rps_wkey *k = (struct rps_wkey *)rps_keytab_find(&w->keys, keys[i]);

		/* the replaced state stays in the grave (a push may still use it) */
		atomic_store_explicit(&k->comp, opts->kind == RPS_CODEC_NONE ? NULL : made[i],
				      memory_order_release);
	}
	rps_free(made); /* the states themselves are in the grave */
	if (rc)
		RPS_ERR("set_compression: out of memory; nothing changed");
	return rc;
}

/* The key's frames, in push order: fn(arg, element offset in the key, count). */
static uint64_t key_frames(struct rps_worker *w, const struct rps_wkey *k,
			   int (*fn)(void *, uint64_t, uint64_t), void *arg)
{
	uint64_t maxcnt = 0;

	for (uint32_t s = 0; s < k->nslices; s++) {
		const struct rps_wslice *sl = &k->slices[s];
		const struct rps_wserver *srv = &w->servers[sl->server];
		uint64_t nfr = rps_wplan_nframes(sl->nelems, srv->push_elems);

		for (uint64_t f = 0; f < nfr; f++) {
			uint64_t off, cnt;

			rps_wplan_frame(sl->nelems, srv->push_elems, f, &off, &cnt);
			if (cnt > maxcnt)
				maxcnt = cnt;
			if (fn)
				fn(arg, sl->offset + off, cnt);
		}
	}
	return maxcnt;
}

struct enc_ctx {
	struct rps_wcomp *c;
	float ratio; /* this push's */
	struct rps_cblob *b;
	const float *g;
	float *scratch;
	size_t size;
};

static int add_size(void *arg, uint64_t off, uint64_t cnt)
{
	struct enc_ctx *x = arg;

	(void)off;
	x->size += ALIGN8(rps_codec_bytes_blk(x->c->o.kind, cnt, x->ratio, x->c->o.block));
	return 0;
}

static int enc_frame(void *arg, uint64_t off, uint64_t cnt)
{
	struct enc_ctx *x = arg;
	struct rps_codec_enc e = {
	    .kind = x->c->o.kind,
	    .ratio = x->ratio,
	    .residual = x->c->residual ? x->c->residual + off : NULL,
	    .scratch = x->scratch,
	    .rng = &x->c->rng,
	    .block = x->c->o.block,
	    .momentum = x->c->o.momentum,
	    .velocity = x->c->velocity ? x->c->velocity + off : NULL,
	};
	size_t n = rps_codec_encode(&e, x->g + off, cnt, x->b->data + x->b->cur);

	x->b->cur += ALIGN8(n);
	return 0;
}

int rps_wcomp_encode(struct rps_worker *w, const struct rps_wkey *k, const float *g,
		     struct rps_cblob **blob_p)
{
	struct rps_wcomp *c = atomic_load_explicit(&((struct rps_wkey *)k)->comp,
						   memory_order_acquire);
	struct enc_ctx x = {.c = c, .g = g};
	uint64_t maxcnt;

	*blob_p = NULL;
	if (!c)
		return 0;
	/* one encoder at a time: the residual, and the push count of the
	 * warm-up that fixes this push's ratio and so its size */
	pthread_mutex_lock(&c->lock);
	x.ratio = rps_codec_step_ratio(&c->o, c->pushes);
	maxcnt = key_frames(w, k, add_size, &x);
	x.b = rps_malloc(sizeof(*x.b) + x.size);
	if (!x.b) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	atomic_init(&x.b->refs, 1);
	x.b->codec = c->o.kind;
	x.b->ratio = x.ratio;
	x.b->block = c->o.block;
	x.b->size = x.size;
	x.b->cur = 0;
	if (c->o.kind == RPS_CODEC_TOPK) {
		/* the selection's magnitudes: one frame's worth */
		x.scratch = rps_malloc((size_t)(maxcnt ? maxcnt : 1) * sizeof(float));
		if (!x.scratch) {
			pthread_mutex_unlock(&c->lock);
			rps_free(x.b);
			return -ENOMEM;
		}
	}
	key_frames(w, k, enc_frame, &x);
	c->pushes++;
	pthread_mutex_unlock(&c->lock);
	rps_free(x.scratch);
	x.b->cur = 0; /* now the read cursor of rps_cblob_next */
	*blob_p = x.b;
	return 0;
}

int rps_cblob_next(struct rps_cblob *b, uint64_t cnt, const void **data_p, uint32_t *len_p)
{
	size_t n = rps_codec_bytes_blk(b->codec, cnt, b->ratio, b->block);

	if (b->cur + n > b->size)
		return -EIO;
	*data_p = b->data + b->cur;
	*len_p = (uint32_t)n;
	b->cur += ALIGN8(n);
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
	return 0;
}

void rps_cblob_put(struct rps_cblob *b)
{
	if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
		rps_free(b);
}

int rps_worker_key_wire_stats(const struct rps_worker *w, rps_key_t key,
			      struct rps_key_wire_stats *st)
{
	struct rps_wkey *k;

	if (!w || !st)
		return -EINVAL;
	k = (struct rps_wkey *)rps_keytab_find(&w->keys, key);
	if (!k)
		return -ENOENT;
	st->pushes = atomic_load_explicit(&k->wire_pushes, memory_order_relaxed);
	st->raw_bytes = atomic_load_explicit(&k->wire_raw, memory_order_relaxed);
	st->data_bytes = atomic_load_explicit(&k->wire_data, memory_order_relaxed);
	st->wire_bytes = atomic_load_explicit(&k->wire_bytes, memory_order_relaxed);
	return 0;
}

void rps_wstat_push_wire(struct rps_worker *w, const struct rps_piece *p)
{
	uint64_t raw = (uint64_t)p->u.push.fixed.count * sizeof(float);
	uint64_t data = p->u.push.codec ? p->u.push.clen : raw;
	uint64_t wire = sizeof(struct rps_frame_hdr) + sizeof(struct rps_push) + data;
	struct rps_wkey *k = p->u.push.wkey;

	atomic_fetch_add_explicit(&w->stat_bytes_out, data, memory_order_relaxed);
	atomic_fetch_add_explicit(&w->stat_push_raw, raw, memory_order_relaxed);
	atomic_fetch_add_explicit(&w->stat_push_wire, wire, memory_order_relaxed);
	if (k) {
		atomic_fetch_add_explicit(&k->wire_pushes, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&k->wire_raw, raw, memory_order_relaxed);
		atomic_fetch_add_explicit(&k->wire_data, data, memory_order_relaxed);
		atomic_fetch_add_explicit(&k->wire_bytes, wire, memory_order_relaxed);
	}
}

void rps_wstat_push_step(struct rps_worker *w)
{
	uint64_t now = atomic_load_explicit(&w->stat_push_wire, memory_order_relaxed);
	uint64_t mark = atomic_exchange_explicit(&w->stat_step_mark, now, memory_order_relaxed);

	atomic_store_explicit(&w->stat_last_step, now - mark, memory_order_relaxed);
}
