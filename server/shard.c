/* A shard: its store, key table, priority ring and clocks (the update thread
 * is update.c), and the creation of slices (DECLARE) with their initial values. */
#include "server/shard.h"
#include "server/ckpt_async.h"
#include "server/table.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/bsp_sum.h"
#include "server/lowprec.h"
#include "src/alloc.h"
#include "src/fault.h"
#include "src/log.h"
#include "src/util.h"

/* ---- initialisers ---------------------------------------------------------- */

/* Uniform in [0, 1) from 24 random bits. */
static inline float unit_f(uint64_t h)
{
	return (float)(h >> 40) * (1.0f / 16777216.0f);
}

float rps_server_init_value(const struct rps_init *init, uint64_t key, uint32_t slice, uint64_t e)
{
	uint64_t base = rps_hash64(init->seed ^ rps_hash64(key ^ rps_hash64(slice + 1ull)));

	switch (init->kind) {
	case RPS_INIT_CONST:
		return init->a;
	case RPS_INIT_UNIFORM:
		return init->a + (init->b - init->a) * unit_f(rps_hash64(base + e));
	case RPS_INIT_NORMAL: {
		/* Box-Muller: u1 in (0, 1], u2 in [0, 1) */
		double u1 = ((rps_hash64(base + 2 * e) >> 11) + 1) * (1.0 / 9007199254740992.0);
		double u2 = (rps_hash64(base + 2 * e + 1) >> 11) * (1.0 / 9007199254740992.0);
		double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);

		return (float)(init->a + init->b * z);
	}
	default:
		return 0.0f;
	}
}

int rps_server_consistency_parse(const char *s)
{
	if (!strcmp(s, "asp"))
		return RPS_ASP;
	if (!strcmp(s, "bsp"))
		return RPS_BSP;
	if (!strcmp(s, "ssp"))
		return RPS_SSP;
	return -EINVAL;
}

const char *rps_server_consistency_name(enum rps_consistency c)
{
	switch (c) {
	case RPS_ASP:
		return "asp";
	case RPS_BSP:
		return "bsp";
	case RPS_SSP:
		return "ssp";
	}
	return "?";
}

/* ---- slices ------------------------------------------------------------------ */

static void meta_free(struct rps_slice_meta *m)
{
	rps_lp_free(m);
	rps_optim_state_free(&m->opt);
	rps_free(m->acc);
	rps_free(m->assigned_map);
	rps_free(m);
}

static void fill_ack(const struct rps_slice_meta *m, struct rps_declare_ack *ack)
{
	memset(ack, 0, sizeof(*ack));
	ack->key = m->key;
	ack->slice = m->slice;
	ack->shard = m->shard;
	ack->offset = m->data_off;
	ack->nelems = m->nelems;
}

/* Write the initial values, chunk by chunk under the seqlock. */
static void slice_fill(struct rps_shard *sh, struct rps_slice_meta *m, const struct rps_init *in)
{
	uint32_t epc = m->sl.epc;
	uint64_t e = 0;

	while (e < m->nelems) {
		uint64_t c = e / epc;
		uint64_t i = e % epc;
		uint64_t n = RPS_MIN(epc - i, m->nelems - e);
		float *w = rps_store_chunk_data(&sh->store, &m->sl, c) + i;

		rps_store_write_begin(&sh->store, &m->sl, c);
		switch (in->kind) {
		case RPS_INIT_UNIFORM:
		case RPS_INIT_NORMAL:
			for (uint64_t k = 0; k < n; k++)
				w[k] = rps_server_init_value(in, m->key, m->slice, e + k);
			break;
		case RPS_INIT_CONST:
			for (uint64_t k = 0; k < n; k++)
				w[k] = in->a;
			break;
		default:
			memset(w, 0, n * sizeof(float));
			break;
		}
		rps_store_write_end(&sh->store, &m->sl, c);
		e += n;
	}
}

/* ---- optimizer specs ------------------------------------------------------------ */

#define RPS_SHARD_MAX_SPECS 256 /* distinct specs per shard */

/* The shard's copy of spec o (shared by every slice with the same spec), or
 * NULL with why set (-ENOSPC: too many distinct ones, -ENOMEM) in *rc_p. */
