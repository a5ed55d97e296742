/* Low-precision pulls on the worker (worker/lowprec.h): the public calls,
 * the DECLARE of a key's copy, and the copy's geometry. */
#include "worker/lowprec.h"

#include <errno.h>
#include <string.h>

#include <rdmaps/pullprec.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/rowprec.h"
#include "src/store.h"

#define PIECE_BATCH 64

int rps_pull_precision_parse(const char *name, enum rps_pull_precision *prec_p)
{
	static const char *const names[] = {"fp32", "fp16", "bf16"};

	if (!name || !prec_p) {
		RPS_ERR("pull precision: no name given (fp32, fp16 or bf16)");
		return -EINVAL;
	}
	for (unsigned i = 0; i < 3; i++) {
		if (!strcmp(name, names[i])) {
			*prec_p = (enum rps_pull_precision)i;
			return 0;
		}
	}
	RPS_ERR("pull precision '%.64s' unknown: use fp32 (the default), fp16 or bf16", name);
	return -EINVAL;
}

const char *rps_pull_precision_name(enum rps_pull_precision prec)
{
	switch (prec) {
	case RPS_PULL_FP32:
		return "fp32";
	case RPS_PULL_FP16:
		return "fp16";
	case RPS_PULL_BF16:
		return "bf16";
	}
	return "?";
}

enum rps_pull_precision rps_worker_pull_precision(const struct rps_worker *w, rps_key_t key)
{
	const struct rps_wkey *k = w ? rps_keytab_find(&w->keys, key) : NULL;

	return k ? (enum rps_pull_precision)atomic_load(&k->pull_prec) : RPS_PULL_FP32;
}

void rps_wlp_widen(uint32_t prec, const void *in, float *out, uint64_t n)
{
	rps_row_widen(prec, in, out, (size_t)n); /* src/rowprec.c: the codecs' converters */
}

int rps_wlp_copy_slice(const struct rps_wslice *sl, struct rps_wslice *out)
{
	if (!sl->lp_prec || !sl->lp_chunk_bytes)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	out->server = sl->server;
	out->shard = sl->shard;
	out->offset = sl->offset;
	out->nelems = (sl->nelems + 1) / 2;
	out->store_off = sl->lp_store_off;
	out->chunk_bytes = sl->lp_chunk_bytes;
	out->line = sl->lp_line;
	out->last_bytes = sl->lp_last_bytes;
	out->lp_prec = sl->lp_prec;
	out->lp_nelems = sl->nelems;
	return 0;
}

int rps_wlp_ack(const struct rps_wconn *wc, const struct rps_declare_ack *a, const void *data,
		size_t len, uint32_t want_prec, struct rps_wslice *sl)
{
	struct rps_declare_lp d;
	uint64_t words = (a->nelems + 1) / 2;
	uint32_t cb, line;

	if (!data || len != sizeof(d)) {
		RPS_ERR("server %u: declare ack of key %llu slice %u: low-precision copy of %zu "
			"bytes, not %zu",
			wc->srv->rank, (unsigned long long)a->key, a->slice, len, sizeof(d));
		return -EPROTO;
	}
	memcpy(&d, data, sizeof(d));
	cb = d.aux & RPS_DECLARE_ACK_BYTES;
	line = d.aux & RPS_DECLARE_ACK_COMPACT ? RPS_STORE_WORD : RPS_STORE_LINE;
	if (d.prec != want_prec || !cb || cb % line || cb > wc->srv->chunk_bytes ||
	    (line == RPS_STORE_WORD && words > cb / sizeof(float)) || d.offset < line) {
		RPS_ERR("server %u: declare ack of key %llu slice %u: low-precision copy "
			"(precision %u, asked %u, geometry %#x at %llu) does not fit a store of "
			"%u-byte chunks",
			wc->srv->rank, (unsigned long long)a->key, a->slice, d.prec, want_prec, d.aux,
			(unsigned long long)d.offset, wc->srv->chunk_bytes);
		return -EPROTO;
	}
	sl->lp_chunk_bytes = cb;
	sl->lp_line = line;
	sl->lp_last_bytes = rps_store_geom_last(cb, line, words);
	sl->lp_store_off = d.offset;
	sl->lp_prec = d.prec;
	return 0;
}

