/* Replicated shards: a replacement server joins a running job as a backup
 * (docs/replication.md "A replacement server joins as a backup").
 *
 * With RDMAPS_REPLICAS=2 a server started while the job runs (rdmaps-launch
 * --restart-servers after a server died, or by hand) takes no rank: the
 * dead server's rank is served by its promoted backup already. It asks the
 * scheduler for the map over a control connection (REPL_MAP, role ctl) and
 * offers itself to every live server as the backup of its shards (a HELLO
 * with channel RPS_REPL_HELLO_JOIN); those without one (the promoted backup,
 * and the server whose backup died with the dead one) take it: each copies
 * its shards' state at an entry boundary of their update threads and
 * forwards every entry after it (repl.c, repl_copy.c). Its standbys then
 * follow their primaries as any backup does, and take over if they die.
 * It runs until the scheduler says the job ends or can no longer be reached.
 */
#include "server/repl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "control/control.h"
#include "server/server_int.h"
#include "src/alloc.h"
#include "src/config.h"
#include "src/log.h"
#include "src/util.h"

struct rps_repl_mapper {
	pthread_mutex_t lock;
	struct rps_server *srv;
	struct rps_transport *tr;
	struct rps_conn *c;
	uint32_t req;
	char host[RPS_STR_MAX];
	uint16_t port;
	int timeout_ms;
};

#define MAP_BYTES (sizeof(struct rps_map) + RPS_MAX_NODES * sizeof(struct rps_node))

static int mapper_new(struct rps_server *srv, struct rps_repl_mapper **m_p)
{
	struct rps_repl_mapper *m;
	int rc;

	m = rps_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->srv = srv;
	m->timeout_ms = 2000;
	rc = rps_config_parse_hostport(srv->scheduler, m->host, sizeof(m->host), &m->port);
	if (!rc)
		rc = rps_ctl_transport_create(srv->cfg, srv->secret, MAP_BYTES + 4096,
					      m->timeout_ms, NULL, NULL, &m->tr);
	if (rc) {
		pthread_mutex_destroy(&m->lock);
		rps_free(m);
		return rc < 0 ? rc : -EINVAL;
	}
	*m_p = m;
	return 0;
}

void rps_repl_join_mapper_free(struct rps_repl_mapper *m)
{
	if (!m)
		return;
	if (m->c)
		rps_tr_close(m->c);
	rps_transport_destroy(m->tr);
	pthread_mutex_destroy(&m->lock);
	rps_free(m);
}

/* Under m->lock: wait for the answer to request req. */
static int map_wait(struct rps_repl_mapper *m, uint32_t req, struct rps_map *map_p,
		    struct rps_node *nodes, int max)
{
	uint64_t deadline = rps_now_ns() + (uint64_t)m->timeout_ms * 1000000ull;
	int rc = -ETIMEDOUT, done = 0;

	while (!done && rps_now_ns() < deadline) {
		struct rps_tr_event ev[4];
		int n = rps_tr_poll(m->tr, ev, 4, 50);

		for (int i = 0; i < n; i++) {
			const struct rps_map *mp = ev[i].data;

			if (!done && ev[i].type == RPS_TR_EV_CLOSED && ev[i].conn == m->c) {
				rc = ev[i].status ? ev[i].status : -ECONNRESET;
				done = 1;
			} else if (!done && ev[i].type == RPS_TR_EV_RECV &&
				   ev[i].hdr.op == RPS_OP_ERROR) {
				rc = ev[i].hdr.status < 0 ? ev[i].hdr.status : -EPROTO;
				done = 1;
			} else if (!done && ev[i].type == RPS_TR_EV_RECV &&
				   ev[i].hdr.op == RPS_OP_REPL_MAP && ev[i].hdr.req_id == req) {
				done = 1;
				if (ev[i].hdr.status) {
					rc = ev[i].hdr.status;
				} else if (ev[i].data_len < sizeof(*mp) ||
					   ev[i].data_len != sizeof(*mp) + (size_t)mp->num_nodes *
										  sizeof(*nodes)) {
					rc = -EPROTO;
				} else {
					if (map_p)
						*map_p = *mp;
					rc = (int)RPS_MIN(mp->num_nodes, (uint32_t)max);
					memcpy(nodes, mp + 1, (size_t)rc * sizeof(*nodes));
				}
			}
			if (ev[i].type == RPS_TR_EV_RECV && ev[i].token)
				rps_tr_release(m->tr, ev[i].token);
		}
	}
	return rc;
}