static const struct rps_shard_spec *
spec_intern(struct rps_shard *sh, const struct rps_optim_opts *o, char *why, size_t len, int *rc_p)
{
	struct rps_shard_spec *s;

	for (s = sh->specs; s; s = s->next)
		if (rps_optim_opts_same(&s->opts, o))
			return s;
	if (sh->nspecs >= RPS_SHARD_MAX_SPECS) {
		snprintf(why, len,
			 "shard %u holds %d distinct optimizer specs already: give keys "
			 "fewer different ones",
			 sh->p.idx, RPS_SHARD_MAX_SPECS);
		*rc_p = -ENOSPC;
		return NULL;
	}
	s = rps_calloc(1, sizeof(*s));
	if (!s) {
		snprintf(why, len, "shard %u: out of memory for an optimizer spec", sh->p.idx);
		*rc_p = -ENOMEM;
		return NULL;
	}
	s->opts = *o;
	s->noclip = *o;
	s->noclip.clip_norm = 0;
	s->next = sh->specs;
	sh->specs = s;
	sh->nspecs++;
	return s;
}

static void specs_free(struct rps_shard *sh)
{
	while (sh->specs) {
		struct rps_shard_spec *n = sh->specs->next;

		rps_free(sh->specs);
		sh->specs = n;
	}
	sh->nspecs = 0;
}

/* A slice that has seen any update (applied, or summed for the clock). */
static int slice_updated(const struct rps_slice_meta *m)
{
	return m->opt.step || m->elems_applied || m->dirty;
}

/* Spec o for an existing slice m (see rps_shard_declare_opt). */
static int slice_set_spec(struct rps_shard *sh, struct rps_slice_meta *m,
			  const struct rps_optim_opts *o, char *why, size_t len)
{
	const struct rps_shard_spec *s;
	struct rps_optim_state st;
	char want[96], have[96];
	int rc = 0;

	if (m->spec && rps_optim_opts_same(&m->spec->opts, o))
		return 0; /* idempotent */
	rps_optim_describe(o, want, sizeof(want));
	if (m->spec) {
		rps_optim_describe(&m->spec->opts, have, sizeof(have));
		snprintf(why, len,
			 "key %llu slice %u: optimizer %s refused, the key already has %s (given "
			 "earlier, by this or another worker)",
			 (unsigned long long)m->key, m->slice, want, have);
		return -EINVAL;
	}
	if (slice_updated(m)) {
		snprintf(
		    why, len,
		    "key %llu slice %u: optimizer %s refused, the key was already trained with "
		    "the servers' default optimizer (%s, %llu steps)",
		    (unsigned long long)m->key, m->slice, want,
		    rps_optim_kind_name(sh->p.optim.kind), (unsigned long long)m->opt.step);
		return -EINVAL;
	}
	s = spec_intern(sh, o, why, len, &rc);
	if (!s)
		return rc;
	/* no update yet: the state is all zeros; the new kind's, zeroed */
	rc = rps_optim_state_init(&st, o, m->nelems);
	if (rc) {
		snprintf(why, len, "key %llu slice %u: no memory for the state of %s",
			 (unsigned long long)m->key, m->slice, want);
		return rc;
	}
	rps_ckpt_cow_slice_all(m); /* a snapshot in flight reads the old state */
	rps_optim_state_free(&m->opt);
	m->opt = st;
	m->spec = s;
	RPS_DEBUG("shard %u: key %llu slice %u takes optimizer %s", sh->p.idx,
		  (unsigned long long)m->key, m->slice, want);
	return 0;
}

int rps_shard_declare(struct rps_shard *sh, const struct rps_declare *d,
		      struct rps_declare_ack *ack_p)
{
	char why[8];

	return rps_shard_declare_opt(sh, d, NULL, ack_p, why, sizeof(why));
}

