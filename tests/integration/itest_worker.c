/* itest-worker: the worker side of the multi-process integration tests.
 * Started by tests/integration/cluster.sh through rdmaps-launch, so it runs
 * against real rdmaps-sched and rdmaps-server processes on 127.0.0.1 (TCP) or
 * on the SoftRoCE devices (RDMA).
 *
 *   itest-worker bsp     BSP, SGD lr 1: a pull at clock c returns exactly
 *                        -(sum of every worker's pushes of clocks < c)
 *   itest-worker asp     ASP, SGD lr 1: after every worker pushed, each value is
 *                        exactly -(sum of all pushes): nothing lost
 *   itest-worker ssp     SSP with bound s = RDMAPS_STALENESS, the last worker slow
 *                        (sleeps every clock): each worker pushes 1s into its own
 *                        key at the elements of the clock, so a pull shows which
 *                        clocks of which worker were applied. Every pull at clock
 *                        c must see all clocks < c - s of every worker (staleness
 *                        <= s) and its own clocks < c; s = 0 must give exactly the
 *                        BSP values (clocks < c, nothing of c); with s > 0 a fast
 *                        worker must actually run ahead (staleness >= 1 seen).
 *   itest-worker dead    RDMAPS_FAULT kills one worker (kill_role=worker,
 *                        kill_rank=R, kill_at_clock=K: it dies on reaching clock K,
 *                        after its pushes of clocks < K were acknowledged). The
 *                        others must not hang: BSP pulls at clock c give exactly
 *                        every worker's clocks < min(c, K) plus the survivors'
 *                        clocks K..c-1; under SSP the final values are that sum
 *                        for all clocks.
 *   itest-worker drop    RDMAPS_FAULT drop=P: servers refuse a fraction of the
 *                        pushes with -EIO; each key (one slice each) is pushed
 *                        alone and pushed again until it is accepted, so the
 *                        final ASP values are exactly the sums; each worker must
 *                        have seen some -EIO.
 *   itest-worker metrics a few BSP clocks with delays and stalls injected, then
 *                        rank 0 scrapes /metrics of every server (port
 *                        RDMAPS_METRICS_PORT + 1 + rank, at ITEST_SERVER_HOST) and
 *                        of the scheduler (the port itself): the names, non-zero
 *                        push / byte / fault counters, clocks; and runs
 *                        ITEST_BIN/rdmaps-ctl status: every node alive, shard lines.
 *   itest-worker elastic BSP; RDMAPS_FAULT kills worker R at clock K and
 *                        rdmaps-launch --restart-workers starts a replacement,
 *                        which joins the running job in rank R at the shards'
 *                        clock J. Every pull at clock c must equal the sums over
 *                        clocks < c of workers != R, R's clocks < K, and R's
 *                        clocks >= J for one J (the same J all along); the
 *                        replacement's first pull must be the state at J, and in
 *                        the end J must have been reached (it took part).
 *   itest-worker restart BSP with checkpoints every RS_CKPT clocks; RDMAPS_FAULT
 *                        kills server 1 at clock RS_KILL and rdmaps-launch
 *                        --restart-servers restores it. Each worker pushes 1s into
 *                        its own keys (2 on each server) at the elements of the
 *                        clock, so the final values show which clocks of which
 *                        worker were applied: everything on server 0; on server 1
 *                        every clock but [C, m), C = the checkpoint before the
 *                        kill, m >= the kill clock (where the worker reconnected,
 *                        or one more if that clock's push to the key was in flight
 *                        when the server died: it failed, -EHOSTDOWN).
 *   itest-worker torn    ASP, SGD lr 1, every worker at once: TORN_ITERS times push
 *                        all-ones gradients into two one-chunk keys and pull each
 *                        alone (over RDMA: the short READ path, while the update
 *                        threads rewrite the chunks). Every pulled vector must be
 *                        uniform (one torn read shows as two values) and never
 *                        higher than the one before; in the end exactly
 *                        -(workers * TORN_ITERS). Prints the torn-read retries.
 *   itest-worker realloc each worker pulls its own keys into buffers that are
 *                        freed and allocated again at the same address (munmap +
 *                        mmap MAP_FIXED; free + malloc until the address
 *                        repeats), unregistered and with
 *                        rps_worker_register/unregister: every value exact.
 *   itest-worker bsp_order  3 workers push order-sensitive gradients in forced
 *                        orders: with RDMAPS_BSP_SUM=ordered every order gives the
 *                        rank-order sum bit for bit (run_bsp_order).
 *   itest-worker errors  unknown keys, wrong lengths, a key re-declared with
 *                        another length; and (rank 0, with ITEST_SERVER_PORTS)
 *                        bad frames over raw sockets while rank 1 keeps working;
 *                        afterwards no parameter changed.
 *
 * Gradients are small integers so float sums are exact whatever order the
 * servers add them in (bsp_order excepted: it is about that order). Exit 0 on success; any mismatch is printed and fails.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdmaps/rdmaps.h>

#include "src/auth.h"
#include "src/config.h"
#include "src/fault.h"
#include "src/keymap.h"
#include "src/proto.h"

/* The test's settings: defaults and RDMAPS_* variables, read at the start of
 * main (the library keeps no process-wide configuration; this program keeps
 * its own). */
static struct rps_config itest_config;

static const struct rps_config *itest_cfg(void)
{
	return &itest_config;
}

#define NKEYS 5
#define CLOCKS 4

static const rps_key_t keys[NKEYS] = { 1001, 1002, 1003, 1004, 1005 };
/* 1 element, a small tensor, one chunk, several chunks, and one split into
 * slices across servers (the tests run with RDMAPS_SLICE_BYTES=256K). */
static const size_t lens[NKEYS] = { 1, 100, 4096, 5000, 300000 };

static int rank, nworkers, failures;

#define CHECK(cond, ...)                                                         \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "itest-worker %d: FAIL %s:%d: ", rank, __FILE__, \
				__LINE__);                                       \
			fprintf(stderr, __VA_ARGS__);                            \
			fprintf(stderr, "\n");                                   \
			failures++;                                              \
		}                                                                \
	} while (0)

static size_t total_len(void)
{
	size_t n = 0;

	for (int k = 0; k < NKEYS; k++)
		n += lens[k];
	return n;
}

/* Worker w's gradient for element i of key k at clock c. */
static float grad(int w, int c, int k, size_t i)
{
	return (float)((w + 1) + 10 * c + k + (int)(i % 13));
}

static void fill_grads(float *g, int w, int c)
{
	size_t off = 0;

	for (int k = 0; k < NKEYS; k++)
		for (size_t i = 0; i < lens[k]; i++)
			g[off++] = grad(w, c, k, i);
}

/* Value after clocks [0, upto) of every worker were applied with SGD lr 1. */
static void expected(float *v, int upto)
{
	size_t off = 0;

	for (int k = 0; k < NKEYS; k++) {
		for (size_t i = 0; i < lens[k]; i++) {
			double s = 0;

			for (int c = 0; c < upto; c++)
				for (int w = 0; w < nworkers; w++)
					s += grad(w, c, k, i);
			v[off++] = (float)-s;
		}
	}
}

static int compare(const float *got, const float *want, const char *what)
{
	size_t off = 0, bad = 0;

	for (int k = 0; k < NKEYS; k++) {
		for (size_t i = 0; i < lens[k]; i++, off++) {
			if (got[off] != want[off]) {
				if (bad < 5)
					fprintf(stderr,
						"itest-worker %d: %s: key %llu [%zu] = %.1f, want %.1f\n",
						rank, what, (unsigned long long)keys[k], i, got[off],
						want[off]);
				bad++;
			}
		}
	}
	CHECK(bad == 0, "%s: %zu values differ", what, bad);
	return bad ? -1 : 0;
}

/* req_p is read only after the call that fills it returned rc. */
static int wait_ok(int rc, struct rps_req **req_p, const char *what)
{
	if (rc == 0)
		rc = rps_req_wait(*req_p, 60000);
	CHECK(rc == 0, "%s: %s", what, rps_strerror(rc));
	return rc;
}

static int pull_all(struct rps_worker *w, float *v)
{
	struct rps_req *req = NULL;
	int rc = rps_worker_pull(w, keys, v, lens, NKEYS, &req);

	if (!rc)
		rc = rps_req_wait(req, 60000);
	/* ITEST_PULL_AGAIN (replicated shards over RDMA): a pull by one-sided
	 * READs of a primary that died fails with the connection; pulled again
	 * from its promoted backup, as fmnist-train does (docs/replication.md) */
	for (int tries = 0; getenv("ITEST_PULL_AGAIN") && tries < 3 &&
			    (rc == -ECONNRESET || rc == -EHOSTDOWN);
	     tries++) {
		fprintf(stderr, "itest-worker %d: pull: %s: pulling again\n", rank,
			rps_strerror(rc));
		req = NULL;
		rc = rps_worker_pull(w, keys, v, lens, NKEYS, &req);
		if (!rc)
			rc = rps_req_wait(req, 60000);
	}
	CHECK(rc == 0, "%s: %s", "pull", rps_strerror(rc));
	return rc;
}

static int push_all(struct rps_worker *w, const float *g)
{
	struct rps_req *req = NULL;

	return wait_ok(rps_worker_push(w, keys, g, lens, NKEYS, &req), &req, "push");
}

static int declare_all(struct rps_worker *w)
{
	struct rps_init zeros = { .kind = RPS_INIT_ZEROS };
	int rc = rps_worker_declare(w, keys, lens, NKEYS, &zeros);

	CHECK(rc == 0, "declare: %s", rps_strerror(rc));
	return rc;
}

