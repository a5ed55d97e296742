/* rdmaps-sched: the scheduler of an rdmaps job (rendezvous, barriers,
 * heartbeats, dead nodes, end of job). See docs/scheduler.md.
 *
 *   RDMAPS_SCHEDULER=10.0.0.1:9090 RDMAPS_NUM_SERVERS=2 RDMAPS_NUM_WORKERS=4 rdmaps-sched
 *   rdmaps-sched --scheduler 0.0.0.0:9090 --num-servers 2 --num-workers 4
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "server/sched.h"
#include "src/config.h"
#include "src/log.h"

#include <rdmaps/status.h>

static struct rps_sched *volatile the_sched;

static void on_signal(int sig)
{
	(void)sig;
	if (the_sched)
		rps_sched_stop(the_sched);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: rdmaps-sched [--config] [--help] [--FLAG VALUE ...]\n"
		     "The scheduler of an rdmaps job: servers and workers register with it, get\n"
		     "the cluster map, meet in barriers and send heartbeats; it declares silent\n"
		     "nodes dead and ends the job when every worker left.\n\n"
		     "It listens on the address of --scheduler / RDMAPS_SCHEDULER (host:port;\n"
		     "0.0.0.0:PORT for every interface) and waits for --num-servers servers and\n"
		     "--num-workers workers. A node silent for --heartbeat-timeout-ms is dead.\n"
		     "SIGINT / SIGTERM: tell every node to shut down, then exit.\n"
		     "`rdmaps-ctl status` shows the nodes.\n\n"
		     "  --config   print every setting (value, source, help) and exit\n"
		     "  --help     this text\n\n"
		     "Settings (also RDMAPS_<NAME> variables):\n");
	rps_config_usage(out);
}

int main(int argc, char **argv)
{
	struct rps_sched_opts o;
	struct rps_sched *sched;
	struct rps_config cfg;
	struct sigaction sa;
	int dump = 0, rc;

	if (rps_config_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	rps_log_set_ident("sched", -1);
	if (rps_config_init(&cfg) || rps_config_parse_args(&cfg, &argc, argv, &dump))
		return 2;
	if (argc > 1) {
		fprintf(stderr, "rdmaps-sched: unexpected argument '%s' (--help lists the flags)\n",
			argv[1]);
		return 2;
	}
	if (dump) {
		rps_config_dump(&cfg, stdout);
		return 0;
	}
	if (rps_log_level_parse(cfg.log_level) >= 0)
		rps_log_set_level(rps_log_level_parse(cfg.log_level));
	if (cfg.role[0] && strcmp(cfg.role, "scheduler") != 0)
		RPS_WARN("RDMAPS_ROLE is '%s'; rdmaps-sched runs as the scheduler anyway",
			 cfg.role);
	if (cfg.heartbeat_timeout_ms <= cfg.heartbeat_ms)
		RPS_WARN("heartbeat timeout %d ms <= heartbeat interval %d ms: every node will be "
			 "declared dead",
			 cfg.heartbeat_timeout_ms, cfg.heartbeat_ms);

	rps_sched_opts_init(&o, &cfg);
	if (!o.port) {
		RPS_ERR("no scheduler port: set RDMAPS_SCHEDULER=host:port or --scheduler");
		return 2;
	}
	rc = rps_sched_create(&o, &sched);
	if (rc)
		return 1;
	the_sched = sched;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = rps_sched_run(sched);
	the_sched = NULL;
	rps_sched_destroy(sched);
	if (rc == -ECANCELED)
		return 1; /* the job ended without running: said why above */
	if (rc) {
		RPS_ERR("scheduler failed: %s", rps_strerror(rc));
		return 1;
	}
	return 0;
}
