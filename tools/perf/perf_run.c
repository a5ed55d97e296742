/* rdmaps-perf: the measuring loops of one worker process.
 *
 * Per size: declare this size's keys (every thread its own), meet the other
 * worker processes, warm up, meet again, then the timed part. The threads of
 * a process share its rps_worker (the library takes any number of caller
 * threads); each thread has its own keys and its own pull buffers. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perflib.h"

#define PERF_PAGE     4096
#define PERF_LAT_GROW (1u << 20)

struct perf_proc;

struct perf_thread {
	struct perf_proc *pp;
	int idx;
	pthread_t tid;
	rps_key_t *keys; /* pp->keys + idx * nkeys */
	size_t *lens;	 /* pp->lens + idx * nkeys */
	float *bufs;	 /* nslots * slot_elems floats (pull / pushpull values) */
	int nslots;
	struct rps_req **reqs; /* bw: nslots requests in flight */
	uint64_t *samples;     /* lat modes: ns per timed request */
	size_t nsamples, cap;
	uint64_t done; /* timed requests completed */
	uint64_t t1_ns;
	int rc;
};

struct perf_proc {
	struct rps_worker *w;
	const struct rps_perf_params *p;
	const struct rps_perf_hooks *hooks;
	int rank;
	int size_idx;
	size_t bytes;
	size_t elems;
	int nkeys;
	uint64_t iters, warmup;
	rps_key_t *keys; /* threads * nkeys */
	size_t *lens;
	float *grads; /* nkeys * elems, read only, shared by the threads */
	pthread_barrier_t bar;
	pthread_mutex_t gate_lock; /* threads start once the barrier is set up */
	pthread_cond_t gate_cond;
	int gate_open;
	uint64_t t0_ns, deadline_ns;
	uint64_t cpu0_ns;
	_Atomic int abort;
	int rc; /* the first failure */
	pthread_mutex_t lock;
	int timeout_ms;
};

static void fail(struct perf_proc *pp, int rc, const char *what)
{
	pthread_mutex_lock(&pp->lock);
	if (!pp->rc) {
		pp->rc = rc;
		fprintf(stderr, "rdmaps-perf: worker %d: %s (%zu B): %s\n", pp->rank, what,
			pp->bytes, rps_strerror(rc));
	}
	pthread_mutex_unlock(&pp->lock);
	atomic_store(&pp->abort, 1);
}

static int keep_going(struct perf_proc *pp, uint64_t n, uint64_t limit, int timed, uint64_t now)
{
	if (atomic_load_explicit(&pp->abort, memory_order_relaxed))
		return 0;
	if (timed && pp->deadline_ns)
		return now < pp->deadline_ns;
	return n < limit;
}

