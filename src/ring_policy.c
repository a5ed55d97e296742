/* A shard's ring: the priority policies (see ring.h): their names, the key
 * each one gives a push, and the binary heap that orders the keys. The ring
 * itself (src/ring.c) calls into this file; nothing here knows the ring. */
#include "src/ring.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "src/ring_int.h"
#include "src/util.h"

static const char *const policy_names[] = {
    [RPS_PRIO_FIFO] = "fifo",		[RPS_PRIO_FRESHEST] = "freshest",
    [RPS_PRIO_STALENESS] = "staleness", [RPS_PRIO_MAGNITUDE] = "magnitude",
    [RPS_PRIO_CALLBACK] = "callback",
};

int rps_ring_policy_parse(const char *s)
{
	/* "callback" is not a word a user can give: it needs a function */
	return rps_name_index(policy_names, RPS_PRIO_CALLBACK, s);
}

const char *rps_ring_policy_name(enum rps_priority_policy p)
{
	if ((unsigned)p < RPS_ARRAY_SIZE(policy_names))
		return policy_names[p];
	return "unknown";
}

/* ---- priority keys: larger first ---- */

/* Order-preserving map of a double onto uint64 (IEEE total order); NaN is
 * the lowest priority and -0 equals +0. */
static uint64_t key_of_double(double d)
{
	uint64_t u;

	if (isnan(d))
		return 0;
	if (d == 0.0)
		d = 0.0;
	memcpy(&u, &d, sizeof(u));
	return (u & (1ull << 63)) ? ~u : u | (1ull << 63);
}

uint64_t rps_ring_prio_key(enum rps_priority_policy policy, rps_priority_fn fn, void *fn_arg,
			   const struct rps_push_info *info)
{
	switch (policy) {
	case RPS_PRIO_FRESHEST:
		return info->timestamp_ns;
	case RPS_PRIO_STALENESS:
		return UINT64_MAX - info->staleness;
	case RPS_PRIO_MAGNITUDE:
		return key_of_double(info->norm);
	case RPS_PRIO_CALLBACK:
		return key_of_double(fn(info, fn_arg));
	case RPS_PRIO_FIFO:
	default:
		return 0;
	}
}

/* a goes out before b */
static inline bool node_before(const struct rps_ring_node *a, const struct rps_ring_node *b)
{
	return a->key > b->key || (a->key == b->key && a->seq < b->seq);
}

void rps_ring_heap_up(struct rps_ring_node *h, size_t i)
{
	struct rps_ring_node x = h[i];

	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!node_before(&x, &h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = x;
}

void rps_ring_heap_down(struct rps_ring_node *h, size_t n, size_t i)
{
	struct rps_ring_node x = h[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && node_before(&h[c + 1], &h[c]))
			c++;
		if (!node_before(&h[c], &x))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}
