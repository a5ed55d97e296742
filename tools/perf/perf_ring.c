/* rdmaps-perf ring_vs_ps: the parameter server's push + pull against the
 * workers' ring all-reduce, for the same tensor, on a fresh local cluster per
 * worker count (docs/allreduce.md).
 *
 *   rdmaps-perf ring_vs_ps [--sizes 1M,16M,64M] [--workers-list 2,4,8]
 *                          [--servers S] [--rounds N] [--transport tcp|rdma]
 *
 * Per size and worker count each worker process does, after one untimed
 * round of each: for every round, a barrier, then
 *   ps    rps_worker_pushpull of one key of SIZE bytes (BSP: push, end the
 *         clock, pull the sum of every worker's push) and its wait;
 *   ring  rps_worker_allreduce of the same SIZE bytes.
 * A round's time is the slowest worker's. Every round is printed, then the
 * medians side by side. PERF_RING_VERBOSE=1: the servers' and scheduler's output too. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perflib.h"

#define RING_MAX_W     RPS_PERF_MAX_PROCS
#define RING_MAX_ROUND 1000

enum { M_PS = 0, M_RING = 1 };
static const char *const method_name[2] = { "ps", "ring" };

struct ring_rec {
	int32_t rank, size_idx, method, round; /* round -1: the worker's end, rc in us */
	double us;
};

struct ring_opts {
	size_t sizes[RPS_PERF_MAX_SIZES];
	int nsizes;
	int workers[16], nworkers;
	int servers, rounds;
	const char *transport;
};

static int put(int fd, const struct ring_rec *r)
{
	return write(fd, r, sizeof(*r)) == (ssize_t)sizeof(*r) ? 0 : -EIO;
}

static int one_round(struct rps_worker *w, int method, rps_key_t key, float *g, float *v,
		     size_t n)
{
	struct rps_req *req;
	int rc;

	if (method == M_RING)
		return rps_worker_allreduce(w, &key, g, &n, 1);
	rc = rps_worker_pushpull(w, &key, g, v, &n, 1, &req);
	return rc ? rc : rps_req_wait(req, -1);
}

static void ring_child(int fd, const struct ring_opts *o)
{
	struct ring_rec end = { .round = -1 };
	struct rps_worker *w = NULL;
	int rc, rank;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setenv("RDMAPS_ROLE", "worker", 1);
	setenv("RDMAPS_HOST", "127.0.0.1", 1);
	unsetenv("RDMAPS_PORT");
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "rdmaps-perf: worker: cannot join: %s\n", rps_strerror(rc));
		goto out;
	}
	rank = rps_worker_rank(w);
	end.rank = rank;
	for (int si = 0; si < o->nsizes && !rc; si++) {
		size_t n = o->sizes[si] / sizeof(float);
		rps_key_t key = 1000 + (rps_key_t)si;
		struct rps_init init = { .kind = RPS_INIT_ZEROS };
		float *g = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));

		if (!g || !v) {
			rc = -ENOMEM;
			free(g);
			free(v);
			break;
		}
		for (size_t i = 0; i < n; i++)
			g[i] = (float)((i + (size_t)rank) % 7);
		rc = rps_worker_declare(w, &key, &n, 1, &init);
		for (int m = 0; m < 2 && !rc; m++) {
			/* one untimed round of each: connections, first touch */
			rc = rps_worker_barrier(w);
			if (!rc)
				rc = one_round(w, m, key, g, v, n);
			for (int r = 0; r < o->rounds && !rc; r++) {
				struct ring_rec rec = { rank, si, m, r, 0 };
				uint64_t t0;

				rc = rps_worker_barrier(w);
				if (rc)
					break;
				t0 = perf_now_ns();
				rc = one_round(w, m, key, g, v, n);
				rec.us = (double)(perf_now_ns() - t0) / 1000.0;
				if (!rc)
					rc = put(fd, &rec);
				/* the sums grow: start again from small integers */
				for (size_t i = 0; i < n && m == M_RING; i++)
					g[i] = (float)((i + (size_t)rank) % 7);
			}
		}
		free(g);
		free(v);
	}
	if (rc)
		fprintf(stderr, "rdmaps-perf: worker %d: %s\n", end.rank, rps_strerror(rc));
	else
		rps_worker_barrier(w);
	rps_worker_destroy(w);
