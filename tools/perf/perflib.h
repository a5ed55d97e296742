/* The measuring library of rdmaps-perf, kept apart from its command line so
 * that the benchmark suite and the tests reuse it.
 *
 * What it measures: the parameter server's own operations through the public
 * worker API (rps_worker_pull / _push / _pushpull + rps_req_wait) against a
 * real cluster, per message size:
 *   *_lat     one request in flight per thread; per-request times
 *             (min, median, average, p99, p99.9);
 *   *_bw      up to `depth` requests in flight per thread; bytes and
 *             requests per second over the whole run;
 *   pushpull  one training step per iteration (push every key, end the
 *             clock, pull every key of the next clock); step times, and the
 *             bytes of both directions per second.
 * Warm-up requests run before the timed part and are excluded from it.
 *
 * Layers:
 *   perf_run.c      the loops of one worker process (threads, keys, buffers)
 *   perf_stats.c    order statistics, CPU time of processes
 *   perf_cluster.c  a local cluster: rdmaps-sched + servers + worker processes
 *   perf_remote.c   perftest-like server side / client side over a control socket
 *   perf_report.c   table and JSON output
 */
#ifndef RPS_PERFLIB_H
#define RPS_PERFLIB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>

#include <rdmaps/rdmaps.h>

/* The perf tool uses only the public API (include/rdmaps/): its own small
 * helpers, plain malloc/free. */
#define PERF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PERF_MAX(a, b) ((a) > (b) ? (a) : (b))
#define PERF_ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t perf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define RPS_PERF_MAX_SIZES	32
#define RPS_PERF_MAX_SERVERS	64
#define RPS_PERF_MAX_PROCS	64
#define RPS_PERF_MAX_THREADS	64
#define RPS_PERF_DEFAULT_PORT	18515
#define RPS_PERF_MIN_SIZE	8	    /* two floats */
#define RPS_PERF_MAX_SIZE	(8u << 20)  /* 8 MiB, the top of -a */
#define RPS_PERF_SLOT_BYTES_MAX (64u << 20) /* pull buffers per thread */
#define RPS_PERF_WARMUP_BYTES	(16u << 20) /* default warm-up, per thread */

enum rps_perf_mode {
	RPS_PERF_PULL_LAT = 0,
	RPS_PERF_PUSH_LAT,
	RPS_PERF_PULL_BW,
	RPS_PERF_PUSH_BW,
	RPS_PERF_PUSHPULL,
	RPS_PERF_NMODES,
};

/* "pull_lat" ... ; -EINVAL for an unknown name */
int rps_perf_mode_parse(const char *s);
const char *rps_perf_mode_name(enum rps_perf_mode m);
/* 1 for the modes reported as latency tables (pull_lat, push_lat, pushpull) */
int rps_perf_mode_is_lat(enum rps_perf_mode m);

/* What one worker process runs. */
struct rps_perf_params {
	enum rps_perf_mode mode;
	size_t sizes[RPS_PERF_MAX_SIZES]; /* bytes per key, multiples of 4, >= 8 */
	int nsizes;
	uint64_t iters;	    /* timed requests per thread and size (0: default) */
	uint64_t warmup;    /* untimed requests first (UINT64_MAX: default) */
	double duration_s;  /* > 0: time-bound instead of iters */
	int keys;	    /* keys per thread (requests rotate over them) */
	int threads;	    /* client threads of this process, sharing its worker */
	int depth;	    /* bw: requests in flight per thread */
	int procs;	    /* worker processes in the job (key numbering) */
	uint64_t cap_bytes; /* sweep: at most this many bytes per size and thread (0: none) */
	int req_timeout_ms; /* one request; 0 = 60 s */
	/* the settings the worker runs with (key placement); NULL: the defaults
	 * and RDMAPS_* environment */
	const struct rps_config *config;
};

void rps_perf_params_init(struct rps_perf_params *p);
/* Fill defaults that depend on the mode and size: iterations, warm-up. */
uint64_t rps_perf_iters_for(const struct rps_perf_params *p, size_t bytes);
uint64_t rps_perf_warmup_for(const struct rps_perf_params *p, uint64_t iters, size_t bytes);

/* The result of one size, from one process or aggregated over processes. */
struct rps_perf_result {
	uint64_t bytes; /* message size (per key) */
	uint64_t iters; /* timed requests (steps for pushpull), all threads */
	uint64_t moved; /* payload bytes moved by the timed requests */
	uint64_t t0_ns; /* CLOCK_MONOTONIC: first timed request posted */
	uint64_t t1_ns; /* last timed request completed */
	double t_min_us, t_median_us, t_avg_us, t_p99_us, t_p999_us, t_max_us;
	double bw_MBps; /* 1 MB = 10^6 bytes */
	double msg_rate_Mps;
	double client_cpu_pct; /* worker process(es), % of one core; < 0 unknown */
	double server_cpu_pct; /* server process(es), % of one core; < 0 unknown */
	double server_cpu_s;   /* CPU seconds of the server process(es) in the window */
	double window_s;       /* wall time of the server CPU window */
	int nworkers;	       /* processes aggregated */
	double worker_bw_MBps[RPS_PERF_MAX_PROCS]; /* per process (bw modes) */
	uint64_t errors;
};

/* Called around the timed part of each size, by one thread of the process:
 * start() after every thread warmed up and the workers met in a barrier,
 * just before the timed requests; stop() after they all completed. */
struct rps_perf_hooks {
	int (*start)(void *arg, int size_idx);
	int (*stop)(void *arg, int size_idx, struct rps_perf_result *res);
	void *arg;
};

