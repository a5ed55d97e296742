/* The scheduler (rdmaps-sched): rendezvous, ranks, barriers, heartbeats,
 * dead-node detection and the end of a job. See docs/scheduler.md.
 *
 * Single-threaded: rps_sched_run() polls one TCP transport instance and does
 * everything from there. Tests run it in a thread of their own:
 *
 *	rps_sched_opts_init(&o, NULL);
 *	o.host = "127.0.0.1"; o.port = 0; o.num_servers = 2; o.num_workers = 2;
 *	rps_sched_create(&o, &s);      (listens; rps_sched_port(s) is the port)
 *	thread: rps_sched_run(s);      (returns at the end of the job or on stop)
 *	rps_sched_stop(s); join; rps_sched_destroy(s);
 */
#ifndef RPS_SCHED_H
#define RPS_SCHED_H

#include <stddef.h>
#include <stdint.h>

struct rps_config;
struct rps_sched;

struct rps_sched_opts {
	const char *host;   /* address to listen on; NULL or "" = all (0.0.0.0) */
	uint16_t port;	    /* 0 = any free port (see rps_sched_port) */
	const char *secret; /* checked in every hello */
	int num_servers;
	int num_workers;
	int heartbeat_timeout_ms;     /* silent this long = dead */
	int shutdown_grace_ms;	      /* end of job: how long to wait for servers to leave */
	int metrics_port;	      /* > 0: /metrics over HTTP on host:metrics_port */
	const struct rps_config *cfg; /* copied at create; NULL = defaults and RDMAPS_* */
	char host_buf[256];	      /* rps_sched_opts_init: storage for host */
	char secret_buf[256];	      /* rps_sched_opts_init: storage for secret */
};

/* From cfg (NULL = defaults and RDMAPS_* variables, rps_config_init): host
 * and port of cfg->scheduler (the address nodes connect to; "0.0.0.0:PORT"
 * listens on every interface), secret, counts, heartbeat timeout; o->cfg = cfg.
 * host and secret point into *o. */
void rps_sched_opts_init(struct rps_sched_opts *o, const struct rps_config *cfg);
/* Create the transport and listen. -EADDRINUSE etc. from the transport,
 * -EINVAL for bad counts. */
int rps_sched_create(const struct rps_sched_opts *o, struct rps_sched **sched_p);
/* The port it listens on (the real one when opts.port was 0). */
uint16_t rps_sched_port(const struct rps_sched *s);
/* Serve until the job ends (every worker left or died, servers told to shut
 * down) or rps_sched_stop(). Returns 0 in both cases, -errno if the transport
 * failed. */
int rps_sched_run(struct rps_sched *s);
/* Ask rps_sched_run() to send SHUTDOWN to every node and return.
 * Async-signal-safe (sets a flag; run() notices within ~50 ms). */
void rps_sched_stop(struct rps_sched *s);
/* Close every connection and free. Not while run() is running. */
void rps_sched_destroy(struct rps_sched *s);

/* Write the STATUS table (what `rdmaps-ctl status` prints) into buf;
 * returns the length (truncated to len - 1). Only from the run() thread or
 * when run() is not running. */
size_t rps_sched_status_text(struct rps_sched *s, char *buf, size_t len);

#endif
