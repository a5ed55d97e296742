/* rdmaps-perf: latency and bandwidth of the parameter server's own
 * operations (pull, push, push-pull), like perftest for verbs.
 *
 *   rdmaps-perf [MODE] [OPTIONS]                  server side: wait for a client
 *   rdmaps-perf [MODE] [OPTIONS] HOST             client side, against HOST
 *   rdmaps-perf [MODE] [OPTIONS] --local-cluster  everything on this machine
 *
 * The measuring itself is in perflib (perf_*.c); this file is the command line. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perflib.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: rdmaps-perf [MODE] [OPTIONS] [HOST | --local-cluster]\n"
	    "Latency and bandwidth of rdmaps pulls and pushes through the worker API,\n"
	    "against a real cluster. Like perftest: without HOST it is the server side\n"
	    "(starts rdmaps-sched on PORT+1 and the servers, waits for one client on\n"
	    "PORT); with HOST it is the client. --local-cluster runs it all here.\n\n"
	    "MODE: pull_lat (default) | push_lat | pull_bw | push_bw | pushpull\n"
	    "      ring_vs_ps: PS push+pull against ring all-reduce (rdmaps-perf ring_vs_ps --help)\n\n"
	    "  -m, --mode MODE          the same as the MODE argument\n"
	    "  -t, --transport T        tcp | rdma (default: RDMAPS_TRANSPORT or tcp)\n"
	    "      --tls                TLS 1.3 on every TCP connection (RDMAPS_TLS=1 for this\n"
	    "                           process and those it starts; docs/security.md); the\n"
	    "                           transport is reported as tcp+tls\n"
	    "  -s, --size BYTES         bytes per key (K/M suffixes; default 4096)\n"
	    "  -a, --all                sweep 8 B .. 8 MiB (see --min-size, --max-size, --step)\n"
	    "      --sizes LIST         these sizes, comma separated (8,64,4K,1M)\n"
	    "      --min-size, --max-size BYTES   bounds of -a\n"
	    "      --step 2|4           -a: powers of 2 (default) or of 4\n"
	    "  -n, --iters N            timed requests per thread and size (default 1000\n"
	    "                           for latency, 5000 for bandwidth; without -n a size\n"
	    "                           moves at most 1 GiB per thread, >= 32 requests)\n"
	    "  -D, --duration SECS      run each size SECS seconds instead of -n\n"
	    "      --warmup N           untimed requests first (default ~10%%, 8..200, at\n"
	    "                           most 16 MiB per thread)\n"
	    "  -k, --keys N             keys per thread, requests rotate over them (default 1)\n"
	    "      --threads N          client threads per worker process, each with its own\n"
	    "                           keys, sharing the process's worker (default 1)\n"
	    "  -w, --procs N            worker processes (--local-cluster; default 1)\n"
	    "      --servers N          server processes (default 1)\n"
	    "  -d, --depth N            bandwidth: requests in flight per thread (default 16)\n"
	    "  -c, --consistency C      asp | bsp | ssp (default: RDMAPS_CONSISTENCY or asp)\n"
	    "  -L, --local-cluster      start rdmaps-sched, the servers and the workers here\n"
	    "  -p, --port PORT          control port (default %d); the scheduler uses PORT+1\n"
	    "      --host ADDR          server side: address to listen on and advertise\n"
	    "                           (default: RDMAPS_HOST or 127.0.0.1)\n"
	    "      --server-host ADDR   local cluster: servers' address (default 127.0.0.1;\n"
	    "                           rdma: RDMAPS_RXE_IP0 when set, as in the SoftRoCE guest)\n"
	    "      --worker-host ADDR   workers' address (local cluster, client side; rdma in\n"
	    "                           the SoftRoCE harness: RDMAPS_RXE_IP1)\n"
	    "      --timeout SECS       give up after SECS (default 600; 0 = never)\n"
	    "      --json               print JSON instead of the table\n"
	    "  -q, --quiet-servers      discard the output of the servers and the scheduler\n"
	    "  -h, --help\n\n"
	    "Server settings (shards, optimizer, learning rate, ...) are RDMAPS_* variables,\n"
	    "see docs/options.md; they are passed to every process started here.\n"
	    "Output: latency t_min/t_median/t_avg/t_p99/t_p99.9 in us, or BW in MB/s\n"
	    "(10^6 B/s) and Mmsg/s; srv_cpu = CPU of the server processes during the\n"
	    "timed part, in %% of one core; cli_cpu = the same for the worker processes.\n",
	    RPS_PERF_DEFAULT_PORT);
}

static int add_size(struct rps_perf_params *p, uint64_t s)
{
	if (p->nsizes >= RPS_PERF_MAX_SIZES) {
		fprintf(stderr, "rdmaps-perf: at most %d sizes\n", RPS_PERF_MAX_SIZES);
		return -EINVAL;
	}
	if (s < RPS_PERF_MIN_SIZE || s % 4 || s > (1ull << 31)) {
		fprintf(stderr, "rdmaps-perf: size %llu: need a multiple of 4 (float32), %d..2G\n",
			(unsigned long long)s, RPS_PERF_MIN_SIZE);
		return -EINVAL;
	}
	p->sizes[p->nsizes++] = (size_t)s;
	return 0;
}

static int parse_int(const char *name, const char *v, long lo, long hi, long *out)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || end == v || x < lo || x > hi) {
		fprintf(stderr, "rdmaps-perf: %s %s: expected an integer in %ld..%ld\n", name, v,
			lo, hi);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

static int parse_size_opt(const char *name, const char *v, uint64_t *out)
{
	if (rps_perf_parse_size(v, out)) {
		fprintf(stderr, "rdmaps-perf: %s %s: expected a size (4096, 64K, 1M)\n", name, v);
		return -EINVAL;
	}
	return 0;
}

enum {
	OPT_SIZES = 256,
	OPT_MIN_SIZE,
	OPT_MAX_SIZE,
	OPT_STEP,
	OPT_WARMUP,
	OPT_THREADS,
	OPT_SERVERS,
	OPT_HOST,
	OPT_SERVER_HOST,
	OPT_WORKER_HOST,
	OPT_TIMEOUT,
	OPT_JSON,
	OPT_TLS,
};

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"mode", required_argument, NULL, 'm'},
	    {"transport", required_argument, NULL, 't'},
	    {"size", required_argument, NULL, 's'},
	    {"all", no_argument, NULL, 'a'},
	    {"sizes", required_argument, NULL, OPT_SIZES},
	    {"min-size", required_argument, NULL, OPT_MIN_SIZE},
	    {"max-size", required_argument, NULL, OPT_MAX_SIZE},
	    {"step", required_argument, NULL, OPT_STEP},
	    {"iters", required_argument, NULL, 'n'},
	    {"duration", required_argument, NULL, 'D'},
	    {"warmup", required_argument, NULL, OPT_WARMUP},
	    {"keys", required_argument, NULL, 'k'},
	    {"threads", required_argument, NULL, OPT_THREADS},
	    {"procs", required_argument, NULL, 'w'},
	    {"workers", required_argument, NULL, 'w'},
	    {"servers", required_argument, NULL, OPT_SERVERS},
	    {"depth", required_argument, NULL, 'd'},
	    {"consistency", required_argument, NULL, 'c'},
	    {"local-cluster", no_argument, NULL, 'L'},
	    {"port", required_argument, NULL, 'p'},
	    {"host", required_argument, NULL, OPT_HOST},
	    {"server-host", required_argument, NULL, OPT_SERVER_HOST},
	    {"worker-host", required_argument, NULL, OPT_WORKER_HOST},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"tls", no_argument, NULL, OPT_TLS},
	    {"quiet-servers", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct rps_perf_params p;
	struct rps_perf_result *res;
	const char *transport = getenv("RDMAPS_TRANSPORT"), *consistency = NULL;
	const char *host = NULL, *listen_host = NULL, *server_host = NULL, *worker_host = NULL;
	uint64_t min_size = RPS_PERF_MIN_SIZE, max_size = RPS_PERF_MAX_SIZE, u;
	int all = 0, step = 2, local = 0, json = 0, quiet = 0, mode_set = 0;
	long port = RPS_PERF_DEFAULT_PORT, timeout = 600, v, servers = 1, procs = 1;
	int servers_given = 0, c, rc;
	char *end;

	/* ring all-reduce against push + pull: a mode with its own options */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "ring_vs_ps"))
			return rps_perf_ring_main(argc, argv);
	rps_perf_params_init(&p);
	p.nsizes = 0;
	while ((c = getopt_long(argc, argv, "m:t:s:an:D:k:w:d:c:Lp:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			rc = rps_perf_mode_parse(optarg);
			if (rc < 0) {
				fprintf(stderr, "rdmaps-perf: unknown mode '%s'\n", optarg);
				return 2;
			}
			p.mode = (enum rps_perf_mode)rc;
			mode_set = 1;
			break;
		case 't':
			transport = optarg;
			break;
		case 's':
			if (parse_size_opt("--size", optarg, &u) || add_size(&p, u))
				return 2;
			break;
		case 'a':
			all = 1;
			break;
		case OPT_SIZES: {
			char *save = NULL, *list = strdup(optarg);

			for (char *t = strtok_r(list, ",", &save); t;
			     t = strtok_r(NULL, ",", &save))
				if (parse_size_opt("--sizes", t, &u) || add_size(&p, u))
					return 2;
			free(list);
			break;
		}
		case OPT_MIN_SIZE:
			if (parse_size_opt("--min-size", optarg, &min_size))
				return 2;
			break;
		case OPT_MAX_SIZE:
			if (parse_size_opt("--max-size", optarg, &max_size))
				return 2;
			break;
		case OPT_STEP:
			if (parse_int("--step", optarg, 2, 4, &v) || v == 3)
				return 2;
			step = (int)v;
			break;
		case 'n':
			if (parse_int("--iters", optarg, 1, 1L << 40, &v))
				return 2;
			p.iters = (uint64_t)v;
			break;
		case 'D':
			p.duration_s = strtod(optarg, &end);
			if (*end || p.duration_s <= 0) {
				fprintf(stderr, "rdmaps-perf: --duration %s: seconds > 0\n",
					optarg);
				return 2;
			}
			break;
		case OPT_WARMUP:
			if (parse_int("--warmup", optarg, 0, 1L << 30, &v))
				return 2;
			p.warmup = (uint64_t)v;
			break;
		case 'k':
			if (parse_int("--keys", optarg, 1, 1 << 20, &v))
				return 2;
			p.keys = (int)v;
			break;
		case OPT_THREADS:
			if (parse_int("--threads", optarg, 1, RPS_PERF_MAX_THREADS, &v))
				return 2;
			p.threads = (int)v;
			break;
		case 'w':
			if (parse_int("--procs", optarg, 1, RPS_PERF_MAX_PROCS, &procs))
				return 2;
			break;
		case OPT_SERVERS:
			if (parse_int("--servers", optarg, 1, RPS_PERF_MAX_SERVERS, &servers))
				return 2;
			servers_given = 1;
			break;
		case 'd':
			if (parse_int("--depth", optarg, 1, 4096, &v))
				return 2;
			p.depth = (int)v;
			break;
		case 'c':
			if (strcmp(optarg, "asp") && strcmp(optarg, "bsp") &&
			    strcmp(optarg, "ssp")) {
				fprintf(stderr, "rdmaps-perf: --consistency %s: asp | bsp | ssp\n",
					optarg);
				return 2;
			}
			consistency = optarg;
			break;
		case 'L':
			local = 1;
			break;
		case OPT_TLS:
			setenv("RDMAPS_TLS", "1", 1); /* the client and every process started */
			break;
		case 'p':
			if (parse_int("--port", optarg, 1, 65534, &port))
				return 2;
			break;
		case OPT_HOST:
			listen_host = optarg;
			break;
		case OPT_SERVER_HOST:
			server_host = optarg;
			break;
		case OPT_WORKER_HOST:
			worker_host = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_int("--timeout", optarg, 0, 1L << 30, &timeout))
				return 2;
			break;
		case OPT_JSON:
			json = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	for (int i = optind; i < argc; i++) {
		rc = rps_perf_mode_parse(argv[i]);
		if (rc >= 0 && !mode_set) {
			p.mode = (enum rps_perf_mode)rc;
			mode_set = 1;
		} else if (!host && rc < 0) {
			host = argv[i];
		} else {
			fprintf(stderr, "rdmaps-perf: unexpected argument '%s' (try --help)\n",
				argv[i]);
			return 2;
		}
	}
	if (!transport || !*transport)
		transport = "tcp";
	if (strcmp(transport, "tcp") && strcmp(transport, "rdma")) {
		fprintf(stderr, "rdmaps-perf: --transport %s: tcp | rdma\n", transport);
		return 2;
	}
	if (local && host) {
		fprintf(stderr,
			"rdmaps-perf: '%s': not a mode (pull_lat, push_lat, pull_bw, push_bw, "
			"pushpull), and --local-cluster takes no HOST\n",
			host);
		return 2;
	}
	if (procs > 1 && !local) {
		fprintf(stderr, "rdmaps-perf: several worker processes (--procs) need "
				"--local-cluster; use --threads against a server side\n");
		return 2;
	}
	if (all) {
		if (min_size < RPS_PERF_MIN_SIZE)
			min_size = RPS_PERF_MIN_SIZE;
		for (uint64_t s = min_size; s <= max_size; s *= (uint64_t)step)
			if (add_size(&p, s))
				return 2;
	}
	if (!p.nsizes)
		p.sizes[p.nsizes++] = 4096;
	p.procs = (int)procs;
	if (!consistency)
		consistency = getenv("RDMAPS_CONSISTENCY");
	signal(SIGPIPE, SIG_IGN);
	/* the tables are the output: the processes' info lines are noise here */
	if (!getenv("RDMAPS_LOG_LEVEL"))
		setenv("RDMAPS_LOG_LEVEL", "warn", 1);

	res = calloc((size_t)p.nsizes, sizeof(*res));
	if (!res)
		return 1;
	struct rps_perf_report rep = {
	    .params = &p,
	    /* RDMAPS_TLS=1 covers the TCP connections only (docs/security.md) */
	    .transport = getenv("RDMAPS_TLS") && !strcmp(getenv("RDMAPS_TLS"), "1")
			     ? (!strcmp(transport, "tcp") ? "tcp+tls" : "rdma+tls(control)")
			     : transport,
	    .consistency = consistency ? consistency : "asp",
	    .servers = (int)servers,
	    .procs = (int)procs,
	};
	char where[300];

	if (local) {
		struct rps_perf_local_opts lo = {
		    .cluster =
			{
			    .transport = transport,
			    .consistency = consistency,
			    .servers = (int)servers,
			    .workers = (int)procs,
			    .quiet = quiet,
			},
		    .timeout_s = (int)timeout,
		};
		int rdma = !strcmp(transport, "rdma");

		if (!server_host)
			server_host = rdma && getenv("RDMAPS_RXE_IP0") ? getenv("RDMAPS_RXE_IP0")
								       : "127.0.0.1";
		if (!worker_host)
			worker_host = rdma && getenv("RDMAPS_RXE_IP1") ? getenv("RDMAPS_RXE_IP1")
								       : "127.0.0.1";
		lo.cluster.server_host = server_host;
		lo.worker_host = worker_host;
		/* in the SoftRoCE harness: servers on rxe0, workers on rxe1 */
		if (rdma && !getenv("RDMAPS_DEVICE")) {
			lo.cluster.server_device = getenv("RDMAPS_RXE_DEV0");
			lo.worker_device = getenv("RDMAPS_RXE_DEV1");
		}
		snprintf(where, sizeof(where), "local cluster: servers on %s, workers on %s",
			 server_host, worker_host);
		rep.where = where;
		rc = rps_perf_local_run(&lo, &p, res);
	} else {
		struct rps_perf_remote_opts ro = {
		    .transport = transport,
		    .consistency = consistency,
		    .port = (uint16_t)port,
		    .servers = servers_given || !host ? (int)servers : 0,
		    .workers = 1,
		    .timeout_s = (int)timeout,
		};

		if (!host) {
			ro.host = listen_host ? listen_host
					      : (getenv("RDMAPS_HOST") ? getenv("RDMAPS_HOST")
								       : "127.0.0.1");
			rc = rps_perf_remote_server(&ro, stdout);
			free(res);
			return rc ? 1 : 0;
		}
		ro.host = host;
		if (worker_host)
			setenv("RDMAPS_HOST", worker_host, 1);
		snprintf(where, sizeof(where), "client of %s:%ld", host, port);
		rep.where = where;
		rc = rps_perf_remote_client(&ro, &p, res);
	}
	if (rc) {
		fprintf(stderr, "rdmaps-perf: failed: %s\n", rps_strerror(rc));
		free(res);
		return 1;
	}
	if (json)
		rc = rps_perf_print_json(stdout, &rep, res, p.nsizes);
	else
		rps_perf_print_table(stdout, &rep, res, p.nsizes);
	free(res);
	return rc ? 1 : 0;
}
