/* rdmaps — server API: a process owning S shards of the parameters. */
#ifndef RDMAPS_SERVER_H
#define RDMAPS_SERVER_H

#include <rdmaps/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rps_server;

#define RPS_MAX_CORES 256

struct rps_config; /* a configuration (src/config.h); opaque here */

/* Bits of rps_server_opts.field_mask: bit N says the N-th member after
 * field_mask is set. Unset members take their defaults from the configuration
 * (opts.config, or the defaults and RDMAPS_* variables when none is given). */
#define RPS_SERVER_OPT_SCHEDULER    (1ull << 0)
#define RPS_SERVER_OPT_TRANSPORT    (1ull << 1)
#define RPS_SERVER_OPT_HOST	    (1ull << 2)
#define RPS_SERVER_OPT_PORT	    (1ull << 3)
#define RPS_SERVER_OPT_SECRET	    (1ull << 4)
#define RPS_SERVER_OPT_SHARDS	    (1ull << 5)
#define RPS_SERVER_OPT_NCORES	    (1ull << 6)
#define RPS_SERVER_OPT_CORES	    (1ull << 7)
#define RPS_SERVER_OPT_SHARD_BYTES  (1ull << 8)
#define RPS_SERVER_OPT_RING_SIZE    (1ull << 9)
#define RPS_SERVER_OPT_OPTIM	    (1ull << 10)
#define RPS_SERVER_OPT_PRIORITY	    (1ull << 11)
#define RPS_SERVER_OPT_PRIORITY_FN  (1ull << 12)
#define RPS_SERVER_OPT_PRIORITY_ARG (1ull << 13)
#define RPS_SERVER_OPT_CONSISTENCY  (1ull << 14)
#define RPS_SERVER_OPT_STALENESS    (1ull << 15)
#define RPS_SERVER_OPT_INIT	    (1ull << 16)
#define RPS_SERVER_OPT_TIMEOUT_MS   (1ull << 17)
#define RPS_SERVER_OPT_CONFIG	    (1ull << 18)
#define RPS_SERVER_OPT_ALL	    ((1ull << 19) - 1)

struct rps_server_opts {
	uint64_t field_mask;     /* RPS_SERVER_OPT_*: which members below are set */
	const char *scheduler;   /* "host:port"; NULL = the configuration's (RDMAPS_SCHEDULER) */
	const char *transport;   /* "tcp" | "rdma"; NULL or "" = the configuration's */
	const char *host;        /* address to listen on and advertise; NULL = the configuration's */
	uint16_t port;           /* 0 = any free port */
	const char *secret;      /* NULL = the configuration's */
	int shards;              /* shards of this server, one update thread each */
	int ncores;              /* cores to pin update threads to (round robin); 0 = all online */
	int cores[RPS_MAX_CORES];
	size_t shard_bytes;      /* capacity of one shard's readable store */
	size_t ring_size;        /* entries per shard priority ring */
	struct rps_optim_opts optim;
	enum rps_priority_policy priority;
	rps_priority_fn priority_fn; /* RPS_PRIO_CALLBACK */
	void *priority_arg;
	enum rps_consistency consistency;
	uint32_t staleness;      /* SSP bound */
	struct rps_init init;    /* initialiser of keys declared without one */
	int timeout_ms;
	/* Where every other option comes from (copied at create: it need not
	 * outlive the call). NULL = defaults and RDMAPS_* variables. */
	const struct rps_config *config;
};

/* Every member from the defaults and RDMAPS_* variables, field_mask =
 * RPS_SERVER_OPT_ALL; the strings and config are NULL (the configuration's,
 * at create). */
RPS_API void rps_server_opts_init(struct rps_server_opts *opts);
/* Allocate and register the shards, start update threads, listen. opts NULL:
 * everything from the defaults and RDMAPS_* variables. */
RPS_API int rps_server_create(const struct rps_server_opts *opts, struct rps_server **server_p);
/* Register with the scheduler and serve until rps_server_stop() or a shutdown
 * from the scheduler. Returns 0 on a clean stop. */
RPS_API int rps_server_run(struct rps_server *server);
/* Ask a running server to stop (async-signal-safe). */
RPS_API void rps_server_stop(struct rps_server *server);
/* Before rps_server_run: load the newest valid checkpoint of each shard from
 * dir once joined (docs/operations.md); run() fails if there is none. */
RPS_API int rps_server_set_restore(struct rps_server *server, const char *dir);
/* Ask for a checkpoint of every shard now (RDMAPS_CHECKPOINT_DIR);
 * async-signal-safe. */
RPS_API void rps_server_checkpoint(struct rps_server *server);
RPS_API void rps_server_destroy(struct rps_server *server);

#ifdef __cplusplus
}
#endif
#endif
