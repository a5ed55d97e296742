/* A shard's bounded priority ring (see ring.h).
 *
 * fifo: a bounded array of cells with sequence numbers (Vyukov's MPMC queue,
 * single-consumer side): producers claim a position with one CAS and publish
 * the cell by storing its sequence; the consumer needs no atomic RMW at all.
 * The "closed" flag is a bit of the enqueue position, so a push either claims
 * a slot before the close or sees the close: nothing slips in unseen.
 *
 * Other policies: a binary heap of (key, sequence, slot) under a spinlock,
 * entries kept in a slot array with a free stack. The keys and the heap order
 * are in src/ring_policy.c: every policy maps onto "larger key first", ties
 * to the smaller sequence (the older push).
 *
 * Nothing is allocated after create. Waiting uses a mutex and two condition
 * variables that are touched only when somebody waits: a waiter registers in
 * an atomic count and re-checks under the mutex; the other side makes its
 * change, then (seq_cst) reads the count and signals under the mutex if it is
 * non-zero. One of the two always sees the other, so no wake-up is lost.
 */
#include "src/ring.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/ring_int.h"
#include "src/util.h"

#define RING_CLOSED (1ull << 63)
#define RING_SPINS  128

/* seq: 2 pos when the cell is free for position pos, 2 pos + 1 once the entry
 * of position pos is published (plain Vyukov, pos and pos + 1, cannot tell
 * "full" from "free for the next lap" with one cell). */
struct ring_cell {
	_Atomic uint64_t seq;
	struct rps_ring_entry e;
};

struct rps_ring {
	/* read-mostly */
	size_t capacity;
	enum rps_priority_policy policy;
	rps_priority_fn fn;
	void *fn_arg;
	struct ring_cell *cells;    /* fifo */
	struct rps_ring_node *heap; /* priority policies */
	struct rps_ring_entry *slots;
	uint32_t *free_slots;

	/* fifo producers */
	_Alignas(RPS_CACHELINE) _Atomic uint64_t enq_pos; /* | RING_CLOSED */
	/* fifo consumer */
	_Alignas(RPS_CACHELINE) _Atomic uint64_t deq_pos;

	/* heap state, under lock */
	_Alignas(RPS_CACHELINE) atomic_flag lock;
	bool heap_closed;
	size_t heap_n;
	size_t nfree;
	uint64_t next_seq;
	_Atomic size_t heap_depth; /* mirror of heap_n for rps_ring_depth */

	/* waiting */
	_Alignas(RPS_CACHELINE) _Atomic int closed;
	_Atomic int pop_waiters;
	_Atomic int push_waiters;
	pthread_mutex_t wait_lock;
	pthread_cond_t pop_cond;
	pthread_cond_t push_cond;
};

/* ---- spinlock (heap policies) ---- */

static inline void ring_lock(struct rps_ring *r)
{
	unsigned spins = 0;

	while (atomic_flag_test_and_set_explicit(&r->lock, memory_order_acquire)) {
		if (++spins >= RING_SPINS) {
			/* the holder may be descheduled: give it the core */
			sched_yield();
			spins = 0;
		}
	}
}

static inline void ring_unlock(struct rps_ring *r)
{
	atomic_flag_clear_explicit(&r->lock, memory_order_release);
}

/* ---- waking ---- */

/* The two halves of the handshake (see top of file): the side that changed
 * the ring reads the waiter count after a full fence; a waiter bumps the
 * count, then fences, then re-checks the ring. ThreadSanitizer does not model
 * fences, so there the read is an RMW, which reads the latest count and
 * synchronises with the waiter's increment (correct too, but it writes a
 * shared line on every push and pop). */
#if defined(__SANITIZE_THREAD__)
#define RING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RING_TSAN 1
#endif
#endif

static inline int waiters_after_change(_Atomic int *waiters)
{
#ifdef RING_TSAN
	return atomic_fetch_add(waiters, 0);
#else
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(waiters, memory_order_relaxed);
#endif
}

