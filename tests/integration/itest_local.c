/* A worker of local_agg.sh: aggregation on the host (rps_worker_local_pushpull,
 * docs/local-aggregation.md) on a real local cluster, through the public API.
 *
 *   itest-local exact   STEPS steps of integer gradients (worker r, step s,
 *                       element i: (r + 1) * (i % 13 + 1) + s) under BSP with
 *                       SGD lr 1 on zeros: after step s every value must be
 *                       exactly -(the sum of every gradient of steps <= s),
 *                       checked on every worker at every step. Rank 0 prints
 *                       "final fnv1a <hex>" of the last values.
 *                       ITEST_LOCAL_SIZE: the local group size expected.
 *   itest-local kill    as exact, but worker ITEST_KILL_RANK kills itself
 *                       (SIGKILL) before step ITEST_KILL_STEP: every other
 *                       worker must get an error (not hang) from that step,
 *                       within ITEST_KILL_MAX_S seconds, and exits 0 then.
 *   itest-local bench   ITEST_STEPS steps of ITEST_ELEMS floats (default 20 and
 *                       1 Mi): rank 0 reads every server's received bytes
 *                       (/metrics, RDMAPS_METRICS_PORT + 1 + rank) before and
 *                       after and prints bytes per step and ms per step.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdmaps/rdmaps.h>

#define NKEYS 3
static const rps_key_t keys[NKEYS] = { 11, 12, 13 };

static int failures;
#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "itest-local: FAIL: " __VA_ARGS__);                \
			fprintf(stderr, "\n");                                             \
			failures++;                                                        \
		}                                                                          \
	} while (0)

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int declare(struct rps_worker *w, const size_t *lens)
{
	struct rps_init init = { .kind = RPS_INIT_ZEROS };
	struct rps_optim_opts o;
	int rc;

	rps_optim_opts_init(&o);
	o.kind = RPS_OPT_SGD;
	o.lr = 1.0f;
	rc = rps_worker_declare_opt(w, keys, lens, NKEYS, &init, &o);
	CHECK(rc == 0, "declare: %s", rps_strerror(rc));
	if (!rc)
		rc = rps_worker_barrier(w);
	return rc;
}

/* ---- exact / kill ---- */

#define EXACT_TOTAL (1000 + 37 + 20000)

/* The steps of run_exact, in buffers of EXACT_TOTAL elements it owns. */
static int run_exact_in(struct rps_worker *w, int kill, float *g, float *v, double *expect)
{
	static const size_t lens[NKEYS] = { 1000, 37, 20000 };
	size_t total = EXACT_TOTAL;
	int rank = rps_worker_rank(w), nw = rps_worker_num_workers(w);
	int steps = env_int("ITEST_STEPS", 20), want = env_int("ITEST_LOCAL_SIZE", 0);
	int kill_rank = env_int("ITEST_KILL_RANK", -1), kill_step = env_int("ITEST_KILL_STEP", 5);
	uint64_t h = 0xcbf29ce484222325ull;
	int rc;

	if (declare(w, lens))
		return 1;
	for (int s = 0; s < steps; s++) {
		double t0 = now_s();

		if (kill && rank == kill_rank && s == kill_step) {
			fprintf(stderr, "itest-local: worker %d kills itself before step %d\n", rank, s);
			raise(SIGKILL);
		}
		for (size_t i = 0; i < total; i++) {
			double sum = 0;

			g[i] = (float)((rank + 1) * (int)(i % 13 + 1) + s);
			for (int r = 0; r < nw; r++)
				sum += (r + 1) * (int)(i % 13 + 1) + s;
			expect[i] -= sum;
		}
		rc = rps_worker_local_pushpull(w, keys, g, v, lens, NKEYS);
		if (kill) {
			if (s < kill_step) {
				CHECK(rc == 0, "worker %d step %d: %s", rank, s, rps_strerror(rc));
				continue;
			}
			if (rc) {
				double dt = now_s() - t0;

				printf("worker %d: step %d failed as expected after %.2f s: %s\n", rank,
				       s, dt, rps_strerror(rc));
				CHECK(dt <= env_int("ITEST_KILL_MAX_S", 20),
				      "worker %d: the error took %.1f s", rank, dt);
				/* and the group stays broken */
				rc = rps_worker_local_pushpull(w, keys, g, v, lens, NKEYS);
				CHECK(rc != 0, "worker %d: a step after the loss succeeded", rank);
				return failures ? 1 : 0;
			}
			continue;
		}
		CHECK(rc == 0, "worker %d step %d: %s", rank, s, rps_strerror(rc));
		if (rc)
			return 1;
		for (size_t i = 0; i < total; i++)
			if ((double)v[i] != expect[i]) {
				CHECK(0, "worker %d step %d element %zu: %.1f, want %.1f", rank, s, i,
				      (double)v[i], expect[i]);
				return 1;
			}
	}
	if (kill) {
		CHECK(rank == kill_rank, "worker %d: every step succeeded although worker %d died",
		      rank, kill_rank);
		return failures ? 1 : 0;
	}
	if (want)
		CHECK(rps_worker_local_size(w) == want, "worker %d: local group of %d, want %d", rank,
		      rps_worker_local_size(w), want);
	printf("worker %d: %d steps exact, local group %d, leader %d\n", rank, steps,
	       rps_worker_local_size(w), rps_worker_local_leader(w));
	if (rank == 0) {
		const unsigned char *b = (const unsigned char *)v;

		for (size_t i = 0; i < total * sizeof(float); i++) {
			h ^= b[i];
			h *= 0x100000001b3ull;
		}
		printf("final fnv1a %016" PRIx64 "\n", h);
	}
	return failures ? 1 : 0;
}

