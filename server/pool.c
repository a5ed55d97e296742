/* Object pools: one owner thread takes, any thread gives back.
 *
 * Returns go onto a lock-free stack (push with compare-exchange); the owner
 * takes the whole stack at once with an exchange when its private free list
 * runs dry, which is immune to ABA. No mutex and no malloc in steady state. */
#include "server/pool.h"

#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/util.h"

void rps_srv_pool_init(struct rps_srv_pool *p, size_t obj_size)
{
	p->obj_size = RPS_ALIGN_UP(obj_size ? obj_size : 1, RPS_CACHELINE);
	p->free = NULL;
	p->all = NULL;
	atomic_init(&p->ret, NULL);
	p->nobjs = 0;
}

void rps_srv_pool_fini(struct rps_srv_pool *p)
{
	struct rps_srv_pool_obj *o = p->all;

	while (o) {
		struct rps_srv_pool_obj *n = o->all_next;

		rps_free(o);
		o = n;
	}
	p->all = NULL;
	p->free = NULL;
	atomic_store(&p->ret, NULL);
	p->nobjs = 0;
}

void *rps_srv_pool_get(struct rps_srv_pool *p)
{
	struct rps_srv_pool_obj *o = p->free;

	if (RPS_UNLIKELY(!o)) {
		o = atomic_exchange_explicit(&p->ret, NULL, memory_order_acquire);
		if (!o) {
			o = rps_aligned_alloc(RPS_CACHELINE, sizeof(*o) + p->obj_size);
			if (!o)
				return NULL;
			o->pool = p;
			o->size = p->obj_size;
			o->all_next = p->all;
			p->all = o;
			p->nobjs++;
			o->next = NULL;
		}
	}
	p->free = o->next;
	o->next = NULL;
	return o + 1;
}

void rps_srv_pool_put(void *obj)
{
	struct rps_srv_pool_obj *o = (struct rps_srv_pool_obj *)obj - 1;
	struct rps_srv_pool *p = o->pool;
	struct rps_srv_pool_obj *head = atomic_load_explicit(&p->ret, memory_order_relaxed);

	do {
		o->next = head;
	} while (!atomic_compare_exchange_weak_explicit(&p->ret, &head, o, memory_order_release,
							memory_order_relaxed));
}

void rps_srv_bufpool_init(struct rps_srv_bufpool *bp, size_t max_bytes)
{
	int n = 0;

	while (n < RPS_BUF_CLASSES && ((size_t)1 << (RPS_BUF_MIN_SHIFT + n)) < max_bytes)
		n++;
	if (n < RPS_BUF_CLASSES)
		n++;
	bp->nclasses = n;
	bp->max_bytes = max_bytes;
	for (int i = 0; i < n; i++)
		rps_srv_pool_init(&bp->cls[i], (size_t)1 << (RPS_BUF_MIN_SHIFT + i));
}

void rps_srv_bufpool_fini(struct rps_srv_bufpool *bp)
{
	for (int i = 0; i < bp->nclasses; i++)
		rps_srv_pool_fini(&bp->cls[i]);
	bp->nclasses = 0;
}

void *rps_srv_bufpool_get(struct rps_srv_bufpool *bp, size_t bytes)
{
	int i = 0;

	if (bytes > bp->max_bytes)
		return NULL;
	while (i < bp->nclasses && ((size_t)1 << (RPS_BUF_MIN_SHIFT + i)) < bytes)
		i++;
	if (i == bp->nclasses)
		return NULL;
	return rps_srv_pool_get(&bp->cls[i]);
}
