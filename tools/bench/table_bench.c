/* rdmaps-bench-table: rows/s of a sparse table's pull_rows and push_rows.
 *
 * A worker of an rdmaps job (run it under rdmaps-launch; table-bench.sh runs
 * 1, 2 and 4 workers and is the one command of docs/benchmarks.md):
 *   1. declares a table (dim 64, sgd) and creates --rows rows (default 10^7;
 *      the workers split the ids and pull_rows them in batches, which creates
 *      them): worker 0 reads the servers' RSS before and after (servers on
 *      this machine: the children of rdmaps-launch named rdmaps-server) and
 *      prints the memory per row;
 *   2. --rounds rounds of --round-secs seconds of pull_rows of batches of
 *      --batch ids drawn Zipf(--zipf) over the rows (ranks scattered over the
 *      ids by a hash, so hot rows spread over the shards): rows/s per worker
 *      and in all, every round, then the median; worker 0 reads the servers'
 *      CPU time over the pull rounds (% of one core);
 *   3. the same rounds with push_rows (gradients 1e-3).
 * Every row already exists in 2 and 3 (step 1 made them all). Each worker
 * writes its figures to --out DIR (default /tmp), worker 0 reads them after a
 * barrier and prints the table. Ids drawn by rejection-inversion (Hörmann and
 * Derflinger), a pool of 64 batches per worker made before timing; rows/s
 * count every id asked for, duplicates included (worker 0 prints how many
 * distinct rows a batch holds on average). */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmaps/rdmaps.h>
#include <rdmaps/table.h>

#define TABLE 7
#define POOL 64
#define MAX_ROUNDS 64
#define MAX_SERVERS 64