static inline void waiter_register(_Atomic int *waiters)
{
	atomic_fetch_add(waiters, 1);
#ifndef RING_TSAN
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* The same with wait_lock held (from inside the wait loops). */
static void ring_wake_locked(_Atomic int *waiters, pthread_cond_t *cond)
{
	if (waiters_after_change(waiters))
		pthread_cond_signal(cond);
}

static void ring_wake(struct rps_ring *r, _Atomic int *waiters, pthread_cond_t *cond)
{
	if (RPS_LIKELY(waiters_after_change(waiters) == 0))
		return;
	pthread_mutex_lock(&r->wait_lock);
	pthread_cond_signal(cond);
	pthread_mutex_unlock(&r->wait_lock);
}

/* ---- create / destroy ---- */

int rps_ring_create(size_t capacity, enum rps_priority_policy policy, rps_priority_fn fn,
		    void *fn_arg, struct rps_ring **ring_p)
{
	struct rps_ring *r;
	pthread_condattr_t ca;

	if (capacity < 1 || capacity > UINT32_MAX || (unsigned)policy > RPS_PRIO_CALLBACK) {
		RPS_ERR("ring: bad capacity %zu or policy %d", capacity, (int)policy);
		return -EINVAL;
	}
	if (policy == RPS_PRIO_CALLBACK && !fn) {
		RPS_ERR("ring: callback policy without a function");
		return -EINVAL;
	}

	r = rps_aligned_alloc(RPS_CACHELINE, sizeof(*r));
	if (!r)
		return -ENOMEM;
	memset(r, 0, sizeof(*r));
	r->capacity = capacity;
	r->policy = policy;
	r->fn = fn;
	r->fn_arg = fn_arg;
	atomic_flag_clear(&r->lock);
	atomic_init(&r->enq_pos, 0);
	atomic_init(&r->deq_pos, 0);
	atomic_init(&r->heap_depth, 0);
	atomic_init(&r->closed, 0);
	atomic_init(&r->pop_waiters, 0);
	atomic_init(&r->push_waiters, 0);

	if (policy == RPS_PRIO_FIFO) {
		r->cells = rps_aligned_alloc(RPS_CACHELINE, capacity * sizeof(*r->cells));
		if (!r->cells)
			goto err_free_ring;
		for (size_t i = 0; i < capacity; i++)
			atomic_init(&r->cells[i].seq, 2 * i);
	} else {
		r->heap = rps_malloc(capacity * sizeof(*r->heap));
		r->slots = rps_malloc(capacity * sizeof(*r->slots));
		r->free_slots = rps_malloc(capacity * sizeof(*r->free_slots));
		if (!r->heap || !r->slots || !r->free_slots)
			goto err_free_arrays;
		for (size_t i = 0; i < capacity; i++)
			r->free_slots[i] = (uint32_t)(capacity - 1 - i);
		r->nfree = capacity;
	}

	if (pthread_mutex_init(&r->wait_lock, NULL))
		goto err_free_arrays;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&r->pop_cond, &ca))
		goto err_destroy_mutex;
	if (pthread_cond_init(&r->push_cond, &ca))
		goto err_destroy_pop_cond;
	pthread_condattr_destroy(&ca);

	*ring_p = r;
	return 0;

err_destroy_pop_cond:
	pthread_cond_destroy(&r->pop_cond);
err_destroy_mutex:
	pthread_condattr_destroy(&ca);
	pthread_mutex_destroy(&r->wait_lock);
err_free_arrays:
	rps_free(r->cells);
	rps_free(r->heap);
	rps_free(r->slots);
	rps_free(r->free_slots);
err_free_ring:
	rps_free(r);
	RPS_ERR("ring: cannot allocate %zu entries", capacity);
	return -ENOMEM;
}

void rps_ring_destroy(struct rps_ring *r)
{
	if (!r)
		return;
	pthread_cond_destroy(&r->push_cond);
	pthread_cond_destroy(&r->pop_cond);
	pthread_mutex_destroy(&r->wait_lock);
	rps_free(r->cells);
	rps_free(r->heap);
	rps_free(r->slots);
	rps_free(r->free_slots);
	rps_free(r);
}

/* ---- fifo ---- */

