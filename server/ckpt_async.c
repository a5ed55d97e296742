/* Checkpoints off the hot path: snapshot on the update thread, file written
 * by the shard's writer thread ("rps-ckpt-<shard>").
 *
 * Why a copy and not copy-on-write: the update thread is the only writer of
 * its shard, so between two ring entries the shard is consistent and a plain
 * memcpy of every slice's parameters and optimizer state is a consistent
 * snapshot. Copying runs at memory bandwidth (~100 MB in tens of ms, page
 * faults of the fresh buffer included), while writing, checksumming and
 * fsync'ing the same bytes takes hundreds of ms to seconds; that difference
 * is what moves off the hot path. Copy-on-write would make the pause smaller
 * still, but every write of the shard (pushes, BSP sums, ASSIGN, restores,
 * and the one-sided RDMA reads that see the same chunks) would have to check
 * and copy chunks first, in the hottest loop of the server, for a pause that
 * happens once per checkpoint. The price of the copy is memory: while a
 * snapshot is in flight the shard holds its parameters and optimizer state
 * twice; the buffer is freed as soon as the file is written.
 *
 * One snapshot per shard at a time. If the previous one is still being
 * written when the next is due:
 *   - a periodic checkpoint under BSP waits for it (the update thread
 *     blocks, so pushes of that shard wait): every shard then writes every
 *     checkpoint clock, and the files of one clock across all shards stay one
 *     consistent cut. Warned once per shard, counted (waited);
 *   - a periodic checkpoint under ASP/SSP is skipped with a warning
 *     (counted: skipped) and taken at the next clock boundary instead;
 *   - a requested one (rdmaps-ctl checkpoint, rps_worker_checkpoint,
 *     SIGUSR1) waits: the request was asked for.
 * The sparse tables' files (server/table_ckpt.c) are still written by the
 * update thread at the snapshot, before the dense file is handed over (the
 * .ckpt commits them), and pruned by the writer after the commit.
 *
 * Failures of the writer (disk full, ...) are logged and counted
 * (ckpts_failed); the temp file is removed and the older files are kept (the
 * prune runs only after a successful commit: src/ckpt_write.c). Shutdown
 * (rps_shard_ckpt_async_stop) waits for a write in flight.
 */
#include "server/ckpt_async.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "server/ckpt.h"
#include "server/table.h"
#include "src/alloc.h"
#include "src/ckpt.h"
#include "src/log.h"
#include "src/util.h"

struct snap_slice {
	struct rps_ckpt_slice cs;
	struct rps_optim_opts optim; /* cs.optim points here when the slice has a spec */
};

struct snap {
	uint64_t clock;
	uint32_t rank;
	uint32_t creq_gen; /* a control request's: publish its result */
	int tables;	   /* table files were written for it: prune after the commit */
	uint64_t nslices;
	struct snap_slice *sl;
	float *data;
	size_t bytes;
	uint64_t pushes0; /* pushes_applied when taken */
	uint64_t copy_ns;
};

struct rps_ckpt_async {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct snap *job; /* in flight (NULL: idle) */
	int stop, hold;
	int warned_busy;
	atomic_ullong written, failed, skipped, waited, copy_ns_max, write_ns_max;
};

static void snap_free(struct snap *s)
{
	if (!s)
		return;
	rps_free(s->data);
	rps_free(s->sl);
	rps_free(s);
}

