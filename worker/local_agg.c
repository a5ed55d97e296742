/* Aggregation on the host before the network: rps_worker_local_pushpull
 * (<rdmaps/local.h>, docs/local-aggregation.md). The segments, waits and
 * liveness are in local_agg_shm.c; this file finds the host's group and runs
 * a step.
 *
 * A step s of the group (members in rank order, the leader first):
 *   follower: copies its gradient into its slot, publishes slot.seq = s,
 *             sends its CLOCK (no push: its counts are 0), waits for
 *             ctl.done >= s, copies the pulled values out;
 *   leader:   waits for every follower's seq >= s (worker timeout; a dead
 *             one is reported by rank), sums the gradients in rank order
 *             into its own slot, pushes the sum, ends the clock, pulls into
 *             the shared values, publishes status and done = s.
 * A follower writes its slot of s + 1 only after done >= s, and the leader
 * writes the values of s + 1 only after every follower arrived at s + 1,
 * that is after each copied the values of s: no other lock is needed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cblas.h>
#include <rdmaps/local.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/local_agg.h"
#include "worker/worker_int.h"

enum { LOCAL_NONE = 0, LOCAL_ALONE = 1, LOCAL_GROUP = 2 };

struct rps_wlocal {
	int mode;	    /* LOCAL_* */
	int broken;	    /* 0, or the -errno every later call returns */
	uint32_t size;	    /* members */
	uint32_t index;	    /* ours in members[] */
	uint32_t *members;  /* their ranks, ascending: members[0] leads */
	struct rps_lagg_ctl *ctl;
	struct rps_lagg_life *life;
	void *data;
	size_t data_bytes;
	size_t stride;	    /* bytes of one slot in data */
	uint64_t elems;
	uint64_t layout;
	uint32_t steps;
	int registered;	    /* the values area is registered with the worker */
	char name[64];	    /* the ctl segment; the data one is name + "-d" */
};

/* ---- hashing ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
#define FNV0 0xcbf29ce484222325ull

static uint64_t layout_hash(const rps_key_t *keys, const size_t *lens, size_t n)
{
	uint64_t h = FNV0;

	for (size_t i = 0; i < n; i++) {
		uint64_t k = keys[i], l = lens[i];

		h = fnv(h, &k, sizeof(k));
		h = fnv(h, &l, sizeof(l));
	}
	return h;
}

/* The job's key: the scheduler's address, the user, and every worker node
 * (id, rank, pid) of the map, in any order. The same on every worker of the
 * job, another for any other job. */
static int job_key(struct rps_worker *w, uint64_t *key_p)
{
	struct rps_node *nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes));
	struct rps_map map;
	uint64_t h, sum = 0;
	uint32_t uid = (uint32_t)getuid();
	int nn;

	if (!nodes)
		return -ENOMEM;
	nn = rps_ctl_map(w->ctl, &map, nodes, RPS_MAX_NODES);
	if (nn < 0) {
		rps_free(nodes);
		return nn;
	}
	for (int i = 0; i < nn; i++) {
		uint32_t v[3] = { nodes[i].id, nodes[i].rank, nodes[i].pid };

		if (nodes[i].role != RPS_ROLE_WORKER)
			continue;
		sum += fnv(FNV0, v, sizeof(v)) * 0x9e3779b97f4a7c15ull;
	}
	rps_free(nodes);
	h = fnv(FNV0, w->scheduler, strlen(w->scheduler));
	h = fnv(h, &uid, sizeof(uid));
	*key_p = fnv(h, &sum, sizeof(sum));
	return 0;
}

/* ---- tearing down ---- */

static void local_unmap(struct rps_worker *w, struct rps_wlocal *l)
{
	if (l->registered) {
		rps_worker_unregister(w, (char *)l->data + (size_t)l->size * l->stride);
		l->registered = 0;
	}
	rps_lagg_unmap(l->data, l->data_bytes);
	l->data = NULL;
	/* the peers see us gone from now on (not "dead": we are not in a step) */
	rps_lagg_life_stop(l->life);
	l->life = NULL;
	rps_lagg_unmap(l->ctl, sizeof(*l->ctl));
	l->ctl = NULL;
}

