/* Connecting a worker to the servers: HELLO with retries, the servers' HELLO_ACK
 * parameters, closing. Losing and regaining a server: reconnect.c. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/worker_int.h"

/* Errors after which a connect is tried again (server not up yet). */
static int connect_retryable(int rc)
{
	return rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH ||
	       rc == -ENETUNREACH || rc == -ECONNRESET || rc == -EAGAIN || rc == -EINTR ||
	       rc == -ECONNABORTED || rc == -EADDRNOTAVAIL;
}

int rps_wconn_connect_one(struct rps_worker *w, struct rps_wserver *s, uint32_t channel,
			  uint64_t deadline_ns, void *ack, size_t *ack_len_p,
			  struct rps_conn **conn_p)
{
	struct rps_hello h;
	int delay = 20;
	int rc;

	rps_proto_hello_init(&h, RPS_ROLE_WORKER, w->rank);
	h.channel = channel;
	for (;;) {
		uint64_t now = rps_now_ns();
		int left = now >= deadline_ns ? 0 : (int)((deadline_ns - now) / 1000000u);

		if (left < 1)
			left = 1;
		rc = rps_tr_connect(w->tr, s->host, s->port, &h, ack, RPS_TR_ACK_MAX, ack_len_p,
					 left, conn_p);
		if (!rc)
			return 0;
		if (!connect_retryable(rc) || rps_now_ns() + (uint64_t)delay * 1000000u >= deadline_ns)
			break;
		RPS_DEBUG("connect server %u %s:%u channel %u: %s, retrying", s->rank, s->host,
			  s->port, channel, strerror(-rc));
		rps_sleep_ms(delay);
		delay = RPS_MIN(delay * 2, 500);
	}
	RPS_ERR("connect server %u %s:%u channel %u: %s", s->rank, s->host, s->port, channel,
		rps_strerror(rc));
	return rc;
}

/* Check a HELLO_ACK payload and take the server's parameters from the first. */
static int parse_ack(struct rps_worker *w, struct rps_wserver *s, uint32_t channel,
		     const void *ack, size_t len, int first)
{
	const struct rps_hello_ack *a = ack;
	const struct rps_shard_desc *d;

	if (len < sizeof(*a)) {
		RPS_ERR("server %u %s:%u: hello ack of %zu bytes, expected >= %zu", s->rank,
			s->host, s->port, len, sizeof(*a));
		return -EPROTO;
	}
	if (!a->num_shards || a->num_shards > RPS_MAX_SHARDS ||
	    len < sizeof(*a) + (size_t)a->num_shards * sizeof(*d)) {
		RPS_ERR("server %u %s:%u: hello ack with %u shards in %zu bytes", s->rank, s->host,
			s->port, a->num_shards, len);
		return -EPROTO;
	}
	if (a->server_rank != s->rank) {
		RPS_ERR("server %s:%u: says it is rank %u, the map says %u", s->host, s->port,
			a->server_rank, s->rank);
		return -EPROTO;
	}
	if (!a->max_msg || a->consistency > RPS_SSP) {
		RPS_ERR("server %u: hello ack with max_msg %llu, consistency %u", s->rank,
			(unsigned long long)a->max_msg, a->consistency);
		return -EPROTO;
	}
	if (a->num_workers && a->num_workers != w->num_workers &&
	    a->num_workers > (uint32_t)rps_worker_num_workers(w)) /* smaller: a map behind ours */
		RPS_WARN("server %u counts %u workers, the map %u", s->rank, a->num_workers,
			 w->num_workers);
	d = (const struct rps_shard_desc *)(a + 1);
	if (first) {
		s->nshards = a->num_shards;
		s->consistency = a->consistency;
		s->staleness = a->staleness;
		s->chunk_bytes = a->chunk_bytes;
		s->max_msg = a->max_msg;
		s->shards = rps_calloc(s->nshards, sizeof(*s->shards));
		if (!s->shards)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->nshards; i++) {
			s->shards[i].desc = d[i];
			atomic_init(&s->shards[i].clock_seen, 0);
			atomic_init(&s->shards[i].wclock_seen, 0);
		}
		return 0;
	}
	if (a->num_shards != s->nshards || a->consistency != s->consistency ||
	    a->chunk_bytes != s->chunk_bytes) {
		RPS_ERR("server %u channel %u: hello ack disagrees with channel 0 (%u shards, "
			"chunk %u)",
			s->rank, channel, a->num_shards, a->chunk_bytes);
		return -EPROTO;
	}
	/* the key of the shard this connection reads is this connection's own
	 * (a memory window bound to it, docs/rdma.md) */
	if (channel < s->nshards)
		s->shards[channel].desc.remote_key = d[channel].remote_key;
	return 0;
}

