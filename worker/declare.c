/* Declare: create keys' slices on their shards, learn where they live. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/optim.h"
#include "worker/worker_int.h"

#define PIECE_BATCH 64

struct decl_item {
	rps_key_t key;
	size_t len;
	size_t idx;
};

static int item_cmp(const void *a, const void *b)
{
	const struct decl_item *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Entries of keys to create: NULL where the key is known already or repeats
 * an earlier one of the call; known[i] is the entry of a known key whose
 * optimizer is to become spec (NULL: none to change). -EEXIST where the
 * lengths disagree. */
static int plan_entries(struct rps_worker *w, const rps_key_t *keys, const size_t *lens, size_t n,
			const struct rps_optim_opts *spec, struct rps_wkey **ents,
			struct rps_wkey **known)
{
	struct decl_item *it = rps_malloc(n * sizeof(*it));
	int rc = 0;

	if (!it)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		it[i].key = keys[i];
		it[i].len = lens[i];
		it[i].idx = i;
	}
	qsort(it, n, sizeof(*it), item_cmp);
	for (size_t i = 0; i < n && !rc; i++) {
		const struct rps_wkey *old;

		if (i && it[i].key == it[i - 1].key) {
			if (it[i].len != it[i - 1].len) {
				RPS_ERR("declare: key %llu given twice, with %zu and %zu elements",
					(unsigned long long)it[i].key, it[i - 1].len, it[i].len);
				rc = -EEXIST;
			}
			continue;
		}
		old = rps_keytab_find(&w->keys, it[i].key);
		if (old) {
			if (old->nelems != it[i].len) {
				RPS_ERR("declare: key %llu exists with %llu elements, not %zu",
					(unsigned long long)it[i].key,
					(unsigned long long)old->nelems, it[i].len);
				rc = -EEXIST;
			} else if (spec && atomic_load(&old->optim) != spec) {
				/* entries are never freed: safe to update in place */
				known[it[i].idx] = (struct rps_wkey *)old;
			}
			continue;
		}
		ents[it[i].idx] = rps_wkey_new(&w->km, it[i].key, it[i].len);
		if (!ents[it[i].idx])
			rc = -ENOMEM;
	}
	rps_free(it);
	return rc;
}

static void free_entries(struct rps_wkey **ents, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rps_free(ents[i]);
	rps_free(ents);
}

/* A DECLARE piece for slice s of k, with init (NULL: the server's) and the
 * optimizer spec (NULL: none). */
static void decl_piece_set(struct rps_worker *w, struct rps_piece *p, const struct rps_wkey *k,
			   uint32_t s, const struct rps_init *init,
			   const struct rps_optim_opts *spec)
{
	const struct rps_wslice *sl = &k->slices[s];

	p->conn = rps_wshard_get(w, sl->server, sl->shard)->conn;
	p->server = sl->server;
	p->shard = sl->shard;
	memset(&p->u.decl.fixed, 0, sizeof(p->u.decl.fixed));
	p->u.decl.fixed.key = k->key;
	p->u.decl.fixed.slice = s;
	p->u.decl.fixed.shard = sl->shard;
	p->u.decl.fixed.nelems = sl->nelems;
	p->u.decl.fixed.init_kind = init ? (uint32_t)init->kind : RPS_INIT_DEFAULT;
	p->u.decl.optim = spec;
	/* its pull precision (worker/lowprec.h): the copy again on a restarted server */
	p->u.decl.fixed.reserved = atomic_load(&k->pull_prec);
	if (init) {
		p->u.decl.fixed.init_a = init->a;
		p->u.decl.fixed.init_b = init->b;
		p->u.decl.fixed.seed = init->seed;
	}
}

static void decl_flush(struct rps_worker *w, struct rps_piece **batch, int nb)
{
	for (int i = 0; i < nb; i++)
		rps_wpost_piece(w, batch[i]);
}

/* DECLAREs of every slice of ents[i] (new keys: init; out = the slice, which
 * the ack fills) and of known[i] (keys declared before: their own init, out
 * NULL: their place is known), each with spec. */