void rps_wlocal_fini(struct rps_worker *w)
{
	struct rps_wlocal *l = w ? w->local : NULL;

	if (!l)
		return;
	local_unmap(w, l);
	rps_free(l->members);
	rps_free(l);
	w->local = NULL;
}

/* The group cannot go on: tell the others (failed, status, done) and keep
 * the error for every later call. */
static int group_fail(struct rps_wlocal *l, uint32_t why_rank, int rc)
{
	if (l->ctl) {
		uint32_t zero = 0;

		atomic_compare_exchange_strong(&l->ctl->failed, &zero, why_rank + 1);
		if (l->index == 0) {
			atomic_store(&l->ctl->status, rc);
			atomic_store(&l->ctl->status_step, l->steps);
			atomic_store_explicit(&l->ctl->done, l->steps, memory_order_release);
			rps_lagg_wake(&l->ctl->done);
		}
	}
	l->broken = rc;
	return rc;
}

/* ---- finding the group (first call) ---- */

static uint64_t deadline(const struct rps_worker *w)
{
	return rps_now_ns() + (uint64_t)w->timeout_ms * 1000000ull;
}

/* The leader: a fresh data segment, announced in ctl, unlinked once every
 * follower mapped it. */
static int leader_setup(struct rps_worker *w, struct rps_wlocal *l, const char *dname)
{
	struct rps_lagg_ctl *ctl = l->ctl;
	int rc = rps_lagg_data_create(dname, l->data_bytes, &l->data);

	if (rc)
		return rc;
	ctl->data_elems = l->elems;
	ctl->data_bytes = l->data_bytes;
	ctl->layout = l->layout;
	atomic_store_explicit(&ctl->data_ready, 1, memory_order_release);
	rps_lagg_wake(&ctl->data_ready);
	rc = rps_lagg_wait(ctl, &ctl->attached, l->size - 1, NULL, deadline(w));
	shm_unlink(dname);
	if (rc) {
		uint32_t late = UINT32_MAX;

		for (uint32_t i = 1; i < l->size && late == UINT32_MAX; i++)
			if (!rps_lagg_alive(&ctl->slot[l->members[i]]))
				late = l->members[i];
		if (late != UINT32_MAX)
			RPS_ERR("local aggregation: worker %u of this host is gone before it "
				"attached to %s", late, dname);
		else
			RPS_ERR("local aggregation: %u of %u workers of this host attached to %s "
				"within %d ms (%s)", atomic_load(&ctl->attached), l->size - 1, dname,
				w->timeout_ms, rps_strerror(rc));
		return group_fail(l, late == UINT32_MAX ? w->rank : late, rc);
	}
	/* pulls land in the values area: read into it directly over rdma */
	l->registered = rps_worker_register(w, (char *)l->data + (size_t)l->size * l->stride,
					    l->data_bytes - (size_t)l->size * l->stride) == 0;
	return 0;
}

static int follower_setup(struct rps_worker *w, struct rps_wlocal *l, const char *dname)
{
	struct rps_lagg_ctl *ctl = l->ctl;
	uint32_t lead = l->members[0];
	int rc = rps_lagg_wait(ctl, &ctl->data_ready, 1, &ctl->slot[lead], deadline(w));

	if (rc) {
		RPS_ERR("local aggregation: the host's leader (worker %u) did not create %s: %s",
			lead, dname, rc == -EHOSTDOWN ? "it is gone" : rps_strerror(rc));
		return group_fail(l, lead, rc);
	}
	if (ctl->layout != l->layout || ctl->data_elems != l->elems ||
	    ctl->data_bytes != l->data_bytes) {
		RPS_ERR("local aggregation: worker %u (the host's leader) steps with other keys or "
			"lengths (%llu elements) than worker %u (%llu): every worker must call "
			"rps_worker_local_pushpull with the same keys and lengths",
			lead, (unsigned long long)ctl->data_elems, w->rank,
			(unsigned long long)l->elems);
		return group_fail(l, w->rank, -EINVAL);
	}
	rc = rps_lagg_data_open(dname, l->data_bytes, &l->data);
	if (rc)
		return group_fail(l, w->rank, rc);
	atomic_fetch_add_explicit(&ctl->attached, 1, memory_order_acq_rel);
	rps_lagg_wake(&ctl->attached);
	return 0;
}