static void max_store(atomic_ullong *a, uint64_t v)
{
	uint64_t cur = atomic_load(a);

	while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

/* ---- the snapshot (update thread) ------------------------------------------------- */

static struct snap *snap_take(struct rps_shard *sh)
{
	uint64_t t0 = rps_now_ns(), nsl = 0, nfl = 0, at = 0, k = 0;
	struct snap *s;

	for (uint64_t i = 0; i <= sh->tab.mask; i++) {
		struct rps_slice_meta *m =
		    atomic_load_explicit(&sh->tab.slots[i], memory_order_relaxed);
		int nstate;

		if (!m || !m->nelems)
			continue;
		nstate = rps_optim_state_floats(rps_shard_slice_optim(sh, m)->kind);
		nsl++;
		nfl += m->nelems * (1 + (uint64_t)(nstate > 0 ? nstate : 0));
	}
	s = rps_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->sl = rps_calloc(nsl ? nsl : 1, sizeof(*s->sl));
	s->bytes = nfl * sizeof(float);
	s->data = rps_malloc(s->bytes ? s->bytes : 1);
	if (!s->sl || !s->data) {
		snap_free(s);
		return NULL;
	}
	for (uint64_t i = 0; i <= sh->tab.mask; i++) {
		struct rps_slice_meta *m =
		    atomic_load_explicit(&sh->tab.slots[i], memory_order_relaxed);
		const struct rps_optim_opts *o;
		struct snap_slice *ss;
		uint32_t epc;
		int nstate;
		float *p;

		if (!m || !m->nelems)
			continue;
		o = rps_shard_slice_optim(sh, m);
		nstate = rps_optim_state_floats(o->kind);
		ss = &s->sl[k++];
		ss->cs.key = m->key;
		ss->cs.slice = m->slice;
		ss->cs.kind = (uint32_t)o->kind;
		ss->cs.nelems = m->nelems;
		ss->cs.step = m->opt.step;
		ss->cs.nstate = nstate > 0 ? (uint32_t)nstate : 0;
		if (m->spec) { /* the job's spec goes with the slice, copied */
			ss->optim = m->spec->opts;
			ss->cs.optim = &ss->optim;
		}
		/* we are the only writer of the shard: nothing changes under us */
		p = s->data + at;
		epc = m->sl.epc;
		for (uint64_t e = 0; e < m->nelems;) {
			uint64_t c = e / epc, off = e % epc;
			uint64_t n = RPS_MIN(epc - off, m->nelems - e);

			memcpy(p + e, rps_store_chunk_data(&sh->store, &m->sl, c) + off,
			       n * sizeof(float));
			e += n;
		}
		ss->cs.params = p;
		at += m->nelems;
		for (uint32_t j = 0; j < ss->cs.nstate; j++) {
			const float *src = j ? m->opt.v : m->opt.m;

			memcpy(s->data + at, src, m->nelems * sizeof(float));
			ss->cs.state[j] = s->data + at;
			at += m->nelems;
		}
	}
	s->nslices = k;
	s->clock = sh->clock;
	s->rank = atomic_load(&sh->server_rank);
	s->pushes0 = atomic_load_explicit(&sh->pushes_applied, memory_order_relaxed);
	s->copy_ns = rps_now_ns() - t0;
	return s;
}

/* ---- the writer thread ------------------------------------------------------------ */

static void publish_creq(struct rps_shard *sh, uint32_t gen, int rc, const char *path,
			 uint64_t nslices)
{
	struct rps_shard_creq_res *r = &sh->creq_res;

	if (!gen)
		return;
	r->rc = rc;
	if (rc) {
		snprintf(r->text, sizeof(r->text), "checkpoint in %s failed: %s", sh->p.ckpt_dir,
			 rps_strerror(rc));
	} else {
		snprintf(r->text, sizeof(r->text), "%.*s", (int)sizeof(r->text) - 1, path);
		r->nslices = nslices;
	}
	atomic_store_explicit(&sh->creq_done, gen, memory_order_release);
}

static void snap_write(struct rps_shard *sh, struct snap *s)
{
	struct rps_ckpt_async *a = sh->ckpt_async;
	struct rps_ckpt_writer *w = NULL;
	struct rps_ckpt_info info;
	uint64_t t0 = rps_now_ns(), dt;
	int rc;

	memset(&info, 0, sizeof(info));
	rc = rps_ckpt_writer_open(sh->p.ckpt_dir, s->rank, sh->p.idx, sh->p.server_shards,
				  s->clock, &w);
	for (uint64_t i = 0; !rc && i < s->nslices; i++)
		rc = rps_ckpt_writer_add(w, &s->sl[i].cs);
	if (rc)
		rps_ckpt_writer_abort(w);
	else
		rc = rps_ckpt_writer_commit(w, 0, &info);
	if (s->tables) /* table files of clocks without a .ckpt (this one, if it failed) */
		rps_shard_tables_ckpt_prune(sh, sh->p.ckpt_dir, s->rank);
	dt = rps_now_ns() - t0;
	max_store(&a->write_ns_max, dt);
	if (rc) {
		atomic_fetch_add(&sh->ckpts_failed, 1);
		atomic_fetch_add(&a->failed, 1);
		RPS_ERR("shard %u: checkpoint at clock %llu in %s failed: %s (the older checkpoints "
			"are kept)",
			sh->p.idx, (unsigned long long)s->clock, sh->p.ckpt_dir, rps_strerror(rc));
	} else {
		uint64_t pushes = atomic_load_explicit(&sh->pushes_applied, memory_order_relaxed);

		atomic_store(&sh->ckpt_clock, s->clock);
		atomic_store(&sh->ckpt_wall_ns, rps_wall_ns());
		atomic_fetch_add(&sh->ckpts_ok, 1);
		atomic_fetch_add(&a->written, 1);
		RPS_DEBUG("shard %u: checkpoint %s: clock %llu, %llu slices, %llu bytes; copied in "
			  "%.1f ms by the update thread, written in %.1f ms by the writer, "
			  "%llu pushes applied meanwhile",
			  sh->p.idx, info.path, (unsigned long long)s->clock,
			  (unsigned long long)info.nslices, (unsigned long long)info.payload_bytes,
			  (double)s->copy_ns / 1e6, (double)dt / 1e6,
			  (unsigned long long)(pushes - s->pushes0));
	}
	publish_creq(sh, s->creq_gen, rc, info.path, info.nslices);
}

static void *writer_main(void *arg)
{
	struct rps_shard *sh = arg;
	struct rps_ckpt_async *a = sh->ckpt_async;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct snap *s;

		while ((!a->job && !a->stop) || (a->job && a->hold && !a->stop))
			pthread_cond_wait(&a->cv, &a->lock);
		if (!a->job)
			break; /* stopped, nothing in flight */
		s = a->job;
		pthread_mutex_unlock(&a->lock);
		snap_write(sh, s);
		snap_free(s);
		pthread_mutex_lock(&a->lock);
		a->job = NULL;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* ---- the interface -------------------------------------------------------------- */

int rps_shard_ckpt_async_start(struct rps_shard *sh)
{
	struct rps_ckpt_async *a;
	char name[16];
	int rc;

	if (sh->ckpt_async)
		return 0;
	a = rps_calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cv, NULL);
	sh->ckpt_async = a;
	rc = pthread_create(&a->th, NULL, writer_main, sh);
	if (rc) {
		RPS_WARN("shard %u: checkpoint writer thread: %s (checkpoints are written by the "
			 "update thread)",
			 sh->p.idx, strerror(rc));
		sh->ckpt_async = NULL;
		pthread_cond_destroy(&a->cv);
		pthread_mutex_destroy(&a->lock);
		rps_free(a);
		return -rc;
	}
	snprintf(name, sizeof(name), "rps-ckpt-%u", sh->p.idx);
	pthread_setname_np(a->th, name);
	return 0;
}

void rps_shard_ckpt_async_stop(struct rps_shard *sh)
{
	struct rps_ckpt_async *a = sh->ckpt_async;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	if (a->job)
		RPS_INFO("shard %u: waiting for its checkpoint of clock %llu to be written",
			 sh->p.idx, (unsigned long long)a->job->clock);
	a->stop = 1;
	a->hold = 0;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->th, NULL);
	sh->ckpt_async = NULL;
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->lock);
	rps_free(a);
}