/* clip: RDMAPS_CLIP_NORM=32 and a small frame (RDMAPS_MAX_MSG=4K, so a
 * tensor of 4096 floats goes out in 5 PUSH frames). Each worker pushes 2.0
 * into every element once (norm 2 * 64 = 128): clipping is per tensor, so
 * each push is scaled by 32 / 128 = 1/4, exactly as if it were one frame, and
 * with SGD lr 1 every value ends at -(workers * 0.5) (BSP: the sum of the
 * clipped pushes, applied at clock 1). Per-frame clipping would scale each
 * frame by about 1/2. */
#define CLIP_KEY 2001
#define CLIP_LEN 4096

static int run_clip(struct rps_worker *w)
{
	struct rps_init zeros = {.kind = RPS_INIT_ZEROS};
	rps_key_t key = CLIP_KEY;
	size_t len = CLIP_LEN;
	float *g = calloc(len, sizeof(float)), *v = calloc(len, sizeof(float));
	struct rps_req *req = NULL;
	int rc = rps_worker_declare(w, &key, &len, 1, &zeros);

	CHECK(rc == 0, "clip: declare: %s", rps_strerror(rc));
	if (!rc)
		rc = rps_worker_barrier(w);
	for (size_t i = 0; i < len; i++)
		g[i] = 2.0f;
	if (!rc)
		rc = wait_ok(rps_worker_push(w, &key, g, &len, 1, &req), &req, "clip push");
	if (!rc) {
		rc = rps_worker_clock(w);
		CHECK(rc == 0, "clip: clock: %s", rps_strerror(rc));
	}
	if (!rc)
		rc = rps_worker_barrier(w); /* every push applied (ASP) or summed (BSP) */
	if (!rc)
		rc = wait_ok(rps_worker_pull(w, &key, v, &len, 1, &req), &req, "clip pull");
	for (size_t i = 0; !rc && i < len; i++) {
		if (v[i] != -0.5f * (float)nworkers) {
			CHECK(0, "clip: element %zu is %g, want %g (clipped per tensor)", i, v[i],
			      -0.5f * (float)nworkers);
			break;
		}
	}
	free(g);
	free(v);
	return rc;
}

/* bsp_order: 3 workers, BSP, SGD lr 1. Gradients of wide magnitude and both
 * signs, so their float sum depends on the order it is taken in. Clock 0:
 * key A is pushed by workers 0, 1, 2 one after the other, key B by 2, 1, 0
 * (each push acknowledged, i.e. summed, then a barrier before the next
 * worker's), key C by all at once. Sums in rank order (RDMAPS_BSP_SUM=ordered):
 * A, B and C all equal -((g0 + g1) + g2), bit for bit. Arrival order: A is
 * -((g0 + g1) + g2), B -((g2 + g1) + g0) and they differ (the data is
 * order-sensitive, so the ordered case could fail). Keys of ORD_LEN elements:
 * two slices on two servers, several frames each (RDMAPS_MAX_MSG=64K). */
#define ORD_LEN 100000

static float ord_grad(int w, size_t i)
{
	uint64_t h = (uint64_t)w * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 1;

	h ^= h >> 31;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 29;
	return ldexpf(1.0f + (float)(h & 0xffff) / 65536.0f, (int)((h >> 16) % 41) - 20) *
	       ((h >> 40) & 1 ? -1.0f : 1.0f);
}

/* -(((0 + g[o0]) + g[o1]) + g[o2]) */
static void ord_want(float *v, const int *o)
{
	for (size_t i = 0; i < ORD_LEN; i++) {
		float s = 0.0f;

		for (int k = 0; k < 3; k++)
			s += ord_grad(o[k], i);
		v[i] = -s;
	}
}

static size_t ord_diff(const float *got, const float *want, const char *what)
{
	size_t bad = 0;

	for (size_t i = 0; i < ORD_LEN; i++) {
		if (memcmp(&got[i], &want[i], sizeof(float))) {
			if (bad < 3 && what)
				fprintf(stderr, "itest-worker %d: %s [%zu] = %.9g, want %.9g\n", rank,
					what, i, got[i], want[i]);
			bad++;
		}
	}
	return bad;
}

static int run_bsp_order(struct rps_worker *w)
{
	static const int fwd[3] = {0, 1, 2}, rev[3] = {2, 1, 0};
	struct rps_init zeros = {.kind = RPS_INIT_ZEROS};
	rps_key_t ks[3] = {3001, 3002, 3003};
	size_t ls[3] = {ORD_LEN, ORD_LEN, ORD_LEN};
	int arrival = !strcmp(itest_cfg()->bsp_sum, "arrival");
	float *g = malloc(ORD_LEN * sizeof(float)), *v = malloc(3 * ORD_LEN * sizeof(float));
	float *want = malloc(ORD_LEN * sizeof(float));
	struct rps_req *req = NULL;
	int rc;

	CHECK(nworkers == 3, "bsp_order needs 3 workers, not %d", nworkers);
	rc = rps_worker_declare(w, ks, ls, 3, &zeros);
	CHECK(rc == 0, "bsp_order: declare: %s", rps_strerror(rc));
	if (!rc)
		rc = rps_worker_barrier(w);
	for (size_t i = 0; i < ORD_LEN; i++)
		g[i] = ord_grad(rank, i);
	/* A and B in forced orders: one worker at a time, acknowledged (summed) */
	for (int step = 0; !rc && step < 3; step++) {
		if (rank == fwd[step])
			rc = wait_ok(rps_worker_push(w, &ks[0], g, &ls[0], 1, &req), &req, "push A");
		if (!rc && rank == rev[step])
			rc = wait_ok(rps_worker_push(w, &ks[1], g, &ls[1], 1, &req), &req, "push B");
		if (!rc)
			rc = rps_worker_barrier(w);
	}
	if (!rc) /* C: all at once */
		rc = wait_ok(rps_worker_push(w, &ks[2], g, &ls[2], 1, &req), &req, "push C");
	if (!rc) {
		rc = rps_worker_clock(w);
		CHECK(rc == 0, "bsp_order: clock: %s", rps_strerror(rc));
	}
	if (!rc) /* at clock 1: exactly clock 0 applied */
		rc = wait_ok(rps_worker_pull(w, ks, v, ls, 3, &req), &req, "bsp_order pull");
	if (!rc && !arrival) {
		ord_want(want, fwd);
		CHECK(ord_diff(v, want, "A (pushed 0, 1, 2)") == 0, "A is not the rank-order sum");
		CHECK(ord_diff(v + ORD_LEN, want, "B (pushed 2, 1, 0)") == 0,
		      "B is not the rank-order sum");
		CHECK(ord_diff(v + 2 * ORD_LEN, want, "C (pushed at once)") == 0,
		      "C is not the rank-order sum");
	} else if (!rc) {
		size_t d;

		ord_want(want, fwd);
		CHECK(ord_diff(v, want, "arrival A") == 0, "A is not the sum in arrival order");
		ord_want(want, rev);
		CHECK(ord_diff(v + ORD_LEN, want, "arrival B") == 0,
		      "B is not the sum in arrival order");
		d = ord_diff(v, v + ORD_LEN, NULL);
		CHECK(d > 0, "A and B equal: the gradients do not depend on the order");
		printf("itest-worker %d: bsp_order (arrival): A and B differ in %zu of %d elements\n",
		       rank, d, ORD_LEN);
	}
	free(g);
	free(v);
	free(want);
	return failures ? -1 : 0;
}

/* Clocks of the bsp and asp modes: CLOCKS, or ITEST_CLOCKS (the replicated
 * shards' runs kill a server in the middle). */
static int itest_clocks(void)
{
	const char *e = getenv("ITEST_CLOCKS");

	return e && atoi(e) > 0 ? atoi(e) : CLOCKS;
}

/* ITEST_KILL2=CLOCK,RANK (replicated shards, cluster.sh repl3_bsp): worker 0,
 * at clock CLOCK before its pushes, kills with SIGKILL the process serving
 * server rank RANK now (after a failover: the process hosting the promoted
 * backup), its pid from rdmaps-ctl status (ITEST_BIN). */
/* ITEST_KILL2_WAIT=COUNT,TEXT,FILE (cluster.sh repl_join): before killing,
 * wait until FILE (the job's output) has COUNT lines with TEXT: the chain is
 * whole again ("backup here holds all"), at most 120 s. */
static void kill2_wait(void)
{
	const char *e = getenv("ITEST_KILL2_WAIT");
	char text[128], path[512], line[1024];
	int want, have = 0;

	if (!e || sscanf(e, "%d,%127[^,],%511s", &want, text, path) != 3)
		return;
	for (int i = 0; i < 1200 && have < want; i++) {
		FILE *f = fopen(path, "r");

		have = 0;
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, text))
				have++;
		if (f)
			fclose(f);
		if (have < want)
			usleep(100000);
	}
	CHECK(have >= want, "ITEST_KILL2_WAIT: %d of %d lines with '%s' in %s", have, want, text,
	      path);
	fprintf(stderr, "itest-worker 0: %d lines with '%s': the chain is whole again\n", have,
		text);
}

static void kill2_maybe(int c)
{
	const char *e = getenv("ITEST_KILL2"), *bin = getenv("ITEST_BIN");
	int kc, kr, pid = 0;
	char cmd[1200], line[512];
	FILE *f;

	if (!e || rank != 0 || sscanf(e, "%d,%d", &kc, &kr) != 2 || kc != c)
		return;
	CHECK(bin != NULL, "ITEST_KILL2: ITEST_BIN not set");
	if (!bin)
		return;
	kill2_wait();
	snprintf(cmd, sizeof(cmd), "%s/rdmaps-ctl status", bin);
	f = popen(cmd, "r");
	CHECK(f != NULL, "popen %s", cmd);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned id, r, p;
		char role[16], hp[128], state[16];

		if (sscanf(line, "%u %15s %u %127s %u %15s", &id, role, &r, hp, &p, state) == 6 &&
		    !strcmp(role, "server") && (int)r == kr && !strcmp(state, "alive"))
			pid = (int)p;
	}
	CHECK(pclose(f) == 0, "rdmaps-ctl status failed");
	CHECK(pid > 0, "ITEST_KILL2: no alive server of rank %d in rdmaps-ctl status", kr);
	if (pid <= 0)
		return;
	fprintf(stderr, "itest-worker 0: clock %d: killing server rank %d's process %d (SIGKILL)\n",
		c, kr, pid);
	CHECK(kill(pid, SIGKILL) == 0, "kill %d: %s", pid, strerror(errno));
}

