/* Server object pools and send-buffer pools (pool.c). */
#ifndef RPS_SERVER_POOL_H
#define RPS_SERVER_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One owner thread takes objects; any thread gives them back (a lock-free
 * stack the owner empties in one exchange, so no ABA). Objects are allocated
 * only when the pool is empty and kept until rps_srv_pool_fini, which frees all of
 * them, in use or not. Payloads are 64-byte aligned. */
struct rps_srv_pool;

struct rps_srv_pool_obj {
	struct rps_srv_pool_obj *next;	   /* free list / return stack */
	struct rps_srv_pool_obj *all_next; /* every object of the pool */
	struct rps_srv_pool *pool;
	size_t size; /* payload bytes */
	char pad[32];
};
_Static_assert(sizeof(struct rps_srv_pool_obj) == 64, "pool header is one line");

struct rps_srv_pool {
	size_t obj_size;
	struct rps_srv_pool_obj *free; /* owner only */
	struct rps_srv_pool_obj *all;  /* owner only */
	_Atomic(struct rps_srv_pool_obj *) ret;
	uint64_t nobjs;
};

void rps_srv_pool_init(struct rps_srv_pool *p, size_t obj_size);
void rps_srv_pool_fini(struct rps_srv_pool *p);
/* Owner thread. NULL when out of memory. */
void *rps_srv_pool_get(struct rps_srv_pool *p);
/* Any thread. */
void rps_srv_pool_put(void *obj);

/* Send buffers in power-of-two size classes from 4 KiB up to max_bytes. */
#define RPS_BUF_MIN_SHIFT 12
#define RPS_BUF_CLASSES	  24
struct rps_srv_bufpool {
	struct rps_srv_pool cls[RPS_BUF_CLASSES];
	int nclasses;
	size_t max_bytes;
};
void rps_srv_bufpool_init(struct rps_srv_bufpool *bp, size_t max_bytes);
void rps_srv_bufpool_fini(struct rps_srv_bufpool *bp);
/* Owner thread; NULL if bytes > max_bytes or out of memory. Give back with rps_srv_pool_put. */
void *rps_srv_bufpool_get(struct rps_srv_bufpool *bp, size_t bytes);

#endif
