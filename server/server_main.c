/* rdmaps-server: one server process of an rdmaps cluster.
 *
 *   rdmaps-server [--restore DIR] [--flags] [--config] [--help]
 *
 * Settings come from built-in defaults, then RDMAPS_* variables, then flags
 * (--shards 4, --consistency=bsp, ...). --config prints them and exits.
 * SIGINT / SIGTERM stop the server cleanly; SIGUSR1 writes a checkpoint of
 * every shard (RDMAPS_CHECKPOINT_DIR). --restore DIR loads the newest valid
 * checkpoints from DIR after joining (docs/operations.md). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <rdmaps/server.h>

#include "src/config.h"
#include "src/log.h"

static struct rps_server *the_server;

static void on_signal(int sig)
{
	(void)sig;
	rps_server_stop(the_server);
}

static void on_usr1(int sig)
{
	(void)sig;
	rps_server_checkpoint(the_server);
}

/* Take --restore DIR / --restore=DIR out of argv (it is not a setting). */
static int take_restore(int *argc, char **argv, const char **dir_p)
{
	int out = 1;

	for (int i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--")) {
			while (i < *argc)
				argv[out++] = argv[i++];
			break;
		}
		if (!strcmp(argv[i], "--restore")) {
			if (i + 1 >= *argc || !argv[i + 1][0]) {
				fprintf(stderr, "rdmaps-server: --restore needs a directory\n");
				return -1;
			}
			*dir_p = argv[++i];
			continue;
		}
		if (!strncmp(argv[i], "--restore=", 10)) {
			*dir_p = argv[i] + 10;
			if (!**dir_p) {
				fprintf(stderr, "rdmaps-server: --restore needs a directory\n");
				return -1;
			}
			continue;
		}
		argv[out++] = argv[i];
	}
	argv[out] = NULL;
	*argc = out;
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rdmaps-server [--restore DIR] [--flags] [--config] [--help]\n"
		"\n"
		"Serve shards of an rdmaps parameter server. Every setting is a flag\n"
		"(--shard-bytes 64M or --shard-bytes=64M) and an environment variable\n"
		"(RDMAPS_SHARD_BYTES); flags win over the environment.\n"
		"\n"
		"  --restore DIR  after joining, load the newest valid checkpoint of each shard\n"
		"             from DIR (files of the rank RDMAPS_RANK asks for, or of the one\n"
		"             rank in DIR, or of the rank the scheduler gives); refuse to start\n"
		"             without one\n"
		"  --config   print every setting, its value and where it came from, and exit\n"
		"  --help     this text\n"
		"\n"
		"SIGINT / SIGTERM stop the server cleanly (a second one ends it at once);\n"
		"SIGUSR1 writes a checkpoint of every shard (RDMAPS_CHECKPOINT_DIR).\n"
		"\n");
	rps_config_usage(out);
}

/* OpenBLAS (cblas.h does not declare it in every version) */
extern void openblas_set_num_threads(int num_threads);

int main(int argc, char **argv)
{
	struct rps_server_opts opts;
	struct rps_server *srv;
	struct rps_config cfg;
	struct sigaction sa;
	const char *restore = NULL;
	int dump = 0;
	int level;
	int rc;

	if (rps_config_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	/* One BLAS thread per caller: the update threads are pinned one per core,
	 * and OpenBLAS's own (spinning) thread pool would compete with them and
	 * with the workers on the same machine. */
	openblas_set_num_threads(1);
	if (take_restore(&argc, argv, &restore))
		return 2;
	rc = rps_config_init(&cfg);
	if (rc) {
		fprintf(stderr, "rdmaps-server: bad configuration in the environment: %s\n",
			rps_strerror(rc));
		return 2;
	}
	rc = rps_config_parse_args(&cfg, &argc, argv, &dump);
	if (rc) {
		fprintf(stderr, "rdmaps-server: bad arguments (try --help)\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--")) {
			fprintf(stderr, "rdmaps-server: unexpected argument '%s' (try --help)\n",
				argv[i]);
			return 2;
		}
	}
	snprintf(cfg.role, sizeof(cfg.role), "server");
	if (dump) {
		rps_config_dump(&cfg, stdout);
		return 0;
	}
	level = rps_log_level_parse(cfg.log_level);
	if (level >= 0)
		rps_log_set_level(level);
	rps_log_set_ident("server", -1);

	memset(&opts, 0, sizeof(opts));
	opts.field_mask = RPS_SERVER_OPT_CONFIG; /* everything from the flags and RDMAPS_* */
	opts.config = &cfg;
	rc = rps_server_create(&opts, &srv);
	if (rc) {
		fprintf(stderr, "rdmaps-server: cannot start: %s\n", rps_strerror(rc));
		return 1;
	}
	if (restore) {
		rc = rps_server_set_restore(srv, restore);
		if (rc) {
			fprintf(stderr, "rdmaps-server: --restore %s: %s\n", restore,
				rps_strerror(rc));
			rps_server_destroy(srv);
			return 1;
		}
	}
	the_server = srv;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESETHAND; /* a second signal ends a server stuck in its join */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sa.sa_flags = 0;
	sigaction(SIGPIPE, &sa, NULL);

	rc = rps_server_run(srv);

	sa.sa_handler = SIG_DFL;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	the_server = NULL;
	rps_server_destroy(srv);
	if (rc) {
		if (restore && (rc == -ENOENT || rc == -EBADMSG))
			/* not "unknown key": the restore is what failed */
			fprintf(stderr,
				"rdmaps-server: exiting: --restore %s: no valid checkpoint to "
				"restore from (every file of a shard refused, or none: the lines "
				"above say which and why); not starting with fresh parameters\n",
				restore);
		else
			fprintf(stderr, "rdmaps-server: exiting: %s\n", rps_strerror(rc));
		return 1;
	}
	return 0;
}
