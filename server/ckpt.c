/* Shard checkpoints: writing a consistent snapshot from the update thread
 * (here: the synchronous path; normally the update thread only copies the
 * shard and its writer thread writes the file, ckpt_async.c), and loading
 * one into a fresh shard (rdmaps-server --restore).
 *
 * Consistency: the update thread is the only writer of its shard, so a
 * snapshot it takes between two ring entries is consistent. Periodic ones are
 * taken right after the shard's clock moved (rps_shard_ckpt_maybe from
 * shard_advance): under BSP every sum of the clocks before it is applied and
 * nothing of later clocks is (pushes of the next clock are deferred or not yet
 * sent), so the file is exactly "the parameters after clocks < C". Under
 * SSP/ASP pushes of later clocks may already be in. A checkpoint on request
 * (RPS_ENT_CKPT) is taken wherever the thread is; under BSP the partial sums
 * of the current clock are not in it (the workers redo that clock).
 *
 * File format, atomicity, retention: src/ckpt.h, docs/operations.md.
 */
#include "server/ckpt.h"
#include "server/lowprec.h"
#include "server/ckpt_async.h"
#include "server/table.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "src/alloc.h"
#include "src/ckpt.h"
#include "src/log.h"
#include "src/util.h"

/* ---- writing -------------------------------------------------------------------- */

static int write_slice(struct rps_shard *sh, struct rps_ckpt_writer *w,
		       const struct rps_slice_meta *m)
{
	const struct rps_optim_opts *o = rps_shard_slice_optim(sh, m);
	struct rps_ckpt_slice cs;
	uint32_t epc = m->sl.epc;
	int nstate = rps_optim_state_floats(o->kind);
	uint64_t e = 0;
	int rc;

	memset(&cs, 0, sizeof(cs));
	cs.key = m->key;
	cs.slice = m->slice;
	cs.kind = (uint32_t)o->kind;
	cs.optim = m->spec ? &m->spec->opts : NULL; /* the job's spec goes with the slice */
	cs.nelems = m->nelems;
	cs.step = m->opt.step;
	cs.nstate = nstate > 0 ? (uint32_t)nstate : 0;
	rc = rps_ckpt_writer_begin_slice(w, &cs);
	while (!rc && e < m->nelems) {
		uint64_t c = e / epc;
		uint64_t i = e % epc;
		uint64_t n = RPS_MIN(epc - i, m->nelems - e);

		/* we are the only writer: the chunk cannot change under us */
		rc = rps_ckpt_writer_append(w, rps_store_chunk_data(&sh->store, &m->sl, c) + i, n);
		e += n;
	}
	if (!rc && cs.nstate >= 1)
		rc = rps_ckpt_writer_append(w, m->opt.m, m->nelems);
	if (!rc && cs.nstate >= 2)
		rc = rps_ckpt_writer_append(w, m->opt.v, m->nelems);
	if (!rc)
		rc = rps_ckpt_writer_end_slice(w);
	return rc;
}

int rps_shard_ckpt_write(struct rps_shard *sh)
{
	struct rps_ckpt_info info;

	/* on request: taken now, written by the writer thread (ckpt_async.c);
	 * a write still in flight is waited for */
	if (sh->p.ckpt_dir && sh->p.ckpt_dir[0] && atomic_load(&sh->server_rank) != UINT32_MAX &&
	    rps_shard_ckpt_async_submit(sh, 0, RPS_CKPT_BUSY_WAIT) >= 0)
		return 0;
	return rps_shard_ckpt_write_info(sh, &info);
}