struct opts {
	uint64_t rows;
	uint32_t dim, batch;
	double zipf, round_secs;
	int rounds, fill;
	const char *out;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* the id of row rank k (0-based) */
static uint64_t row_id(uint64_t k)
{
	return mix64(k ^ 0x7ab1e);
}

static double unif(uint64_t *s)
{
	*s = mix64(*s);
	return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}

/* Zipf(s) over 1..n by rejection-inversion */
struct zipf {
	double s, n, hx1, hn, c;
};

static double zH(const struct zipf *z, double x)
{
	return (pow(x, 1.0 - z->s) - 1.0) / (1.0 - z->s);
}

static double zHinv(const struct zipf *z, double u)
{
	return pow(1.0 + (1.0 - z->s) * u, 1.0 / (1.0 - z->s));
}

static double zh(const struct zipf *z, double x)
{
	return pow(x, -z->s);
}

static void zipf_init(struct zipf *z, double s, uint64_t n)
{
	z->s = s;
	z->n = (double)n;
	z->hx1 = zH(z, 1.5) - 1.0;
	z->hn = zH(z, z->n + 0.5);
	z->c = 2.0 - zHinv(z, zH(z, 2.5) - zh(z, 2.0));
}

static uint64_t zipf_draw(const struct zipf *z, uint64_t *rng)
{
	for (;;) {
		double u = z->hn + unif(rng) * (z->hx1 - z->hn), x = zHinv(z, u);
		double k = floor(x + 0.5);

		if (k < 1)
			k = 1;
		else if (k > z->n)
			k = z->n;
		if (k - x <= z->c || u >= zH(z, k + 0.5) - zh(z, k))
			return (uint64_t)k;
	}
}

/* ---- the servers' processes (this machine only) ---- */

static int server_pids(int *pids, int max)
{
	pid_t parent = getppid();
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		char path[300], buf[512], comm[64];
		int pid, ppid;
		FILE *f;

		if ((pid = atoi(e->d_name)) <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		if (!(f = fopen(path, "r")))
			continue;
		if (fgets(buf, sizeof(buf), f) &&
		    sscanf(buf, "%*d (%63[^)]) %*c %d", comm, &ppid) == 2 && ppid == parent &&
		    !strcmp(comm, "rdmaps-server"))
			pids[n++] = pid;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* resident bytes of pid (VmRSS), 0 if unknown */
static double rss_bytes(int pid)
{
	char path[64], line[256];
	double kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lf kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024.0;
}

/* CPU seconds (user + system) of pid */
static double cpu_s(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double sum_rss(const int *pids, int n)
{
	double s = 0;

	for (int i = 0; i < n; i++)
		s += rss_bytes(pids[i]);
	return s;
}

static double sum_cpu(const int *pids, int n)
{
	double s = 0;

	for (int i = 0; i < n; i++)
		s += cpu_s(pids[i]);
	return s;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* mean distinct ids per batch of the pool (duplicates travel once if the
 * worker merges them; rows/s counts every id asked for) */
static double mean_unique(const uint64_t *pool, uint32_t batch)
{
	uint64_t *v = malloc(batch * sizeof(uint64_t));
	size_t u = 0;

	if (!v)
		return 0;
	for (int b = 0; b < POOL; b++) {
		memcpy(v, pool + (size_t)b * batch, batch * sizeof(uint64_t));
		qsort(v, batch, sizeof(uint64_t), cmp_u64);
		for (uint32_t i = 0; i < batch; i++)
			u += i == 0 || v[i] != v[i - 1];
	}
	free(v);
	return (double)u / POOL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rdmaps-bench-table [options]   (a worker: rdmaps-launch ... -- rdmaps-bench-table)\n"
		"  --rows N          rows created and drawn from (default 10000000)\n"
		"  --dim D           floats per row (default 64)\n"
		"  --batch B         ids per call (default 4096)\n"
		"  --zipf S          Zipf exponent of the draws (default 1.1)\n"
		"  --rounds R        rounds of pulls, then of pushes (default 5)\n"
		"  --round-secs T    seconds per round (default 3)\n"
		"  --out DIR         where workers leave their figures (default /tmp)\n"
		"  --no-fill         do not create the rows first (draws create them)\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "rows", required_argument, NULL, 'n' },     { "dim", required_argument, NULL, 'd' },
		{ "batch", required_argument, NULL, 'b' },    { "zipf", required_argument, NULL, 'z' },
		{ "rounds", required_argument, NULL, 'r' },   { "round-secs", required_argument, NULL, 't' },
		{ "out", required_argument, NULL, 'o' },      { "no-fill", no_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },	      { 0 },
	};
	int c;

	*o = (struct opts){ .rows = 10000000, .dim = 64, .batch = 4096, .zipf = 1.1,
			    .round_secs = 3, .rounds = 5, .fill = 1, .out = "/tmp" };
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': o->rows = strtoull(optarg, NULL, 10); break;
		case 'd': o->dim = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'b': o->batch = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'z': o->zipf = strtod(optarg, NULL); break;
		case 'r': o->rounds = atoi(optarg); break;
		case 't': o->round_secs = strtod(optarg, NULL); break;
		case 'o': o->out = optarg; break;
		case 'F': o->fill = 0; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -EINVAL;
		}
	}
	if (o->rows < 2 || o->dim < 1 || o->batch < 1 || o->batch > RPS_TABLE_MAX_BATCH ||
	    !(o->zipf > 1.0) || o->rounds < 1 || o->rounds > MAX_ROUNDS || !(o->round_secs > 0)) {
		fprintf(stderr, "rdmaps-bench-table: want --rows >= 2, --dim >= 1, --batch "
				"1..%u, --zipf > 1, --rounds 1..%d, --round-secs > 0\n",
			RPS_TABLE_MAX_BATCH, MAX_ROUNDS);
		return -EINVAL;
	}
	return 0;
}

/* rounds of pulls (push 0) or pushes; rates[r] rows/s of this worker;
 * cpu (worker 0, else NULL): the servers' CPU in each round, % of a core */
static int rounds(struct rps_worker *w, const struct opts *o, const uint64_t *pool, float *buf,
		  int push, double *rates, const int *pids, int npids, double *cpu)
{
	for (int r = 0; r < o->rounds; r++) {
		int rc = rps_worker_barrier(w);
		double t0 = now_s(), t, c0 = cpu ? sum_cpu(pids, npids) : 0;
		uint64_t rows = 0;
		size_t b = 0;

		if (rc)
			return rc;
		do {
			const uint64_t *ids = pool + (b++ % POOL) * o->batch;

			rc = push ? rps_worker_push_rows(w, TABLE, ids, o->batch, buf)
				  : rps_worker_pull_rows(w, TABLE, ids, o->batch, buf);
			if (rc) {
				fprintf(stderr, "rdmaps-bench-table: %s_rows: %s\n",
					push ? "push" : "pull", rps_strerror(rc));
				return rc;
			}
			rows += o->batch;
			t = now_s();
		} while (t - t0 < o->round_secs);
		rates[r] = (double)rows / (t - t0);
		if (cpu)
			cpu[r] = 100 * (sum_cpu(pids, npids) - c0) / (now_s() - t0);
	}
	return 0;
}

static int write_rates(const struct opts *o, int rank, const double *pull, const double *push)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/rdmaps-table-bench.%d.%d", o->out, (int)getppid(), rank);
	if (!(f = fopen(path, "w"))) {
		fprintf(stderr, "rdmaps-bench-table: cannot write %s: %s\n", path, strerror(errno));
		return -errno;
	}
	for (int r = 0; r < o->rounds; r++)
		fprintf(f, "%.17g %.17g\n", pull[r], push[r]);
	return fclose(f) ? -EIO : 0;
}

static int read_rates(const struct opts *o, int rank, double *pull, double *push)
{
	char path[4096];
	FILE *f;
	int ok = 1;

	snprintf(path, sizeof(path), "%s/rdmaps-table-bench.%d.%d", o->out, (int)getppid(), rank);
	if (!(f = fopen(path, "r"))) {
		fprintf(stderr, "rdmaps-bench-table: cannot read %s: %s (all workers must share "
				"--out DIR)\n",
			path, strerror(errno));
		return -ENOENT;
	}
	for (int r = 0; r < o->rounds && ok; r++)
		ok = fscanf(f, "%lf %lf", &pull[r], &push[r]) == 2;
	fclose(f);
	unlink(path);
	return ok ? 0 : -EINVAL;
}

static void print_table(const struct opts *o, int nw, double (*rates)[2][MAX_ROUNDS])
{
	const char *what[2] = { "pull", "push" };

	for (int k = 0; k < 2; k++) {
		double all[MAX_ROUNDS];

		printf("%-5s %-6s", "op", "round");
		for (int i = 0; i < nw; i++)
			printf(" %10s%-2d", "rows/s w", i);
		printf(" %14s %10s\n", "rows/s all", "MB/s all");
		for (int r = 0; r < o->rounds; r++) {
			all[r] = 0;
			printf("%-5s %-6d", what[k], r + 1);
			for (int i = 0; i < nw; i++) {
				printf(" %12.0f", rates[i][k][r]);
				all[r] += rates[i][k][r];
			}
			printf(" %14.0f %10.1f\n", all[r], all[r] * o->dim * 4 / 1e6);
		}
		double m = median(all, o->rounds);
		printf("%-5s median rows/s all %.0f (%.1f MB/s of rows), %d worker(s)\n", what[k], m,
		       m * o->dim * 4 / 1e6, nw);
	}
}

int main(int argc, char **argv)
{
	static double rates[64][2][MAX_ROUNDS], pull_cpu[MAX_ROUNDS];
	struct rps_table_spec spec;
	struct rps_worker *w;
	struct opts o;
	struct zipf z;
	int rc, rank, nw, pids[MAX_SERVERS], npids = 0;

	if (parse(argc, argv, &o))
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((rc = rps_worker_create(NULL, &w))) {
		fprintf(stderr, "rdmaps-bench-table: cannot join the cluster: %s (run it under "
				"rdmaps-launch)\n",
			rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	nw = rps_worker_num_workers(w);
	if (nw > 64) {
		fprintf(stderr, "rdmaps-bench-table: at most 64 workers\n");
		goto fail;
	}
	rps_table_spec_init(&spec);
	spec.dim = o.dim;
	spec.capacity_hint = o.rows;
	spec.optim.kind = RPS_OPT_SGD;
	spec.optim.lr = 0.01f;
	spec.field_mask = RPS_TABLE_SPEC_DIM | RPS_TABLE_SPEC_CAPACITY_HINT | RPS_TABLE_SPEC_OPTIM;
	if ((rc = rps_worker_declare_table(w, TABLE, &spec))) {
		fprintf(stderr, "rdmaps-bench-table: declare table: %s\n", rps_strerror(rc));
		goto fail;
	}
	float *buf = malloc((size_t)o.batch * o.dim * sizeof(float));
	uint64_t *pool = malloc((size_t)POOL * o.batch * sizeof(uint64_t));
	if (!buf || !pool)
		goto fail;
	if (rank == 0) {
		npids = server_pids(pids, MAX_SERVERS);
		printf("rdmaps-bench-table: %d worker(s), %d server(s) (%d on this machine), "
		       "transport %s, %llu rows x %u floats, batches of %u ids, Zipf(%g)\n",
		       nw, rps_worker_num_servers(w), npids, rps_worker_transport(w),
		       (unsigned long long)o.rows, o.dim, o.batch, o.zipf);
	}
	if ((rc = rps_worker_barrier(w)))
		goto fail;
	/* 1. create the rows */
	double rss0 = rank == 0 ? sum_rss(pids, npids) : 0;
	if (o.fill) {
		uint64_t lo = o.rows * (uint64_t)rank / (uint64_t)nw;
		uint64_t hi = o.rows * (uint64_t)(rank + 1) / (uint64_t)nw;
		double t0 = now_s();

		for (uint64_t k = lo; k < hi; k += o.batch) {
			uint32_t n = (uint32_t)(hi - k < o.batch ? hi - k : o.batch);

			for (uint32_t i = 0; i < n; i++)
				pool[i] = row_id(k + i);
			if ((rc = rps_worker_pull_rows(w, TABLE, pool, n, buf))) {
				fprintf(stderr, "rdmaps-bench-table: creating rows: %s\n",
					rps_strerror(rc));
				goto fail;
			}
		}
		if ((rc = rps_worker_barrier(w)))
			goto fail;
		if (rank == 0) {
			double rss1 = sum_rss(pids, npids), el = now_s() - t0;

			printf("create %llu rows: %.1f s (%.0f rows/s); servers' RSS %.1f MiB -> "
			       "%.1f MiB: %.1f bytes per row (%u of them the row's floats)\n",
			       (unsigned long long)o.rows, el, (double)o.rows / el, rss0 / 1048576,
			       rss1 / 1048576, (rss1 - rss0) / (double)o.rows, o.dim * 4);
			if (!npids)
				printf("create: no rdmaps-server is a sibling of this worker: RSS not "
				       "measured\n");
		}
	}
	/* 2. and 3. */
	zipf_init(&z, o.zipf, o.rows);
	uint64_t rng = 0x5eed0000ull + (uint64_t)rank;
	for (size_t i = 0; i < (size_t)POOL * o.batch; i++)
		pool[i] = row_id(zipf_draw(&z, &rng) - 1);
	if (rank == 0)
		printf("draws: a batch of %u ids holds %.0f distinct rows on average (worker 0's "
		       "pool of %d batches)\n",
		       o.batch, mean_unique(pool, o.batch), POOL);
	for (size_t i = 0; i < (size_t)o.batch * o.dim; i++)
		buf[i] = 1e-3f;
	/* the servers' CPU with no request at all: what the pulls' figure
	 * compares with (timers, heartbeats, pollers) */
	double idle_cpu = 0, idle_s = 0;
	if ((rc = rps_worker_barrier(w)))
		goto fail;
	if (rank == 0 && npids) {
		double c0 = sum_cpu(pids, npids), t0 = now_s();
		struct timespec ts = { (time_t)o.round_secs,
				       (long)((o.round_secs - (time_t)o.round_secs) * 1e9) };

		nanosleep(&ts, NULL);
		idle_s = now_s() - t0;
		idle_cpu = 100 * (sum_cpu(pids, npids) - c0) / idle_s;
	}
	double cpu0 = rank == 0 ? sum_cpu(pids, npids) : 0, tc0 = now_s();
	if ((rc = rounds(w, &o, pool, buf, 0, rates[rank][0], pids, npids,
			 rank == 0 && npids ? pull_cpu : NULL)))
		goto fail;
	if ((rc = rps_worker_barrier(w)))
		goto fail;
	double cpu1 = rank == 0 ? sum_cpu(pids, npids) : 0, tc1 = now_s();
	for (size_t i = 0; i < (size_t)o.batch * o.dim; i++)
		buf[i] = 1e-3f;
	if ((rc = rounds(w, &o, pool, buf, 1, rates[rank][1], pids, npids, NULL)))
		goto fail;
	if ((rc = write_rates(&o, rank, rates[rank][0], rates[rank][1])) ||
	    (rc = rps_worker_barrier(w)))
		goto fail;
	if (rank == 0) {
		for (int i = 1; i < nw; i++)
			if ((rc = read_rates(&o, i, rates[i][0], rates[i][1])))
				goto fail;
		char path[4096];
		snprintf(path, sizeof(path), "%s/rdmaps-table-bench.%d.0", o.out, (int)getppid());
		unlink(path);
		print_table(&o, nw, rates);
		if (npids) {
			for (int r = 0; r < o.rounds; r++)
				printf("pull round %d: servers' CPU %.2f%% of one core\n", r + 1,
				       pull_cpu[r]);
			printf("pull: servers' CPU %.2f%% of one core over %.1f s of pull rounds, "
			       "median of rounds %.2f%% (%d server process(es), utime + stime "
			       "from /proc/PID/stat); idle (no request, %.1f s before): %.2f%%\n",
			       100 * (cpu1 - cpu0) / (tc1 - tc0), tc1 - tc0,
			       median(pull_cpu, o.rounds), npids, idle_s, idle_cpu);
		}
	}
	free(buf);
	free(pool);
	rc = rps_worker_barrier(w);
	rps_worker_destroy(w);
	return rc ? 1 : 0;
fail:
	rps_worker_destroy(w);
	return 1;
}
