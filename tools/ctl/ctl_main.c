/* rdmaps-ctl: ask a running scheduler about its job.
 *
 *   rdmaps-ctl status                       the node table (RDMAPS_SCHEDULER)
 *   rdmaps-ctl --scheduler 10.0.0.1:9090 status
 *   rdmaps-ctl checkpoint                   every shard writes a checkpoint now
 *   rdmaps-ctl export model.npz             every key's parameters into an .npz
 *   rdmaps-ctl token worker 3               the token of worker 3 (RDMAPS_TOKEN)
 *
 * Only the public API (<rdmaps/ctl.h>): the library's control client connects
 * as role "ctl" with the shared secret, sends its request and prints what the
 * scheduler answers. Exits 1 when the scheduler cannot be reached, refuses
 * us or the request fails, 2 on a usage error.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/ctl.h>

#include "common/job_token.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: rdmaps-ctl [--scheduler HOST:PORT] [--secret S] [--timeout-ms N] COMMAND\n"
	    "Ask the scheduler of a running rdmaps job.\n\n"
	    "Commands:\n"
	    "  status       nodes, roles, ranks, host:port, liveness, heartbeat age, clock,\n"
	    "               pushes/s, pulls/s, counters; per server: each shard's ring depth\n"
	    "               and clock, checkpoint age\n"
	    "  checkpoint   every shard of every live server writes a checkpoint now (into\n"
	    "               the servers' RDMAPS_CHECKPOINT_DIR); prints one line per file:\n"
	    "               server R shard S clock C PATH\n"
	    "  export FILE  every key's parameters at one clock boundary into the NumPy\n"
	    "               .npz FILE: one 1-D float32 array per key, named by the key in\n"
	    "               decimal. BSP: all shards at the same clock (the largest among\n"
	    "               them; shards below it wait until they get there); ASP/SSP: each\n"
	    "               shard as it is when it takes the request. Written atomically,\n"
	    "               only when complete.\n"
	    "  token ROLE RANK\n"
	    "               print the token (RDMAPS_TOKEN) of server or worker RANK under\n"
	    "               RDMAPS_SECRET: give it to that process in place of the secret\n"
	    "               (docs/security.md \"Tokens\"); no scheduler is asked\n"
	    "Both wait up to --timeout-ms for the servers and exit 1, saying what failed,\n"
	    "when a server has no checkpoint directory, dies or does not answer in time.\n\n"
	    "The scheduler address and secret come from RDMAPS_SCHEDULER and RDMAPS_SECRET\n"
	    "or the flags; every rdmaps setting is accepted (--help of rdmaps-sched lists\n"
	    "them). --config prints the settings.\n");
}

/* rdmaps-ctl token ROLE RANK (issue 20): for Slurm / MPI recipes. */
static int token_cmd(int argc, char **argv)
{
	const char *secret = getenv("RDMAPS_SECRET");
	char tok[256], *end;
	unsigned long rank;
	int role;

	if (argc != 4) {
		fprintf(stderr, "rdmaps-ctl: usage: rdmaps-ctl token server|worker RANK\n");
		return 2;
	}
	role = !strcmp(argv[2], "server") ? 1 : !strcmp(argv[2], "worker") ? 2 : 0;
	rank = strtoul(argv[3], &end, 10);
	if (!role || end == argv[3] || *end || argv[3][0] == '-' || rank > 1023) {
		fprintf(stderr, "rdmaps-ctl: token: ROLE is server or worker and RANK a number "
				"0..1023, not '%s %s'\n",
			argv[2], argv[3]);
		return 2;
	}
	if (!secret || !secret[0]) {
		fprintf(stderr, "rdmaps-ctl: token: RDMAPS_SECRET is not set: a token is made "
				"from the job's secret\n");
		return 2;
	}
	if (rps_tool_token(secret, role, (unsigned)rank, tok, sizeof(tok))) {
		fprintf(stderr, "rdmaps-ctl: token: cannot make it (secret too long?)\n");
		return 1;
	}
	printf("%s\n", tok);
	memset(tok, 0, sizeof(tok));
	return 0;
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
	if (argc >= 2 && !strcmp(argv[1], "token"))
		return token_cmd(argc, argv);
	rc = rps_ctl_opts_from_args(&argc, argv, stdout, &o);
	if (rc < 0)
		return 2;
	if (rc > 0)
		return 0; /* --config */
	if (argc == 3 && !strcmp(argv[1], "export")) {
		rc = rps_ctl_export(&o, argv[2], stdout);
	} else if (argc == 2 && !strcmp(argv[1], "status")) {
		rc = rps_ctl_status_print(&o, stdout);
	} else if (argc == 2 && !strcmp(argv[1], "checkpoint")) {
		rc = rps_ctl_checkpoint(&o, stdout);
	} else if (argc >= 2 && strcmp(argv[1], "status") && strcmp(argv[1], "checkpoint") &&
		   strcmp(argv[1], "export")) {
		fprintf(stderr,
			"rdmaps-ctl: unknown command '%s' (try status, checkpoint, export FILE)\n",
			argv[1]);
		return 2;
	} else {
		usage(stderr);
		return 2;
	}
	if (rc == -EDESTADDRREQ)
		return 2;
	return rc ? 1 : 0;
}