/* DECLAREs of every slice of known[i] with the pull precision prec (the
 * acks write each slice's copy into it), and wait for every answer. */
static int declare_copies(struct rps_worker *w, struct rps_wkey **known, size_t n, uint32_t prec)
{
	struct rps_piece *batch[PIECE_BATCH];
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);
	int nb = 0;

	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	pthread_mutex_lock(&w->core.lock);
	for (size_t i = 0; i < n; i++) {
		struct rps_wkey *k = known[i];

		for (uint32_t s = 0; k && s < k->nslices; s++) {
			struct rps_wslice *sl = &k->slices[s];
			const struct rps_init *init = &k->init;
			struct rps_piece *p;

			if (nb == PIECE_BATCH) {
				pthread_mutex_unlock(&w->core.lock);
				for (int j = 0; j < nb; j++)
					rps_wpost_piece(w, batch[j]);
				nb = 0;
				pthread_mutex_lock(&w->core.lock);
			}
			p = rps_piece_alloc_locked(&w->core, req, RPS_PK_DECLARE, RPS_PW_RESP);
			if (!p) {
				rps_wreq_fail_locked(req, -ENOMEM);
				goto out;
			}
			p->conn = rps_wshard_get(w, sl->server, sl->shard)->conn;
			p->server = sl->server;
			p->shard = sl->shard;
			memset(&p->u.decl.fixed, 0, sizeof(p->u.decl.fixed));
			p->u.decl.fixed.key = k->key;
			p->u.decl.fixed.slice = s;
			p->u.decl.fixed.shard = sl->shard;
			p->u.decl.fixed.nelems = sl->nelems;
			p->u.decl.fixed.init_kind = (uint32_t)init->kind;
			p->u.decl.fixed.init_a = init->a;
			p->u.decl.fixed.init_b = init->b;
			p->u.decl.fixed.seed = init->seed;
			p->u.decl.fixed.reserved = prec; /* RPS_DECLARE_FLAG_LOWPREC */
			p->u.decl.optim = atomic_load(&k->optim);
			p->u.decl.out = sl;
			batch[nb++] = p;
		}
	}
out:
	pthread_mutex_unlock(&w->core.lock);
	for (int j = 0; j < nb; j++)
		rps_wpost_piece(w, batch[j]);
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	return rps_wreq_wait_internal(req, w->timeout_ms);
}

int rps_worker_set_pull_precision(struct rps_worker *w, const rps_key_t *keys, size_t n,
				  enum rps_pull_precision prec)
{
	struct rps_wkey **known;
	int rc = 0;

	if (!w || (n && !keys))
		return -EINVAL;
	if ((unsigned)prec > RPS_PULL_BF16) {
		RPS_ERR("set_pull_precision: precision %d unknown (RPS_PULL_FP32, _FP16, _BF16)",
			(int)prec);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!rps_keytab_find(&w->keys, keys[i])) {
			RPS_ERR("set_pull_precision: key %llu was not declared through this worker",
				(unsigned long long)keys[i]);
			return -ENOENT;
		}
	}
	if (!n)
		return 0;
	known = rps_calloc(n, sizeof(*known));
	if (!known)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		/* entries are never freed: safe to update in place */
		struct rps_wkey *k = (struct rps_wkey *)rps_keytab_find(&w->keys, keys[i]);
		int dup = 0;

		for (size_t j = 0; j < i && !dup; j++)
			dup = known[j] == k;
		if (!dup && atomic_load(&k->pull_prec) != (uint32_t)prec)
			known[i] = k;
	}
	if (prec != RPS_PULL_FP32) {
		rc = rps_wready(w);
		for (int tries = 0; !rc; tries++) {
			int r;

			rc = declare_copies(w, known, n, (uint32_t)prec);
			if (!rc || tries == RPS_WRETRY_TRIES - 1)
				break;
			r = rps_wretry_lost(w, rc); /* idempotent: reconnect, again */
			if (r) {
				rc = r;
				break;
			}
		}
	}
	for (size_t i = 0; !rc && i < n; i++)
		if (known[i])
			atomic_store(&known[i]->pull_prec, (uint32_t)prec);
	rps_free(known);
	return rc;
}