static int connect_server(struct rps_worker *w, struct rps_wserver *s, uint64_t deadline_ns)
{
	char *ack = rps_malloc(RPS_TR_ACK_MAX);
	size_t ack_len = 0;
	struct rps_conn *c = NULL;
	int rc;

	if (!ack)
		return -ENOMEM;
	rc = rps_wconn_connect_one(w, s, 0, deadline_ns, ack, &ack_len, &c);
	if (rc)
		goto out;
	rc = parse_ack(w, s, 0, ack, ack_len, 1);
	if (rc) {
		rps_tr_close(c);
		goto out;
	}
	s->nconns = w->channels ? s->nshards : 1;
	s->conns = rps_calloc(s->nconns, sizeof(*s->conns));
	if (!s->conns) {
		rps_tr_close(c);
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < s->nconns; i++) {
		s->conns[i].srv = s;
		s->conns[i].channel = i;
		atomic_init(&s->conns[i].dead, 0);
	}
	s->conns[0].c = c;
	c->user = &s->conns[0];
	for (uint32_t i = 1; i < s->nconns; i++) {
		rc = rps_wconn_connect_one(w, s, i, deadline_ns, ack, &ack_len, &c);
		if (rc)
			goto out;
		s->conns[i].c = c;
		c->user = &s->conns[i];
		rc = parse_ack(w, s, i, ack, ack_len, 0);
		if (rc)
			goto out;
	}
	for (uint32_t i = 0; i < s->nshards; i++)
		s->shards[i].conn = &s->conns[w->channels ? i : 0];
	RPS_DEBUG("server %u %s:%u: %u shards, %u connections, max_msg %llu, chunk %u", s->rank,
		  s->host, s->port, s->nshards, s->nconns, (unsigned long long)s->max_msg,
		  s->chunk_bytes);
out:
	rps_free(ack);
	return rc;
}

int rps_wconn_connect_all(struct rps_worker *w, const struct rps_node *nodes, int nnodes)
{
	uint64_t deadline = rps_now_ns() + (uint64_t)w->timeout_ms * 1000000u;
	uint64_t own_max = w->cfg && w->cfg->max_msg ? w->cfg->max_msg : UINT64_MAX;
	int rc;

	w->servers = rps_calloc(w->num_servers, sizeof(*w->servers));
	if (!w->servers)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->num_servers; i++)
		w->servers[i].rank = UINT32_MAX;
	for (int i = 0; i < nnodes; i++) {
		const struct rps_node *n = &nodes[i];
		struct rps_wserver *s;

		if (n->role != RPS_ROLE_SERVER)
			continue;
		if (n->rank >= w->num_servers) {
			RPS_ERR("map: server rank %u of %u", n->rank, w->num_servers);
			return -EPROTO;
		}
		s = &w->servers[n->rank];
		s->rank = n->rank;
		s->node_id = n->id;
		s->node_pid = n->pid;
		memcpy(s->host, n->host, sizeof(s->host));
		s->host[sizeof(s->host) - 1] = 0;
		s->port = n->port;
	}
	for (uint32_t i = 0; i < w->num_servers; i++) {
		if (w->servers[i].rank == UINT32_MAX) {
			RPS_ERR("map: no server of rank %u", i);
			return -EPROTO;
		}
	}
	for (uint32_t i = 0; i < w->num_servers; i++) {
		struct rps_wserver *s = &w->servers[i];

		rc = connect_server(w, s, deadline);
		if (rc)
			return rc;
		if (s->nshards != w->servers[0].nshards) {
			RPS_ERR("server %u has %u shards, server 0 has %u: every server must run "
				"with the same RDMAPS_SHARDS",
				i, s->nshards, w->servers[0].nshards);
			return -EPROTO;
		}
		if (s->consistency != w->servers[0].consistency ||
		    s->staleness != w->servers[0].staleness) {
			RPS_ERR("server %u runs consistency %u/%u, server 0 %u/%u: every server "
				"must run with the same RDMAPS_CONSISTENCY and RDMAPS_STALENESS",
				i, s->consistency, s->staleness, w->servers[0].consistency,
				w->servers[0].staleness);
			return -EPROTO;
		}
		s->push_elems = rps_wplan_push_elems(s->max_msg, w->tr->max_frame);
		s->pull_elems = rps_wplan_pull_elems(RPS_MIN(s->max_msg, own_max),
						     w->tr->max_frame);
		if (!s->push_elems || !s->pull_elems) {
			RPS_ERR("server %u: frame limit %llu (transport frame %llu) holds no element",
				i, (unsigned long long)s->max_msg,
				(unsigned long long)w->tr->max_frame);
			return -EMSGSIZE;
		}
	}
	w->shards_per_server = w->servers[0].nshards;
	w->consistency = (enum rps_consistency)w->servers[0].consistency;
	w->staleness = w->servers[0].staleness;
	return 0;
}

void rps_wconn_close_all(struct rps_worker *w)
{
	if (!w->servers)
		return;
	for (uint32_t i = 0; i < w->num_servers; i++) {
		struct rps_wserver *s = &w->servers[i];

		for (uint32_t j = 0; s->conns && j < s->nconns; j++) {
			struct rps_wconn *wc = &s->conns[j];

			if (wc->c && !wc->closed) {
				int zero = 0;

				atomic_compare_exchange_strong(&wc->dead, &zero, -ECONNRESET);
				rps_tr_close(wc->c);
				wc->closed = 1;
			}
		}
	}
}