static int run_bsp(struct rps_worker *w)
{
	const int clocks = itest_clocks();
	size_t n = total_len();
	float *v = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float)),
	      *want = calloc(n, sizeof(float));

	for (int c = 0; c < clocks && !failures; c++) {
		char what[64];

		/* A pull at clock c sees exactly the clocks before c. */
		if (pull_all(w, v))
			break;
		expected(want, c);
		snprintf(what, sizeof(what), "bsp pull at clock %d", c);
		compare(v, want, what);
		kill2_maybe(c);
		fill_grads(g, rank, c);
		if (c == clocks - 1) {
			/* the last step as one push-pull */
			struct rps_req *req = NULL;

			if (wait_ok(rps_worker_pushpull(w, keys, g, v, lens, NKEYS, &req), &req,
				    "pushpull"))
				break;
			expected(want, c + 1);
			compare(v, want, "bsp pushpull result");
		} else {
			if (push_all(w, g))
				break;
			int rc = rps_worker_clock(w);
			CHECK(rc == 0, "clock: %s", rps_strerror(rc));
		}
	}
	free(v);
	free(g);
	free(want);
	return failures ? -1 : 0;
}

static int run_asp(struct rps_worker *w)
{
	const int clocks = itest_clocks();
	size_t n = total_len();
	float *v = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float)),
	      *want = calloc(n, sizeof(float));

	for (int c = 0; c < clocks; c++) {
		fill_grads(g, rank, c);
		if (push_all(w, g))
			goto out;
		int rc = rps_worker_clock(w);
		CHECK(rc == 0, "clock: %s", rps_strerror(rc));
	}
	/* Everyone's pushes were acknowledged (= applied) before the barrier. */
	CHECK(rps_worker_barrier(w) == 0, "barrier");
	if (pull_all(w, v) == 0) {
		expected(want, clocks);
		compare(v, want, "asp final pull");
	}
out:
	free(v);
	free(g);
	free(want);
	return failures ? -1 : 0;
}

/* ---- torn reads through rps_worker_pull ---- */

#define TORN_ITERS 150
#define TORN_KEYS  2

static const rps_key_t torn_keys[TORN_KEYS] = { 2001, 2002 };
/* a compact chunk of 8-byte words and one chunk of 64-byte lines */
static const size_t torn_lens[TORN_KEYS] = { 100, 4096 };

/* 1 if v[0..n) all equal v[0]; else reports the first other value */
static int uniform(const float *v, size_t n, const char *what)
{
	for (size_t i = 1; i < n; i++) {
		if (v[i] != v[0]) {
			CHECK(0, "%s: element %zu is %g, element 0 is %g (a torn read)", what, i,
			      (double)v[i], (double)v[0]);
			return 0;
		}
	}
	return 1;
}

static int run_torn(struct rps_worker *w)
{
	struct rps_init zeros = { .kind = RPS_INIT_ZEROS };
	float *ones = malloc(torn_lens[1] * sizeof(float)),
	      *v = malloc(torn_lens[1] * sizeof(float));
	float last[TORN_KEYS] = { 0, 0 };
	int rc;

	CHECK(ones && v, "out of memory");
	if (!ones || !v)
		goto out;
	for (size_t i = 0; i < torn_lens[1]; i++)
		ones[i] = 1;
	/* registered: the one-chunk key as big as a chunk is read into it
	 * directly (a direct request), not through bounce memory */
	rc = rps_worker_register(w, v, torn_lens[1] * sizeof(float));
	CHECK(rc == 0, "register: %s", rps_strerror(rc));
	rc = rps_worker_declare(w, torn_keys, torn_lens, TORN_KEYS, &zeros);
	CHECK(rc == 0, "declare: %s", rps_strerror(rc));
	if (rc || rps_worker_barrier(w))
		goto out;
	for (int it = 0; it < TORN_ITERS && !failures; it++) {
		for (int k = 0; k < TORN_KEYS && !failures; k++) {
			struct rps_req *req = NULL;

			if (wait_ok(rps_worker_push(w, &torn_keys[k], ones, &torn_lens[k], 1, &req),
				    &req, "torn push"))
				goto out;
			if (wait_ok(rps_worker_pull(w, &torn_keys[k], v, &torn_lens[k], 1, &req),
				    &req, "torn pull"))
				goto out;
			if (!uniform(v, torn_lens[k], "torn pull"))
				goto out;
			/* values only go down; this worker's own push is applied */
			CHECK(v[0] <= last[k] - 1, "key %llu: pulled %g after %g",
			      (unsigned long long)torn_keys[k], (double)v[0], (double)last[k]);
			last[k] = v[0];
		}
	}
	CHECK(rps_worker_barrier(w) == 0, "barrier");
	for (int k = 0; k < TORN_KEYS; k++) {
		struct rps_req *req = NULL;

		if (wait_ok(rps_worker_pull(w, &torn_keys[k], v, &torn_lens[k], 1, &req), &req,
			    "final pull") == 0 && uniform(v, torn_lens[k], "final pull"))
			CHECK(v[0] == -(float)(nworkers * TORN_ITERS), "key %llu: final %g, want %d",
			      (unsigned long long)torn_keys[k], (double)v[0], -(nworkers * TORN_ITERS));
	}
	{
		const char *tr = getenv("RDMAPS_TRANSPORT");
		struct rps_worker_stats st = { .field_mask = RPS_WORKER_STAT_TORN_RETRIES |
							     RPS_WORKER_STAT_DIRECT_PULLS |
							     RPS_WORKER_STAT_DIRECT_SLEEPS |
							     RPS_WORKER_STAT_DIRECT_NAPS };
		uint64_t direct, sleeps, naps;

		CHECK(rps_worker_stats(w, &st) == 0, "rps_worker_stats");
		direct = st.direct_pulls;
		sleeps = st.direct_sleeps;
		naps = st.direct_naps;
		printf("itest-worker %d: torn: %d pulls, %llu torn-read retries\n", rank,
		       TORN_ITERS * TORN_KEYS, (unsigned long long)st.torn_retries);
		printf("itest-worker %d: torn: %llu direct pulls, %llu waits slept, %llu naps "
		       "without a wake-up\n",
		       rank, (unsigned long long)direct, (unsigned long long)sleeps,
		       (unsigned long long)naps);
		/* over RDMA every pull of these one-chunk keys is a direct request */
		if (tr && !strcmp(tr, "rdma"))
			CHECK(direct >= (uint64_t)(TORN_ITERS * TORN_KEYS),
			      "%llu direct pulls over RDMA, want %d or more",
			      (unsigned long long)direct, TORN_ITERS * TORN_KEYS);
		/* a sleeping waiter is woken by its READ's wake-up, not by its nap */
		CHECK(naps * 2 <= sleeps + 8, "%llu of %llu direct waits slept to the nap",
		      (unsigned long long)naps, (unsigned long long)sleeps);
	}
out:
	if (v)
		CHECK(rps_worker_unregister(w, v) == 0, "unregister");
	free(ones);
	free(v);
	return failures ? -1 : 0;
}

/* ---- /metrics and rdmaps-ctl status ---- */

static void send_all(int fd, const void *buf, size_t len);

#define METRICS_CLOCKS 4

/* GET /metrics from host:port into buf (NUL-terminated body). 0 or -1. */
static int http_get_metrics(const char *host, int port, char *buf, size_t cap)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char req[128];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char *body;

	if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		CHECK(0, "metrics: connect %s:%d: %s", host, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	snprintf(req, sizeof(req), "GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n", host);
	send_all(fd, req, strlen(req));
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 5000) <= 0 || got + 1 >= cap)
			break;
		n = read(fd, buf + got, cap - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	if (strncmp(buf, "HTTP/1.1 200", 12)) {
		CHECK(0, "metrics: %s:%d answered '%.40s'", host, port, buf);
		return -1;
	}
	body = strstr(buf, "\r\n\r\n");
	if (!body) {
		CHECK(0, "metrics: %s:%d: no body", host, port);
		return -1;
	}
	memmove(buf, body + 4, strlen(body + 4) + 1);
	return 0;
}

/* Value of the sample `name{labels}` (the whole series name), or -1e300. */
static double metric_value(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, series, n) && l[n] == ' ')
			return strtod(l + n + 1, NULL);
	return -1e300;
}

/* Sum of the samples of `name` over one label (e.g. every shard). */
static double metric_sum(const char *text, const char *name, int *count_p)
{
	size_t n = strlen(name);
	double sum = 0;

	*count_p = 0;
	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *sp;

		if (strncmp(l, name, n) || l[n] != '{')
			continue;
		sp = strchr(l, ' ');
		if (sp) {
			sum += strtod(sp + 1, NULL);
			(*count_p)++;
		}
	}
	return sum;
}