out:
	end.us = rc;
	put(fd, &end);
	_exit(rc ? 1 : 0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One worker count on a fresh cluster: t[size][method][round] = slowest
 * worker's time (us). */
static int run_w(const struct ring_opts *o, int W, double (*t)[2][RING_MAX_ROUND])
{
	struct rps_perf_cluster_opts co = { .transport = o->transport, .consistency = "bsp",
					    .servers = o->servers, .workers = W, .quiet = !getenv("PERF_RING_VERBOSE"),
					    .make_secret = 1 };
	struct rps_perf_cluster cl;
	pid_t kids[RING_MAX_W];
	int pfd[2], nkids = 0, ends = 0, failed = 0, rc;
	struct ring_rec rec;
	uint64_t sum = 0;

	for (int i = 0; i < o->nsizes; i++)
		sum += o->sizes[i];
	/* every key on one shard at worst, and room for the server's own */
	co.shard_bytes = sum + sum / 4 + (64ull << 20);
	if (!getenv("RDMAPS_SHARDS"))
		setenv("RDMAPS_SHARDS", "1", 1);
	rc = rps_perf_cluster_start(&co, &cl);
	if (rc)
		return rc;
	if (pipe2(pfd, O_CLOEXEC)) {
		rc = -errno;
		goto out;
	}
	for (int i = 0; i < W; i++) {
		pid_t pid;

		fflush(stdout);
		fflush(stderr);
		pid = fork();
		if (pid < 0) {
			rc = -errno;
			break;
		}
		if (pid == 0) {
			close(pfd[0]);
			dup2(STDERR_FILENO, STDOUT_FILENO);
			ring_child(pfd[1], o);
		}
		kids[nkids++] = pid;
	}
	close(pfd[1]);
	for (int s = 0; s < o->nsizes; s++)
		for (int m = 0; m < 2; m++)
			for (int r = 0; r < o->rounds; r++)
				t[s][m][r] = 0;
	while (read(pfd[0], &rec, sizeof(rec)) == (ssize_t)sizeof(rec)) {
		if (rec.round < 0) {
			ends++;
			failed += rec.us != 0;
			continue;
		}
		if (rec.size_idx < 0 || rec.size_idx >= o->nsizes || rec.method < 0 ||
		    rec.method > 1 || rec.round >= o->rounds)
			continue;
		if (rec.us > t[rec.size_idx][rec.method][rec.round])
			t[rec.size_idx][rec.method][rec.round] = rec.us;
	}
	close(pfd[0]);
	for (int i = 0; i < nkids; i++) {
		int st;

		waitpid(kids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
	}
	if (!rc && (failed || ends != W)) {
		fprintf(stderr, "rdmaps-perf: %d of %d worker processes failed\n",
			failed ? failed : W - ends, W);
		rc = -EIO;
	}
out:
	rps_perf_cluster_stop(&cl, 10000);
	return rc;
}

static int parse_list(const char *arg, int is_size, struct ring_opts *o)
{
	char *save = NULL, *list = strdup(arg);
	int rc = 0;

	for (char *tok = strtok_r(list, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
		uint64_t b;

		if (is_size) {
			if (rps_perf_parse_size(tok, &b) || b < 8 || b % 4 || b > (1ull << 30) ||
			    o->nsizes >= RPS_PERF_MAX_SIZES) {
				fprintf(stderr, "rdmaps-perf: --sizes %s: sizes of 8 B..1 GiB, "
						"multiples of 4\n", tok);
				rc = -EINVAL;
			} else {
				o->sizes[o->nsizes++] = (size_t)b;
			}
		} else {
			long v = strtol(tok, NULL, 10);

			if (v < 2 || v > RING_MAX_W || o->nworkers >= 16) {
				fprintf(stderr, "rdmaps-perf: --workers-list %s: 2..%d workers\n", tok,
					RING_MAX_W);
				rc = -EINVAL;
			} else {
				o->workers[o->nworkers++] = (int)v;
			}
		}
	}
	free(list);
	return rc;
}

int rps_perf_ring_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "sizes", required_argument, NULL, 's' },
		{ "workers-list", required_argument, NULL, 'w' },
		{ "servers", required_argument, NULL, 'S' },
		{ "rounds", required_argument, NULL, 'n' },
		{ "transport", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ring_opts o = { .servers = 1, .rounds = 5, .transport = "tcp" };
	double(*t)[2][RING_MAX_ROUND];
	int c, rc = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:w:n:t:h", lo, NULL)) != -1) {
		switch (c) {
		case 's': if (parse_list(optarg, 1, &o)) return 2; break;
		case 'w': if (parse_list(optarg, 0, &o)) return 2; break;
		case 'S': o.servers = atoi(optarg); break;
		case 'n': o.rounds = atoi(optarg); break;
		case 't': o.transport = optarg; break;
		case 'h':
			printf("usage: rdmaps-perf ring_vs_ps [--sizes 1M,16M,64M] "
			       "[--workers-list 2,4,8] [--servers S] [--rounds N] [--transport T]\n"
			       "PS push+pull (BSP pushpull) against ring all-reduce of one tensor,\n"
			       "a local cluster per worker count; every round (the slowest worker's\n"
			       "time) and the medians.\n");
			return 0;
		default: return 2;
		}
	}
	if (optind < argc && strcmp(argv[optind], "ring_vs_ps"))
		optind++;
	if (o.servers < 1 || o.servers > RPS_PERF_MAX_SERVERS || o.rounds < 1 ||
	    o.rounds > RING_MAX_ROUND) {
		fprintf(stderr, "rdmaps-perf: --servers 1..%d, --rounds 1..%d\n",
			RPS_PERF_MAX_SERVERS, RING_MAX_ROUND);
		return 2;
	}
	if (!o.nsizes)
		parse_list("1M,16M,64M", 1, &o);
	if (!o.nworkers)
		parse_list("2,4,8", 0, &o);
	signal(SIGPIPE, SIG_IGN);
	if (!getenv("RDMAPS_LOG_LEVEL"))
		setenv("RDMAPS_LOG_LEVEL", "warn", 1);
	t = calloc((size_t)o.nsizes, sizeof(*t));
	if (!t)
		return 1;
	printf("# rdmaps-perf ring_vs_ps: transport %s, %d server(s), BSP, %d rounds; time of "
	       "the slowest worker per round\n",
	       o.transport, o.servers, o.rounds);
	printf("%-8s %-3s %-5s %-6s %12s %14s\n", "bytes", "W", "sync", "round", "time_ms",
	       "algbw_MB/s");
	double med[RPS_PERF_MAX_SIZES][16][2];

	for (int wi = 0; wi < o.nworkers && !rc; wi++) {
		int W = o.workers[wi];

		rc = run_w(&o, W, t);
		if (rc) {
			fprintf(stderr, "rdmaps-perf: %d workers: %s\n", W, rps_strerror(rc));
			break;
		}
		for (int s = 0; s < o.nsizes; s++)
			for (int m = 0; m < 2; m++) {
				double v[RING_MAX_ROUND];

				for (int r = 0; r < o.rounds; r++) {
					v[r] = t[s][m][r];
					printf("%-8zu %-3d %-5s %-6d %12.3f %14.1f\n", o.sizes[s], W,
					       method_name[m], r, v[r] / 1000.0,
					       (double)o.sizes[s] / v[r]);
				}
				med[s][wi][m] = median(v, o.rounds);
			}
		fflush(stdout);
	}
	if (!rc) {
		printf("# medians (ms); algbw = tensor bytes / time; ring/ps < 1: ring faster\n");
		printf("%-8s %-3s %12s %12s %10s\n", "bytes", "W", "ps_ms", "ring_ms", "ring/ps");
		for (int wi = 0; wi < o.nworkers; wi++)
			for (int s = 0; s < o.nsizes; s++)
				printf("%-8zu %-3d %12.3f %12.3f %10.3f\n", o.sizes[s], o.workers[wi],
				       med[s][wi][M_PS] / 1000.0, med[s][wi][M_RING] / 1000.0,
				       med[s][wi][M_RING] / med[s][wi][M_PS]);
	}
	free(t);
	return rc ? 1 : 0;
}
