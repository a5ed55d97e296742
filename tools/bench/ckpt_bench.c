/* rdmaps-bench-ckpt: push latency while the servers write a checkpoint,
 * against no checkpoint (docs/benchmarks.md "Checkpoints"; run it through
 * tools/bench/ckpt-bench.sh, which starts the job).
 *
 *   rdmaps-bench-ckpt --ctl PATH/rdmaps-ctl [--mb 100] [--elems 256] [--rounds 5]
 *                     [--rate 2000] [--trace FILE]
 *
 * One worker of an ASP job. It declares a big key (--mb MiB of float32
 * parameters, split into slices over the shards) and a small one (--elems
 * floats), pushes the big one once, then runs interleaved rounds:
 *   ckpt  start `rdmaps-ctl checkpoint` and push the small key at --rate
 *         pushes/s (one in flight; latency counted from each push's due time,
 *         so a stall counts for every push it delays) until the command has
 *         returned: every shard wrote its file; the round lasts as long as the
 *         checkpoint did;
 *   none  the same pushes for as long as the last ckpt round, no checkpoint.
 * Each round prints its pushes, p50, p99 and max latency; the end prints the
 * medians over the rounds of each kind and the ratio of the p99 medians.
 * --trace FILE writes one line per push: round, kind, its due time and its
 * completion (CLOCK_MONOTONIC seconds, the clock of `perf sched record -k
 * CLOCK_MONOTONIC`), latency in us; and the start and end of each round.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdmaps/rdmaps.h>

extern char **environ;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static FILE *trace_f; /* --trace */
static int trace_round;
static const char *trace_kind = "warm";

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
	size_t i;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_d);
	i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static double median(double *v, int n)
{
	return pct(v, (size_t)n, 0.5);
}

struct round_res {
	double secs, p50, p99, max;
	size_t n;
};

/* Push the small key at `rate` pushes/s until deadline (or until child ends
 * if child > 0). Open loop: push i is due at t0 + i / rate and its latency
 * counts from then (the coordinated-omission correction): a push that waits
 * behind a stalled one counts the stall too, as a steady client would see it.
 * One push in flight at a time. */