/* Synchronous: the update thread writes the file itself (no writer thread). */
int rps_shard_ckpt_write_info(struct rps_shard *sh, struct rps_ckpt_info *info_p)
{
	uint32_t rank = atomic_load(&sh->server_rank);
	struct rps_ckpt_writer *w = NULL;
	struct rps_ckpt_info info;
	uint64_t t0 = rps_now_ns();
	int rc;

	if (!sh->p.ckpt_dir || !sh->p.ckpt_dir[0] || rank == UINT32_MAX)
		return 0;
	rc = rps_ckpt_writer_open(sh->p.ckpt_dir, rank, sh->p.idx, sh->p.server_shards, sh->clock,
				  &w);
	for (uint64_t i = 0; !rc && i <= sh->tab.mask; i++) {
		struct rps_slice_meta *m =
		    atomic_load_explicit(&sh->tab.slots[i], memory_order_relaxed);

		if (m && m->nelems)
			rc = write_slice(sh, w, m);
	}
	if (!rc && sh->tables) /* its tables' files first: the .ckpt commits them */
		rc = rps_shard_tables_ckpt_write(sh, sh->p.ckpt_dir, rank, sh->clock);
	if (rc) {
		rps_ckpt_writer_abort(w);
	} else {
		rc = rps_ckpt_writer_commit(w, 0, &info);
	}
	if (sh->tables)
		rps_shard_tables_ckpt_prune(sh, sh->p.ckpt_dir, rank);
	sh->ckpt_last_clock = sh->clock;
	sh->ckpt_last_ns = rps_now_ns();
	if (rc) {
		atomic_fetch_add(&sh->ckpts_failed, 1);
		RPS_ERR("shard %u: checkpoint at clock %llu in %s failed: %s", sh->p.idx,
			(unsigned long long)sh->clock, sh->p.ckpt_dir, rps_strerror(rc));
		return rc;
	}
	atomic_store(&sh->ckpt_clock, sh->clock);
	atomic_store(&sh->ckpt_wall_ns, rps_wall_ns());
	atomic_fetch_add(&sh->ckpts_ok, 1);
	*info_p = info;
	RPS_DEBUG("shard %u: checkpoint %s: clock %llu, %llu slices, %llu bytes in %.1f ms",
		  sh->p.idx, info.path, (unsigned long long)info.clock,
		  (unsigned long long)info.nslices, (unsigned long long)info.payload_bytes,
		  (double)(rps_now_ns() - t0) / 1e6);
	return 0;
}

void rps_shard_ckpt_maybe(struct rps_shard *sh)
{
	int due = 0;

	if (!sh->p.ckpt_dir || !sh->p.ckpt_dir[0] || sh->clock == sh->ckpt_last_clock)
		return;
	/* at every multiple of ckpt_every the clock reaches or passes (BSP: the
	 * clock moves one by one, so exactly at the multiples): the same clocks
	 * on every shard of every server, also after a restore at another clock */
	if (sh->p.ckpt_every &&
	    sh->clock / sh->p.ckpt_every > sh->ckpt_last_clock / sh->p.ckpt_every)
		due = 1;
	if (sh->p.ckpt_secs &&
	    rps_now_ns() - sh->ckpt_last_ns >= (uint64_t)sh->p.ckpt_secs * 1000000000ull)
		due = 1;
	if (!due || atomic_load(&sh->server_rank) == UINT32_MAX)
		return;
	/* BSP waits for a write still in flight (every shard writes every
	 * checkpoint clock: one cut); ASP/SSP skip to the next clock */
	if (rps_shard_ckpt_async_submit(sh, 0,
					sh->p.consistency == RPS_BSP ? RPS_CKPT_BUSY_WAIT
								     : RPS_CKPT_BUSY_SKIP) < 0) {
		struct rps_ckpt_info info;

		rps_shard_ckpt_write_info(sh, &info); /* no writer thread, or no memory */
	}
}

/* ---- restoring ------------------------------------------------------------------- */

struct restore_ctx {
	struct rps_shard *sh;
	const char *path;
	uint64_t nslices;
};

