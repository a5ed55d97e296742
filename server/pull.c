/* Pulls over TCP: validation, the consistency condition, and the shard's list
 * of parked pulls (added by the network thread, answered by the update thread
 * once its clocks allow). Over RDMA workers read the store themselves. */
#include "server/pull.h"

#include <errno.h>

#include "src/log.h"

int rps_shard_pull_check(const struct rps_shard *sh, const struct rps_pull *p,
			 struct rps_slice_meta **meta_p)
{
	struct rps_slice_meta *m;

	if (!p->count) {
		*meta_p = NULL; /* a pure clock wait */
		return 0;
	}
	m = rps_srv_keytab_lookup(&sh->tab, p->key, p->slice);
	if (!m)
		return -ENOENT;
	if (p->offset > m->nelems || p->count > m->nelems - p->offset)
		return -EINVAL;
	if (sizeof(struct rps_pull) + (uint64_t)p->count * sizeof(float) > sh->p.max_msg)
		return -EMSGSIZE;
	*meta_p = m;
	return 0;
}

int rps_shard_pull_ready(const struct rps_shard *sh, uint32_t min_clock, uint32_t requester)
{
	uint64_t clock;

	switch (sh->p.consistency) {
	case RPS_BSP:
		return rps_store_clock(&sh->store) >= min_clock;
	case RPS_SSP:
		return rps_store_clock(&sh->store) + sh->p.staleness >= min_clock;
	case RPS_ASP:
	default:
		if (requester < sh->p.nworkers)
			clock = rps_store_worker_clock(&sh->store, requester);
		else
			clock = rps_store_clock(&sh->store);
		return clock >= min_clock;
	}
}

int rps_shard_pull_park(struct rps_shard *sh, struct rps_srv_req *req)
{
	pthread_mutex_lock(&sh->park_lock);
	atomic_fetch_add(&sh->nparked, 1);
	/* pairs with the fence in rps_shard_handle after a clock moved */
	atomic_thread_fence(memory_order_seq_cst);
	if (rps_shard_pull_ready(sh, req->u.pull.min_clock, req->worker)) {
		atomic_fetch_sub(&sh->nparked, 1);
		pthread_mutex_unlock(&sh->park_lock);
		return 1;
	}
	req->next = NULL;
	if (sh->parked_tail)
		sh->parked_tail->next = req;
	else
		sh->parked = req;
	sh->parked_tail = req;
	pthread_mutex_unlock(&sh->park_lock);
	atomic_fetch_add_explicit(&sh->pulls_parked, 1, memory_order_relaxed);
	return 0;
}

/* Detach, in order, every parked request for which take(sh, r, arg) holds. */
static struct rps_srv_req *park_take(struct rps_shard *sh,
				     int (*take)(struct rps_shard *sh, const struct rps_srv_req *r,
						 const void *arg),
				     const void *arg)
{
	struct rps_srv_req *out = NULL, **otail = &out;
	struct rps_srv_req *r, *prev = NULL;

	pthread_mutex_lock(&sh->park_lock);
	r = sh->parked;
	while (r) {
		struct rps_srv_req *n = r->next;

		if (take(sh, r, arg)) {
			if (prev)
				prev->next = n;
			else
				sh->parked = n;
			if (sh->parked_tail == r)
				sh->parked_tail = prev;
			r->next = NULL;
			*otail = r;
			otail = &r->next;
			atomic_fetch_sub(&sh->nparked, 1);
		} else {
			prev = r;
		}
		r = n;
	}
	pthread_mutex_unlock(&sh->park_lock);
	return out;
}

static int take_ready(struct rps_shard *sh, const struct rps_srv_req *r, const void *arg)
{
	(void)arg;
	return rps_shard_pull_ready(sh, r->u.pull.min_clock, r->worker);
}

static int take_conn(struct rps_shard *sh, const struct rps_srv_req *r, const void *arg)
{
	(void)sh;
	return !arg || r->sc == arg;
}

void rps_shard_pull_release(struct rps_shard *sh)
{
	struct rps_srv_req *ready = park_take(sh, take_ready, NULL), *r;

	while (ready) {
		r = ready->next;
		sh->io->pull_answer(sh->io_arg, sh, ready);
		ready = r;
	}
}

struct rps_srv_req *rps_shard_pull_unpark(struct rps_shard *sh, const struct rps_srv_conn *sc)
{
	return park_take(sh, take_conn, sc);
}