static int fifo_push(struct rps_ring *r, const struct rps_ring_entry *e)
{
	uint64_t pos = atomic_load_explicit(&r->enq_pos, memory_order_relaxed);
	struct ring_cell *c;

	for (;;) {
		uint64_t seq;
		int64_t dif;

		if (pos & RING_CLOSED)
			return -EPIPE;
		c = &r->cells[pos % r->capacity];
		seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		dif = (int64_t)(seq - 2 * pos);
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&r->enq_pos, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed))
				break;
		} else if (dif < 0) {
			/* the cell still holds the entry of the previous lap */
			uint64_t now = atomic_load_explicit(&r->enq_pos, memory_order_relaxed);

			if (now == pos)
				return -EAGAIN;
			pos = now;
		} else {
			pos = atomic_load_explicit(&r->enq_pos, memory_order_relaxed);
		}
	}
	c->e = *e;
	atomic_store_explicit(&c->seq, 2 * pos + 1, memory_order_release);
	return 0;
}

static int fifo_pop(struct rps_ring *r, struct rps_ring_entry *e_p)
{
	uint64_t pos = atomic_load_explicit(&r->deq_pos, memory_order_relaxed);
	struct ring_cell *c = &r->cells[pos % r->capacity];
	uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);

	if (seq != 2 * pos + 1)
		return -EAGAIN; /* empty, or the next producer has not published yet */
	*e_p = c->e;
	atomic_store_explicit(&c->seq, 2 * (pos + r->capacity), memory_order_release);
	atomic_store_explicit(&r->deq_pos, pos + 1, memory_order_relaxed);
	return 0;
}

/* Claimed slots (published or not) not yet popped. */
static size_t fifo_depth(const struct rps_ring *r)
{
	uint64_t deq = atomic_load_explicit(&((struct rps_ring *)r)->deq_pos, memory_order_acquire);
	uint64_t enq =
	    atomic_load_explicit(&((struct rps_ring *)r)->enq_pos, memory_order_acquire) &
	    ~RING_CLOSED;
	uint64_t d = enq - deq;

	return d > r->capacity ? r->capacity : (size_t)d;
}

/* ---- heap ---- */

static int heap_push(struct rps_ring *r, const struct rps_ring_entry *e)
{
	/* the key outside the lock: it may call the user */
	uint64_t key = rps_ring_prio_key(r->policy, r->fn, r->fn_arg, &e->info);
	struct rps_ring_node *n;
	uint32_t slot;

	ring_lock(r);
	if (r->heap_closed) {
		ring_unlock(r);
		return -EPIPE;
	}
	if (r->heap_n == r->capacity) {
		ring_unlock(r);
		return -EAGAIN;
	}
	slot = r->free_slots[--r->nfree];
	r->slots[slot] = *e;
	n = &r->heap[r->heap_n];
	n->key = key;
	n->seq = r->next_seq++;
	n->slot = slot;
	rps_ring_heap_up(r->heap, r->heap_n);
	r->heap_n++;
	atomic_store_explicit(&r->heap_depth, r->heap_n, memory_order_relaxed);
	ring_unlock(r);
	return 0;
}

static int heap_pop(struct rps_ring *r, struct rps_ring_entry *e_p)
{
	uint32_t slot;

	ring_lock(r);
	if (r->heap_n == 0) {
		ring_unlock(r);
		return -EAGAIN;
	}
	slot = r->heap[0].slot;
	*e_p = r->slots[slot];
	r->free_slots[r->nfree++] = slot;
	r->heap_n--;
	if (r->heap_n) {
		r->heap[0] = r->heap[r->heap_n];
		rps_ring_heap_down(r->heap, r->heap_n, 0);
	}
	atomic_store_explicit(&r->heap_depth, r->heap_n, memory_order_relaxed);
	ring_unlock(r);
	return 0;
}

/* ---- API ---- */

static inline int ring_try_push(struct rps_ring *r, const struct rps_ring_entry *e)
{
	return r->policy == RPS_PRIO_FIFO ? fifo_push(r, e) : heap_push(r, e);
}

static inline int ring_try_pop(struct rps_ring *r, struct rps_ring_entry *e_p)
{
	return r->policy == RPS_PRIO_FIFO ? fifo_pop(r, e_p) : heap_pop(r, e_p);
}

int rps_ring_push(struct rps_ring *r, const struct rps_ring_entry *e)
{
	int rc = ring_try_push(r, e);

	if (rc == 0)
		ring_wake(r, &r->pop_waiters, &r->pop_cond);
	return rc;
}

int rps_ring_pop(struct rps_ring *r, struct rps_ring_entry *e_p)
{
	int rc = ring_try_pop(r, e_p);

	if (rc == 0)
		ring_wake(r, &r->push_waiters, &r->push_cond);
	return rc;
}