static void check_metrics(int nservers)
{
	const struct rps_config *cfg = itest_cfg();
	const char *shost = getenv("ITEST_SERVER_HOST"), *bin = getenv("ITEST_BIN");
	size_t cap = 1 << 20;
	char *buf = malloc(cap), series[160], cmd[600];
	double faults[3] = { 0 };
	int base = cfg->metrics_port, cnt;

	CHECK(base > 0, "metrics: RDMAPS_METRICS_PORT not set");
	if (!shost)
		shost = "127.0.0.1";
	for (int r = 0; r < nservers && base > 0; r++) {
		static const char *const kinds[3] = { "drop", "delay", "stall" };
		double v;

		if (http_get_metrics(shost, base + 1 + r, buf, cap))
			continue;
		CHECK(strstr(buf, "# TYPE rdmaps_pushes_total counter") != NULL,
		      "server %d: no rdmaps_pushes_total", r);
		v = metric_sum(buf, "rdmaps_pushes_total", &cnt);
		CHECK(cnt == cfg->shards && v > 0, "server %d: pushes %g over %d shards", r, v, cnt);
		v = metric_sum(buf, "rdmaps_shard_clock", &cnt);
		CHECK(cnt == cfg->shards && v >= (double)cnt * METRICS_CLOCKS,
		      "server %d: shard clocks sum %g over %d shards", r, v, cnt);
		metric_sum(buf, "rdmaps_ring_depth", &cnt);
		CHECK(cnt == cfg->shards, "server %d: %d ring depths", r, cnt);
		metric_sum(buf, "rdmaps_pull_requests_total", &cnt);
		CHECK(cnt == cfg->shards, "server %d: %d pull counters", r, cnt);
		metric_sum(buf, "rdmaps_checkpoint_age_seconds", &cnt);
		CHECK(cnt == cfg->shards, "server %d: %d checkpoint ages", r, cnt);
		for (int d = 0; d < 2; d++) {
			snprintf(series, sizeof(series), "rdmaps_bytes_total{transport=\"%s\",dir=\"%s\"}",
				 cfg->transport, d ? "tx" : "rx");
			v = metric_value(buf, series);
			CHECK(v > 0, "server %d: %s = %g", r, series, v);
			snprintf(series, sizeof(series),
				 "rdmaps_messages_total{transport=\"%s\",dir=\"%s\"}", cfg->transport,
				 d ? "tx" : "rx");
			v = metric_value(buf, series);
			CHECK(v > 0, "server %d: %s = %g", r, series, v);
		}
		for (int k = 0; k < 3; k++) {
			snprintf(series, sizeof(series), "rdmaps_faults_injected_total{kind=\"%s\"}",
				 kinds[k]);
			v = metric_value(buf, series);
			CHECK(v >= 0, "server %d: no %s", r, series);
			faults[k] += v;
		}
	}
	CHECK(faults[1] > 0 && faults[2] > 0, "metrics: faults injected: delay %g, stall %g",
	      faults[1], faults[2]);
	/* the scheduler (launched on 127.0.0.1) */
	if (base > 0 && http_get_metrics("127.0.0.1", base, buf, cap) == 0) {
		double v = metric_value(buf, "rdmaps_nodes{role=\"worker\",state=\"alive\"}");

		CHECK(v == nworkers, "scheduler: %g workers alive, want %d", v, nworkers);
		v = metric_value(buf, "rdmaps_nodes{role=\"server\",state=\"alive\"}");
		CHECK(v == nservers, "scheduler: %g servers alive, want %d", v, nservers);
		v = metric_value(buf, "rdmaps_bytes_total{transport=\"tcp\",dir=\"rx\"}");
		CHECK(v > 0, "scheduler: bytes received %g", v);
		CHECK(strstr(buf, "rdmaps_heartbeats_missed_total{role=\"worker\"} 0") != NULL,
		      "scheduler: no rdmaps_heartbeats_missed_total");
	}
	/* rdmaps-ctl status lists every node, alive, with the servers' shard lines */
	if (bin) {
		FILE *f;
		size_t got = 0;

		snprintf(cmd, sizeof(cmd), "%s/rdmaps-ctl status", bin);
		f = popen(cmd, "r");
		CHECK(f != NULL, "popen %s", cmd);
		if (f) {
			got = fread(buf, 1, cap - 1, f);
			buf[got] = '\0';
			CHECK(pclose(f) == 0, "rdmaps-ctl status failed");
			fprintf(stderr, "itest-worker %d: rdmaps-ctl status:\n%s", rank, buf);
			for (int id = 0; id < nservers + nworkers; id++) {
				char want[64];
				const char *l = buf;
				int found = 0;

				snprintf(want, sizeof(want), "%-5d %-7s", id,
					 id < nservers ? "server" : "worker");
				for (; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
					if (!strncmp(l, want, strlen(want)) && strstr(l, " alive "))
						found = 1;
				CHECK(found, "rdmaps-ctl status: no alive line for node %d", id);
			}
			CHECK(strstr(buf, "PUSHES/S") != NULL, "rdmaps-ctl status: no PUSHES/S");
			snprintf(series, sizeof(series), "shards %d: ring depth", cfg->shards);
			cnt = 0;
			for (const char *l = strstr(buf, series); l; l = strstr(l + 1, series))
				cnt++;
			CHECK(cnt == nservers, "rdmaps-ctl status: %d shard lines, want %d", cnt,
			      nservers);
		}
	} else {
		CHECK(0, "metrics: ITEST_BIN not set");
	}
	free(buf);
}

static int run_metrics(struct rps_worker *w)
{
	size_t n = total_len();
	float *v = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float));

	for (int c = 0; c < METRICS_CLOCKS && !failures; c++) {
		if (pull_all(w, v))
			break;
		fill_grads(g, rank, c);
		if (push_all(w, g))
			break;
		rps_worker_clock(w);
	}
	/* a pull at the last clock: every shard is there */
	pull_all(w, v);
	CHECK(rps_worker_barrier(w) == 0, "metrics: barrier");
	if (rank == 0 && !failures) {
		usleep(3 * (useconds_t)itest_cfg()->heartbeat_ms * 1000); /* heartbeats */
		check_metrics(rps_worker_num_servers(w));
	}
	free(v);
	free(g);
	return failures ? -1 : 0;
}

/* ---- dropped pushes (fault injection) ---- */

#define DROP_CLOCKS 8
#define DROP_NKEYS  4 /* the keys of one slice each */

static int run_drop(struct rps_worker *w)
{
	size_t n = total_len();
	float *v = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float)),
	      *want = calloc(n, sizeof(float));
	int drops = 0;

	for (int c = 0; c < DROP_CLOCKS && !failures; c++) {
		size_t off = 0;

		fill_grads(g, rank, c);
		for (int k = 0; k < DROP_NKEYS; off += lens[k], k++) {
			int rc, tries = 0;

			do {
				struct rps_req *req = NULL;

				rc = rps_worker_push(w, &keys[k], g + off, &lens[k], 1, &req);
				if (!rc)
					rc = rps_req_wait(req, 60000);
				drops += rc == -EIO;
			} while (rc == -EIO && ++tries < 100);
			CHECK(rc == 0, "push of key %llu at clock %d: %s", (unsigned long long)keys[k],
			      c, rps_strerror(rc));
		}
		int rc = rps_worker_clock(w);
		CHECK(rc == 0, "clock: %s", rps_strerror(rc));
	}
	fprintf(stderr, "itest-worker %d: drop: %d push(es) refused with -EIO and sent again\n",
		rank, drops);
	CHECK(drops > 0, "drop: no push was dropped (is RDMAPS_FAULT=drop=P set?)");
	CHECK(rps_worker_barrier(w) == 0, "drop: barrier");
	if (!failures && pull_all(w, v) == 0) {
		size_t m = 0;

		expected(want, DROP_CLOCKS);
		for (int k = 0; k < DROP_NKEYS; k++)
			m += lens[k];
		for (size_t i = m; i < n; i++)
			want[i] = 0.0f; /* the last key is never pushed */
		compare(v, want, "drop: final values");
	}
	free(v);
	free(g);
	free(want);
	return failures ? -1 : 0;
}

/* ---- a worker dies (fault injection) ---- */

#define DEAD_CLOCKS 7

/* Values after clocks [0, upto) when worker `victim` took part only in the
 * clocks before `kclock`. */
static void expected_dead(float *v, int upto, int victim, int kclock)
{
	size_t off = 0;

	for (int k = 0; k < NKEYS; k++) {
		for (size_t i = 0; i < lens[k]; i++) {
			double s = 0;

			for (int c = 0; c < upto; c++)
				for (int w = 0; w < nworkers; w++)
					if (w != victim || c < kclock)
						s += grad(w, c, k, i);
			v[off++] = (float)-s;
		}
	}
}

static int run_dead(struct rps_worker *w)
{
	const struct rps_fault_spec *f = rps_fault_current();
	const char *cons = itest_cfg()->consistency;
	int bsp = !strcmp(cons, "bsp"), victim = f->kill_rank, kc = (int)f->kill_clock;
	size_t n = total_len();
	float *v = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float)),
	      *want = calloc(n, sizeof(float));

	CHECK(f->kill && !strcmp(f->kill_role, "worker") && victim >= 0 && victim < nworkers &&
		  kc > 0 && kc < DEAD_CLOCKS,
	      "dead: needs RDMAPS_FAULT kill_role=worker,kill_rank=R,kill_at_clock=K (0 < K < %d)",
	      DEAD_CLOCKS);
	for (int c = 0; c < DEAD_CLOCKS && !failures; c++) {
		char what[64];

		if (bsp) {
			if (pull_all(w, v))
				break;
			expected_dead(want, c, victim, kc);
			snprintf(what, sizeof(what), "%s pull at clock %d", cons, c);
			compare(v, want, what);
		}
		fill_grads(g, rank, c);
		if (push_all(w, g))
			break;
		int rc = rps_worker_clock(w); /* the victim dies in here at clock K */
		CHECK(rc == 0, "clock: %s", rps_strerror(rc));
		CHECK(rank != victim || c + 1 < kc, "worker %d should have been killed at clock %d",
		      rank, kc);
	}
	CHECK(rps_worker_barrier(w) == 0, "dead: barrier");
	if (!failures && pull_all(w, v) == 0) {
		expected_dead(want, DEAD_CLOCKS, victim, kc);
		compare(v, want, "dead: final values");
	}
	free(v);
	free(g);
	free(want);
	return failures ? -1 : 0;
}

