/* Checkpoints off the hot path: a copy-on-write snapshot taken by the update
 * thread, copied and written by the shard's writer thread ("rps-ckpt-<shard>").
 *
 * Copy-on-write by chunk (the store's chunks, chunk_bytes each). At the clock
 * boundary the update thread, the only writer of its shard, only records the
 * snapshot: the slices, their optimizer steps and specs, one buffer for all
 * the values (allocated, not touched), and every chunk marked "to copy"
 * (RPS_COW_TODO); each slice's meta points to its record. Then the writer
 * thread copies the chunks (parameters and the optimizer state of the same
 * elements) into the buffer, claiming each (TODO -> BUSY -> DONE), and writes
 * the file from the buffer. Before the update thread writes into a chunk
 * (write_runs, update.c: pushes, BSP sums, assignments) it checks the chunk:
 * DONE, write; TODO, copy it first itself; BUSY, wait for the writer's copy of
 * that one chunk. So every chunk is copied exactly once, before any write
 * after the boundary: the file is the shard at the boundary.
 *
 * Why not a plain copy of the whole shard on the update thread: it is simple
 * but it is a pause of the whole shard: 100 MB took 170-220 ms on the loaded
 * 2-core test machine (page faults of the fresh buffer included), every push
 * of the shard waiting meanwhile, about as long as writing the file. With
 * copy-on-write the pause is the bookkeeping (a byte per chunk), and a push
 * pays for copying only the chunks it writes first, once per checkpoint. The
 * cost on the hot path when no checkpoint is in flight is one pointer test
 * per chunk written. Memory: while a snapshot is in flight the shard holds
 * its values and optimizer state twice (the buffer, freed when the file is
 * written); one snapshot per shard at a time.
 *
 * If the previous snapshot is still being written when the next is due:
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
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "server/ckpt.h"
#include "server/table.h"
#include "src/alloc.h"
#include "src/ckpt.h"
#include "src/log.h"
#include "src/util.h"

#define RPS_CKPT_WRITER_NICE 10 /* the writer thread's nice value */

struct rps_ckpt_cow_slice {
	struct rps_ckpt_cow_hdr h; /* first: rps_ckpt_cow_chunk reads it */
	struct rps_shard *sh;
	struct rps_slice_meta *m;
	uint64_t nchunks;
	uint32_t epc;
	float *dst;	      /* params[nelems], then state[nstate][nelems] */
	const float *src_s[2]; /* the optimizer state arrays at the snapshot */
	struct rps_ckpt_slice cs;
	struct rps_optim_opts optim; /* cs.optim points here when the slice has a spec */
};

struct snap {
	uint64_t clock;
	uint32_t rank;
	uint32_t creq_gen; /* a control request's: publish its result */
	int tables;	   /* table files were written for it: prune after the commit */
	uint64_t nslices;
	struct rps_ckpt_cow_slice *sl; /* owned by the update thread (struct rps_ckpt_async.cow) */
	float *data;		       /* owned by the writer: freed once written */
	size_t bytes;
	uint64_t pushes0; /* pushes_applied when taken */
	uint64_t take_ns;
};

/* The records of the newest snapshot: the update thread frees them when it
 * takes the next one (the writer is done with them then) or at stop. */
struct cow_set {
	struct rps_ckpt_cow_slice *sl;
	uint64_t nslices;
	atomic_uchar *states;
};

struct rps_ckpt_async {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct snap *job; /* in flight (NULL: idle) */
	int stop, hold;
	int warned_busy;
	struct cow_set cow; /* update thread only */
	atomic_ullong written, failed, skipped, waited, take_ns_max, write_ns_max, cow_chunks;
};

static void snap_free(struct snap *s)
{
	if (!s)
		return;
	rps_free(s->data);
	rps_free(s);
}

/* Update thread: unhook the old records from the metas, free them. */
static void cow_release(struct cow_set *c)
{
	for (uint64_t i = 0; i < c->nslices; i++)
		if (c->sl[i].m->ckpt_cow == &c->sl[i])
			c->sl[i].m->ckpt_cow = NULL;
	rps_free(c->sl);
	rps_free((void *)c->states);
	memset(c, 0, sizeof(*c));
}