/* Nothing left and nothing will come: closed, and no slot claimed. */
static bool ring_drained(struct rps_ring *r)
{
	if (!atomic_load(&r->closed))
		return false;
	return rps_ring_depth(r) == 0;
}

/* Wait on cond until woken or the deadline; -ETIMEDOUT when it has passed. */
static int ring_wait(struct rps_ring *r, pthread_cond_t *cond, const struct timespec *deadline)
{
	int rc;

	if (!deadline) {
		pthread_cond_wait(cond, &r->wait_lock);
		return 0;
	}
	rc = pthread_cond_timedwait(cond, &r->wait_lock, deadline);
	return rc == ETIMEDOUT ? -ETIMEDOUT : 0;
}

int rps_ring_push_wait(struct rps_ring *r, const struct rps_ring_entry *e, int timeout_ms)
{
	struct timespec deadline = {0};
	int rc;

	rc = rps_ring_push(r, e);
	if (rc != -EAGAIN || timeout_ms == 0)
		return rc == -EAGAIN ? -ETIMEDOUT : rc;
	if (timeout_ms > 0)
		rps_deadline_ms(&deadline, timeout_ms);

	pthread_mutex_lock(&r->wait_lock);
	waiter_register(&r->push_waiters);
	for (;;) {
		/* always try after a wake-up, so a signal is never wasted */
		rc = ring_try_push(r, e);
		if (rc != -EAGAIN)
			break;
		if (ring_wait(r, &r->push_cond, timeout_ms > 0 ? &deadline : NULL) == -ETIMEDOUT) {
			rc = ring_try_push(r, e);
			if (rc == -EAGAIN)
				rc = -ETIMEDOUT;
			break;
		}
	}
	atomic_fetch_sub(&r->push_waiters, 1);
	if (rc == 0)
		ring_wake_locked(&r->pop_waiters, &r->pop_cond);
	pthread_mutex_unlock(&r->wait_lock);
	return rc;
}

int rps_ring_pop_wait(struct rps_ring *r, struct rps_ring_entry *e_p, int timeout_ms)
{
	struct timespec deadline = {0};
	int rc;

	rc = rps_ring_pop(r, e_p);
	if (rc != -EAGAIN)
		return rc;
	if (ring_drained(r))
		return -EPIPE;
	if (timeout_ms == 0)
		return -ETIMEDOUT;
	if (timeout_ms > 0)
		rps_deadline_ms(&deadline, timeout_ms);

	pthread_mutex_lock(&r->wait_lock);
	waiter_register(&r->pop_waiters);
	for (;;) {
		rc = ring_try_pop(r, e_p);
		if (rc != -EAGAIN)
			break;
		if (ring_drained(r)) {
			rc = -EPIPE;
			break;
		}
		if (ring_wait(r, &r->pop_cond, timeout_ms > 0 ? &deadline : NULL) == -ETIMEDOUT) {
			rc = ring_try_pop(r, e_p);
			if (rc == -EAGAIN)
				rc = ring_drained(r) ? -EPIPE : -ETIMEDOUT;
			break;
		}
	}
	atomic_fetch_sub(&r->pop_waiters, 1);
	if (rc == 0)
		ring_wake_locked(&r->push_waiters, &r->push_cond);
	pthread_mutex_unlock(&r->wait_lock);
	return rc;
}

void rps_ring_close(struct rps_ring *r)
{
	if (r->policy == RPS_PRIO_FIFO) {
		atomic_fetch_or(&r->enq_pos, RING_CLOSED);
	} else {
		ring_lock(r);
		r->heap_closed = true;
		ring_unlock(r);
	}
	atomic_store(&r->closed, 1);
	pthread_mutex_lock(&r->wait_lock);
	pthread_cond_broadcast(&r->pop_cond);
	pthread_cond_broadcast(&r->push_cond);
	pthread_mutex_unlock(&r->wait_lock);
}

size_t rps_ring_depth(const struct rps_ring *r)
{
	if (r->policy == RPS_PRIO_FIFO)
		return fifo_depth(r);
	return atomic_load_explicit(&((struct rps_ring *)r)->heap_depth, memory_order_acquire);
}

size_t rps_ring_capacity(const struct rps_ring *r)
{
	return r->capacity;
}