static void send_declares(struct rps_worker *w, struct rps_req *req, struct rps_wkey **ents,
			  struct rps_wkey **known, size_t n, const struct rps_init *init,
			  const struct rps_optim_opts *spec)
{
	struct rps_piece *batch[PIECE_BATCH];
	int nb = 0;

	pthread_mutex_lock(&w->core.lock);
	for (size_t i = 0; i < 2 * n; i++) {
		struct rps_wkey *k = i < n ? (ents ? ents[i] : NULL) : known ? known[i - n] : NULL;

		for (uint32_t s = 0; k && s < k->nslices; s++) {
			struct rps_wslice *sl = &k->slices[s];
			struct rps_piece *p;

			if (nb == PIECE_BATCH) {
				pthread_mutex_unlock(&w->core.lock);
				decl_flush(w, batch, nb);
				nb = 0;
				pthread_mutex_lock(&w->core.lock);
			}
			p = rps_piece_alloc_locked(&w->core, req, RPS_PK_DECLARE, RPS_PW_RESP);
			if (!p) {
				rps_wreq_fail_locked(req, -ENOMEM);
				goto out;
			}
			decl_piece_set(w, p, k, s, i < n ? init : &k->init, spec);
			p->u.decl.out = i < n ? sl : NULL;
			batch[nb++] = p;
		}
	}
out:
	pthread_mutex_unlock(&w->core.lock);
	decl_flush(w, batch, nb);
}

/* Send the DECLAREs of ents / known and wait for every answer. On -ETIMEDOUT
 * the new entries are kept alive (late acks write into them) and taken out
 * of ents. */
static int declare_wait(struct rps_worker *w, struct rps_wkey **ents, struct rps_wkey **known,
			size_t n, const struct rps_init *init, const struct rps_optim_opts *spec)
{
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);
	int rc;

	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	send_declares(w, req, ents, known, n, init, spec);
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	rc = rps_wreq_wait_internal(req, w->timeout_ms);
	if (rc == -ETIMEDOUT) {
		RPS_ERR("declare: no answer from the servers within %d ms", w->timeout_ms);
		for (size_t i = 0; ents && i < n; i++) {
			/* on -ENOMEM: leaked, never freed early */
			if (ents[i])
				rps_worker_keep(w, ents[i]);
			ents[i] = NULL;
		}
	}
	return rc;
}

/* The worker's copy of optim (checked), NULL for none: 0 or -EINVAL / -ENOMEM. */
static int spec_of(struct rps_worker *w, const struct rps_optim_opts *optim,
		   const struct rps_optim_opts **spec_p)
{
	*spec_p = NULL;
	if (!optim)
		return 0;
	if (rps_optim_opts_check(optim)) /* logged */
		return -EINVAL;
	*spec_p = rps_keytab_spec(&w->keys, optim);
	return *spec_p ? 0 : -ENOMEM;
}

int rps_worker_declare(struct rps_worker *w, const rps_key_t *keys, const size_t *lens, size_t n,
		       const struct rps_init *init)
{
	return rps_worker_declare_opt(w, keys, lens, n, init, NULL);
}

int rps_worker_declare_opt(struct rps_worker *w, const rps_key_t *keys, const size_t *lens,
			   size_t n, const struct rps_init *init,
			   const struct rps_optim_opts *optim)
{
	const struct rps_optim_opts *spec;
	struct rps_wkey **ents, **known = NULL;
	size_t todo = 0;
	int rc;

	if (!w)
		return -EINVAL;
	if (!n)
		return 0;
	if (!keys || !lens)
		return -EINVAL;
	if (init && (init->kind < RPS_INIT_DEFAULT || init->kind > RPS_INIT_PUSH))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!lens[i])
			return -EINVAL;
	rc = spec_of(w, optim, &spec);
	if (rc)
		return rc;
	rc = rps_wready(w);
	if (rc)
		return rc;
	ents = rps_calloc(n, sizeof(*ents));
	if (spec)
		known = rps_calloc(n, sizeof(*known));
	if (!ents || (spec && !known)) {
		rc = -ENOMEM;
		goto out_free;
	}
	rc = plan_entries(w, keys, lens, n, spec, ents, known);
	if (rc)
		goto out_free;
	for (size_t i = 0; i < n; i++) {
		if (!ents[i])
			continue;
		if (init)
			ents[i]->init = *init;
		else
			ents[i]->init.kind = RPS_INIT_DEFAULT; /* remembered for a re-declare */
		atomic_store(&ents[i]->optim, spec);
	}
	for (size_t i = 0; i < n; i++)
		todo += ents[i] != NULL || (known && known[i] != NULL);
	if (!todo)
		goto out_free;

	for (int tries = 0;; tries++) {
		int r;

		rc = declare_wait(w, ents, known, n, init, spec);
		/* a server connection lost meanwhile (an idle timeout while this
		 * process was stopped, a restarted server): DECLARE is idempotent,
		 * so reconnect and send it again, as a push or pull would be */
		if (!rc || tries == RPS_WRETRY_TRIES - 1)
			break;
		r = rps_wretry_lost(w, rc);
		if (r) {
			rc = r;
			break;
		}
		RPS_WARN("declare: %s; reconnected, declaring again (%d of %d)",
			 rps_strerror(rc), tries + 2, RPS_WRETRY_TRIES);
	}
	if (rc)
		goto out_free;
	for (size_t i = 0; known && i < n; i++)
		if (known[i])
			atomic_store(&known[i]->optim, spec);
	for (size_t i = 0; i < n; i++) {
		const struct rps_wkey *old = NULL;
		int r;

		if (!ents[i])
			continue;
		r = rps_keytab_insert(&w->keys, ents[i], &old);
		if (r == -EEXIST && old->nelems == ents[i]->nelems) {
			rps_free(ents[i]); /* another thread declared it meanwhile */
		} else if (r) {
			rps_free(ents[i]);
			if (!rc)
				rc = r;
		}
		ents[i] = NULL;
	}