/* Run every size of p on worker w (rank = this process's worker rank).
 * results[p->nsizes] receive this process's figures. 0 or -errno (the
 * first failure, reported on stderr). */
int rps_perf_run(struct rps_worker *w, const struct rps_perf_params *p, int rank,
		 const struct rps_perf_hooks *hooks, struct rps_perf_result *results);

/* Order statistics of ns samples (sorted in place) into the t_*_us fields. */
void rps_perf_lat_stats(uint64_t *samples, size_t n, struct rps_perf_result *r);
/* Combine per-process results of one size into *out (bw modes: bytes over
 * the union of the windows; lat: the worst per-process percentiles and the
 * mean of the averages are not exact, so lat results are combined from the
 * merged sample sets by rps_perf_run itself when procs == 1). */
void rps_perf_aggregate(const struct rps_perf_result *in, int n, enum rps_perf_mode mode,
			struct rps_perf_result *out);

/* CPU time (user + system, every thread) of a process in ns; -errno. */
int rps_perf_proc_cpu_ns(pid_t pid, uint64_t *ns_p);
/* CPU time of this process (getrusage). */
uint64_t rps_perf_self_cpu_ns(void);
/* "1M" / "4096" / "64K" -> bytes; -EINVAL */
int rps_perf_parse_size(const char *s, uint64_t *bytes_p);

/* ---- local cluster (perf_cluster.c) ---- */
struct rps_perf_cluster_opts {
	const char *transport;	   /* tcp | rdma */
	const char *consistency;   /* asp | bsp | ssp; NULL = environment */
	const char *sched_host;	   /* address the scheduler listens on */
	uint16_t sched_port;	   /* 0: a free one */
	const char *server_host;   /* address servers listen on and advertise */
	const char *server_device; /* RDMAPS_DEVICE of the servers; NULL: environment */
	uint16_t server_port;	   /* 0: any; else server i listens on port + i */
	int servers;
	int workers;	      /* worker processes that will join */
	uint64_t shard_bytes; /* 0: RDMAPS_SHARD_BYTES or the default */
	const char *bindir;   /* where rdmaps-sched / rdmaps-server are; NULL: beside us */
	int quiet;	      /* servers' stdout and stderr to /dev/null */
	int make_secret;      /* no RDMAPS_SECRET: make a random one (one machine only;
			       * two hosts must share theirs) */
};

struct rps_perf_cluster {
	pid_t sched; /* -1 once reaped */
	pid_t servers[RPS_PERF_MAX_SERVERS];
	int nservers;
	int exited;	      /* how many were reaped */
	int failed;	      /* ... of them with a bad status */
	char sched_addr[128]; /* host:port for RDMAPS_SCHEDULER */
};

int rps_perf_cluster_start(const struct rps_perf_cluster_opts *o, struct rps_perf_cluster *c);
/* Sum of the servers' CPU time (ns). */
int rps_perf_cluster_cpu_ns(const struct rps_perf_cluster *c, uint64_t *ns_p);
/* Wait up to timeout_ms for sched and servers to leave by themselves (they do
 * once every worker left), then SIGTERM, then SIGKILL. Returns 0 if all
 * exited with status 0. */
int rps_perf_cluster_stop(struct rps_perf_cluster *c, int timeout_ms);
/* Reap those that ended (a bad exit status is reported on stderr): -ECHILD
 * if any of them ended so far (they end by themselves after the workers
 * left), 0 while all run. */
int rps_perf_cluster_check(struct rps_perf_cluster *c);

/* Run params on a fresh local cluster with `procs` worker processes of
 * `params->threads` threads each. results[nsizes] are aggregated over the
 * processes, server CPU filled in. */
struct rps_perf_local_opts {
	struct rps_perf_cluster_opts cluster;
	const char *worker_host;
	const char *worker_device; /* RDMAPS_DEVICE of the workers; NULL: environment */
	int timeout_s;		   /* whole run; 0 = none */
};
int rps_perf_local_run(const struct rps_perf_local_opts *lo, const struct rps_perf_params *p,
		       struct rps_perf_result *results);

/* ---- perftest-like mode (perf_remote.c) ---- */
struct rps_perf_remote_opts {
	const char *transport;
	const char *consistency;
	const char *host; /* server side: listen + advertise; client: the server */
	uint16_t port;	  /* control port; scheduler on port + 1 */
	int servers;
	int workers; /* client processes expected (server side) */
	int timeout_s;
};
/* Server side: start sched + servers, serve one client run, print the
 * server CPU per size to out. */
int rps_perf_remote_server(const struct rps_perf_remote_opts *o, FILE *out);
/* Client side: check parameters with the server, run, fill results (with
 * the server's CPU figures). */
int rps_perf_remote_client(const struct rps_perf_remote_opts *o, const struct rps_perf_params *p,
			   struct rps_perf_result *results);

/* ---- ring all-reduce against push + pull (perf_ring.c) ----
 * `rdmaps-perf ring_vs_ps [OPTIONS]`: its own command line (--help). */
int rps_perf_ring_main(int argc, char **argv);

/* ---- output (perf_report.c) ---- */
struct rps_perf_report {
	const struct rps_perf_params *params;
	const char *transport;
	const char *consistency;
	int servers;
	int procs;
	const char *where; /* "local-cluster" | "client of HOST" */
};
void rps_perf_print_table(FILE *out, const struct rps_perf_report *rep,
			  const struct rps_perf_result *res, int n);
/* One JSON document (jansson; numbers to 6 significant digits, not finite:
 * null). 0, or -1 (said on stderr). */
int rps_perf_print_json(FILE *out, const struct rps_perf_report *rep,
			const struct rps_perf_result *res, int n);

#endif
