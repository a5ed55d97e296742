/* Private to src/ring*.c: the priority policies (src/ring_policy.c) as the
 * ring (src/ring.c) uses them. Dependencies point one way: ring -> policy. */
#ifndef RPS_RING_INT_H
#define RPS_RING_INT_H

#include <stddef.h>
#include <stdint.h>

#include "src/ring.h"

/* A heap entry: larger key first, ties to the smaller sequence (older push). */
struct rps_ring_node {
	uint64_t key;
	uint64_t seq;
	uint32_t slot;
};

/* The key a policy gives a push; policies map onto "larger key first".
 * RPS_PRIO_CALLBACK calls fn(info, fn_arg). */
uint64_t rps_ring_prio_key(enum rps_priority_policy policy, rps_priority_fn fn, void *fn_arg,
			   const struct rps_push_info *info);

/* Restore the heap order after h[i] was added (up) or replaced (down, n nodes). */
void rps_ring_heap_up(struct rps_ring_node *h, size_t i);
void rps_ring_heap_down(struct rps_ring_node *h, size_t n, size_t i);

#endif