out_free:
	rps_free(known);
	if (ents)
		free_entries(ents, n);
	return rc;
}

int rps_worker_set_optimizer(struct rps_worker *w, const rps_key_t *keys, size_t n,
			     const struct rps_optim_opts *optim)
{
	const struct rps_optim_opts *spec;
	struct rps_wkey **known;
	size_t todo = 0;
	int rc;

	if (!w || !optim || (n && !keys))
		return -EINVAL;
	rc = spec_of(w, optim, &spec);
	if (rc || !n)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (!rps_keytab_find(&w->keys, keys[i])) {
			RPS_ERR("set_optimizer: key %llu was not declared through this worker",
				(unsigned long long)keys[i]);
			return -ENOENT;
		}
	}
	rc = rps_wready(w);
	if (rc)
		return rc;
	known = rps_calloc(n, sizeof(*known));
	if (!known)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct rps_wkey *k = (struct rps_wkey *)rps_keytab_find(&w->keys, keys[i]);
		int dup = 0;

		for (size_t j = 0; j < i && !dup; j++)
			dup = known[j] == k;
		if (!dup && atomic_load(&k->optim) != spec) {
			known[i] = k; /* entries are never freed: safe to update in place */
			todo++;
		}
	}
	if (todo)
		rc = declare_wait(w, NULL, known, n, NULL, spec);
	for (size_t i = 0; !rc && i < n; i++)
		if (known[i])
			atomic_store(&known[i]->optim, spec);
	rps_free(known);
	return rc;
}

/* ---- declaring again on a restarted server ---- */

struct redecl {
	struct rps_worker *w;
	struct rps_req *req;
	uint32_t server;
	int rc;
	int n;
};

static void redeclare_key(struct rps_wkey *k, void *arg)
{
	struct redecl *r = arg;
	struct rps_worker *w = r->w;

	for (uint32_t s = 0; s < k->nslices && !r->rc; s++) {
		struct rps_wslice *sl = &k->slices[s];
		struct rps_piece *p;

		if (sl->server != r->server)
			continue;
		pthread_mutex_lock(&w->core.lock);
		p = rps_piece_alloc_locked(&w->core, r->req, RPS_PK_DECLARE, RPS_PW_RESP);
		if (!p) {
			rps_wreq_fail_locked(r->req, -ENOMEM);
			pthread_mutex_unlock(&w->core.lock);
			r->rc = -ENOMEM;
			return;
		}
		decl_piece_set(w, p, k, s, &k->init, atomic_load(&k->optim));
		p->u.decl.out = sl; /* the ack writes the slice's new place */
		pthread_mutex_unlock(&w->core.lock);
		rps_wpost_piece(w, p);
		r->n++;
	}
}

int rps_wdeclare_server(struct rps_worker *w, uint32_t server)
{
	struct redecl r = { .w = w, .server = server };
	int rc;

	r.req = rps_wreq_new(&w->core, NULL, NULL);
	if (!r.req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	rps_keytab_foreach(&w->keys, redeclare_key, &r);
	rps_wsubmit_leave(w);
	rps_wreq_seal(r.req);
	rc = rps_wreq_wait_internal(r.req, w->timeout_ms);
	if (rc)
		RPS_ERR("server %u: declaring %d slices again: %s", w->servers[server].rank, r.n,
			rps_strerror(rc));
	else
		RPS_DEBUG("server %u: %d slices declared again", w->servers[server].rank, r.n);
	return rc ? rc : r.rc;
}
