/* Load on rdmaps-sched from many nodes: S servers and W workers, each a
 * control client (rps_ctl_join, its heartbeat thread) in this one process,
 * against a real rdmaps-sched. Servers send a heartbeat tail of 4 shards as
 * rdmaps-server does. Measures the time until every node has its map, one
 * barrier of every node (group 1), then holds the cluster for HOLD seconds
 * (heartbeats only; the caller samples the scheduler's /proc meanwhile) and
 * leaves: workers first, then the servers once the scheduler shut them down.
 *   sched-load HOST:PORT SECRET SERVERS WORKERS HEARTBEAT_MS HOLD_S
 * Prints "joined_s", "barrier_ms", "held_s" lines; exit 0 when every node
 * joined, passed the barrier and saw no dead node. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/control.h"
#include "src/proto.h"

struct node {
	const char *sched, *secret;
	uint8_t role;
	int hb_ms, rc, barrier_rc;
	struct rps_ctl *ctl;
	pthread_t th;
};

static atomic_int dead_seen;
static atomic_int shutdowns;

static void on_dead(void *arg, const struct rps_node *n)
{
	(void)arg;
	if (n->alive == 0 && n->role == RPS_ROLE_SERVER)
		atomic_fetch_add(&dead_seen, 1);
}

static void on_shutdown(void *arg)
{
	(void)arg;
	atomic_fetch_add(&shutdowns, 1);
}

static const struct rps_ctl_events events = { .on_dead = on_dead, .on_shutdown = on_shutdown };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *join_thread(void *arg)
{
	struct node *nd = arg;
	struct rps_ctl_join_opts o;

	memset(&o, 0, sizeof(o));
	o.scheduler = nd->sched;
	o.secret = nd->secret;
	o.role = nd->role;
	o.host = "127.0.0.1";
	o.port = nd->role == RPS_ROLE_SERVER ? 4000 : 0;
	o.want_rank = UINT32_MAX;
	o.timeout_ms = 120000;
	o.heartbeat_ms = nd->hb_ms;
	o.events = &events;
	nd->rc = rps_ctl_join(&o, &nd->ctl);
	if (nd->rc == 0 && nd->role == RPS_ROLE_SERVER) {
		struct {
			struct rps_heartbeat_srv s;
			struct rps_hb_shard sh[4];
		} tail;

		memset(&tail, 0, sizeof(tail));
		tail.s.num_shards = 4;
		tail.s.ckpt_age_ms = -1;
		nd->rc = rps_ctl_set_heartbeat_tail(nd->ctl, &tail, sizeof(tail));
	}
	return NULL;
}

static void *barrier_thread(void *arg)
{
	struct node *nd = arg;

	nd->barrier_rc = rps_ctl_barrier(nd->ctl, 1, 120000);
	return NULL;
}

static int run_all(struct node *v, int n, void *(*fn)(void *))
{
	for (int i = 0; i < n; i++)
		if (pthread_create(&v[i].th, NULL, fn, &v[i])) {
			fprintf(stderr, "sched-load: thread %d: %s\n", i, strerror(errno));
			return -1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(v[i].th, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: sched-load HOST:PORT SECRET SERVERS WORKERS HEARTBEAT_MS HOLD_S\n");
		return 2;
	}
	int ns = atoi(argv[3]), nw = atoi(argv[4]), n = ns + nw, bad = 0;
	struct node *v = calloc((size_t)n, sizeof(*v));
	double t0, t1;

	if (!v || ns < 1 || nw < 1)
		return 2;
	for (int i = 0; i < n; i++) {
		v[i].sched = argv[1];
		v[i].secret = argv[2];
		v[i].role = i < ns ? RPS_ROLE_SERVER : RPS_ROLE_WORKER;
		v[i].hb_ms = atoi(argv[5]);
	}
	t0 = now_s();
	if (run_all(v, n, join_thread))
		return 1;
	t1 = now_s();
	for (int i = 0; i < n; i++)
		if (v[i].rc) {
			fprintf(stderr, "sched-load: node %d: join failed: %s\n", i, strerror(-v[i].rc));
			bad++;
		}
	if (bad)
		return 1;
	printf("joined_s %.3f nodes %d\n", t1 - t0, n);
	t0 = now_s();
	run_all(v, n, barrier_thread);
	t1 = now_s();
	for (int i = 0; i < n; i++)
		if (v[i].barrier_rc) {
			fprintf(stderr, "sched-load: node %d: barrier: %s\n", i, strerror(-v[i].barrier_rc));
			bad++;
		}
	printf("barrier_ms %.1f\n", (t1 - t0) * 1000);
	fflush(stdout);
	sleep((unsigned)atoi(argv[6]));
	printf("held_s %d dead_notices %d\n", atoi(argv[6]), atomic_load(&dead_seen));
	for (int i = ns; i < n; i++)
		rps_ctl_leave(v[i].ctl);
	/* the last worker gone, the scheduler shuts the servers down */
	for (int i = 0; i < 100 && atomic_load(&shutdowns) < ns; i++)
		usleep(50000);
	printf("servers_shut_down %d of %d\n", atomic_load(&shutdowns), ns);
	for (int i = 0; i < ns; i++)
		rps_ctl_leave(v[i].ctl);
	free(v);
	return bad || atomic_load(&dead_seen) || atomic_load(&shutdowns) < ns ? 1 : 0;
}