static int discover(struct rps_worker *w, struct rps_wlocal *l)
{
	struct rps_lagg_ctl *ctl;
	struct rps_lagg_slot *me;
	char dname[80];
	uint64_t key;
	int rc;

	rc = job_key(w, &key);
	if (rc)
		return rc;
	snprintf(l->name, sizeof(l->name), "%s%016llx", RPS_LAGG_PREFIX, (unsigned long long)key);
	snprintf(dname, sizeof(dname), "%s-d", l->name);
	rps_lagg_sweep(RPS_MAX(60, 2 * w->timeout_ms / 1000));
	rc = rps_lagg_ctl_open(l->name, &l->ctl);
	if (rc) {
		/* no shared memory here (no /dev/shm, full, ...): this worker
		 * aggregates alone; it still joins the barrier the others of
		 * the job are in */
		RPS_WARN("local aggregation: no shared memory segment (%s): worker %u pushes "
			 "and pulls for itself", rps_strerror(rc), w->rank);
		rc = rps_ctl_barrier(w->ctl, 0, -1);
		if (rc) {
			RPS_ERR("local aggregation: barrier of the job's workers: %s",
				rps_strerror(rc));
			return rc;
		}
		l->mode = LOCAL_ALONE;
		return 0;
	}
	ctl = l->ctl;
	me = &ctl->slot[w->rank];
	if (atomic_load(&me->state) != RPS_LAGG_EMPTY) {
		RPS_ERR("local aggregation: rank %u is registered in %s already (pid %u)", w->rank,
			l->name, me->pid);
		return -EEXIST;
	}
	atomic_store(&me->state, RPS_LAGG_INIT);
	me->pid = (uint32_t)getpid();
	rc = rps_lagg_life_start(me, &l->life);
	if (rc)
		return rc;
	atomic_store(&me->layout, l->layout);
	ctl->key = key;
	ctl->version = 1;
	atomic_store(&ctl->magic, RPS_LAGG_MAGIC);
	atomic_store_explicit(&me->state, RPS_LAGG_READY, memory_order_release);

	/* every worker of the job registered on its host before it entered */
	rc = rps_ctl_barrier(w->ctl, 0, -1);
	if (rc) {
		RPS_ERR("local aggregation: barrier of the job's workers: %s", rps_strerror(rc));
		return rc;
	}
	l->members = rps_calloc(w->num_workers, sizeof(*l->members));
	if (!l->members)
		return -ENOMEM;
	l->size = 0;
	for (uint32_t r = 0; r < w->num_workers && r < RPS_MAX_WORKERS; r++) {
		if (atomic_load_explicit(&ctl->slot[r].state, memory_order_acquire) !=
		    RPS_LAGG_READY)
			continue;
		if (r == w->rank)
			l->index = l->size;
		l->members[l->size++] = r;
	}
	if (l->members[0] == w->rank)
		shm_unlink(l->name); /* every member has it mapped */
	if (l->size <= 1) {
		local_unmap(w, l);
		l->mode = LOCAL_ALONE;
		RPS_INFO("local aggregation: no other worker of the job on this host");
		return 0;
	}
	l->stride = RPS_ALIGN_UP(l->elems * sizeof(float), 64);
	l->data_bytes = (size_t)(l->size + 1) * l->stride; /* a slot each + the values */
	rc = l->index == 0 ? leader_setup(w, l, dname) : follower_setup(w, l, dname);
	if (rc)
		return rc;
	l->mode = LOCAL_GROUP;
	RPS_INFO("local aggregation: %u workers of the job on this host (ranks %u..%u), worker "
		 "%u pushes and pulls for them (%zu bytes of shared memory, segment %s)",
		 l->size, l->members[0], l->members[l->size - 1], l->members[0], l->data_bytes,
		 l->name);
	return 0;
}