/* ---- a worker joins a running job (elastic) ---- */

static int env_int(const char *name, int dflt);

#define EL_CLOCKS 14
#define EL_NKEYS  4 /* not the big key: candidates are compared often */
#define EL_SLEEP_MS 150

/* Values after clocks < upto: victim took part in clocks < kc and >= j. */
static void expected_el(float *v, int upto, int victim, int kc, int j)
{
	size_t off = 0;

	for (int k = 0; k < EL_NKEYS; k++) {
		for (size_t i = 0; i < lens[k]; i++) {
			double s = 0;

			for (int c = 0; c < upto; c++)
				for (int w = 0; w < nworkers; w++)
					if (w != victim || c < kc || c >= j)
						s += grad(w, c, k, i);
			v[off++] = (float)-s;
		}
	}
}

static int same(const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i]) /* not memcmp: -0.0 == 0.0 */
			return 0;
	return 1;
}

/* The J (in [kc, c]) that explains the values of a pull at clock c, -1 none
 * (J = c: the replacement has not pushed yet). */
static int which_join(const float *v, float *want, size_t n, int c, int victim, int kc)
{
	for (int j = kc; j <= (c > kc ? c : kc); j++) {
		expected_el(want, c, victim, kc, j);
		if (same(v, want, n))
			return j;
	}
	return -1;
}

static int run_elastic(struct rps_worker *w, uint32_t start)
{
	const struct rps_fault_spec *f = rps_fault_current();
	int victim = f->kill_rank, kc = (int)f->kill_clock, joined = -1, c;
	size_t n = 0;
	float *v, *g, *want;

	for (int k = 0; k < EL_NKEYS; k++)
		n += lens[k];
	v = calloc(n, sizeof(float));
	g = calloc(n, sizeof(float));
	want = calloc(n, sizeof(float));
	if (start) { /* the replacement: RDMAPS_FAULT is not set for it */
		victim = rank;
		kc = env_int("ITEST_KILL_CLOCK", 0);
		fprintf(stderr, "itest-worker %d: replacement joins at clock %u\n", rank, start);
	}
	CHECK(victim >= 0 && kc > 0 && kc < EL_CLOCKS,
	      "elastic: needs RDMAPS_FAULT kill_role=worker,kill_rank=R,kill_at_clock=K "
	      "(ITEST_KILL_CLOCK=K for the replacement)");
	for (c = (int)start; c < EL_CLOCKS && !failures; c++) {
		struct rps_req *req = NULL;
		int j;

		if (wait_ok(rps_worker_pull(w, keys, v, lens, EL_NKEYS, &req), &req, "elastic pull"))
			break;
		if (start && c == (int)start) {
			expected_el(want, c, victim, kc, c);
			CHECK(same(v, want, n), "replacement: first pull at clock %d is not the state "
						"of the running job",
			      c);
			joined = c;
		} else {
			j = which_join(v, want, n, c, victim, kc);
			CHECK(j >= 0, "elastic pull at clock %d matches no join clock", c);
			if (j >= 0 && j < c) {
				CHECK(joined < 0 || joined == j, "join clock was %d, now %d", joined, j);
				joined = j;
			}
		}
		usleep(EL_SLEEP_MS * 1000); /* compute */
		for (int k = 0, off = 0; k < EL_NKEYS; off += (int)lens[k], k++)
			for (size_t i = 0; i < lens[k]; i++)
				g[off + i] = grad(rank, c, k, i);
		if (wait_ok(rps_worker_push(w, keys, g, lens, EL_NKEYS, &req), &req, "elastic push"))
			break;
		rps_worker_clock(w); /* the victim dies in here at clock K */
	}
	CHECK(rps_worker_barrier(w) == 0, "elastic: barrier");
	if (!failures) {
		struct rps_req *req = NULL;

		if (wait_ok(rps_worker_pull(w, keys, v, lens, EL_NKEYS, &req), &req,
			    "elastic final pull") == 0) {
			int j = which_join(v, want, n, EL_CLOCKS, victim, kc);

			CHECK(j >= kc && j < EL_CLOCKS,
			      "elastic: final values show no replacement (join clock %d)", j);
			CHECK(joined < 0 || j == joined, "elastic: join clock %d, then %d", joined, j);
			fprintf(stderr, "itest-worker %d: elastic: the replacement took part from "
					"clock %d on\n",
				rank, j);
		}
	}
	free(v);
	free(g);
	free(want);
	return failures ? -1 : 0;
}

/* ---- a server killed and restored from its checkpoint ---- */

#define RS_CLOCKS 24
#define RS_CKPT	  4  /* RDMAPS_CHECKPOINT_EVERY */
#define RS_KILL	  10 /* kill_at_clock of server 1 */
#define RS_LEN	  5000
#define RS_KPW	  4 /* keys per worker: 2 on server 0, 2 on server 1 */

static int lost(int rc)
{
	return rc == -ECONNRESET || rc == -EHOSTDOWN;
}

/* Worker w's keys: the first two of 3000 + 1000 w + j on each server. */
static void rs_keys(const struct rps_keymap *km, int w, rps_key_t *k, int *srv)
{
	int n[2] = { 0, 0 }, got = 0;

	for (rps_key_t key = 3000 + 1000 * (rps_key_t)w; got < RS_KPW; key++) {
		struct rps_slice_loc loc;

		rps_keymap_locate(km, key, RS_LEN, 0, &loc);
		if (loc.server > 1 || n[loc.server] == 2)
			continue;
		n[loc.server]++;
		k[got] = key;
		srv[got++] = (int)loc.server;
	}
}

static int run_restart(struct rps_worker *w)
{
	const struct rps_config *cfg = itest_cfg();
	int nk = nworkers * RS_KPW, srv[64 * RS_KPW], lostp = 0, lostl = 0;
	int lostc[RS_KPW][RS_CLOCKS] = { { 0 } }; /* my pushes that failed */
	rps_key_t k[64 * RS_KPW];
	size_t l[64 * RS_KPW];
	float *v = calloc((size_t)nk * RS_LEN, sizeof(float)), *g = calloc(RS_LEN, sizeof(float));
	struct rps_init zeros = { .kind = RPS_INIT_ZEROS };
	struct rps_keymap km;
	int rc;

	CHECK(nworkers <= 64 && rps_worker_num_servers(w) == 2, "restart: 2 servers, <= 64 workers");
	rps_keymap_init(&km, rps_keymap_mode_parse(cfg->key_map), 2, (uint32_t)cfg->shards,
			cfg->key_range, cfg->slice_bytes / 4);
	for (int i = 0; i < nworkers; i++)
		rs_keys(&km, i, &k[i * RS_KPW], &srv[i * RS_KPW]);
	for (int i = 0; i < nk; i++)
		l[i] = RS_LEN;
	rc = rps_worker_declare(w, k, l, (size_t)nk, &zeros);
	CHECK(rc == 0, "restart: declare: %s", rps_strerror(rc));
	CHECK(rps_worker_barrier(w) == 0, "restart: barrier");
	for (int c = 0; c < RS_CLOCKS && !failures; c++) {
		rps_key_t *mine = &k[rank * RS_KPW];
		struct rps_req *req = NULL;

		/* my keys at this clock (again after an error of the dead server) */
		for (int t = 0; t < 5; t++) {
			rc = rps_worker_pull(w, mine, v, l, RS_KPW, &req);
			if (!rc)
				rc = rps_req_wait(req, 60000);
			if (!lost(rc))
				break;
			lostp++;
		}
		CHECK(rc == 0, "restart: pull at clock %d: %s", c, rps_strerror(rc));
		memset(g, 0, RS_LEN * sizeof(float));
		for (size_t i = (size_t)c; i < RS_LEN; i += RS_CLOCKS)
			g[i] = 1.0f;
		for (int j = 0; j < RS_KPW; j++) {
			rc = rps_worker_push(w, &mine[j], g, &l[j], 1, &req);
			if (!rc)
				rc = rps_req_wait(req, 60000);
			lostl += lost(rc); /* an update the restored server does not have */
			lostc[j][c] = lost(rc);
			CHECK(rc == 0 || lost(rc), "restart: push at clock %d: %s", c, rps_strerror(rc));
		}
		usleep(50000);
		rc = rps_worker_clock(w);
		CHECK(rc == 0 || lost(rc), "restart: clock %d: %s", c, rps_strerror(rc));
	}
	CHECK(rps_worker_barrier(w) == 0, "restart: final barrier");
	fprintf(stderr, "itest-worker %d: restart: %d pull(s) repeated, %d push(es) lost\n", rank,
		lostp, lostl);
	if (!failures) {
		struct rps_req *req = NULL;

		rc = rps_worker_pull(w, &k[rank * RS_KPW], v, l, RS_KPW, &req);
		if (!rc)
			rc = rps_req_wait(req, 60000);
		CHECK(rc == 0, "restart: final pull: %s", rps_strerror(rc));
	}
	/* my own keys: I know which of my pushes failed */
	for (int i = rank; !failures && i == rank; i++) {
		for (int j = 0; j < RS_KPW; j++) {
			const float *x = v + (size_t)j * RS_LEN;
			int applied[RS_CLOCKS], a = -1, b = -1;

			for (int c = 0; c < RS_CLOCKS; c++)
				applied[c] = 1;
			for (size_t e = 0; e < RS_LEN; e++) {
				CHECK(x[e] == 0.0f || x[e] == -1.0f, "worker %d key %llu [%zu] = %g", i,
				      (unsigned long long)k[i * RS_KPW + j], e, x[e]);
				if (x[e] != -1.0f)
					applied[e % RS_CLOCKS] = 0;
			}
			for (int c = 0; c < RS_CLOCKS; c++) {
				if (applied[c])
					continue;
				if (a < 0)
					a = c;
				CHECK(b < 0 || b == c, "worker %d key %llu: clocks missing apart", i,
				      (unsigned long long)k[i * RS_KPW + j]);
				b = c + 1;
			}
			for (int c = 0; c < RS_CLOCKS; c++)
				CHECK(!lostc[j][c] || (c >= a && c < b),
				      "key %llu: the push of clock %d failed but is applied",
				      (unsigned long long)k[i * RS_KPW + j], c);
			if (srv[i * RS_KPW + j] == 0) {
				CHECK(a < 0, "key %llu on server 0: clocks %d..%d missing",
				      (unsigned long long)k[i * RS_KPW + j], a, b - 1);
				continue;
			}
			/* server 1: [C, m) lost, C the checkpoint before the kill */
			CHECK(a == RS_KILL / RS_CKPT * RS_CKPT && b >= RS_KILL && b <= RS_CLOCKS,
			      "key %llu on server 1: clocks %d..%d missing, want %d..(>= %d)",
			      (unsigned long long)k[i * RS_KPW + j], a, b - 1,
			      RS_KILL / RS_CKPT * RS_CKPT, RS_KILL - 1);
			fprintf(stderr, "itest-worker %d: restart: key %llu: clocks %d..%d lost on "
					"server 1\n",
				rank, (unsigned long long)k[i * RS_KPW + j], a, b - 1);
		}
	}
	free(v);
	free(g);
	return failures ? -1 : 0;
}