int rps_repl_join_map(struct rps_repl_mapper *m, struct rps_map *map_p, struct rps_node *nodes,
		      int max)
{
	struct rps_frame_hdr h;
	int rc;

	pthread_mutex_lock(&m->lock);
	if (!m->c) {
		struct rps_hello hello;
		char ack[64];
		size_t ack_len = 0;

		rps_proto_hello_init(&hello, RPS_ROLE_CTL, UINT32_MAX);
		rc = rps_tr_connect(m->tr, m->host, m->port, &hello, ack, sizeof(ack), &ack_len,
				    m->timeout_ms, &m->c);
		if (rc) {
			m->c = NULL;
			goto out;
		}
	}
	rps_proto_hdr_init(&h, RPS_OP_REPL_MAP, 0, ++m->req ? m->req : ++m->req);
	rc = rps_tr_post_send(m->c, &h, NULL, 0, 0);
	if (!rc)
		rc = map_wait(m, h.req_id, map_p, nodes, max);
	if (rc < 0 && rc != -EAGAIN && rc != -ECANCELED) {
		rps_tr_close(m->c); /* connect again next time */
		m->c = NULL;
	}
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* Offer this server as the backup of every live server rank that has none
 * (and that it does not back up already): the standbys it runs. */
static int join_servers(struct rps_server *srv, const struct rps_map *map,
			const struct rps_node *nodes, int n)
{
	int k = rps_repl_join_busy(srv);

	for (uint32_t rank = 0; rank < map->num_servers; rank++) {
		const struct rps_node *node = NULL;
		int rc;

		for (int i = 0; i < n; i++)
			if (nodes[i].role == RPS_ROLE_SERVER && nodes[i].rank == rank &&
			    nodes[i].alive)
				node = &nodes[i];
		if (!node || rps_repl_join_backs(srv, rank))
			continue;
		if (k >= 2) {
			RPS_WARN("replication: this replacement server backs up two servers already: "
				 "not offering itself to server %u",
				 rank);
			break;
		}
		rc = rps_repl_join_standby(srv, -1, rank, node);
		if (rc == 1) {
			RPS_WARN("replication: joined as the backup of server %u at %.64s:%u: copying "
				 "its %d shards while the job goes on",
				 rank, node->host, node->port, srv->nshards);
			k++;
		} else if (rc < 0) { /* asked again when the map changes */
			RPS_INFO("replication: cannot join server %u at %.64s:%u as its backup: %s",
				 rank, node->host, node->port, rps_strerror(rc));
		}
	}
	return k;
}

int rps_repl_join_maybe(struct rps_server *srv, int *rc_p)
{
	struct rps_repl_mapper *m = NULL, *mine;
	struct rps_node *nodes;
	struct rps_map map;
	int n, k, fails = 0;

	if (srv->cfg->replicas <= 1 || !srv->repl || srv->restore_dir)
		return 0;
	if (mapper_new(srv, &m))
		return 0; /* the usual join says what is wrong */
	nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes));
	if (!nodes) {
		rps_repl_join_mapper_free(m);
		return 0;
	}
	memset(&map, 0, sizeof(map));
	/* the scheduler may not listen yet (or be gone): ask until it answers,
	 * RDMAPS_TIMEOUT_MS, or a signal stops this server */
	for (uint64_t end = rps_now_ns() + (uint64_t)srv->cfg->timeout_ms * 1000000ull;;) {
		n = rps_repl_join_map(m, &map, nodes, RPS_MAX_NODES);
		if (n >= 0 || n == -EAGAIN || n == -ECANCELED || atomic_load(&srv->stop) ||
		    rps_now_ns() >= end)
			break;
		rps_sleep_ms(100);
	}
	*rc_p = 0;
	if (n < 0 && n != -ECANCELED && atomic_load(&srv->stop))
		goto out; /* stopped before it knew: a clean exit */
	if (n < 0 && n != -ECANCELED) { /* forming (-EAGAIN), or not reachable */
		rps_free(nodes);
		rps_repl_join_mapper_free(m);
		return 0;
	}
	if (n == -ECANCELED) { /* nothing to back up: not a failure */
		RPS_WARN("replication: the job at %s is ending: this server does not join it",
			 srv->scheduler);
		goto out;
	}
	if (srv->cfg->replicas != 2) {
		RPS_ERR("the job at %s runs already, with RDMAPS_REPLICAS=%d: a server joins a "
			"running job as a backup with RDMAPS_REPLICAS=2 only so far",
			srv->scheduler, srv->cfg->replicas);
		*rc_p = -ENOTSUP;
		goto out;
	}
	rps_repl_join_set_mapper(srv, m);
	mine = m;
	m = NULL;
	RPS_WARN("replication: the job at %s runs already (map epoch %u, %u servers): this server "
		 "joins as the backup of servers that have none",
		 srv->scheduler, map.epoch, map.num_servers);
	k = join_servers(srv, &map, nodes, n);
	if (!k)
		RPS_WARN("replication: every server of the job has its backup: this one waits for "
			 "one that needs it");
	/* follow the job until it ends (a promoted standby has a rank and its
	 * own scheduler connection meanwhile); a new map (a server died, a
	 * backup was promoted): offer this one again */
	while (!atomic_load(&srv->stop)) {
		struct rps_map now;
		uint32_t epoch = map.epoch;

		rps_sleep_ms(200);
		n = rps_repl_join_map(mine, &now, nodes, RPS_MAX_NODES);
		if (n == -ECANCELED)
			break; /* the job ends */
		if (n >= 0 && now.epoch != epoch) {
			map = now;
			if (rps_repl_join_busy(srv) < 2)
				join_servers(srv, &map, nodes, n);
		}
		fails = n < 0 ? fails + 1 : 0;
		if (fails >= 10) {
			RPS_WARN("replication: the scheduler at %s is gone: stopping",
				 srv->scheduler);
			break;
		}
	}
	rps_repl_stop_standby(srv);
out:
	rps_free(nodes);
	rps_repl_join_mapper_free(m);
	return 1;
}