static int restore_slice(const struct rps_ckpt_slice *cs, void *arg)
{
	struct restore_ctx *ctx = arg;
	struct rps_shard *sh = ctx->sh;
	/* the slice's own spec, kept in the file, or the server's default */
	const struct rps_optim_opts *o = cs->optim ? cs->optim : &sh->p.optim;
	int nstate = rps_optim_state_floats(o->kind);
	struct rps_declare d;
	struct rps_declare_ack ack;
	struct rps_slice_meta *m;
	char why[RPS_DECLARE_REASON_MAX];
	uint32_t epc;
	uint64_t e = 0;
	int rc;

	if (cs->kind != (uint32_t)o->kind || (int)cs->nstate != nstate) {
		RPS_ERR("checkpoint %s: key %llu slice %u was written with optimizer %s (%u state "
			"arrays), this server runs %s: restart it with the job's optimizer",
			ctx->path, (unsigned long long)cs->key, cs->slice,
			rps_optim_kind_name((enum rps_optim_kind)cs->kind), cs->nstate,
			rps_optim_kind_name(o->kind));
		return -EINVAL;
	}
	memset(&d, 0, sizeof(d));
	d.key = cs->key;
	d.slice = cs->slice;
	d.shard = sh->p.idx;
	d.nelems = cs->nelems;
	d.init_kind = RPS_INIT_ZEROS;
	rc = rps_shard_declare_opt(sh, &d, cs->optim, &ack, why, sizeof(why));
	if (rc) {
		RPS_ERR("checkpoint %s: key %llu slice %u of %llu elements: %s", ctx->path,
			(unsigned long long)cs->key, cs->slice, (unsigned long long)cs->nelems,
			rc == -EEXIST ? "twice, with another length"
			: why[0]      ? why
				      : rps_strerror(rc));
		return rc;
	}
	m = rps_srv_keytab_lookup(&sh->tab, cs->key, cs->slice);
	if (!m)
		return -EPROTO;
	epc = m->sl.epc;
	while (e < m->nelems) {
		uint64_t c = e / epc;
		uint64_t i = e % epc;
		uint64_t n = RPS_MIN(epc - i, m->nelems - e);

		rps_store_write_begin(&sh->store, &m->sl, c);
		memcpy(rps_store_chunk_data(&sh->store, &m->sl, c) + i, cs->params + e,
		       n * sizeof(float));
		rps_store_write_end(&sh->store, &m->sl, c);
		e += n;
	}
	rps_lp_refresh(sh, m, 0, m->nelems); /* a low-precision copy, if any */
	if (nstate >= 1)
		memcpy(m->opt.m, cs->state[0], m->nelems * sizeof(float));
	if (nstate >= 2)
		memcpy(m->opt.v, cs->state[1], m->nelems * sizeof(float));
	m->opt.step = cs->step;
	m->elems_applied = cs->step * m->nelems;
	if (m->pending_init) { /* the file's values are the values */
		m->pending_init = 0;
		rps_free(m->assigned_map);
		m->assigned_map = NULL;
	}
	ctx->nslices++;
	return 0;
}

void rps_shard_restore_run(struct rps_shard *sh, struct rps_shard_restore *r)
{
	struct restore_ctx ctx = {.sh = sh, .path = r->path};
	struct rps_ckpt_info info;
	int rc;

	if (rps_srv_keytab_count(&sh->tab)) {
		RPS_ERR("shard %u: restore into a shard that has slices already", sh->p.idx);
		rc = -EBUSY;
		goto out;
	}
	rc = rps_ckpt_read(r->path, r->rank, sh->p.idx, r->nshards, restore_slice, &ctx, &info);
	if (rc)
		goto out;
	{ /* the shard's tables: files beside it, of its clock */
		char dir[sizeof(r->path)];
		char *slash;

		snprintf(dir, sizeof(dir), "%s", r->path);
		slash = strrchr(dir, '/');
		if (slash)
			*slash = 0;
		else
			snprintf(dir, sizeof(dir), ".");
		rc = rps_shard_tables_ckpt_restore(sh, dir, r->rank, info.clock);
		if (rc)
			goto out;
	}
	/* every worker has finished the clocks before the checkpoint's */
	sh->clock = info.clock;
	for (uint32_t w = 0; w < sh->p.nworkers; w++) {
		size_t base = (size_t)w * sh->win;

		sh->wclock[w] = info.clock;
		for (uint32_t i = 0; i < sh->win; i++) {
			sh->applied[base + i] = 0;
			sh->expected[base + i] = RPS_CLOCK_NONE;
		}
		rps_store_set_worker_clock(&sh->store, w, info.clock);
	}
	rps_store_set_clock(&sh->store, info.clock);
	sh->ckpt_last_clock = info.clock;
	sh->ckpt_last_ns = rps_now_ns();
	atomic_store(&sh->ckpt_clock, info.clock);
	atomic_store(&sh->ckpt_wall_ns, info.created_ns);
	sh->changed = 1;
	r->clock = info.clock;
	r->nslices = ctx.nslices;
out:
	r->rc = rc;
	atomic_store(&r->done, 1);
}