/* ---- SSP: staleness observed from the values ---- */

#define SSP_CLOCKS 10
#define SSP_LEN	   10000 /* elements per worker key: several chunks */
#define SSP_KEY0   2000
#define SSP_SLOW_MS 100

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

/* Which clocks of one worker's key are applied: state[c] = 1 all elements of
 * clock c are -1, 0 none is, -1 some are (a chunk read before the update);
 * values other than 0 and -1 are failures. */
static void ssp_decode(const float *v, int state[SSP_CLOCKS], const char *what)
{
	int any[SSP_CLOCKS] = { 0 }, all[SSP_CLOCKS];

	for (int c = 0; c < SSP_CLOCKS; c++)
		all[c] = 1;
	for (size_t i = 0; i < SSP_LEN; i++) {
		int c = (int)(i % SSP_CLOCKS);

		if (v[i] == -1.0f) {
			any[c] = 1;
		} else if (v[i] == 0.0f) {
			all[c] = 0;
		} else {
			CHECK(0, "%s: element %zu = %g, want 0 or -1", what, i, v[i]);
			return;
		}
	}
	for (int c = 0; c < SSP_CLOCKS; c++)
		state[c] = all[c] ? 1 : any[c] ? -1 : 0;
}

static int run_ssp(struct rps_worker *w)
{
	int s = env_int("RDMAPS_STALENESS", 0), slow = rank == nworkers - 1, maxst = 0;
	rps_key_t *k = calloc((size_t)nworkers, sizeof(*k));
	size_t *l = calloc((size_t)nworkers, sizeof(*l));
	float *v = calloc((size_t)nworkers * SSP_LEN, sizeof(float));
	float *g = calloc(SSP_LEN, sizeof(float));
	struct rps_init zeros = { .kind = RPS_INIT_ZEROS };
	struct rps_req *req = NULL;
	int state[SSP_CLOCKS];
	int rc;

	for (int i = 0; i < nworkers; i++) {
		k[i] = SSP_KEY0 + (rps_key_t)i;
		l[i] = SSP_LEN;
	}
	rc = rps_worker_declare(w, k, l, (size_t)nworkers, &zeros);
	CHECK(rc == 0, "ssp declare: %s", rps_strerror(rc));
	CHECK(rps_worker_barrier(w) == 0, "ssp barrier");
	for (int c = 0; c < SSP_CLOCKS && !failures; c++) {
		char what[96];
		int prefix = SSP_CLOCKS; /* clocks < prefix applied for every worker */

		if (wait_ok(rps_worker_pull(w, k, v, l, (size_t)nworkers, &req), &req, "ssp pull"))
			break;
		for (int i = 0; i < nworkers; i++) {
			int p = 0;

			snprintf(what, sizeof(what), "ssp pull at clock %d, key of worker %d", c, i);
			ssp_decode(v + (size_t)i * SSP_LEN, state, what);
			while (p < SSP_CLOCKS && state[p] == 1)
				p++;
			if (p < prefix)
				prefix = p;
			if (i == rank) /* own pushes were acknowledged: applied */
				CHECK(p >= c, "%s: own clocks < %d not all applied (%d)", what, c, p);
			for (int q = c; s == 0 && q < SSP_CLOCKS; q++)
				CHECK(state[q] == 0, "%s: s = 0 but clock %d is (partly) applied",
				      what, q);
		}
		if (prefix > c)
			prefix = c;
		CHECK(c - prefix <= s, "pull at clock %d saw staleness %d > s = %d", c,
		      c - prefix, s);
		if (c - prefix > maxst)
			maxst = c - prefix;

		memset(g, 0, SSP_LEN * sizeof(float));
		for (size_t i = (size_t)c; i < SSP_LEN; i += SSP_CLOCKS)
			g[i] = 1.0f;
		if (slow)
			usleep(SSP_SLOW_MS * 1000);
		if (wait_ok(rps_worker_push(w, &k[rank], g, &l[rank], 1, &req), &req, "ssp push"))
			break;
		rc = rps_worker_clock(w);
		CHECK(rc == 0, "clock: %s", rps_strerror(rc));
	}
	fprintf(stderr, "itest-worker %d: ssp s=%d%s: largest staleness seen %d (library: %u)\n",
		rank, s, slow ? " (slow)" : "", maxst, rps_worker_max_staleness(w));
	CHECK(rps_worker_max_staleness(w) <= (uint32_t)s, "library saw staleness %u > %d",
	      rps_worker_max_staleness(w), s);
	if (s > 0 && rank == 0)
		CHECK(maxst >= 1, "s = %d but the fast worker never ran ahead of the slow one", s);
	/* everything arrives in the end */
	CHECK(rps_worker_barrier(w) == 0, "ssp barrier 2");
	if (!failures && wait_ok(rps_worker_pull(w, k, v, l, (size_t)nworkers, &req), &req,
				 "ssp final pull") == 0) {
		for (int i = 0; i < nworkers; i++) {
			ssp_decode(v + (size_t)i * SSP_LEN, state, "ssp final pull");
			for (int c = 0; c < SSP_CLOCKS; c++)
				CHECK(state[c] == 1, "final: clock %d of worker %d missing", c, i);
		}
	}
	free(k);
	free(l);
	free(v);
	free(g);
	return failures ? -1 : 0;
}

/* ---- bad frames over raw sockets (rank 0 of the errors test) ---- */

static int raw_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = -1;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	/* the servers may not listen yet: this runs before our worker joins */
	for (int tries = 0; tries < 300; tries++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		if (fd >= 0)
			close(fd);
		fd = -1;
		usleep(100 * 1000);
	}
	CHECK(0, "raw connect to port %d: %s", port, strerror(errno));
	return -1;
}

static int read_full(int fd, void *buf, size_t len, int timeout_ms)
{
	size_t done = 0;

	while (done < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, timeout_ms) <= 0)
			return -ETIMEDOUT;
		ssize_t n = read(fd, (char *)buf + done, len - done);
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		done += (size_t)n;
	}
	return 0;
}

/* Read one frame; returns its header (payload skipped) or -errno. */
static int read_frame(int fd, struct rps_frame_hdr *h)
{
	char skip[4096];
	int rc = read_full(fd, h, sizeof(*h), 5000);

	if (rc)
		return rc;
	for (uint32_t left = h->len; left > 0;) {
		uint32_t n = left > sizeof(skip) ? sizeof(skip) : left;
		if ((rc = read_full(fd, skip, n, 5000)))
			return rc;
		left -= n;
	}
	return 0;
}

/* After a protocol violation the server must close the connection (an ERROR
 * frame before that is allowed). */
static void expect_closed(int fd, const char *what)
{
	struct rps_frame_hdr h;
	int rc;

	while ((rc = read_frame(fd, &h)) == 0) {
		if (h.op != RPS_OP_ERROR) {
			CHECK(0, "%s: got op %u instead of ERROR + close", what, h.op);
			break;
		}
	}
	CHECK(rc == -ECONNRESET, "%s: connection not closed by the server (%s)", what,
	      strerror(-rc));
	close(fd);
}

static void send_all(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		CHECK(0, "raw write: %s", strerror(errno));
}

/* The challenge-response by hand (src/auth.h): HELLO (as worker rank 0,
 * with magic and version as given) and, when a CHALLENGE comes, a PROOF made
 * with `secret`. Returns 0 once the proof is sent, or -errno. */
