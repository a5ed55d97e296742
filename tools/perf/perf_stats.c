/* rdmaps-perf: modes, defaults, order statistics, CPU time of processes. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "perflib.h"

static const char *const mode_names[RPS_PERF_NMODES] = {
    [RPS_PERF_PULL_LAT] = "pull_lat", [RPS_PERF_PUSH_LAT] = "push_lat",
    [RPS_PERF_PULL_BW] = "pull_bw",   [RPS_PERF_PUSH_BW] = "push_bw",
    [RPS_PERF_PUSHPULL] = "pushpull",
};

int rps_perf_mode_parse(const char *s)
{
	for (int m = 0; m < RPS_PERF_NMODES; m++)
		if (!strcmp(s, mode_names[m]))
			return m;
	return -EINVAL;
}

const char *rps_perf_mode_name(enum rps_perf_mode m)
{
	return (unsigned)m < RPS_PERF_NMODES ? mode_names[m] : "?";
}

int rps_perf_mode_is_lat(enum rps_perf_mode m)
{
	return m == RPS_PERF_PULL_LAT || m == RPS_PERF_PUSH_LAT || m == RPS_PERF_PUSHPULL;
}

void rps_perf_params_init(struct rps_perf_params *p)
{
	memset(p, 0, sizeof(*p));
	p->mode = RPS_PERF_PULL_LAT;
	p->sizes[0] = 4096;
	p->nsizes = 1;
	p->warmup = UINT64_MAX;
	p->keys = 1;
	p->threads = 1;
	p->depth = 16;
	p->procs = 1;
	p->cap_bytes = 1ull << 30;
}

/* Defaults like perftest: 1000 timed requests for latency, 5000 for
 * bandwidth; without an explicit -n a size moves at most cap_bytes per
 * thread (and at least 32 requests), so an 8 MiB sweep ends in time. */
uint64_t rps_perf_iters_for(const struct rps_perf_params *p, size_t bytes)
{
	uint64_t n;

	if (p->iters)
		return p->iters;
	n = rps_perf_mode_is_lat(p->mode) ? 1000 : 5000;
	if (p->cap_bytes && bytes) {
		uint64_t cap = p->cap_bytes / bytes;

		if (cap < 32)
			cap = 32;
		if (n > cap)
			n = cap;
	}
	return n;
}