static void max_store(atomic_ullong *a, uint64_t v)
{
	uint64_t cur = atomic_load(a);

	while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

/* ---- copy-on-write ---------------------------------------------------------------- */

/* Copy chunk c of the slice (values and the state of its elements) into the
 * snapshot, by whoever claims it first; the other waits for the copy. */
static void cow_claim_copy(struct rps_ckpt_cow_slice *cs, uint64_t c, int by_update)
{
	unsigned char want = RPS_COW_TODO;

	if (atomic_compare_exchange_strong_explicit(&cs->h.state[c], &want, RPS_COW_BUSY,
						    memory_order_acquire, memory_order_acquire)) {
		uint64_t e0 = c * cs->epc, n = RPS_MIN(cs->epc, cs->cs.nelems - e0);

		memcpy(cs->dst + e0, rps_store_chunk_data(&cs->sh->store, &cs->m->sl, c),
		       n * sizeof(float));
		for (uint32_t j = 0; j < cs->cs.nstate; j++)
			memcpy(cs->dst + (1 + j) * cs->cs.nelems + e0, cs->src_s[j] + e0,
			       n * sizeof(float));
		atomic_store_explicit(&cs->h.state[c], RPS_COW_DONE, memory_order_release);
		if (by_update)
			atomic_fetch_add_explicit(&cs->sh->ckpt_async->cow_chunks, 1,
						  memory_order_relaxed);
		return;
	}
	while (atomic_load_explicit(&cs->h.state[c], memory_order_acquire) != RPS_COW_DONE)
		sched_yield(); /* the other side copies one chunk */
}

void rps_ckpt_cow_copy(struct rps_ckpt_cow_slice *cs, uint64_t c)
{
	cow_claim_copy(cs, c, 1);
}

void rps_ckpt_cow_slice_all(struct rps_slice_meta *m)
{
	struct rps_ckpt_cow_slice *cs = m->ckpt_cow;

	for (uint64_t c = 0; cs && c < cs->nchunks; c++)
		rps_ckpt_cow_chunk(m, c);
}

/* ---- the snapshot (update thread) ------------------------------------------------- */

static struct snap *snap_take(struct rps_shard *sh, struct cow_set *cow)
{
	uint64_t t0 = rps_now_ns(), nsl = 0, nfl = 0, nch = 0, at = 0, k = 0, ci = 0;
	struct snap *s;

	for (uint64_t i = 0; i <= sh->tab.mask; i++) {
		struct rps_slice_meta *m =
		    atomic_load_explicit(&sh->tab.slots[i], memory_order_relaxed);
		int nstate;

		if (!m || !m->nelems)
			continue;
		nstate = rps_optim_state_floats(rps_shard_slice_optim(sh, m)->kind);
		nsl++;
		nch += m->sl.nchunks;
		nfl += m->nelems * (1 + (uint64_t)(nstate > 0 ? nstate : 0));
	}
	memset(cow, 0, sizeof(*cow));
	s = rps_calloc(1, sizeof(*s));
	cow->sl = rps_calloc(nsl ? nsl : 1, sizeof(*cow->sl));
	cow->states = rps_calloc(nch ? nch : 1, sizeof(*cow->states)); /* RPS_COW_TODO */
	if (s) {
		s->bytes = nfl * sizeof(float);
		s->data = rps_malloc(s->bytes ? s->bytes : 1); /* touched by the copies */
	}
	if (!s || !s->data || !cow->sl || !cow->states) {
		snap_free(s);
		rps_free(cow->sl);
		rps_free((void *)cow->states);
		memset(cow, 0, sizeof(*cow));
		return NULL;
	}
	for (uint64_t i = 0; i <= sh->tab.mask; i++) {
		struct rps_slice_meta *m =
		    atomic_load_explicit(&sh->tab.slots[i], memory_order_relaxed);
		const struct rps_optim_opts *o;
		struct rps_ckpt_cow_slice *cs;
		int nstate;

		if (!m || !m->nelems)
			continue;
		o = rps_shard_slice_optim(sh, m);
		nstate = rps_optim_state_floats(o->kind);
		cs = &cow->sl[k++];
		cs->h.state = cow->states + ci;
		ci += m->sl.nchunks;
		cs->sh = sh;
		cs->m = m;
		cs->nchunks = m->sl.nchunks;
		cs->epc = m->sl.epc;
		cs->dst = s->data + at;
		cs->cs.key = m->key;
		cs->cs.slice = m->slice;
		cs->cs.kind = (uint32_t)o->kind;
		cs->cs.nelems = m->nelems;
		cs->cs.step = m->opt.step;
		cs->cs.nstate = nstate > 0 ? (uint32_t)nstate : 0;
		if (m->spec) { /* the job's spec goes with the slice, copied */
			cs->optim = m->spec->opts;
			cs->cs.optim = &cs->optim;
		}
		cs->cs.params = cs->dst;
		at += m->nelems;
		for (uint32_t j = 0; j < cs->cs.nstate; j++) {
			cs->src_s[j] = j ? m->opt.v : m->opt.m;
			cs->cs.state[j] = s->data + at;
			at += m->nelems;
		}
		m->ckpt_cow = cs; /* from now on a write copies the chunk first */
	}
	cow->nslices = k;
	s->sl = cow->sl;
	s->nslices = k;
	s->clock = sh->clock;
	s->rank = atomic_load(&sh->server_rank);
	s->pushes0 = atomic_load_explicit(&sh->pushes_applied, memory_order_relaxed);
	s->take_ns = rps_now_ns() - t0;
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
	/* every chunk not copied yet by the update thread (before it wrote into it) */
	for (uint64_t i = 0; i < s->nslices; i++)
		for (uint64_t c = 0; c < s->sl[i].nchunks; c++)
			cow_claim_copy(&s->sl[i], c, 0);
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
		RPS_DEBUG("shard %u: checkpoint %s: clock %llu, %llu slices, %llu bytes; taken in "
			  "%.1f ms by the update thread, copied and written in %.1f ms by the "
			  "writer, %llu pushes applied meanwhile (%llu chunks copied on write so "
			  "far)",
			  sh->p.idx, info.path, (unsigned long long)s->clock,
			  (unsigned long long)info.nslices, (unsigned long long)info.payload_bytes,
			  (double)s->take_ns / 1e6, (double)dt / 1e6,
			  (unsigned long long)(pushes - s->pushes0),
			  (unsigned long long)atomic_load(&a->cow_chunks));
	}
	publish_creq(sh, s->creq_gen, rc, info.path, info.nslices);
}

static void *writer_main(void *arg)
{
	struct rps_shard *sh = arg;
	struct rps_ckpt_async *a = sh->ckpt_async;

	/* background work: on a busy machine the update and network threads
	 * come first (Linux: a thread's own nice value); best effort */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), RPS_CKPT_WRITER_NICE))
		RPS_DEBUG("shard %u: checkpoint writer keeps its priority: %m", sh->p.idx);
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
	cow_release(&a->cow); /* the update thread has stopped: ours */
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

	cow_release(&a->cow); /* the previous snapshot's records: the writer is done */
	s = snap_take(sh, &a->cow);
	if (!s) {
		RPS_WARN("shard %u: no memory for a snapshot of the shard: the checkpoint at clock "
			 "%llu is written by the update thread",
			 sh->p.idx, (unsigned long long)sh->clock);
		return -ENOMEM;
	}
	max_store(&a->take_ns_max, s->take_ns);
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
			cow_release(&a->cow); /* nobody copies into s->data any more */
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
	st->take_ns_max = atomic_load(&a->take_ns_max);
	st->write_ns_max = atomic_load(&a->write_ns_max);
	st->cow_chunks = atomic_load(&a->cow_chunks);
}