/* ---- a step ---- */

static float *slot_buf(struct rps_wlocal *l, uint32_t i)
{
	return (float *)((char *)l->data + (size_t)i * l->stride);
}

static int plain_step(struct rps_worker *w, const rps_key_t *keys, const float *grads,
		      float *vals, const size_t *lens, size_t n)
{
	struct rps_req *req;
	int rc = rps_worker_pushpull(w, keys, grads, vals, lens, n, &req);

	return rc ? rc : rps_req_wait(req, -1);
}

static int leader_step(struct rps_worker *w, struct rps_wlocal *l, const rps_key_t *keys,
		       const float *grads, float *vals, const size_t *lens, size_t n)
{
	struct rps_lagg_ctl *ctl = l->ctl;
	uint32_t s = ++l->steps;
	uint64_t dl = deadline(w);
	float *sum = slot_buf(l, 0), *v = slot_buf(l, l->size);
	int rc;

	for (uint32_t i = 1; i < l->size; i++) {
		struct rps_lagg_slot *f = &ctl->slot[l->members[i]];

		rc = rps_lagg_wait(ctl, &f->seq, s, f, dl);
		if (rc) {
			RPS_ERR("local aggregation: worker %u of this host (pid %u) %s clock %u",
				l->members[i], f->pid,
				rc == -EHOSTDOWN ? "is gone: it did not contribute to"
						 : "did not contribute in time to",
				atomic_load(&w->clock));
			return group_fail(l, l->members[i], rc);
		}
		if (atomic_load(&f->layout) != l->layout) {
			RPS_ERR("local aggregation: worker %u of this host steps with other keys or "
				"lengths than worker %u at clock %u", l->members[i], w->rank,
				atomic_load(&w->clock));
			return group_fail(l, l->members[i], -EINVAL);
		}
	}
	/* rank order, as the servers add a BSP clock's lanes */
	memcpy(sum, grads, l->elems * sizeof(float));
	for (uint32_t i = 1; i < l->size; i++)
		cblas_saxpy((int)l->elems, 1.0f, slot_buf(l, i), 1, sum, 1);
	rc = plain_step(w, keys, sum, v, lens, n);
	if (!rc)
		memcpy(vals, v, l->elems * sizeof(float));
	atomic_store(&ctl->status, rc);
	atomic_store(&ctl->status_step, s);
	atomic_store_explicit(&ctl->done, s, memory_order_release);
	rps_lagg_wake(&ctl->done);
	return rc;
}