int rps_shard_declare_opt(struct rps_shard *sh, const struct rps_declare *d,
			  const struct rps_optim_opts *optim, struct rps_declare_ack *ack_p,
			  char *why, size_t len)
{
	struct rps_slice_meta *m = rps_srv_keytab_lookup(&sh->tab, d->key, d->slice);
	const struct rps_shard_spec *spec = NULL;
	struct rps_init in;
	int rc;

	if (len)
		why[0] = 0;
	if (m) {
		if (m->nelems != d->nelems)
			return -EEXIST;
		if (optim) {
			rc = slice_set_spec(sh, m, optim, why, len);
			if (rc)
				return rc;
		}
		fill_ack(m, ack_p);
		return 0;
	}
	if (d->init_kind > RPS_INIT_PUSH)
		return -EINVAL;
	if (d->init_kind == RPS_INIT_DEFAULT) {
		in = sh->p.init;
	} else {
		in.kind = d->init_kind;
		in.a = d->init_a;
		in.b = d->init_b;
		in.seed = d->seed;
	}
	rc = rps_store_room(&sh->store, d->nelems); /* before allocating for it */
	if (rc)
		return rc;
	if (optim) {
		spec = spec_intern(sh, optim, why, len, &rc);
		if (!spec)
			return rc;
	}

	m = rps_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->key = d->key;
	m->slice = d->slice;
	m->shard = sh->p.idx;
	m->nelems = d->nelems;
	m->spec = spec;
	rc = rps_optim_state_init(&m->opt, spec ? &spec->opts : &sh->p.optim, d->nelems);
	if (rc)
		goto err_meta;
	if (sh->p.consistency == RPS_BSP && d->nelems) {
		/* a lane per worker, summed in rank order (bsp_sum.h) */
		rc = rps_bsp_sum_init(m, sh->p.bsp_arrival ? 1 : sh->p.nworkers);
		if (rc)
			goto err_meta;
	}
	if (in.kind == RPS_INIT_PUSH && d->nelems) {
		m->assigned_map = rps_calloc((d->nelems + 7) / 8, 1);
		if (!m->assigned_map) {
			rc = -ENOMEM;
			goto err_meta;
		}
		m->pending_init = 1;
	}
	if (rps_srv_keytab_count(&sh->tab) >= sh->tab.max) {
		rc = -ENOSPC;
		goto err_meta;
	}
	rc = rps_store_alloc(&sh->store, d->nelems, &m->sl);
	if (rc)
		goto err_meta;
	m->data_off = m->sl.off + m->sl.line; /* chunk 0's data */
	slice_fill(sh, m, &in);
	rc = rps_srv_keytab_insert(&sh->tab, m); /* publishes it */
	if (rc)
		goto err_meta; /* cannot happen: checked above; the chunks stay reserved */
	fill_ack(m, ack_p);
	RPS_DEBUG("shard %u: key %llu slice %u declared, %llu elements at offset %llu", sh->p.idx,
		  (unsigned long long)m->key, m->slice, (unsigned long long)m->nelems,
		  (unsigned long long)m->data_off);
	return 0;

err_meta:
	meta_free(m);
	if (rc == -ENOSPC)
		RPS_WARN("shard %u full: cannot declare key %llu slice %u of %llu elements",
			 sh->p.idx, (unsigned long long)d->key, d->slice,
			 (unsigned long long)d->nelems);
	return rc;
}

void rps_shard_read(const struct rps_shard *sh, const struct rps_slice_meta *m, uint64_t off,
		    uint64_t n, float *dst)
{
	rps_store_read(&sh->store, &m->sl, off, n, dst);
}

/* ---- life cycle ---------------------------------------------------------------- */

