/* rdmaps — server API: a process owning S shards of the parameters. */
#ifndef RDMAPS_SERVER_H
#define RDMAPS_SERVER_H

#include <rdmaps/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rps_server;

#define RPS_MAX_CORES 256

struct rps_server_opts {
	const char *scheduler;   /* "host:port"; NULL = RDMAPS_SCHEDULER */
	const char *transport;   /* "tcp" | "rdma" */
	const char *host;        /* address to listen on and advertise */
	uint16_t port;           /* 0 = any free port */
	const char *secret;
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
};

/* Fill opts from the environment (RDMAPS_*) and built-in defaults. */
RPS_API void rps_server_opts_init(struct rps_server_opts *opts);
/* Allocate and register the shards, start update threads, listen. */
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