static int follower_step(struct rps_worker *w, struct rps_wlocal *l, const float *grads,
			 float *vals)
{
	struct rps_lagg_ctl *ctl = l->ctl;
	struct rps_lagg_slot *me = &ctl->slot[w->rank];
	uint32_t lead = l->members[0], s = ++l->steps, why, c = atomic_load(&w->clock);
	int rc, crc, st;

	memcpy(slot_buf(l, l->index), grads, l->elems * sizeof(float));
	atomic_store(&me->layout, l->layout);
	atomic_store_explicit(&me->seq, s, memory_order_release);
	rps_lagg_wake(&me->seq);
	/* no push: the servers count 0 for us in this clock */
	crc = rps_worker_clock(w);
	/* the leader may wait long for other hosts (BSP): bounded by its life */
	rc = rps_lagg_wait(ctl, &ctl->done, s, &ctl->slot[lead], 0);
	why = atomic_load(&ctl->failed);
	/* done >= s: step s ended, well or not (status of step s); a loss
	 * noticed after it is the next step's business */
	if (!rc && atomic_load(&ctl->status_step) != s) {
		why = 0;
		st = 0;
	} else {
		st = atomic_load(&ctl->status);
	}
	if (rc) {
		if (why)
			RPS_ERR("local aggregation: clock %u failed: worker %u of this host is gone "
				"or failed", c, why - 1);
		else
			RPS_ERR("local aggregation: the host's leader (worker %u, pid %u) is gone "
				"during clock %u", lead, ctl->slot[lead].pid, c);
		return group_fail(l, why ? why - 1 : lead, -EHOSTDOWN);
	}
	if (st && why) {
		RPS_ERR("local aggregation: clock %u failed: worker %u of this host is gone or "
			"failed", c, why - 1);
		return group_fail(l, why - 1, st);
	}
	if (st) {
		RPS_ERR("local aggregation: the host's leader (worker %u) failed clock %u: %s", lead,
			c, rps_strerror(st));
		return st;
	}
	memcpy(vals, slot_buf(l, l->size), l->elems * sizeof(float));
	return crc;
}

int rps_worker_local_pushpull(struct rps_worker *w, const rps_key_t *keys, const float *grads,
			      float *vals, const size_t *lens, size_t n)
{
	struct rps_wlocal *l;
	uint64_t elems = 0;
	int rc;

	if (!w || !keys || !grads || !vals || !lens || !n)
		return -EINVAL;
	rc = rps_keytab_check(&w->keys, keys, lens, n, grads, NULL);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		elems += lens[i];
	if (!w->local) {
		l = rps_calloc(1, sizeof(*l));
		if (!l)
			return -ENOMEM;
		w->local = l;
		l->elems = elems;
		l->layout = layout_hash(keys, lens, n);
		l->size = 1;
		/* a worker that replaced a dead one: its host's group broke
		 * when that one died, and the others are past their first step */
		if (!w->ctl || w->num_workers <= 1 || !strcmp(w->cfg->local_agg, "off") ||
		    w->joined_running) {
			l->mode = LOCAL_ALONE;
		} else {
			rc = discover(w, l);
			if (rc) {
				if (!l->broken)
					l->broken = rc;
				local_unmap(w, l);
				return rc;
			}
		}
	}
	l = w->local;
	if (l->broken)
		return l->broken;
	if (l->mode != LOCAL_GROUP)
		return plain_step(w, keys, grads, vals, lens, n);
	if (elems != l->elems || layout_hash(keys, lens, n) != l->layout) {
		RPS_ERR("local aggregation: a step with other keys or lengths than the first "
			"(%llu elements, first %llu): the host's workers sum slot by slot",
			(unsigned long long)elems, (unsigned long long)l->elems);
		return -EINVAL;
	}
	if (atomic_load(&l->ctl->failed)) { /* noticed by another worker of the host */
		uint32_t why = atomic_load(&l->ctl->failed) - 1;

		RPS_ERR("local aggregation: worker %u of this host is gone or failed: no more steps",
			why);
		return group_fail(l, why, -EHOSTDOWN);
	}
	if (l->index == 0)
		return leader_step(w, l, keys, grads, vals, lens, n);
	return follower_step(w, l, grads, vals);
}

int rps_worker_local_size(const struct rps_worker *w)
{
	if (!w)
		return -EINVAL;
	return w->local && w->local->mode == LOCAL_GROUP ? (int)w->local->size : 1;
}

int rps_worker_local_leader(const struct rps_worker *w)
{
	if (!w)
		return -EINVAL;
	if (w->local && w->local->mode == LOCAL_GROUP)
		return (int)w->local->members[0];
	return (int)w->rank;
}