uint64_t rps_perf_warmup_for(const struct rps_perf_params *p, uint64_t iters, size_t bytes)
{
	uint64_t w, cap;

	if (p->warmup != UINT64_MAX)
		return p->warmup;
	if (rps_perf_mode_is_lat(p->mode)) {
		w = p->duration_s > 0 ? 50 : iters / 10;
		if (w < 8)
			w = 8;
		if (w > 100)
			w = 100;
	} else {
		uint64_t lo = 2 * (uint64_t)p->depth, hi = lo > 200 ? lo : 200;

		w = p->duration_s > 0 ? 200 : iters / 10;
		if (w < lo)
			w = lo;
		if (w > hi)
			w = hi;
	}
	/* warming up connections and registrations takes requests, not bytes:
	 * at most RPS_PERF_WARMUP_BYTES (and at least 4 requests) */
	cap = bytes ? RPS_PERF_WARMUP_BYTES / bytes : w;
	if (cap < 4)
		cap = 4;
	return w < cap ? w : cap;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted samples: the smallest value with at
 * least q of the samples at or below it. */
static double pct_us(const uint64_t *s, size_t n, double q)
{
	size_t rank = (size_t)((double)n * q + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return (double)s[rank - 1] / 1e3;
}

void rps_perf_lat_stats(uint64_t *samples, size_t n, struct rps_perf_result *r)
{
	double sum = 0;

	if (!n)
		return;
	qsort(samples, n, sizeof(*samples), cmp_u64);
	for (size_t i = 0; i < n; i++)
		sum += (double)samples[i];
	r->t_min_us = (double)samples[0] / 1e3;
	r->t_max_us = (double)samples[n - 1] / 1e3;
	/* the median as perftest's "typical": the middle sample */
	r->t_median_us = (double)samples[n / 2] / 1e3;
	r->t_avg_us = sum / (double)n / 1e3;
	r->t_p99_us = pct_us(samples, n, 0.99);
	r->t_p999_us = pct_us(samples, n, 0.999);
}

void rps_perf_aggregate(const struct rps_perf_result *in, int n, enum rps_perf_mode mode,
			struct rps_perf_result *out)
{
	uint64_t t0 = UINT64_MAX, t1 = 0;
	double avg_w = 0, cpu = 0;
	int ncpu = 0;

	memset(out, 0, sizeof(*out));
	if (n <= 0)
		return;
	out->bytes = in[0].bytes;
	out->t_min_us = in[0].t_min_us;
	for (int i = 0; i < n; i++) {
		const struct rps_perf_result *r = &in[i];

		out->iters += r->iters;
		out->moved += r->moved;
		out->errors += r->errors;
		if (r->t0_ns < t0)
			t0 = r->t0_ns;
		if (r->t1_ns > t1)
			t1 = r->t1_ns;
		if (r->t_min_us < out->t_min_us)
			out->t_min_us = r->t_min_us;
		if (r->t_max_us > out->t_max_us)
			out->t_max_us = r->t_max_us;
		/* percentiles of several processes: the worst one (an upper
		 * bound of the merged percentile); the median: weighted mean */
		if (r->t_p99_us > out->t_p99_us)
			out->t_p99_us = r->t_p99_us;
		if (r->t_p999_us > out->t_p999_us)
			out->t_p999_us = r->t_p999_us;
		out->t_median_us += r->t_median_us * (double)r->iters;
		avg_w += r->t_avg_us * (double)r->iters;
		if (r->client_cpu_pct >= 0) {
			cpu += r->client_cpu_pct;
			ncpu++;
		}
		if (i < RPS_PERF_MAX_PROCS)
			out->worker_bw_MBps[i] = r->bw_MBps;
	}
	if (out->iters) {
		out->t_median_us /= (double)out->iters;
		out->t_avg_us = avg_w / (double)out->iters;
	}
	if (n == 1) {
		out->t_median_us = in[0].t_median_us;
		out->t_avg_us = in[0].t_avg_us;
	}
	out->t0_ns = t0;
	out->t1_ns = t1;
	if (t1 > t0) {
		double secs = (double)(t1 - t0) / 1e9;

		out->bw_MBps = (double)out->moved / secs / 1e6;
		out->msg_rate_Mps = (double)out->iters / secs / 1e6;
	}
	(void)mode;
	out->client_cpu_pct = ncpu ? cpu : -1;
	out->server_cpu_pct = -1;
	out->server_cpu_s = -1;
	out->nworkers = n;
}

/* utime + stime of every thread, from /proc/PID/stat (clock ticks). */
static int proc_stat_cpu_ns(pid_t pid, uint64_t *ns_p)
{
	char path[64], buf[1024];
	unsigned long long ut, st;
	FILE *f;
	char *p;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!p)
		return -EPROTO;
	/* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime(14) stime(15) */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -EPROTO;
	*ns_p = (ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
	return 0;
}

/* Sum of /proc/PID/task/TID/schedstat run times (ns resolution). Threads
 * that ended are missing, which is why the caller only takes differences
 * over windows in which the server's threads live on. */
static int proc_schedstat_cpu_ns(pid_t pid, uint64_t *ns_p)
{
	char path[96];
	uint64_t sum = 0;
	int found = 0;

	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));) {
		char p2[320];
		unsigned long long run;
		FILE *f;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(p2, sizeof(p2), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		f = fopen(p2, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &run) == 1) {
			sum += run;
			found = 1;
		}
		fclose(f);
	}
	closedir(d);
	if (!found)
		return -ENOENT;
	*ns_p = sum;
	return 0;
}

int rps_perf_proc_cpu_ns(pid_t pid, uint64_t *ns_p)
{
	static int use_stat = -1;
	int rc;

	if (use_stat != 1) {
		rc = proc_schedstat_cpu_ns(pid, ns_p);
		if (rc == 0) {
			use_stat = 0;
			return 0;
		}
		if (use_stat == 0)
			return rc; /* schedstat worked before: the process is gone */
		use_stat = 1;
	}
	return proc_stat_cpu_ns(pid, ns_p);
}

uint64_t rps_perf_self_cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

int rps_perf_parse_size(const char *s, uint64_t *bytes_p)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case 'K':
		mul = 1ull << 10;
		end++;
		break;
	case 'M':
		mul = 1ull << 20;
		end++;
		break;
	case 'G':
		mul = 1ull << 30;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v > UINT64_MAX / mul)
		return -EINVAL;
	*bytes_p = v * mul;
	return 0;
}