int rps_shard_ckpt_async_on(const struct rps_shard *sh)
{
	return sh->ckpt_async != NULL;
}

void rps_shard_ckpt_async_wait(struct rps_shard *sh)
{
	struct rps_ckpt_async *a = sh->ckpt_async;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	while (a->job)
		pthread_cond_wait(&a->cv, &a->lock);
	pthread_mutex_unlock(&a->lock);
}

int rps_shard_ckpt_async_creq_pending(struct rps_shard *sh)
{
	struct rps_ckpt_async *a = sh->ckpt_async;
	int r;

	if (!a)
		return 0;
	pthread_mutex_lock(&a->lock);
	r = a->job && a->job->creq_gen;
	pthread_mutex_unlock(&a->lock);
	return r;
}

void rps_shard_ckpt_async_hold(struct rps_shard *sh, int hold)
{
	struct rps_ckpt_async *a = sh->ckpt_async;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->hold = hold;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->lock);
}

int rps_shard_ckpt_async_submit(struct rps_shard *sh, uint32_t creq_gen, enum rps_ckpt_busy busy)
{
	struct rps_ckpt_async *a = sh->ckpt_async;
	struct snap *s;
	int rc;

	if (!a)
		return -ENOTCONN;
	if (atomic_load(&sh->server_rank) == UINT32_MAX)
		return -EAGAIN; /* not joined yet: no file name (the synchronous path skips it) */
	pthread_mutex_lock(&a->lock);
	if (a->job) {
		uint64_t prev = a->job->clock;
		int first = !a->warned_busy;

		a->warned_busy = 1;
		if (busy == RPS_CKPT_BUSY_SKIP) {
			pthread_mutex_unlock(&a->lock);
			atomic_fetch_add(&a->skipped, 1);
			if (first)
				RPS_WARN("shard %u: checkpoint at clock %llu skipped: the one of "
					 "clock %llu is still being written (taken at the next "
					 "clock; counted, warned once)",
					 sh->p.idx, (unsigned long long)sh->clock,
					 (unsigned long long)prev);
			return 0;
		}
		atomic_fetch_add(&a->waited, 1);
		if (first)
			RPS_WARN("shard %u: checkpoint at clock %llu waits for the one of clock %llu, "
				 "still being written: pushes of the shard wait meanwhile (a longer "
				 "RDMAPS_CHECKPOINT_EVERY avoids it; counted, warned once)",
				 sh->p.idx, (unsigned long long)sh->clock,
				 (unsigned long long)prev);
		while (a->job)
			pthread_cond_wait(&a->cv, &a->lock);
	}
	pthread_mutex_unlock(&a->lock);

	s = snap_take(sh);
	if (!s) {
		RPS_WARN("shard %u: no memory for a snapshot of the shard: the checkpoint at clock "
			 "%llu is written by the update thread",
			 sh->p.idx, (unsigned long long)sh->clock);
		return -ENOMEM;
	}
	max_store(&a->copy_ns_max, s->copy_ns);
	s->creq_gen = creq_gen;
	sh->ckpt_last_clock = sh->clock;
	sh->ckpt_last_ns = rps_now_ns();
	if (sh->tables) { /* its tables' files first: the .ckpt commits them */
		s->tables = 1;
		rc = rps_shard_tables_ckpt_write(sh, sh->p.ckpt_dir, s->rank, s->clock);
		if (rc) {
			rps_shard_tables_ckpt_prune(sh, sh->p.ckpt_dir, s->rank);
			atomic_fetch_add(&sh->ckpts_failed, 1);
			atomic_fetch_add(&a->failed, 1);
			RPS_ERR("shard %u: checkpoint at clock %llu in %s failed (tables): %s",
				sh->p.idx, (unsigned long long)s->clock, sh->p.ckpt_dir,
				rps_strerror(rc));
			publish_creq(sh, creq_gen, rc, NULL, 0);
			snap_free(s);
			return 1;
		}
	}
	pthread_mutex_lock(&a->lock);
	a->job = s;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->lock);
	return 1;
}

void rps_shard_ckpt_async_stats(struct rps_shard *sh, struct rps_ckpt_async_stats *st)
{
	struct rps_ckpt_async *a = sh->ckpt_async;

	memset(st, 0, sizeof(*st));
	if (!a)
		return;
	st->written = atomic_load(&a->written);
	st->failed = atomic_load(&a->failed);
	st->skipped = atomic_load(&a->skipped);
	st->waited = atomic_load(&a->waited);
	st->copy_ns_max = atomic_load(&a->copy_ns_max);
	st->write_ns_max = atomic_load(&a->write_ns_max);
}