static int push_loop(struct rps_worker *w, rps_key_t key, const float *g, size_t len, double rate,
		     pid_t child, double deadline, double **lat, size_t *cap, struct round_res *r)
{
	double t0 = now_s();
	size_t n = 0;
	int child_rc = 0;

	for (;;) {
		struct rps_req *req = NULL;
		double due = t0 + (double)n / rate, b;
		int rc;

		while (now_s() < due) {
			double left = due - now_s();
			struct timespec ts = {0, left > 2e-4 ? (long)((left - 1e-4) * 1e9) : 0};

			if (ts.tv_nsec)
				nanosleep(&ts, NULL);
		}
		rc = rps_worker_push(w, &key, g, &len, 1, &req);
		if (!rc)
			rc = rps_req_wait(req, 60000);
		if (rc) {
			fprintf(stderr, "rdmaps-bench-ckpt: push: %s\n", rps_strerror(rc));
			return rc;
		}
		b = now_s();
		if (n == *cap) {
			*cap = *cap ? 2 * *cap : 65536;
			*lat = realloc(*lat, *cap * sizeof(double));
			if (!*lat)
				return -ENOMEM;
		}
		(*lat)[n++] = (b - due) * 1e6;
		if (trace_f)
			fprintf(trace_f, "push %d %s %.6f %.6f %.1f\n", trace_round, trace_kind, due,
				b, (b - due) * 1e6);
		if (child > 0) {
			int st;
			pid_t p = waitpid(child, &st, WNOHANG);

			if (p == child) {
				child_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
				break;
			}
		} else if (b >= deadline) {
			break;
		}
	}
	r->secs = now_s() - t0;
	r->n = n;
	r->p50 = pct(*lat, n, 0.50);
	r->p99 = pct(*lat, n, 0.99);
	r->max = (*lat)[n - 1];
	if (child_rc) {
		fprintf(stderr, "rdmaps-bench-ckpt: rdmaps-ctl checkpoint exited %d\n", child_rc);
		return -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *ctl = NULL, *trace = NULL;
	double mb = 100, rate = 2000;
	size_t elems = 256;
	int rounds = 5, rc;
	static const struct option lo[] = {{"ctl", required_argument, NULL, 'c'},
					   {"mb", required_argument, NULL, 'm'},
					   {"elems", required_argument, NULL, 'e'},
					   {"rounds", required_argument, NULL, 'r'},
					   {"rate", required_argument, NULL, 'p'},
					   {"trace", required_argument, NULL, 't'},
					   {NULL, 0, NULL, 0}};
	struct rps_worker_opts o;
	struct rps_worker *w;
	struct rps_init zeros = {.kind = RPS_INIT_ZEROS};
	rps_key_t keys[2] = {1, 2};
	size_t lens[2];
	float *big, *g;
	double *lat = NULL, last_ckpt = 1.0;
	size_t cap = 0;
	double p50[2][64], p99[2][64], secs[2][64];
	int nr[2] = {0, 0};

	for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
		switch (c) {
		case 'c': ctl = optarg; break;
		case 'm': mb = atof(optarg); break;
		case 'e': elems = (size_t)atol(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'p': rate = atof(optarg); break;
		case 't': trace = optarg; break;
		default:
			fprintf(stderr, "usage: rdmaps-bench-ckpt --ctl PATH [--mb N] [--elems N] "
					"[--rounds N] [--rate PUSHES_PER_S] [--trace FILE]\n");
			return 2;
		}
	}
	if (!ctl || mb <= 0 || !elems || rounds < 1 || rounds > 64 || !(rate > 0)) {
		fprintf(stderr, "rdmaps-bench-ckpt: --ctl PATH/rdmaps-ctl is required; --mb > 0, "
				"--elems > 0, --rounds 1..64, --rate > 0\n");
		return 2;
	}
	if (trace && !(trace_f = fopen(trace, "w"))) {
		fprintf(stderr, "rdmaps-bench-ckpt: --trace %s: %s\n", trace, strerror(errno));
		return 2;
	}
	lens[0] = (size_t)(mb * 1024 * 1024 / sizeof(float));
	lens[1] = elems;
	big = calloc(lens[0], sizeof(float));
	g = calloc(elems, sizeof(float));
	if (!big || !g)
		return 1;
	for (size_t i = 0; i < elems; i++)
		g[i] = 1e-3f;
	rps_worker_opts_init(&o);
	rc = rps_worker_create(&o, &w);
	if (rc) {
		fprintf(stderr, "rdmaps-bench-ckpt: create: %s\n", rps_strerror(rc));
		return 1;
	}
	rc = rps_worker_declare(w, keys, lens, 2, &zeros);
	if (!rc) { /* every parameter written once */
		struct rps_req *req = NULL;

		for (size_t i = 0; i < lens[0]; i++)
			big[i] = (float)(i % 1000) * 1e-3f;
		rc = rps_worker_push(w, keys, big, lens, 1, &req);
		if (!rc)
			rc = rps_req_wait(req, 120000);
	}
	if (rc) {
		fprintf(stderr, "rdmaps-bench-ckpt: declare / first push: %s\n", rps_strerror(rc));
		rps_worker_destroy(w);
		return 1;
	}
	printf("rdmaps-bench-ckpt: %.0f MiB of parameters (%zu floats), pushes of %zu floats at "
	       "%.0f/s (latency from each push's due time), %d rounds of each kind, interleaved\n",
	       mb, lens[0], elems, rate, rounds);
	{ /* warm-up: 0.5 s of pushes */
		struct round_res r;

		rc = push_loop(w, keys[1], g, elems, rate, 0, now_s() + 0.5, &lat, &cap, &r);
	}
	for (int i = 0; !rc && i < 2 * rounds; i++) {
		int kind = i % 2 == 0; /* 1: ckpt first in each pair */
		struct round_res r;

		trace_round = i / 2 + 1;
		trace_kind = kind ? "ckpt" : "none";
		if (trace_f)
			fprintf(trace_f, "start %d %s %.6f\n", trace_round, trace_kind, now_s());
		if (kind) {
			char *args[] = {(char *)ctl, "checkpoint", NULL};
			posix_spawn_file_actions_t fa;
			pid_t pid;

			posix_spawn_file_actions_init(&fa);
			posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
			rc = posix_spawn(&pid, ctl, &fa, NULL, args, environ);
			posix_spawn_file_actions_destroy(&fa);
			if (rc) {
				fprintf(stderr, "rdmaps-bench-ckpt: %s: %s\n", ctl, strerror(rc));
				rc = -rc;
				break;
			}
			rc = push_loop(w, keys[1], g, elems, rate, pid, 0, &lat, &cap, &r);
			last_ckpt = r.secs;
		} else {
			rc = push_loop(w, keys[1], g, elems, rate, 0, now_s() + last_ckpt, &lat,
				       &cap, &r);
		}
		if (trace_f)
			fprintf(trace_f, "end %d %s %.6f\n", trace_round, trace_kind, now_s());
		if (rc)
			break;
		printf("round %2d %-4s %7.3f s %7zu pushes  p50 %8.1f us  p99 %8.1f us  max %9.1f us\n",
		       i / 2 + 1, kind ? "ckpt" : "none", r.secs, r.n, r.p50, r.p99, r.max);
		fflush(stdout);
		p50[kind][nr[kind]] = r.p50;
		p99[kind][nr[kind]] = r.p99;
		secs[kind][nr[kind]] = r.secs;
		nr[kind]++;
	}
	if (!rc) {
		double a = median(p99[1], nr[1]), b = median(p99[0], nr[0]);

		printf("median none: p50 %.1f us  p99 %.1f us (%d rounds)\n", median(p50[0], nr[0]), b,
		       nr[0]);
		printf("median ckpt: p50 %.1f us  p99 %.1f us (%d rounds, checkpoint %.3f s)\n",
		       median(p50[1], nr[1]), a, nr[1], median(secs[1], nr[1]));
		printf("p99 ratio ckpt / none: %.2f\n", b > 0 ? a / b : 0);
	}
	rps_worker_destroy(w);
	if (trace_f)
		fclose(trace_f);
	free(lat);
	free(big);
	free(g);
	return rc ? 1 : 0;
}
