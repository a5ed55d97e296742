/* A shard's bounded priority ring: many producers (network / completion
 * threads), one consumer (the shard's pinned update thread).
 *
 * Policies decide the pop order; ties always go to the older entry (fifo):
 *   fifo       insertion order
 *   freshest   largest timestamp_ns first
 *   staleness  smallest staleness first (stale pushes later)
 *   magnitude  largest norm first
 *   callback   largest fn(info, arg) first
 * A full ring refuses with -EAGAIN (rps_ring_push) or makes the producer wait
 * (rps_ring_push_wait); it never drops an entry.
 */
#ifndef RPS_RING_H
#define RPS_RING_H

#include <stddef.h>
#include <stdint.h>
#include <rdmaps/types.h>

/* One queued item. The ring copies entries by value. */
struct rps_ring_entry {
	struct rps_push_info info; /* what priorities look at */
	uint32_t type;             /* owner-defined (push, clock marker, ...) */
	uint32_t shard;
	void *ptr;                 /* owner-defined (receive buffer, slice) */
	void *ptr2;
	uint64_t u64;              /* owner-defined */
};

struct rps_ring;

/* capacity >= 1 entries. -EINVAL for a bad policy or callback missing. */
int rps_ring_create(size_t capacity, enum rps_priority_policy policy, rps_priority_fn fn,
		    void *fn_arg, struct rps_ring **ring_p);
void rps_ring_destroy(struct rps_ring *ring);

/* Thread-safe for many producers. 0, or -EAGAIN when full, -EPIPE when closed. */
int rps_ring_push(struct rps_ring *ring, const struct rps_ring_entry *e);
/* Wait up to timeout_ms (< 0 forever) for room. 0, -ETIMEDOUT, -EPIPE. */
int rps_ring_push_wait(struct rps_ring *ring, const struct rps_ring_entry *e, int timeout_ms);
/* Single consumer. 0 with *e_p filled, -EAGAIN if empty. */
int rps_ring_pop(struct rps_ring *ring, struct rps_ring_entry *e_p);
/* Wait up to timeout_ms (< 0 forever). 0, -ETIMEDOUT, or -EPIPE when closed and empty. */
int rps_ring_pop_wait(struct rps_ring *ring, struct rps_ring_entry *e_p, int timeout_ms);
/* Wake everyone; pushes fail with -EPIPE, pops drain what is left. */
void rps_ring_close(struct rps_ring *ring);
size_t rps_ring_depth(const struct rps_ring *ring);
size_t rps_ring_capacity(const struct rps_ring *ring);
/* "fifo" ... -> policy, or -EINVAL ("callback" is not parseable: it needs a function) */
int rps_ring_policy_parse(const char *s);
const char *rps_ring_policy_name(enum rps_priority_policy p);

#endif
