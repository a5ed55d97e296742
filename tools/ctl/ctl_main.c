/* rdmaps-ctl: ask a running scheduler about its job.
 *
 *   rdmaps-ctl status                       the node table (RDMAPS_SCHEDULER)
 *   rdmaps-ctl --scheduler 10.0.0.1:9090 status
 *
 * Only the public API (<rdmaps/ctl.h>): the library's control client connects
 * as role "ctl" with the shared secret, sends STATUS and prints the text the
 * scheduler answers. Exits 1 when the scheduler cannot be reached or refuses
 * us, 2 on a usage error.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <rdmaps/ctl.h>

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

int main(int argc, char **argv)
{
	struct rps_ctl_opts o;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	rc = rps_ctl_opts_from_args(&argc, argv, stdout, &o);
	if (rc < 0)
		return 2;
	if (rc > 0)
		return 0; /* --config */
	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "status")) {
		fprintf(stderr, "rdmaps-ctl: unknown command '%s' (try status)\n", argv[1]);
		return 2;
	}
	rc = rps_ctl_status_print(&o, stdout);
	if (rc == -EDESTADDRREQ)
		return 2;
	return rc ? 1 : 0;
}
