/* rdmaps-perf: perftest-style tables (units in the column names) and JSON. */
#include <jansson.h>
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

/* A number as "%.6g" gives it (JSON_REAL_PRECISION(6) below); not finite: null. */
static void jnum(json_t *o, const char *name, double v)
{
	json_object_set_new(o, name, isfinite(v) ? json_real(v) : json_null());
}

/* negative = unknown -> null */
static void jnum_opt(json_t *o, const char *name, double v)
{
	jnum(o, name, v < 0 ? NAN : v);
}

static json_t *jresult(const struct rps_perf_params *p, const struct rps_perf_result *r)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "bytes", json_integer((json_int_t)r->bytes));
	json_object_set_new(o, "iters", json_integer((json_int_t)r->iters));
	json_object_set_new(o, "moved_bytes", json_integer((json_int_t)r->moved));
	jnum(o, "seconds", r->t1_ns > r->t0_ns ? (double)(r->t1_ns - r->t0_ns) / 1e9 : 0);
	if (rps_perf_mode_is_lat(p->mode)) {
		jnum(o, "t_min_us", r->t_min_us);
		jnum(o, "t_median_us", r->t_median_us);
		jnum(o, "t_avg_us", r->t_avg_us);
		jnum(o, "t_p99_us", r->t_p99_us);
		jnum(o, "t_p999_us", r->t_p999_us);
		jnum(o, "t_max_us", r->t_max_us);
	}
	jnum(o, "bw_MBps", r->bw_MBps);
	jnum(o, "msg_rate_Mps", r->msg_rate_Mps);
	jnum_opt(o, "server_cpu_pct", r->server_cpu_pct);
	jnum_opt(o, "server_cpu_s", r->server_cpu_s);
	jnum_opt(o, "server_window_s", r->server_cpu_pct < 0 ? -1 : r->window_s);
	jnum_opt(o, "client_cpu_pct", r->client_cpu_pct);
	if (r->nworkers > 1) {
		json_t *a = json_array();

		for (int k = 0; a && k < r->nworkers && k < RPS_PERF_MAX_PROCS; k++)
			json_array_append_new(a, isfinite(r->worker_bw_MBps[k])
						     ? json_real(r->worker_bw_MBps[k])
						     : json_null());
		json_object_set_new(o, "worker_bw_MBps", a ? a : json_null());
	}
	json_object_set_new(o, "errors", json_integer((json_int_t)r->errors));
	return o;
}

int rps_perf_print_json(FILE *out, const struct rps_perf_report *rep,
			const struct rps_perf_result *res, int n)
{
	const struct rps_perf_params *p = rep->params;
	struct utsname u;
	char date[32];
	time_t now = time(NULL);
	struct tm tm;
	json_t *doc, *results;
	int rc;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	doc = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i}",
			"tool", "rdmaps-perf", "format", 1, "date", date, "kernel", u.release,
			"mode", rps_perf_mode_name(p->mode), "where", rep->where, "transport",
			rep->transport, "consistency", rep->consistency, "servers", rep->servers,
			"procs", rep->procs, "threads", p->threads, "keys", p->keys, "depth",
			p->depth);
	results = json_array();
	if (!doc || !results) {
		json_decref(doc);
		json_decref(results);
		fprintf(stderr, "rdmaps-perf: out of memory for the JSON report\n");
		return -1;
	}
	jnum(doc, "duration_s", p->duration_s);
	json_object_set_new(doc, "units",
			    json_pack("{s:s, s:s, s:s}", "bw", "MB/s, 1 MB = 10^6 bytes", "time",
				      "us", "cpu", "percent of one core"));
	for (int i = 0; i < n; i++)
		json_array_append_new(results, jresult(p, &res[i]));
	json_object_set_new(doc, "results", results);
	rc = json_dumpf(doc, out, JSON_REAL_PRECISION(6));
	json_decref(doc);
	if (rc) {
		fprintf(stderr, "rdmaps-perf: writing the JSON report failed\n");
		return -1;
	}
	fprintf(out, "\n");
	fflush(out);
	return 0;
}
