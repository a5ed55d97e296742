/* Checkpoints off the hot path: a copy-on-write snapshot taken by the update
 * thread, streamed into the file by the shard's writer thread
 * ("rps-ckpt-<shard>").
 *
 * Copy-on-write by chunk (the store's chunks, chunk_bytes each, and the same
 * elements of each optimizer state array). At the clock boundary the update
 * thread, the only writer of its shard, only records the snapshot: the
 * slices, their optimizer steps and specs, and a state byte per (array,
 * chunk), all COW_TODO; each slice's meta points to its record. The writer
 * thread then goes through the file in order (per slice: values, state[0],
 * state[1], chunk by chunk): it claims each TODO (array, chunk) (-> BUSY),
 * copies it into its one-chunk buffer, marks it DONE and appends it to the
 * file. Before the update thread writes into a chunk (write_runs, update.c:
 * pushes, BSP sums, assignments) it looks at the chunk's arrays: DONE or
 * SAVED, write; TODO or BUSY, save the old values in a side buffer first
 * (-> SAVED), which the writer appends and frees when it gets there. A chunk
 * the writer was copying (BUSY) is not waited for: the saved copy wins and
 * the writer, whose BUSY -> DONE then fails, takes it instead of its own
 * (which may hold the new values). So the file is the shard at the boundary,
 * the update thread never waits for the writer (which runs at SCHED_IDLE and
 * may lose its core in the middle of a chunk), and the snapshot holds in
 * memory only the chunks written into before the writer reached them.
 *
 * Why not a plain copy of the whole shard on the update thread: it is simple
 * but a pause of the whole shard: 100 MB took 170-220 ms on the loaded 2-core
 * test machine (page faults of the fresh buffer included), every push of the
 * shard waiting meanwhile, about as long as writing the file, and the shard's
 * memory twice while the file is written. With copy-on-write the pause is
 * the bookkeeping (0.2 ms for 100 MB), a push pays for saving only the chunks
 * it writes first (once per checkpoint), and the extra memory is those
 * chunks. With no snapshot in flight a write costs one pointer test per chunk.
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

#define RPS_CKPT_WRITER_NICE 10 /* without SCHED_IDLE: the writer thread's nice value */

/* State of one array (values, state[0], state[1]) of one chunk of a slice in
 * the snapshot in flight. */
#define COW_TODO  0 /* not written, not saved: the old values are in the shard */
#define COW_BUSY  1 /* being taken (by the writer or saved by the update thread) */
#define COW_DONE  2 /* the writer has it: the shard may change it */
#define COW_SAVED 3 /* the update thread saved the old values in side[]: likewise */

struct rps_ckpt_cow_slice {
	struct rps_shard *sh;
	struct rps_slice_meta *m;
	uint64_t nchunks;
	uint32_t epc;
	uint32_t narr;		/* 1 + nstate */
	atomic_uchar *state;	/* [narr * nchunks], array-major */
	float **side;		/* [narr * nchunks]: saved old values (COW_SAVED) */
	const float *src_s[2];	/* the optimizer state arrays at the snapshot */
	const atomic_int *finished; /* the writer went through every chunk */
	struct rps_ckpt_slice cs;   /* the record (its arrays are not used) */
	struct rps_optim_opts optim; /* cs.optim points here when the slice has a spec */
};

struct snap {
	uint64_t clock;
	uint32_t rank;
	uint32_t creq_gen; /* a control request's: publish its result */
	int tables;	   /* table files were written for it: prune after the commit */
	uint64_t nslices;
	struct rps_ckpt_cow_slice *sl; /* owned by the update thread (struct rps_ckpt_async.cow) */
	atomic_int *finished;
	uint32_t max_epc;
	uint64_t pushes0; /* pushes_applied when taken */
	uint64_t take_ns;
};

/* The records of the newest snapshot: the update thread frees them when it
 * takes the next one (the writer is done with them then) or at stop. */
struct cow_set {
	struct rps_ckpt_cow_slice *sl;
	uint64_t nslices;
	atomic_uchar *states;
	float **side;
	uint64_t nstates;
	atomic_int finished;
};