static int record(struct perf_thread *th, uint64_t ns)
{
	if (th->nsamples == th->cap) {
		size_t cap = th->cap ? th->cap * 2 : PERF_LAT_GROW;
		uint64_t *s = realloc(th->samples, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		th->samples = s;
		th->cap = cap;
	}
	th->samples[th->nsamples++] = ns;
	return 0;
}

/* One request of a lat mode (and of pushpull), waited for. */
static int one_request(struct perf_thread *th, uint64_t i)
{
	struct perf_proc *pp = th->pp;
	int k = (int)(i % (uint64_t)pp->nkeys);
	struct rps_req *req = NULL;
	int rc;

	switch (pp->p->mode) {
	case RPS_PERF_PULL_LAT:
		rc = rps_worker_pull(pp->w, &th->keys[k], th->bufs, &th->lens[k], 1, &req);
		break;
	case RPS_PERF_PUSH_LAT:
		rc = rps_worker_push(pp->w, &th->keys[k], pp->grads, &th->lens[k], 1, &req);
		break;
	default: /* pushpull: every key of the thread, one step */
		rc = rps_worker_pushpull(pp->w, th->keys, pp->grads, th->bufs, th->lens,
					 (size_t)pp->nkeys, &req);
		break;
	}
	if (rc)
		return rc;
	return rps_req_wait(req, pp->timeout_ms);
}

static int lat_loop(struct perf_thread *th, uint64_t limit, int timed)
{
	struct perf_proc *pp = th->pp;
	uint64_t now = perf_now_ns();

	for (uint64_t i = 0; keep_going(pp, i, limit, timed, now); i++) {
		uint64_t t0 = now;
		int rc = one_request(th, i);

		now = perf_now_ns();
		if (rc) {
			fail(pp, rc, rps_perf_mode_name(pp->p->mode));
			return rc;
		}
		if (timed) {
			rc = record(th, now - t0);
			if (rc) {
				fail(pp, rc, "recording a sample");
				return rc;
			}
			th->done++;
		}
	}
	return 0;
}

/* Up to nslots requests in flight, completed in order: perftest's tx depth. */
static int bw_loop(struct perf_thread *th, uint64_t limit, int timed)
{
	struct perf_proc *pp = th->pp;
	struct rps_req **reqs = th->reqs;
	uint64_t posted = 0, done = 0;
	int pull = pp->p->mode == RPS_PERF_PULL_BW;
	int rc = 0;

	for (;;) {
		/* post while there is room and work */
		while (posted - done < (uint64_t)th->nslots &&
		       keep_going(pp, posted, limit, timed,
				  timed && pp->deadline_ns ? perf_now_ns() : 0)) {
			int slot = (int)(posted % (uint64_t)th->nslots);
			int k = (int)(posted % (uint64_t)pp->nkeys);

			if (pull)
				rc = rps_worker_pull(pp->w, &th->keys[k],
						     th->bufs + (size_t)slot * pp->elems,
						     &th->lens[k], 1, &reqs[slot]);
			else
				rc = rps_worker_push(pp->w, &th->keys[k], pp->grads, &th->lens[k],
						     1, &reqs[slot]);
			if (rc) {
				fail(pp, rc, pull ? "pull" : "push");
				break;
			}
			posted++;
		}
		if (done == posted)
			break;
		int wrc = rps_req_wait(reqs[done % (uint64_t)th->nslots], pp->timeout_ms);

		if (wrc == -ETIMEDOUT) {
			fail(pp, wrc, pull ? "pull (no answer)" : "push (no answer)");
			return wrc; /* the request stays alive: leak rather than hang */
		}
		if (wrc && !rc) {
			rc = wrc;
			fail(pp, wrc, pull ? "pull" : "push");
		}
		done++;
		if (timed)
			th->done++;
	}
	return rc;
}

static int loop(struct perf_thread *th, uint64_t limit, int timed)
{
	if (rps_perf_mode_is_lat(th->pp->p->mode))
		return lat_loop(th, limit, timed);
	return bw_loop(th, limit, timed);
}

static void *thread_main(void *arg)
{
	struct perf_thread *th = arg;
	struct perf_proc *pp = th->pp;

	pthread_mutex_lock(&pp->gate_lock);
	while (!pp->gate_open)
		pthread_cond_wait(&pp->gate_cond, &pp->gate_lock);
	pthread_mutex_unlock(&pp->gate_lock);

	if (!atomic_load(&pp->abort))
		th->rc = loop(th, pp->warmup, 0);
	pthread_barrier_wait(&pp->bar);
	if (th->idx == 0 && !atomic_load(&pp->abort)) {
		int rc = 0;

		if (pp->p->procs > 1)
			rc = rps_worker_barrier(pp->w);
		if (rc)
			fail(pp, rc, "barrier before the timed part");
		else if (pp->hooks && pp->hooks->start)
			rc = pp->hooks->start(pp->hooks->arg, pp->size_idx);
		if (rc)
			fail(pp, rc, "start");
		pp->cpu0_ns = rps_perf_self_cpu_ns();
		pp->t0_ns = perf_now_ns();
		if (pp->p->duration_s > 0)
			pp->deadline_ns = pp->t0_ns + (uint64_t)(pp->p->duration_s * 1e9);
	}
	pthread_barrier_wait(&pp->bar);
	if (!th->rc && !atomic_load(&pp->abort))
		th->rc = loop(th, pp->iters, 1);
	th->t1_ns = perf_now_ns();
	return NULL;
}

/* Keys of one size: thread t's key k is meant for server (g % servers),
 * g = global thread * nkeys + k, so that several keys spread over the
 * servers evenly instead of where the hash happens to put them. */
static void make_keys(struct perf_proc *pp)
{
	const struct rps_config *cfg = pp->p->config;
	struct rps_config *own = NULL;
	uint32_t nservers = (uint32_t)rps_worker_num_servers(pp->w);
	int spread = nservers > 1;

	if (spread && !cfg) {
		spread = rps_config_create(&own) == 0;
		cfg = own;
	}
	for (int t = 0; t < pp->p->threads; t++) {
		uint64_t gt = (uint64_t)pp->rank * (uint64_t)pp->p->threads + (uint64_t)t;

		for (int k = 0; k < pp->nkeys; k++) {
			uint64_t g = gt * (uint64_t)pp->nkeys + (uint64_t)k;
			uint64_t base = 0x7000000000000000ull | ((uint64_t)pp->size_idx << 48) |
					((gt & 0xffff) << 32) | (((uint64_t)k & 0xffffff) << 8);
			rps_key_t key = base;

			for (uint64_t j = 0; spread && j < 256; j++) {
				uint32_t server;

				if (rps_key_server(cfg, nservers, base + j, &server))
					break;
				if (server == g % (uint64_t)nservers) {
					key = base + j;
					break;
				}
			}
			pp->keys[t * pp->nkeys + k] = key;
			pp->lens[t * pp->nkeys + k] = pp->elems;
		}
	}
	rps_config_destroy(own);
}

static int declare(struct perf_proc *pp)
{
	struct rps_init init = {.kind = RPS_INIT_ZEROS};
	size_t n = (size_t)pp->p->threads * (size_t)pp->nkeys;
	int rc = rps_worker_declare(pp->w, pp->keys, pp->lens, n, &init);

	if (rc == -EEXIST)
		fprintf(stderr,
			"rdmaps-perf: the server already holds these keys with another length:\n"
			"  client and server disagree on the message size or the number of keys\n"
			"  (a server side used by an earlier run?): restart the server side\n");
	else if (rc)
		fprintf(stderr, "rdmaps-perf: declaring %zu keys of %zu B: %s\n", n, pp->bytes,
			rps_strerror(rc));
	return rc;
}

static void *alloc_touched(size_t bytes)
{
	void *p = aligned_alloc(PERF_PAGE, PERF_ALIGN_UP(bytes ? bytes : 1, PERF_PAGE));

	if (p)
		memset(p, 0, bytes);
	return p;
}

static int run_size(struct perf_proc *pp, struct perf_thread *ths, struct rps_perf_result *res)
{
	const struct rps_perf_params *p = pp->p;
	int nth = p->threads, rc, started = 0;
	size_t slot_bytes;

	memset(res, 0, sizeof(*res));
	res->bytes = pp->bytes;
	res->server_cpu_pct = -1;
	res->server_cpu_s = -1;
	res->client_cpu_pct = -1;
	res->nworkers = 1;
	pp->iters = rps_perf_iters_for(p, pp->bytes);
	pp->warmup = rps_perf_warmup_for(p, pp->iters, pp->bytes);
	pp->deadline_ns = 0;
	pp->rc = 0;
	atomic_store(&pp->abort, 0);

	make_keys(pp);
	rc = declare(pp);
	if (rc)
		return rc;

	pp->grads = alloc_touched((size_t)pp->nkeys * pp->bytes);
	if (!pp->grads)
		return -ENOMEM;
	for (size_t i = 0; i < (size_t)pp->nkeys * pp->elems; i++)
		pp->grads[i] = 1e-3f * (float)((i % 7) + 1);
	/* values: one slot (lat), the whole key set (pushpull) or depth slots
	 * within RPS_PERF_SLOT_BYTES_MAX (bw; pushes send from grads) */
	for (int t = 0; t < nth; t++) {
		struct perf_thread *th = &ths[t];

		memset(th, 0, sizeof(*th));
		th->pp = pp;
		th->idx = t;
		th->keys = pp->keys + (size_t)t * (size_t)pp->nkeys;
		th->lens = pp->lens + (size_t)t * (size_t)pp->nkeys;
		if (p->mode == RPS_PERF_PUSHPULL) {
			th->nslots = 1;
			slot_bytes = (size_t)pp->nkeys * pp->bytes;
		} else if (rps_perf_mode_is_lat(p->mode)) {
			th->nslots = 1;
			slot_bytes = pp->bytes;
		} else {
			size_t fit = RPS_PERF_SLOT_BYTES_MAX / pp->bytes;

			th->nslots = (int)PERF_MIN((size_t)p->depth, PERF_MAX(fit, (size_t)1));
			slot_bytes =
			    p->mode == RPS_PERF_PULL_BW ? (size_t)th->nslots * pp->bytes : 0;
			th->reqs = calloc((size_t)th->nslots, sizeof(*th->reqs));
			if (!th->reqs) {
				rc = -ENOMEM;
				goto out_free;
			}
		}
		if (slot_bytes) {
			th->bufs = alloc_touched(slot_bytes);
			if (!th->bufs) {
				rc = -ENOMEM;
				goto out_free;
			}
			/* pulled into again and again: read directly, no bounce
			 * copy (best effort: unregistered pulls work too) */
			(void)rps_worker_register(pp->w, th->bufs, slot_bytes);
		}
		if (rps_perf_mode_is_lat(p->mode) && p->duration_s <= 0) {
			th->cap = pp->iters;
			th->samples = malloc(th->cap * sizeof(uint64_t));
			if (!th->samples) {
				rc = -ENOMEM;
				goto out_free;
			}
			memset(th->samples, 0, th->cap * sizeof(uint64_t));
		}
	}

	if (p->procs > 1) {
		/* nobody warms up while another process still measures */
		rc = rps_worker_barrier(pp->w);
		if (rc) {
			fprintf(stderr, "rdmaps-perf: barrier: %s\n", rps_strerror(rc));
			goto out_free;
		}
	}
	/* threads wait at the gate until the barrier knows how many started */
	pp->gate_open = 0;
	pp->t0_ns = 0;
	for (int t = 0; t < nth; t++) {
		int err = pthread_create(&ths[t].tid, NULL, thread_main, &ths[t]);

		if (err) {
			fprintf(stderr, "rdmaps-perf: starting thread %d: %s\n", t, strerror(err));
			fail(pp, -err, "starting threads");
			break;
		}
		{
			char nm[16];

			snprintf(nm, sizeof(nm), "perf-%d", t);
			pthread_setname_np(ths[t].tid, nm);
		}
		started++;
	}
	if (started)
		pthread_barrier_init(&pp->bar, NULL, (unsigned)started);
	pthread_mutex_lock(&pp->gate_lock);
	pp->gate_open = 1;
	pthread_cond_broadcast(&pp->gate_cond);
	pthread_mutex_unlock(&pp->gate_lock);
	for (int t = 0; t < started; t++)
		pthread_join(ths[t].tid, NULL);
	if (!started) {
		rc = pp->rc;
		goto out_free;
	}
	pthread_barrier_destroy(&pp->bar);

	uint64_t t1 = 0, cpu1 = rps_perf_self_cpu_ns();

	for (int t = 0; t < nth; t++) {
		res->iters += ths[t].done;
		if (ths[t].t1_ns > t1)
			t1 = ths[t].t1_ns;
	}
	res->t0_ns = pp->t0_ns;
	res->t1_ns = t1;
	if (p->mode == RPS_PERF_PUSHPULL)
		res->moved = res->iters * 2 * (uint64_t)pp->nkeys * pp->bytes;
	else
		res->moved = res->iters * pp->bytes;
	if (t1 > pp->t0_ns) {
		double secs = (double)(t1 - pp->t0_ns) / 1e9;

		res->bw_MBps = (double)res->moved / secs / 1e6;
		res->msg_rate_Mps = (double)res->iters / secs / 1e6;
		res->client_cpu_pct = (double)(cpu1 - pp->cpu0_ns) / 1e9 / secs * 100.0;
	}
	if (rps_perf_mode_is_lat(p->mode)) {
		size_t total = 0, off = 0;

		for (int t = 0; t < nth; t++)
			total += ths[t].nsamples;
		uint64_t *all =
		    nth == 1 ? ths[0].samples : malloc(PERF_MAX(total, (size_t)1) * 8);

		if (!all) {
			rc = -ENOMEM;
			goto out_free;
		}
		if (nth > 1)
			for (int t = 0; t < nth; t++) {
				memcpy(all + off, ths[t].samples, ths[t].nsamples * 8);
				off += ths[t].nsamples;
			}
		rps_perf_lat_stats(all, total, res);
		if (nth > 1)
			free(all);
	}
	res->errors = pp->rc ? 1 : 0;
	rc = pp->rc;
	if (!rc && pp->hooks && pp->hooks->stop)
		rc = pp->hooks->stop(pp->hooks->arg, pp->size_idx, res);
out_free:
	for (int t = 0; t < nth; t++) {
		if (ths[t].bufs)
			rps_worker_unregister(pp->w, ths[t].bufs);
		free(ths[t].bufs);
		free(ths[t].samples);
		free(ths[t].reqs);
		ths[t].reqs = NULL;
		ths[t].bufs = NULL;
		ths[t].samples = NULL;
	}
	free(pp->grads);
	pp->grads = NULL;
	return rc;
}

int rps_perf_run(struct rps_worker *w, const struct rps_perf_params *p, int rank,
		 const struct rps_perf_hooks *hooks, struct rps_perf_result *results)
{
	struct perf_proc pp;
	struct perf_thread *ths;
	int rc = 0;

	if (p->threads < 1 || p->threads > RPS_PERF_MAX_THREADS || p->keys < 1 || p->depth < 1 ||
	    p->nsizes < 1)
		return -EINVAL;
	memset(&pp, 0, sizeof(pp));
	pp.w = w;
	pp.p = p;
	pp.hooks = hooks;
	pp.rank = rank;
	pp.nkeys = p->keys;
	pp.timeout_ms = p->req_timeout_ms > 0 ? p->req_timeout_ms : 60000;
	pthread_mutex_init(&pp.lock, NULL);
	pthread_mutex_init(&pp.gate_lock, NULL);
	pthread_cond_init(&pp.gate_cond, NULL);
	pp.keys = calloc((size_t)p->threads * (size_t)p->keys, sizeof(*pp.keys));
	pp.lens = calloc((size_t)p->threads * (size_t)p->keys, sizeof(*pp.lens));
	ths = calloc((size_t)p->threads, sizeof(*ths));
	if (!pp.keys || !pp.lens || !ths) {
		rc = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < p->nsizes && !rc; i++) {
		if (p->sizes[i] < RPS_PERF_MIN_SIZE || p->sizes[i] % 4) {
			fprintf(stderr, "rdmaps-perf: size %zu: need a multiple of 4, >= %d\n",
				p->sizes[i], RPS_PERF_MIN_SIZE);
			rc = -EINVAL;
			break;
		}
		pp.size_idx = i;
		pp.bytes = p->sizes[i];
		pp.elems = p->sizes[i] / 4;
		rc = run_size(&pp, ths, &results[i]);
	}
out:
	free(ths);
	free(pp.keys);
	free(pp.lens);
	pthread_mutex_destroy(&pp.lock);
	pthread_mutex_destroy(&pp.gate_lock);
	pthread_cond_destroy(&pp.gate_cond);
	return rc;
}
