/* RDMA transport, listening side: the same admission limits as TCP
 * (docs/options.md "Limits", transport/tcp/tcp_limits.c) and a deadline on
 * the handshake.
 * - Admission: at most params.max_conns accepted connections at once and
 *   params.max_conns_per_addr from one IP address, counting every phase
 *   (accepting, proving, up, closing): a request beyond either is rejected
 *   (-EMFILE / -EADDRINUSE in the reject's private data, with the reason).
 *   The shard receive queues bound them further (-ENOBUFS, rdma_cm.c).
 * - Handshake: a connection accepted but without its valid PROOF (or not
 *   established) within params.timeout_ms is closed.
 * - Not applied: idle_timeout_ms (pulls are one-sided READs that the server's
 *   CPU never sees, so a connection that only pulls looks idle; a dead peer
 *   is found by the QP's retransmission limits and rdma_cm's DISCONNECTED),
 *   frame deadlines (an RDMA frame arrives whole or not at all) and
 *   send_queue_bytes (sends wait for the peer's credits, up to timeout_ms,
 *   then fail: a peer that stops releasing buffers is cut). */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "src/log.h"
#include "transport/rdma/rdma_int.h"

static int is_accepted(const struct rps_rdma_conn *c)
{
	return c->srq && c->srq->channel >= 0;
}

static int same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (!a || !b || a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
	return 0;
}

int rps_rdma_admit(struct rps_rdma_transport *t, struct rdma_cm_id *id, char *msg, size_t len)
{
	const struct rps_tr_params *p = &t->base.params;
	const struct sockaddr *pa = rdma_get_peer_addr(id);
	int total = 0, same = 0;

	for (const struct rps_rdma_conn *c = t->all; c; c = c->all_next) {
		if (!is_accepted(c))
			continue;
		total++;
		if (c->id && same_addr(rdma_get_peer_addr(c->id), pa))
			same++;
	}
	if (p->max_conns > 0 && total >= p->max_conns) {
		snprintf(msg, len, "too many connections (%d, RDMAPS_MAX_CONNS)", total);
		return -EMFILE;
	}
	if (p->max_conns_per_addr > 0 && same >= p->max_conns_per_addr) {
		snprintf(msg, len, "too many connections from this address (%d, "
			 "RDMAPS_MAX_CONNS_PER_ADDR)", same);
		return -EADDRINUSE;
	}
	return 0;
}

void rps_rdma_handshake_deadlines(struct rps_rdma_transport *t, uint64_t now)
{
	uint64_t limit = (uint64_t)(t->timeout_ms > 0 ? t->timeout_ms : 30000) * 1000000ull;
	char why[96];

	for (struct rps_rdma_conn *c = t->all; c; c = c->all_next) {
		int st = atomic_load(&c->state);

		if ((st != C_ACCEPTING && st != C_PROVING) || !c->born_ns || now < c->born_ns ||
		    now - c->born_ns < limit)
			continue;
		snprintf(why, sizeof(why), "no handshake proof within %d ms (RDMAPS_TIMEOUT_MS)",
			 t->timeout_ms);
		RPS_LOG_RATELIMITED(RPS_LOG_WARN, "refusing %s: %s", c->base.peer, why);
		c->born_ns = 0;
		rps_rdma_conn_fail(c, -ETIMEDOUT, NULL);
	}
}