struct rps_ckpt_async {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct snap *job; /* in flight (NULL: idle) */
	int stop, hold;
	atomic_int hold_chunk; /* tests: the writer stops inside its next chunk copy */
	int in_chunk;
	int warned_busy;
	struct cow_set cow; /* update thread only */
	atomic_ullong written, failed, skipped, waited, take_ns_max, write_ns_max, cow_chunks;
	/* the slice the writer is copying a chunk of (NULL: none) */
	_Atomic(struct rps_ckpt_cow_slice *) reading;
};

static void snap_free(struct snap *s)
{
	rps_free(s);
}

/* Update thread: unhook the old records from the metas, free them. */
static void cow_release(struct cow_set *c)
{
	for (uint64_t i = 0; i < c->nslices; i++)
		if (c->sl[i].m->ckpt_cow == &c->sl[i])
			c->sl[i].m->ckpt_cow = NULL;
	for (uint64_t i = 0; c->side && i < c->nstates; i++)
		rps_free(c->side[i]); /* none left once the writer went through */
	rps_free(c->sl);
	rps_free((void *)c->states);
	rps_free(c->side);
	memset(c, 0, sizeof(*c));
}

static void max_store(atomic_ullong *a, uint64_t v)
{
	unsigned long long cur = atomic_load(a);

	while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

/* ---- copy-on-write ---------------------------------------------------------------- */

/* Array j (0: values, 1 + k: state[k]) of chunk c in the shard, and its length. */
static const float *cow_src(const struct rps_ckpt_cow_slice *cs, uint32_t j, uint64_t c,
			    uint64_t *n_p)
{
	uint64_t e0 = c * cs->epc;

	*n_p = RPS_MIN(cs->epc, cs->cs.nelems - e0);
	if (!j)
		return rps_store_chunk_data(&cs->sh->store, &cs->m->sl, c);
	return cs->src_s[j - 1] + e0;
}

/* Update thread, before it writes into chunk c of m. It never waits for the
 * writer: a chunk the writer is copying (COW_BUSY) is saved all the same
 * (both only read it until this returns) and the saved copy wins; the
 * writer then drops its own (see snap_write). Waiting there was a priority
 * inversion: the writer runs at SCHED_IDLE and may lose its core in the
 * middle of a chunk. */
void rps_ckpt_cow_copy(struct rps_slice_meta *m, uint64_t c)
{
	struct rps_ckpt_cow_slice *cs = m->ckpt_cow;

	if (atomic_load_explicit(cs->finished, memory_order_acquire)) {
		m->ckpt_cow = NULL; /* written: nothing to keep any more */
		return;
	}
	for (uint32_t j = 0; j < cs->narr; j++) {
		size_t i = (size_t)j * cs->nchunks + c;
		atomic_uchar *st = &cs->state[i];
		unsigned char cur = atomic_load_explicit(st, memory_order_acquire);
		const float *src;
		uint64_t n;
		float *b;

		if (cur >= COW_DONE)
			continue;
		src = cow_src(cs, j, c, &n);
		b = rps_malloc(n * sizeof(float));
		if (!b) {
			/* no memory to save it: let the writer take it first */
			RPS_WARN("shard %u: no memory to keep a chunk for the checkpoint in "
				 "flight: waiting for the writer",
				 cs->sh->p.idx);
			while (atomic_load_explicit(st, memory_order_acquire) < COW_DONE)
				sched_yield();
			continue;
		}
		memcpy(b, src, n * sizeof(float));
		cs->side[i] = b; /* published by the exchange below */
		for (;;) {
			if (atomic_compare_exchange_weak_explicit(st, &cur, COW_SAVED,
								  memory_order_seq_cst,
								  memory_order_seq_cst)) {
				atomic_fetch_add_explicit(&cs->sh->ckpt_async->cow_chunks, 1,
							  memory_order_relaxed);
				break;
			}
			if (cur >= COW_DONE) { /* the writer finished its copy first */
				cs->side[i] = NULL;
				rps_free(b);
				break;
			}
		}
	}
}

void rps_ckpt_cow_slice_all(struct rps_slice_meta *m)
{
	struct rps_ckpt_cow_slice *cs = m->ckpt_cow;

	if (!cs)
		return;
	for (uint64_t c = 0; m->ckpt_cow && c < cs->nchunks; c++)
		rps_ckpt_cow_copy(m, c);
	/* every chunk is saved or written; the writer may still be reading one it
	 * lost to a save: m's arrays are freed next, so wait for that copy */
	while (atomic_load_explicit(&cs->sh->ckpt_async->reading, memory_order_seq_cst) == cs)
		sched_yield();
}

/* ---- the snapshot (update thread) ------------------------------------------------- */

static struct snap *snap_take(struct rps_shard *sh, struct cow_set *cow)
{
	uint64_t t0 = rps_now_ns(), nsl = 0, nst = 0, k = 0, si = 0;
	struct snap *s;

	for (uint64_t i = 0; i <= sh->tab.mask; i++) {
		struct rps_slice_meta *m =
		    atomic_load_explicit(&sh->tab.slots[i], memory_order_relaxed);
		int nstate;

		if (!m || !m->nelems)
			continue;
		nstate = rps_optim_state_floats(rps_shard_slice_optim(sh, m)->kind);
		nsl++;
		nst += m->sl.nchunks * (1 + (uint64_t)(nstate > 0 ? nstate : 0));
	}
	memset(cow, 0, sizeof(*cow));
	s = rps_calloc(1, sizeof(*s));
	cow->sl = rps_calloc(nsl ? nsl : 1, sizeof(*cow->sl));
	cow->states = rps_calloc(nst ? nst : 1, sizeof(*cow->states)); /* COW_TODO */
	cow->side = rps_calloc(nst ? nst : 1, sizeof(*cow->side));
	cow->nstates = nst;
	if (!s || !cow->sl || !cow->states || !cow->side) {
		rps_free(s);
		cow_release(cow);
		return NULL;
	}
	atomic_init(&cow->finished, 0);
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
		cs->sh = sh;
		cs->m = m;
		cs->nchunks = m->sl.nchunks;
		cs->epc = m->sl.epc;
		cs->narr = 1 + (uint32_t)(nstate > 0 ? nstate : 0);
		cs->state = cow->states + si;
		cs->side = cow->side + si;
		si += cs->nchunks * cs->narr;
		cs->finished = &cow->finished;
		cs->cs.key = m->key;
		cs->cs.slice = m->slice;
		cs->cs.kind = (uint32_t)o->kind;
		cs->cs.nelems = m->nelems;
		cs->cs.step = m->opt.step;
		cs->cs.nstate = cs->narr - 1;
		if (m->spec) { /* the job's spec goes with the slice, copied */
			cs->optim = m->spec->opts;
			cs->cs.optim = &cs->optim;
		}
		for (uint32_t j = 0; j < cs->cs.nstate; j++)
			cs->src_s[j] = j ? m->opt.v : m->opt.m;
		if (cs->epc > s->max_epc)
			s->max_epc = cs->epc;
		m->ckpt_cow = cs; /* from now on a write saves the old values first */
	}
	cow->nslices = k;
	s->sl = cow->sl;
	s->nslices = k;
	s->finished = &cow->finished;
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

/* Tests (rps_shard_ckpt_async_hold_chunk): the writer has copied a chunk it
 * claimed (BUSY) and waits until released before it marks it DONE. */
static void writer_hold_in_chunk(struct rps_ckpt_async *a)
{
	pthread_mutex_lock(&a->lock);
	a->in_chunk = 1;
	pthread_cond_broadcast(&a->cv);
	while (atomic_load(&a->hold_chunk) && !a->stop)
		pthread_cond_wait(&a->cv, &a->lock);
	a->in_chunk = 0;
	pthread_mutex_unlock(&a->lock);
}

static void snap_write(struct rps_shard *sh, struct snap *s)
{
	struct rps_ckpt_async *a = sh->ckpt_async;
	struct rps_ckpt_writer *w = NULL;
	struct rps_ckpt_info info;
	uint64_t t0 = rps_now_ns(), dt;
	float *tmp;
	int rc;

	memset(&info, 0, sizeof(info));
	tmp = rps_malloc((s->max_epc ? s->max_epc : 1) * sizeof(float));
	rc = tmp ? rps_ckpt_writer_open(sh->p.ckpt_dir, s->rank, sh->p.idx, sh->p.server_shards,
					s->clock, &w)
		 : -ENOMEM;
	/* every chunk of every array, in file order: taken from the shard (under
	 * its claim) or from what the update thread saved before writing it; after
	 * an error only to release them */
	for (uint64_t i = 0; i < s->nslices; i++) {
		struct rps_ckpt_cow_slice *cs = &s->sl[i];

		if (!rc)
			rc = rps_ckpt_writer_begin_slice(w, &cs->cs);
		for (uint32_t j = 0; j < cs->narr; j++) {
			for (uint64_t c = 0; c < cs->nchunks; c++) {
				size_t k = (size_t)j * cs->nchunks + c;
				const float *from;
				uint64_t n;

				unsigned char want = COW_TODO;

				from = cow_src(cs, j, c, &n);
				/* announced before the claim (rps_ckpt_cow_slice_all) */
				atomic_store_explicit(&a->reading, cs, memory_order_seq_cst);
				if (atomic_compare_exchange_strong_explicit(
					&cs->state[k], &want, COW_BUSY, memory_order_seq_cst,
					memory_order_seq_cst)) {
					unsigned char busy = COW_BUSY;

					if (!rc)
						memcpy(tmp, from, n * sizeof(float));
					if (atomic_load_explicit(&a->hold_chunk, memory_order_relaxed))
						writer_hold_in_chunk(a);
					/* DONE, unless the update thread saved the chunk
					 * meanwhile (SAVED): then its copy is the one of the
					 * snapshot (ours may hold its new values) */
					if (atomic_compare_exchange_strong_explicit(
						&cs->state[k], &busy, COW_DONE,
						memory_order_acq_rel, memory_order_acquire))
						from = tmp;
					else
						from = cs->side[k];
				} else {
					from = cs->side[k]; /* COW_SAVED */
				}
				atomic_store_explicit(&a->reading, NULL, memory_order_release);
				if (!rc)
					rc = rps_ckpt_writer_append(w, from, n);
				if (from != tmp) {
					rps_free(cs->side[k]);
					cs->side[k] = NULL;
				}
			}
		}
		if (!rc)
			rc = rps_ckpt_writer_end_slice(w);
	}
	atomic_store_explicit(s->finished, 1, memory_order_release);
	rps_free(tmp);
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
			  "%.1f ms by the update thread, written in %.1f ms by the writer, %llu "
			  "pushes applied meanwhile (%llu chunk arrays kept for it on write so "
			  "far)",
			  sh->p.idx, info.path, (unsigned long long)s->clock,
			  (unsigned long long)info.nslices, (unsigned long long)info.payload_bytes,
			  (double)s->take_ns / 1e6, (double)dt / 1e6,
			  (unsigned long long)(pushes - s->pushes0),
			  (unsigned long long)atomic_load(&a->cow_chunks));
	}
	publish_creq(sh, s->creq_gen, rc, info.path, info.nslices);
}

