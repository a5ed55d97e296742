/* rdmaps-ctl: ask a running scheduler about its job.
 *
 *   rdmaps-ctl status                       the node table (RDMAPS_SCHEDULER)
 *   rdmaps-ctl --scheduler 10.0.0.1:9090 status
 *
 * Connects as role "ctl" over the TCP transport with the shared secret,
 * sends STATUS and prints the text the scheduler answers. Exits 1 when the
 * scheduler cannot be reached or refuses us, 2 on a usage error.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "src/config.h"
#include "src/log.h"
#include "src/proto.h"
#include "src/util.h"
#include "transport/transport.h"

#include <rdmaps/status.h>

#define CTL_MAX_MSG (4u << 20) /* the status table of RPS_MAX_NODES nodes fits */

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: rdmaps-ctl [--scheduler HOST:PORT] [--secret S] [--timeout-ms N] COMMAND\n"
	    "Ask the scheduler of a running rdmaps job.\n\n"
	    "Commands:\n"
	    "  status    nodes, roles, ranks, host:port, liveness, heartbeat age, clock,\n"
	    "            pushes/s, pulls/s, counters; per server: each shard's ring depth\n"
	    "            and clock, checkpoint age\n\n"
	    "The scheduler address and secret come from RDMAPS_SCHEDULER and RDMAPS_SECRET\n"
	    "or the flags; every rdmaps setting is accepted (--help of rdmaps-sched lists\n"
	    "them). --config prints the settings.\n");
}

static int status(const struct rps_config *cfg)
{
	struct rps_transport *tr;
	struct rps_tr_params tp;
	struct rps_conn *conn = NULL;
	struct rps_frame_hdr h;
	struct rps_hello hello;
	char host[RPS_STR_MAX], ack[64];
	size_t ack_len = 0;
	uint16_t port;
	uint64_t deadline;
	int rc, done = 0;

	if (rps_config_parse_hostport(cfg->scheduler, host, sizeof(host), &port)) {
		fprintf(stderr, "rdmaps-ctl: scheduler address '%s': expected host:port\n",
			cfg->scheduler);
		return 2;
	}
	rps_tr_params_from_config(cfg, &tp);
	tp.max_msg = CTL_MAX_MSG;
	rc = rps_transport_create("tcp", &tp, &tr);
	if (rc) {
		fprintf(stderr, "rdmaps-ctl: tcp transport: %s\n", rps_strerror(rc));
		return 1;
	}
	rps_proto_hello_init(&hello, RPS_ROLE_CTL, UINT32_MAX, cfg->secret);
	rc = rps_tr_connect(tr, host, port, &hello, ack, sizeof(ack), &ack_len, cfg->timeout_ms,
			      &conn);
	if (rc) {
		if (rc == -EACCES)
			fprintf(stderr,
				"rdmaps-ctl: scheduler %s refused us: wrong secret "
				"(RDMAPS_SECRET / --secret)\n",
				cfg->scheduler);
		else
			fprintf(stderr, "rdmaps-ctl: cannot reach the scheduler at %s: %s\n",
				cfg->scheduler, rps_strerror(rc));
		rc = 1;
		goto out_transport;
	}
	rps_proto_hdr_init(&h, RPS_OP_STATUS, 0, 1);
	rc = rps_tr_post_send(conn, &h, NULL, 0, 0);
	if (rc) {
		fprintf(stderr, "rdmaps-ctl: sending to the scheduler at %s: %s\n", cfg->scheduler,
			rps_strerror(rc));
		rc = 1;
		goto out_conn;
	}
	rc = 1;
	deadline = rps_now_ns() + (uint64_t)cfg->timeout_ms * 1000000ull;
	while (!done) {
		struct rps_tr_event ev[8];
		uint64_t now = rps_now_ns();
		int n;

		if (now >= deadline) {
			fprintf(stderr, "rdmaps-ctl: no answer from the scheduler at %s in %d ms\n",
				cfg->scheduler, cfg->timeout_ms);
			break;
		}
		n = rps_tr_poll(tr, ev, 8, (int)((deadline - now) / 1000000ull) + 1);
		if (n < 0 && n != -EINTR && n != -EAGAIN) {
			fprintf(stderr, "rdmaps-ctl: poll: %s\n", rps_strerror(n));
			break;
		}
		for (int i = 0; i < n; i++) {
			if (ev[i].type == RPS_TR_EV_CLOSED && !done) {
				fprintf(
				    stderr,
				    "rdmaps-ctl: the scheduler at %s closed the connection (%s)\n",
				    cfg->scheduler,
				    ev[i].status ? rps_strerror(ev[i].status) : "end of stream");
				done = 1;
			} else if (ev[i].type == RPS_TR_EV_RECV) {
				if (!done && ev[i].hdr.op == RPS_OP_STATUS &&
				    ev[i].hdr.req_id == 1) {
					if (ev[i].hdr.status) {
						fprintf(stderr, "rdmaps-ctl: status: %s\n",
							rps_strerror(ev[i].hdr.status));
					} else {
						if (ev[i].data_len)
							fwrite(ev[i].data, 1, ev[i].data_len,
							       stdout);
						rc = 0;
					}
					done = 1;
				} else if (!done && ev[i].hdr.op == RPS_OP_ERROR) {
					fprintf(stderr, "rdmaps-ctl: scheduler error: %.*s (%s)\n",
						(int)ev[i].data_len, (const char *)ev[i].data,
						rps_strerror(ev[i].hdr.status));
					done = 1;
				}
				if (ev[i].token)
					rps_tr_release(tr, ev[i].token);
			}
		}
	}
	fflush(stdout);
out_conn:
	rps_tr_close(conn);
out_transport:
	rps_transport_destroy(tr);
	return rc;
}

int main(int argc, char **argv)
{
	struct rps_config cfg;
	int dump = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		}
	}
	rps_log_set_ident("ctl", -1);
	signal(SIGPIPE, SIG_IGN);
	if (rps_config_init(&cfg) || rps_config_parse_args(&cfg, &argc, argv, &dump))
		return 2;
	if (dump) {
		rps_config_dump(&cfg, stdout);
		return 0;
	}
	rps_config_set_global(&cfg);
	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "status"))
		return status(&cfg);
	fprintf(stderr, "rdmaps-ctl: unknown command '%s' (try status)\n", argv[1]);
	return 2;
}