static int send_hello(int fd, const char *secret, uint32_t magic, uint8_t version)
{
	struct rps_frame_hdr h;
	struct rps_hello hello;
	struct rps_auth_challenge ch;
	struct rps_auth_proof pf;
	int rc;

	rps_proto_hello_init(&hello, RPS_ROLE_WORKER, 0);
	rps_auth_nonce(&hello);
	hello.magic = magic;
	hello.version = version;
	rps_proto_hdr_init(&h, RPS_OP_HELLO, sizeof(hello), 1);
	h.magic = magic;
	h.version = version;
	send_all(fd, &h, sizeof(h));
	send_all(fd, &hello, sizeof(hello));
	rc = read_full(fd, &h, sizeof(h), 5000);
	if (rc)
		return rc;
	if (h.op != RPS_OP_CHALLENGE || h.len != sizeof(ch)) {
		/* an ERROR: skip its text, the caller expects the close */
		char skip[512];

		if (h.len <= sizeof(skip))
			read_full(fd, skip, h.len, 5000);
		return -EPROTO;
	}
	rc = read_full(fd, &ch, sizeof(ch), 5000);
	if (rc)
		return rc;
	/* the server knows the secret (mutual), whatever we prove with */
	if (rps_auth_challenge_answer(itest_cfg()->secret, &hello, &ch, &pf))
		return -EACCES;
	if (strcmp(secret, itest_cfg()->secret))
		rps_auth_mac(secret, 'C', &hello, ch.nonce, pf.mac);
	rps_proto_hdr_init(&h, RPS_OP_PROOF, sizeof(pf), 2);
	send_all(fd, &h, sizeof(h));
	send_all(fd, &pf, sizeof(pf));
	return 0;
}

/* Connect and do a correct handshake; returns fd after the HELLO_ACK. */
static int good_conn(int port, const char *secret)
{
	struct rps_frame_hdr h;
	int fd = raw_connect(port);
	int rc;

	if (fd < 0)
		return -1;
	rc = send_hello(fd, secret, RPS_PROTO_MAGIC, RPS_PROTO_VERSION);
	if (!rc)
		rc = read_frame(fd, &h);
	if (rc || h.op != RPS_OP_HELLO_ACK || h.status != 0) {
		CHECK(0, "good hello to port %d refused (rc %d op %u status %d)", port, rc,
		      rc ? 0 : h.op, rc ? 0 : h.status);
		close(fd);
		return -1;
	}
	return fd;
}

/* PUSH of `count` floats claiming `claimed` in the header; returns the ack status. */
static int raw_push(int fd, uint64_t key, uint32_t shard, uint64_t offset, uint32_t count,
		    uint32_t claimed)
{
	struct rps_frame_hdr h, ack;
	struct rps_push p = { .key = key, .shard = shard, .offset = offset, .count = claimed };
	float data[64] = { 0 };

	for (int i = 0; i < 64; i++)
		data[i] = 12345.0f;
	rps_proto_hdr_init(&h, RPS_OP_PUSH, (uint32_t)(sizeof(p) + 4 * count), 77);
	send_all(fd, &h, sizeof(h));
	send_all(fd, &p, sizeof(p));
	send_all(fd, data, 4 * count);
	int rc = read_frame(fd, &ack);
	if (rc)
		return rc;
	CHECK(ack.op == RPS_OP_PUSH_ACK && ack.req_id == 77, "push answered with op %u req %u",
	      ack.op, ack.req_id);
	return ack.status;
}

static void attack_server(int port, const char *secret, const struct rps_keymap *km)
{
	static const char garbage[] = "GET / HTTP/1.1\r\nHost: rdmaps\r\n\r\nthis is not a frame....";
	struct rps_frame_hdr h;
	struct rps_slice_loc loc;
	int fd;

	fprintf(stderr, "itest-worker %d: sending bad frames to port %d\n", rank, port);
	if ((fd = raw_connect(port)) >= 0) {
		send_all(fd, garbage, sizeof(garbage));
		expect_closed(fd, "garbage");
	}
	if ((fd = raw_connect(port)) >= 0) {
		send_hello(fd, secret, 0x41414141, RPS_PROTO_VERSION);
		expect_closed(fd, "wrong magic");
	}
	if ((fd = raw_connect(port)) >= 0) {
		send_hello(fd, secret, RPS_PROTO_MAGIC, 99);
		expect_closed(fd, "wrong version");
	}
	if ((fd = raw_connect(port)) >= 0) {
		send_hello(fd, "not-the-secret", RPS_PROTO_MAGIC, RPS_PROTO_VERSION);
		expect_closed(fd, "wrong secret");
	}
	if ((fd = good_conn(port, secret)) >= 0) {
		rps_proto_hdr_init(&h, RPS_OP_PUSH, 0x7fffffff, 2); /* beyond RDMAPS_MAX_MSG */
		send_all(fd, &h, sizeof(h));
		expect_closed(fd, "length beyond the limit");
	}
	if ((fd = good_conn(port, secret)) >= 0) {
		rps_proto_hdr_init(&h, 200, 0, 3);
		send_all(fd, &h, sizeof(h));
		expect_closed(fd, "unknown op");
	}
	if ((fd = good_conn(port, secret)) >= 0) {
		/* a PUSH whose count disagrees with its length */
		struct rps_push p = { .key = keys[1], .count = 1000 };
		rps_proto_hdr_init(&h, RPS_OP_PUSH, sizeof(p) + 8, 4);
		send_all(fd, &h, sizeof(h));
		send_all(fd, &p, sizeof(p));
		send_all(fd, "12345678", 8);
		expect_closed(fd, "push count/length mismatch");
	}
	if ((fd = good_conn(port, secret)) >= 0) {
		/* truncated: announce 1000 bytes, send 10, hang up */
		rps_proto_hdr_init(&h, RPS_OP_PUSH, 1000, 5);
		send_all(fd, &h, sizeof(h));
		send_all(fd, "0123456789", 10);
		close(fd);
	}
	if ((fd = good_conn(port, secret)) >= 0) {
		/* caller errors: answered, connection stays */
		int st = raw_push(fd, 987654321, 0, 0, 4, 4);
		CHECK(st == -ENOENT || st == -EINVAL, "push to an unknown key: status %d", st);
		rps_keymap_locate(km, keys[1], lens[1], 0, &loc);
		st = raw_push(fd, keys[1], loc.shard, 98, 4, 4); /* 98 + 4 > 100 */
		CHECK(st == -EINVAL || st == -ENOENT, "push beyond the key: status %d", st);
		close(fd);
	}
}

static int run_errors(struct rps_worker *w)
{
	size_t n = total_len();
	float *v = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float)),
	      *want = calloc(n, sizeof(float));
	struct rps_req *req = NULL;
	rps_key_t unknown = 4242424242ull;
	size_t bad_len = lens[1] + 1, len1 = 7;
	int rc;

	/* Errors the library catches before sending. */
	rc = rps_worker_pull(w, &unknown, v, &len1, 1, &req);
	CHECK(rc == -ENOENT, "pull of an unknown key: %d (%s), want -ENOENT", rc, rps_strerror(rc));
	rc = rps_worker_push(w, &keys[1], g, &bad_len, 1, &req);
	CHECK(rc == -EINVAL, "push of the wrong length: %d (%s), want -EINVAL", rc,
	      rps_strerror(rc));
	/* The server refuses a second declaration with another length. */
	rc = rps_worker_declare(w, &keys[1], &bad_len, 1, NULL);
	CHECK(rc == -EEXIST, "re-declare with another length: %d (%s), want -EEXIST", rc,
	      rps_strerror(rc));

	/* One legitimate round, so the values are not all zero. */
	fill_grads(g, rank, 0);
	push_all(w, g);
	rps_worker_clock(w);
	CHECK(rps_worker_barrier(w) == 0, "barrier 1");

	if (rank == 0 && getenv("ITEST_SERVER_PORTS")) {
		/* a second connection of our own live rank is refused */
		const char *p = getenv("ITEST_SERVER_PORTS");
		int fd = raw_connect(atoi(p));
		struct rps_frame_hdr h;

		if (fd >= 0) {
			rc = send_hello(fd, itest_cfg()->secret, RPS_PROTO_MAGIC,
					RPS_PROTO_VERSION);
			if (!rc)
				rc = read_frame(fd, &h);
			if (!rc && h.op == RPS_OP_HELLO_ACK)
				rc = read_frame(fd, &h);
			CHECK(!rc && h.op == RPS_OP_ERROR && h.status == -EADDRINUSE,
			      "a second rank-0 connection: rc %d op %u status %d, want ERROR "
			      "-EADDRINUSE",
			      rc, rc ? 0 : h.op, rc ? 0 : h.status);
			expect_closed(fd, "second rank-0 connection");
		}
	} else {
		/* meanwhile keep the servers busy with reads */
		for (int i = 0; i < 20; i++)
			pull_all(w, v);
	}
	CHECK(rps_worker_barrier(w) == 0, "barrier 2");

	/* Nothing changed, and the servers still serve. */
	if (pull_all(w, v) == 0) {
		expected(want, 1);
		compare(v, want, "values after the refused second connection");
	}
	/* ASP: nobody pushes the next round before every worker checked this one. */
	CHECK(rps_worker_barrier(w) == 0, "barrier 2b");
	fill_grads(g, rank, 1);
	push_all(w, g);
	rps_worker_clock(w);
	CHECK(rps_worker_barrier(w) == 0, "barrier 3");
	if (pull_all(w, v) == 0) {
		expected(want, 2);
		compare(v, want, "values after another round");
	}
	free(v);
	free(g);
	free(want);
	return failures ? -1 : 0;
}

/* Bad frames over raw sockets, claiming worker rank 0: a rank held by one
 * connection at a time, so rank 0 leaves first and attacks as itself; the
 * others wait for its mark, then check that nothing changed and the
 * servers still serve. */
