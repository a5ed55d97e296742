/* rdmaps-perf: perftest-style tables (units in the column names) and JSON. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "perflib.h"

#define RULE                                                                                       \
	"----------------------------------------------------------------------------------------" \
	"---------------"

static void cpu_col(FILE *out, double v)
{
	if (v < 0)
		fprintf(out, " %11s", "n/a");
	else
		fprintf(out, " %11.2f", v);
}

void rps_perf_print_table(FILE *out, const struct rps_perf_report *rep,
			  const struct rps_perf_result *res, int n)
{
	const struct rps_perf_params *p = rep->params;
	int lat = rps_perf_mode_is_lat(p->mode);

	fprintf(out, "%s\n", RULE);
	fprintf(out, " rdmaps-perf %s (%s)\n", rps_perf_mode_name(p->mode), rep->where);
	fprintf(out,
		" transport %s, %d server(s), %d worker process(es) x %d thread(s), "
		"%d key(s) per thread, consistency %s",
		rep->transport, rep->servers, rep->procs, p->threads, p->keys, rep->consistency);
	if (!lat)
		fprintf(out, ", depth %d", p->depth);
	fprintf(out, "\n");
	if (p->duration_s > 0)
		fprintf(out, " %.1f s per size", p->duration_s);
	else
		fprintf(out, " iterations per thread: %s", p->iters ? "as given" : "default");
	fprintf(out, ", warm-up excluded; MB = 10^6 bytes; CPU in %% of one core\n");
	fprintf(out, "%s\n", RULE);
	if (lat) {
		fprintf(out, " %-9s %9s %11s %13s %11s %11s %12s", "#bytes", "#iters", "t_min[us]",
			"t_median[us]", "t_avg[us]", "t_p99[us]", "t_p99.9[us]");
		if (p->mode == RPS_PERF_PUSHPULL)
			fprintf(out, " %11s", "BW[MB/s]");
	} else {
		fprintf(out, " %-9s %9s %11s %17s", "#bytes", "#iters", "BW[MB/s]",
			"msg_rate[Mmsg/s]");
	}
	fprintf(out, " %11s %11s\n", "srv_cpu[%]", "cli_cpu[%]");
	for (int i = 0; i < n; i++) {
		const struct rps_perf_result *r = &res[i];

		fprintf(out, " %-9llu %9llu", (unsigned long long)r->bytes,
			(unsigned long long)r->iters);
		if (lat) {
			fprintf(out, " %11.2f %13.2f %11.2f %11.2f %12.2f", r->t_min_us,
				r->t_median_us, r->t_avg_us, r->t_p99_us, r->t_p999_us);
			if (p->mode == RPS_PERF_PUSHPULL)
				fprintf(out, " %11.2f", r->bw_MBps);
		} else {
			fprintf(out, " %11.2f %17.6f", r->bw_MBps, r->msg_rate_Mps);
		}
		cpu_col(out, r->server_cpu_pct);
		cpu_col(out, r->client_cpu_pct);
		fprintf(out, "\n");
	}
	fprintf(out, "%s\n", RULE);
	fflush(out);
}

static void jnum(FILE *out, const char *name, double v, int comma)
{
	if (isfinite(v))
		fprintf(out, "\"%s\": %.6g%s", name, v, comma ? ", " : "");
	else
		fprintf(out, "\"%s\": null%s", name, comma ? ", " : "");
}

/* negative = unknown -> null */
static void jnum_opt(FILE *out, const char *name, double v, int comma)
{
	jnum(out, name, v < 0 ? NAN : v, comma);
}

void rps_perf_print_json(FILE *out, const struct rps_perf_report *rep,
			 const struct rps_perf_result *res, int n)
{
	const struct rps_perf_params *p = rep->params;
	struct utsname u;
	char date[32];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	fprintf(out, "{\"tool\": \"rdmaps-perf\", \"format\": 1, \"date\": \"%s\", ", date);
	fprintf(out, "\"kernel\": \"%s\", \"mode\": \"%s\", \"where\": \"%s\", ", u.release,
		rps_perf_mode_name(p->mode), rep->where);
	fprintf(out, "\"transport\": \"%s\", \"consistency\": \"%s\", \"servers\": %d, ",
		rep->transport, rep->consistency, rep->servers);
	fprintf(out, "\"procs\": %d, \"threads\": %d, \"keys\": %d, \"depth\": %d, ", rep->procs,
		p->threads, p->keys, p->depth);
	jnum(out, "duration_s", p->duration_s, 1);
	fprintf(out, "\"units\": {\"bw\": \"MB/s, 1 MB = 10^6 bytes\", \"time\": \"us\", "
		     "\"cpu\": \"percent of one core\"},\n \"results\": [");
	for (int i = 0; i < n; i++) {
		const struct rps_perf_result *r = &res[i];

		fprintf(out, "%s\n  {\"bytes\": %llu, \"iters\": %llu, \"moved_bytes\": %llu, ",
			i ? "," : "", (unsigned long long)r->bytes, (unsigned long long)r->iters,
			(unsigned long long)r->moved);
		jnum(out, "seconds", r->t1_ns > r->t0_ns ? (double)(r->t1_ns - r->t0_ns) / 1e9 : 0,
		     1);
		if (rps_perf_mode_is_lat(p->mode)) {
			jnum(out, "t_min_us", r->t_min_us, 1);
			jnum(out, "t_median_us", r->t_median_us, 1);
			jnum(out, "t_avg_us", r->t_avg_us, 1);
			jnum(out, "t_p99_us", r->t_p99_us, 1);
			jnum(out, "t_p999_us", r->t_p999_us, 1);
			jnum(out, "t_max_us", r->t_max_us, 1);
		}
		jnum(out, "bw_MBps", r->bw_MBps, 1);
		jnum(out, "msg_rate_Mps", r->msg_rate_Mps, 1);
		jnum_opt(out, "server_cpu_pct", r->server_cpu_pct, 1);
		jnum_opt(out, "server_cpu_s", r->server_cpu_s, 1);
		jnum_opt(out, "server_window_s", r->server_cpu_pct < 0 ? -1 : r->window_s, 1);
		jnum_opt(out, "client_cpu_pct", r->client_cpu_pct, 1);
		if (r->nworkers > 1) {
			fprintf(out, "\"worker_bw_MBps\": [");
			for (int k = 0; k < r->nworkers && k < RPS_PERF_MAX_PROCS; k++)
				fprintf(out, "%s%.6g", k ? ", " : "", r->worker_bw_MBps[k]);
			fprintf(out, "], ");
		}
		fprintf(out, "\"errors\": %llu}", (unsigned long long)r->errors);
	}
	fprintf(out, "\n ]}\n");
	fflush(out);
}