static int run_exact(struct rps_worker *w, int kill)
{
	float *g = malloc(EXACT_TOTAL * sizeof(float)), *v = malloc(EXACT_TOTAL * sizeof(float));
	double *expect = calloc(EXACT_TOTAL, sizeof(double));
	int rc = 1;

	if (g && v && expect)
		rc = run_exact_in(w, kill, g, v, expect);
	free(g);
	free(v);
	free(expect);
	return rc;
}

/* ---- bench ---- */

/* Sum over the servers of rdmaps_bytes_total{...,dir="rx"}; -1 on error. */
static double servers_rx(int nservers)
{
	int base = env_int("RDMAPS_METRICS_PORT", 0);
	const char *tr = getenv("RDMAPS_TRANSPORT");
	static char buf[1 << 20];
	char series[128];
	double total = 0;

	if (base <= 0)
		return -1;
	snprintf(series, sizeof(series), "rdmaps_bytes_total{transport=\"%s\",dir=\"rx\"} ",
		 tr && *tr ? tr : "tcp");
	for (int r = 0; r < nservers; r++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons((uint16_t)(base + 1 + r)) };
		const char *req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		size_t got = 0;
		char *p;

		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
		    write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
			if (fd >= 0)
				close(fd);
			return -1;
		}
		for (;;) {
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			ssize_t n;

			if (poll(&pf, 1, 5000) <= 0 || got + 1 >= sizeof(buf))
				break;
			n = read(fd, buf + got, sizeof(buf) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		close(fd);
		buf[got] = '\0';
		p = strstr(buf, series);
		if (!p)
			return -1;
		total += strtod(p + strlen(series), NULL);
	}
	return total;
}

static int run_bench(struct rps_worker *w)
{
	size_t n = (size_t)env_int("ITEST_ELEMS", 1 << 20);
	size_t lens[NKEYS] = { n / 2, n / 4, n - n / 2 - n / 4 };
	int steps = env_int("ITEST_STEPS", 20), rank = rps_worker_rank(w);
	float *g = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));
	double rx0 = 0, rx1, t0, t1;
	int rc;

	if (!g || !v || declare(w, lens))
		return 1;
	for (size_t i = 0; i < n; i++)
		g[i] = 1e-6f * (float)(i % 7);
	/* the first step sets the group up: not measured */
	rc = rps_worker_local_pushpull(w, keys, g, v, lens, NKEYS);
	CHECK(rc == 0, "first step: %s", rps_strerror(rc));
	if (rc)
		return 1;
	rps_worker_barrier(w);
	if (rank == 0)
		rx0 = servers_rx(rps_worker_num_servers(w));
	rps_worker_barrier(w);
	t0 = now_s();
	for (int s = 0; s < steps && !rc; s++)
		rc = rps_worker_local_pushpull(w, keys, g, v, lens, NKEYS);
	t1 = now_s();
	CHECK(rc == 0, "step: %s", rps_strerror(rc));
	rps_worker_barrier(w);
	if (rank == 0) {
		rx1 = servers_rx(rps_worker_num_servers(w));
		CHECK(rx0 >= 0 && rx1 >= 0, "cannot read the servers' /metrics");
		printf("local_agg=%s workers=%d local_group=%d elems=%zu steps=%d: servers received "
		       "%.0f bytes per step (%.2f x the gradient), %.2f ms per step\n",
		       getenv("RDMAPS_LOCAL_AGG") ? getenv("RDMAPS_LOCAL_AGG") : "auto",
		       rps_worker_num_workers(w), rps_worker_local_size(w), n, steps,
		       (rx1 - rx0) / steps, (rx1 - rx0) / steps / ((double)n * sizeof(float)),
		       (t1 - t0) * 1e3 / steps);
	}
	free(g);
	free(v);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "exact";
	struct rps_worker *w;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-local: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	if (!strcmp(mode, "exact"))
		rc = run_exact(w, 0);
	else if (!strcmp(mode, "kill"))
		rc = run_exact(w, 1);
	else if (!strcmp(mode, "bench"))
		rc = run_bench(w);
	else {
		fprintf(stderr, "itest-local: mode exact|kill|bench\n");
		rc = 2;
	}
	rps_worker_destroy(w);
	return rc;
}