static void errors_raw(struct rps_worker **w_p)
{
	const char *ports = getenv("ITEST_SERVER_PORTS");
	const char *mark = getenv("ITEST_ERRORS_MARK");

	if (!mark) {
		CHECK(0, "ITEST_ERRORS_MARK not set (cluster.sh sets it)");
		return;
	}
	if (rank == 0) {
		const struct rps_config *cfg = itest_cfg();
		struct rps_keymap km;
		FILE *f;

		rps_keymap_init(&km, rps_keymap_mode_parse(cfg->key_map),
				(uint32_t)rps_worker_num_servers(*w_p), (uint32_t)cfg->shards,
				cfg->key_range, cfg->slice_bytes / 4);
		rps_worker_destroy(*w_p);
		*w_p = NULL;
		usleep(300 * 1000); /* the servers see our connections close */
		for (const char *p = ports; p && *p;) {
			attack_server(atoi(p), cfg->secret, &km);
			p = strchr(p, ',');
			p = p ? p + 1 : NULL;
		}
		f = fopen(mark, "w");
		if (f)
			fclose(f);
		return;
	}
	for (int i = 0; i < 1200 && access(mark, F_OK) != 0; i++)
		usleep(100 * 1000);
	CHECK(access(mark, F_OK) == 0, "rank 0 did not finish its bad frames");
	{
		size_t n = total_len();
		float *v = calloc(n, sizeof(float)), *want = calloc(n, sizeof(float));

		if (pull_all(*w_p, v) == 0) {
			expected(want, 2);
			compare(v, want, "values after the bad frames");
		}
		free(v);
		free(want);
	}
}

/* ---- pull buffers freed and allocated again at the same address ---- */

#define RA_KEYS 3
#define RA_ROUNDS 8
/* a compact one-chunk key (direct, read whole), a one-chunk key as big as a
 * chunk (a scatter read), and one of many chunks (the general path) */
static const size_t ra_lens[RA_KEYS] = { 100, 4096, 50000 };

static float ra_grad(int r, int k, size_t i)
{
	return (float)((r + 1) + k + (int)(i % 7));
}

/* Check v (the keys back to back) against -(sum of rounds 0..r). */
static void ra_check(const float *v, int r, const char *what)
{
	size_t off = 0;
	int bad = 0;

	for (int k = 0; k < RA_KEYS; off += ra_lens[k], k++) {
		for (size_t i = 0; i < ra_lens[k]; i++) {
			float want = 0;

			for (int q = 0; q <= r; q++)
				want -= ra_grad(q, k, i);
			if (v[off + i] != want && bad++ < 5)
				CHECK(0, "%s, round %d: key %d element %zu is %g, want %g", what, r, k,
				      i, (double)v[off + i], (double)want);
		}
	}
	CHECK(!bad, "%s, round %d: %d wrong values", what, r, bad);
}

/* Pull every key into v, all at once, then each alone; check both. */
static void ra_pull_check(struct rps_worker *w, const rps_key_t *ks, float *v, size_t total,
			  int r, const char *what)
{
	struct rps_req *req = NULL;
	size_t off = 0;

	for (size_t i = 0; i < total; i++)
		v[i] = 12345.0f; /* whatever a stale read would leave */
	if (wait_ok(rps_worker_pull(w, ks, v, ra_lens, RA_KEYS, &req), &req, what) == 0)
		ra_check(v, r, what);
	for (size_t i = 0; i < total; i++)
		v[i] = 12345.0f;
	for (int k = 0; k < RA_KEYS; off += ra_lens[k], k++)
		if (wait_ok(rps_worker_pull(w, &ks[k], v + off, &ra_lens[k], 1, &req), &req, what))
			return;
	ra_check(v, r, what);
}

/* Each worker its own keys (ASP: a pull sees exactly its own pushes). Every
 * round pulls into a buffer mapped anew at the same address (new pages by
 * mmap MAP_FIXED over the range, which stays reserved between rounds), and
 * one from malloc again after free; odd rounds with the
 * buffer registered (and unregistered before it goes). A read through a
 * registration of the old pages would leave 12345 in the new ones. */
static int run_realloc(struct rps_worker *w)
{
	struct rps_init zeros = { .kind = RPS_INIT_ZEROS };
	size_t total = 0, bytes;
	rps_key_t ks[RA_KEYS];
	float *g, *m, *fixed = NULL;
	void *at = NULL, *held[64];
	int rc, same_malloc = 0, nheld = 0;

	for (int k = 0; k < RA_KEYS; k++) {
		ks[k] = 3001 + 10 * (rps_key_t)rank + (rps_key_t)k;
		total += ra_lens[k];
	}
	bytes = (total * sizeof(float) + 4095) & ~(size_t)4095;
	g = malloc(total * sizeof(float));
	CHECK(g, "out of memory");
	if (!g)
		return -1;
	rc = rps_worker_declare(w, ks, ra_lens, RA_KEYS, &zeros);
	CHECK(rc == 0, "declare: %s", rps_strerror(rc));
	if (rc)
		goto out;
	m = malloc(bytes);
	for (int r = 0; r < RA_ROUNDS && !failures; r++) {
		struct rps_req *req = NULL;
		size_t off = 0;
		void *p;

		for (int k = 0; k < RA_KEYS; off += ra_lens[k], k++)
			for (size_t i = 0; i < ra_lens[k]; i++)
				g[off + i] = ra_grad(r, k, i);
		if (wait_ok(rps_worker_push(w, ks, g, ra_lens, RA_KEYS, &req), &req, "push"))
			break;
		rps_worker_clock(w);

		/* mmap at the same address every round */
		p = mmap(at, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
		CHECK(p != MAP_FAILED && (!at || p == at), "mmap: %p at %p", p, at);
		if (p == MAP_FAILED)
			break;
		at = fixed = p;
		if (r % 2) {
			rc = rps_worker_register(w, fixed, bytes);
			CHECK(rc == 0, "register: %s", rps_strerror(rc));
			ra_pull_check(w, ks, fixed, total, r, "registered mmap pull");
			rc = rps_worker_unregister(w, fixed);
			CHECK(rc == 0, "unregister: %s", rps_strerror(rc));
		} else {
			ra_pull_check(w, ks, fixed, total, r, "mmap pull");
		}
		/* "free" the buffer: fresh inaccessible pages replace the old ones at
		 * the same address (the old pages go back to the kernel), while the
		 * range stays ours, so no malloc can land there and be clobbered by
		 * the next round's MAP_FIXED */
		p = mmap(fixed, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
			 -1, 0);
		CHECK(p == fixed, "mmap PROT_NONE over the pull buffer");

		/* malloc: free, and malloc again (glibc gives the same block back) */
		if (m) {
			void *old = m;

			if (r % 2) {
				rc = rps_worker_register(w, m, total * sizeof(float));
				CHECK(rc == 0, "register: %s", rps_strerror(rc));
				ra_pull_check(w, ks, m, total, r, "registered malloc pull");
				CHECK(rps_worker_unregister(w, m) == 0, "unregister malloc");
			} else {
				ra_pull_check(w, ks, m, total, r, "malloc pull");
			}
			/* malloc again until the address repeats (up to 64 tries) */
			free(m);
			m = NULL;
			for (int t = 0; t < 64 && m != old; t++) {
				void *q = malloc(bytes);

				if (!q)
					break;
				if (q != old)
					held[nheld++] = q;
				m = q;
			}
			same_malloc += m == old;
			if (m != old)
				m = nheld ? held[--nheld] : NULL; /* go on with the last */
			while (nheld)
				free(held[--nheld]);
		}
	}
	free(m);
	if (at)
		munmap(at, bytes);
	printf("itest-worker %d: realloc: %d rounds, mmap at one address, malloc at the same "
	       "address again in %d\n",
	       rank, RA_ROUNDS, same_malloc);
out:
	free(g);
	return failures ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct rps_worker *w;
	int rc;

	rps_config_init(&itest_config);

	if (argc != 2) {
		fprintf(stderr, "usage: itest-worker "
				"bsp|asp|torn|errors|ssp|dead|drop|metrics|elastic|restart|clip|realloc|"
				"bsp_order\n");
		return 2;
	}
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-worker: cannot join: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	nworkers = rps_worker_num_workers(w);
	if (!strcmp(argv[1], "elastic") && rps_worker_clock_value(w) > 0) {
		/* a replacement in a running job: the others are past that barrier */
		if (declare_all(w) == 0)
			run_elastic(w, rps_worker_clock_value(w));
	} else if (declare_all(w) == 0) {
		CHECK(rps_worker_barrier(w) == 0, "barrier after declare");
		if (!strcmp(argv[1], "bsp"))
			run_bsp(w);
		else if (!strcmp(argv[1], "asp"))
			run_asp(w);
		else if (!strcmp(argv[1], "torn"))
			run_torn(w);
		else if (!strcmp(argv[1], "errors"))
			run_errors(w);
		else if (!strcmp(argv[1], "ssp"))
			run_ssp(w);
		else if (!strcmp(argv[1], "dead"))
			run_dead(w);
		else if (!strcmp(argv[1], "drop"))
			run_drop(w);
		else if (!strcmp(argv[1], "metrics"))
			run_metrics(w);
		else if (!strcmp(argv[1], "elastic"))
			run_elastic(w, 0);
		else if (!strcmp(argv[1], "restart"))
			run_restart(w);
		else if (!strcmp(argv[1], "clip"))
			run_clip(w);
		else if (!strcmp(argv[1], "bsp_order"))
			run_bsp_order(w);
		else if (!strcmp(argv[1], "realloc"))
			run_realloc(w);
		else
			CHECK(0, "unknown mode %s", argv[1]);
	}
	CHECK(rps_worker_barrier(w) == 0, "final barrier");
	if (!strcmp(argv[1], "errors") && getenv("ITEST_SERVER_PORTS"))
		errors_raw(&w);
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-worker %d: %s: %d failure(s)\n", rank, argv[1], failures);
		return 1;
	}
	printf("itest-worker %d: %s: ok\n", rank, argv[1]);
	return 0;
}