/* ---- the server's restore (rdmaps-server --restore DIR) ---------------------------- */

/* The server ranks that have checkpoint files in dir: the one rank, or
 * UINT32_MAX if none or several (then the scheduler's choice decides). */
uint32_t rps_srv_restore_rank_of_dir(const char *dir, int *nranks_p)
{
	uint32_t first = UINT32_MAX;
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (!d) {
		RPS_ERR("--restore %s: %m", dir);
		*nranks_p = -1;
		return UINT32_MAX;
	}
	while ((de = readdir(d))) {
		uint32_t r, sh;
		uint64_t c;

		if (rps_ckpt_parse_name(de->d_name, &r, &sh, &c) != 1)
			continue;
		if (first == UINT32_MAX) {
			first = r;
			n = 1;
		} else if (r != first && n == 1) {
			n = 2;
		}
	}
	closedir(d);
	*nranks_p = n;
	return n == 1 ? first : UINT32_MAX;
}

/* Find a checkpoint of every shard of `rank`: at one common clock if the
 * files allow it. 0 with paths, or -errno (logged: no silent fresh start). */
int rps_srv_restore_find(const char *dir, uint32_t rank, uint32_t nshards,
			 struct rps_shard_restore *r)
{
	struct rps_ckpt_info info;
	uint64_t common = UINT64_MAX;
	int rc, mixed = 0;

	for (int s = 0; s < (int)nshards; s++) {
		rc = rps_ckpt_find(dir, rank, (uint32_t)s, nshards, &info);
		if (rc) {
			RPS_ERR(
			    "cannot restore server %u: no valid checkpoint of shard %d in %s (%s)",
			    rank, s, dir,
			    rc == -ENOENT ? "every file refused, or none: see above" : rps_strerror(rc));
			return rc;
		}
		snprintf(r[s].path, sizeof(r[s].path), "%s", info.path);
		r[s].clock = info.clock;
		if (info.clock < common)
			common = info.clock;
	}
	for (int s = 0; s < (int)nshards && !mixed; s++) {
		if (r[s].clock == common)
			continue;
		rc = rps_ckpt_find_max(dir, rank, (uint32_t)s, nshards, common, &info);
		if (rc) {
			mixed = 1;
			break;
		}
		snprintf(r[s].path, sizeof(r[s].path), "%s", info.path);
		r[s].clock = info.clock;
	}
	if (mixed)
		RPS_WARN("restore: the shards of server %u have no checkpoint at one common clock "
			 "(newest %llu): each shard takes its own newest",
			 rank, (unsigned long long)common);
	for (int s = 0; s < (int)nshards; s++) {
		r[s].rank = rank;
		r[s].nshards = nshards;
		r[s].rc = 0;
		atomic_init(&r[s].done, 0);
	}
	return 0;
}

/* Wait for the shards' update threads to load the files found (queued as
 * RPS_ENT_RESTORE entries): 0, or the first failure (logged). */
int rps_srv_restore_wait(const char *dir, uint32_t nshards, struct rps_shard_restore *r)
{
	uint64_t nslices = 0, lo = UINT64_MAX, hi = 0;
	for (int s = 0; s < (int)nshards; s++) {
		struct timespec ts = {0, 1000000};

		while (!atomic_load(&r[s].done))
			nanosleep(&ts, NULL);
		if (r[s].rc) {
			RPS_ERR("restore of shard %d from %s failed: %s", s, r[s].path,
				rps_strerror(r[s].rc));
			return r[s].rc;
		}
		nslices += r[s].nslices;
		lo = RPS_MIN(lo, r[s].clock);
		hi = RPS_MAX(hi, r[s].clock);
	}
	RPS_WARN("restored from %s: %d shards at clock %llu (up to %llu), %llu slices; workers go "
		 "on from their own clocks (updates after the checkpoint are lost)",
		 dir, (int)nshards, (unsigned long long)lo, (unsigned long long)hi,
		 (unsigned long long)nslices);
	return 0;
}