int rps_shard_init(struct rps_shard *sh, const struct rps_shard_params *p,
		   const struct rps_shard_io *io, void *io_arg)
{
	uint64_t maxslices;
	size_t nw;
	int rc;

	memset(sh, 0, sizeof(*sh));
	sh->p = *p;
	sh->io = io;
	sh->io_arg = io_arg;
	sh->core = -1;
	sh->optim_noclip = p->optim;
	sh->optim_noclip.clip_norm = 0;
	if (!p->nworkers || p->nworkers > RPS_MAX_WORKERS || !p->ring_size) {
		RPS_ERR("shard %u: bad parameters (%u workers, ring of %zu)", p->idx, p->nworkers,
			p->ring_size);
		return -EINVAL;
	}
	atomic_init(&sh->nparked, 0);
	atomic_init(&sh->pushes_applied, 0);
	atomic_init(&sh->pulls_parked, 0);
	atomic_init(&sh->faults_stall, 0);
	atomic_init(&sh->pulls_served, 0);
	atomic_init(&sh->ckpts_ok, 0);
	atomic_init(&sh->ckpts_failed, 0);
	atomic_init(&sh->ckpt_wall_ns, 0);
	atomic_init(&sh->ckpt_clock, 0);
	atomic_init(&sh->server_rank, UINT32_MAX);

	rc = rps_store_init(&sh->store, p->idx, p->shard_bytes, p->chunk_bytes);
	if (rc) {
		RPS_ERR("shard %u: store of %zu bytes in chunks of %u: %s", p->idx, p->shard_bytes,
			p->chunk_bytes, strerror(-rc));
		return rc;
	}
	maxslices = sh->store.nchunks ? sh->store.nchunks : 1;
	rc = rps_srv_keytab_init(&sh->tab, maxslices);
	if (rc)
		goto err_store;
	rc = rps_ring_create(p->ring_size, p->priority, p->priority_fn, p->priority_arg, &sh->ring);
	if (rc) {
		RPS_ERR("shard %u: ring of %zu entries: %s", p->idx, p->ring_size, strerror(-rc));
		goto err_tab;
	}

	/* A clock c can be counted only while clocks wc..c-1 each still have an
	 * entry in the ring, so ring_size + 2 clocks ahead is enough. */
	sh->win = 64;
	while (sh->win < p->ring_size + 2 && sh->win < (1u << 20))
		sh->win <<= 1;
	nw = p->nworkers;
	sh->wclock = rps_calloc(nw, sizeof(*sh->wclock));
	sh->live = rps_calloc(nw, 1);
	sh->nwarn = rps_calloc(nw, 1);
	sh->wpid = rps_calloc(nw, sizeof(*sh->wpid));
	sh->applied = rps_calloc(nw * sh->win, sizeof(uint32_t));
	sh->expected = rps_malloc(nw * sh->win * sizeof(uint32_t));
	if (!sh->wclock || !sh->live || !sh->nwarn || !sh->wpid || !sh->applied || !sh->expected) {
		rc = -ENOMEM;
		goto err_clocks;
	}
	memset(sh->live, 1, nw);
	for (size_t i = 0; i < nw * sh->win; i++)
		sh->expected[i] = RPS_CLOCK_NONE;
	rc = pthread_mutex_init(&sh->park_lock, NULL);
	if (rc) {
		rc = -rc;
		goto err_clocks;
	}
	rps_srv_bufpool_init(&sh->bufs, p->max_msg);
	sh->ckpt_last_ns = rps_now_ns();
	rps_store_set_clock(&sh->store, 0);
	for (uint32_t w = 0; w < p->nworkers; w++)
		rps_store_set_worker_clock(&sh->store, w, 0);
	return 0;

err_clocks:
	rps_free(sh->wclock);
	rps_free(sh->live);
	rps_free(sh->nwarn);
	rps_free(sh->wpid);
	rps_free(sh->applied);
	rps_free(sh->expected);
	rps_ring_destroy(sh->ring);
err_tab:
	rps_srv_keytab_fini(&sh->tab, NULL);
err_store:
	rps_store_fini(&sh->store);
	return rc;
}

void rps_shard_fini(struct rps_shard *sh)
{
	if (!sh->ring)
		return;
	rps_srv_keytab_fini(&sh->tab, meta_free);
	rps_free(sh->seen);
	sh->seen = NULL;
	specs_free(sh);
	rps_shard_tables_fini(sh);
	rps_ring_destroy(sh->ring);
	sh->ring = NULL;
	rps_store_fini(&sh->store);
	rps_free(sh->codec_buf);
	sh->codec_buf = NULL;
	rps_free(sh->wclock);
	rps_free(sh->live);
	rps_free(sh->nwarn);
	rps_free(sh->wpid);
	rps_free(sh->applied);
	rps_free(sh->expected);
	pthread_mutex_destroy(&sh->park_lock);
	rps_srv_bufpool_fini(&sh->bufs);
}