/* Background work: the writer runs at SCHED_IDLE, so any other thread that
 * wakes on its core (an update or network thread, a worker) takes the core at
 * once. At nice 10 (before) it kept the core until the next scheduler tick
 * (4 ms at HZ=250): with a wake-up preemption refused, pushes waited 3-9 ms
 * behind each writer (perf sched timehist, docs/benchmarks.md). With
 * autogroups (the default) it competes at that level only with its own
 * process's threads, so on a busy machine it still gets the server's share.
 * Where SCHED_IDLE is refused, nice 10 (best effort). */
static void writer_background(struct rps_shard *sh)
{
	struct sched_param sp;

	memset(&sp, 0, sizeof(sp));
	if (!pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp))
		return;
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), RPS_CKPT_WRITER_NICE))
		RPS_DEBUG("shard %u: checkpoint writer keeps its priority: %m", sh->p.idx);
}

static void *writer_main(void *arg)
{
	struct rps_shard *sh = arg;
	struct rps_ckpt_async *a = sh->ckpt_async;

	writer_background(sh);
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

void rps_shard_ckpt_async_hold_chunk(struct rps_shard *sh, int hold)
{
	struct rps_ckpt_async *a = sh->ckpt_async;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	atomic_store(&a->hold_chunk, hold);
	a->hold = 0;
	pthread_cond_broadcast(&a->cv);
	if (hold)
		while (!a->in_chunk && !a->stop)
			pthread_cond_wait(&a->cv, &a->lock);
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
