/* rdmaps-launch: start a whole local cluster (scheduler, S servers, W workers)
 * on this machine, prefix and collect their output, forward Ctrl-C, stop
 * everything at the end and exit non-zero when any process failed.
 *
 *   rdmaps-launch --servers 2 --workers 4 [--transport tcp|rdma] -- PROGRAM ARGS
 *
 * Each process asks the scheduler for the rank of its place (RDMAPS_RANK), so
 * "worker0" is worker rank 0. Worker 0's output goes straight to the terminal
 * (so its progress bar works);
 * everything else is prefixed "[sched]", "[server1]", "[worker3]".
 *
 * The job's secret: RDMAPS_SECRET when set, else a random one made here
 * (getrandom, 32 bytes as 64 hex digits), passed to every process through
 * the environment, never on a command line (docs/security.md).
 * The scheduler gets the secret; each server and worker only its own token
 * (RDMAPS_TOKEN, tools/common/job_token.c: proves its role and rank, nothing
 * else) unless --shared-secret gives every process the secret (the "all
 * trusted" mode). docs/security.md "Tokens".
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/job_secret.h"
#include "common/job_token.h"

#define MAX_PROCS 256

#define LINE_MAX_LEN 4096

struct proc {
	char name[32];
	pid_t pid;
	int fd;             /* read end of its stdout+stderr pipe, -1 if attached / closed */
	int is_worker;
	int is_server;
	int rank;           /* RDMAPS_RANK it was given */
	int replaced;       /* died and was started again (--restart-*) */
	int restart;        /* this one is such a restart */
	double died_at;     /* when it was seen dead */
	int exited;
	int status;         /* wait status */
	char line[LINE_MAX_LEN];
	size_t line_len;
};

static struct proc procs[MAX_PROCS];
static int nprocs;

/* --restart-servers / --restart-workers: start a process that died while the
 * workers still run again (servers with --restore $RDMAPS_CHECKPOINT_DIR),
 * without RDMAPS_FAULT, at most RESTARTS_MAX times per place. */
#define RESTARTS_MAX 5
#define RESTART_DELAY_S 0.5 /* let the scheduler declare the old one dead */
static int restart_servers, restart_workers;
static char *const *worker_argv;
static int shared_secret; /* --shared-secret: every process gets RDMAPS_SECRET */
static char server_bin_path[PATH_MAX + 32];
static const char *server_host_g = "127.0.0.1", *worker_host_g = "127.0.0.1";
static int restarts[2][MAX_PROCS];
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rdmaps-launch [options] -- PROGRAM [ARGS...]\n"
		"Start rdmaps-sched, S rdmaps-server and W copies of PROGRAM (the workers)\n"
		"on this machine; stop everything when the workers are done.\n\n"
		"  -s, --servers N        servers (default 1)\n"
		"  -w, --workers N        workers (default 1)\n"
		"  -t, --transport NAME   tcp | rdma (default: RDMAPS_TRANSPORT or tcp)\n"
		"      --server-host ADDR address servers listen on (default 127.0.0.1;\n"
		"                         RDMA in the SoftRoCE guest: 10.9.0.1)\n"
		"      --worker-host ADDR address workers use (default 127.0.0.1; guest: 10.9.0.2)\n"
		"      --port N           scheduler port (default: a free one is picked)\n"
		"      --server-port-base N  server i listens on port N + i (default: any free port)\n"
		"      --timeout SECS     stop everything and fail after SECS (default 0 = none)\n"
		"      --quiet-servers    do not show server and scheduler output\n"
		"      --expect-killed N  N processes die of SIGKILL on purpose (RDMAPS_FAULT\n"
		"                         kill_at_clock): not failures; another count is one\n"
		"      --restart-servers  a server killed by a signal while workers run is started again\n"
		"                         with --restore $RDMAPS_CHECKPOINT_DIR (same rank)\n"
		"      --restart-workers  a worker killed by a signal is started again; it rejoins in its\n"
		"                         rank at the job's current clock\n"
		"                         (restarted processes run without RDMAPS_FAULT)\n"
		"      --consistency M    bsp | ssp | asp: the servers' consistency model\n"
		"                         (sets RDMAPS_CONSISTENCY; default: the environment's, else asp)\n"
		"      --staleness N      SSP bound in clocks (sets RDMAPS_STALENESS)\n"
		"      --shared-secret    give every process the job secret (all trusted), not\n"
		"                         each server and worker only its own RDMAPS_TOKEN\n"
		"  -h, --help\n\n"
		"Every RDMAPS_* variable of the environment is passed on; the launcher sets\n"
		"RDMAPS_SCHEDULER, RDMAPS_NUM_SERVERS, RDMAPS_NUM_WORKERS, RDMAPS_TRANSPORT,\n"
		"RDMAPS_HOST, RDMAPS_ROLE and RDMAPS_RANK for each process, and\n"
		"RDMAPS_SECRET to a random job secret when it is not set. The scheduler gets\n"
		"the secret; each server and worker gets RDMAPS_TOKEN, a token for its own\n"
		"role and rank, and no secret (unless --shared-secret).\n");
}

/* Directory of this executable: rdmaps-sched and rdmaps-server live beside it. */
static void self_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);

	if (n <= 0) {
		snprintf(dir, len, ".");
		return;
	}
	dir[n] = '\0';
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
}

/* In the child: a server or worker gets its token in place of the job secret
 * (docs/security.md "Tokens"); the scheduler the secret and no token. */
static int put_token(const char *role, int rank)
{
	const char *secret = getenv("RDMAPS_SECRET");
	int r = !strcmp(role, "server") ? 1 : !strcmp(role, "worker") ? 2 : 0;
	char tok[256];

	unsetenv("RDMAPS_TOKEN");
	if (shared_secret || !r || rank < 0 || !secret || !secret[0])
		return 0;
	if (rps_tool_token(secret, r, (unsigned)rank, tok, sizeof(tok))) {
		fprintf(stderr, "rdmaps-launch: cannot make the token of %s %d\n", role, rank);
		return -1;
	}
	setenv("RDMAPS_TOKEN", tok, 1);
	unsetenv("RDMAPS_SECRET");
	memset(tok, 0, sizeof(tok));
	return 0;
}

static int spawn(const char *name, int is_worker, int attach, char *const argv[],
		 const char *role, const char *host, int rank, int restarted)
{
	int pfd[2] = { -1, -1 };
	struct proc *p;

	if (nprocs >= MAX_PROCS) {
		fprintf(stderr, "rdmaps-launch: too many processes\n");
		return -1;
	}
	if (!attach && pipe2(pfd, O_CLOEXEC) != 0) {
		perror("rdmaps-launch: pipe");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("rdmaps-launch: fork");
		return -1;
	}
	if (pid == 0) {
		setenv("RDMAPS_ROLE", role, 1);
		setenv("RDMAPS_HOST", host, 1);
		if (rank >= 0) {
			char r[16];

			snprintf(r, sizeof(r), "%d", rank);
			setenv("RDMAPS_RANK", r, 1);
		} else {
			unsetenv("RDMAPS_RANK");
		}
		if (restarted)
			unsetenv("RDMAPS_FAULT"); /* or it would kill itself again */
		if (put_token(role, rank))
			_exit(126);
		if (!attach) {
			dup2(pfd[1], STDOUT_FILENO);
			dup2(pfd[1], STDERR_FILENO);
		}
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		execvp(argv[0], argv);
		fprintf(stderr, "rdmaps-launch: cannot start %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	p = &procs[nprocs++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->pid = pid;
	p->is_worker = is_worker;
	p->is_server = !strcmp(role, "server");
	p->rank = rank;
	p->restart = restarted;
	p->fd = -1;
	if (!attach) {
		close(pfd[1]);
		p->fd = pfd[0];
		fcntl(p->fd, F_SETFL, O_NONBLOCK);
	}
	return 0;
}

static void emit_line(struct proc *p, int quiet)
{
	if (!quiet) {
		printf("[%s] %.*s\n", p->name, (int)p->line_len, p->line);
		fflush(stdout);
	}
	p->line_len = 0;
}

/* Read what a child wrote; print complete lines with its prefix. */
static void drain(struct proc *p, int quiet)
{
	char buf[4096];

	for (;;) {
		ssize_t n = read(p->fd, buf, sizeof(buf));
		if (n <= 0) {
			if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				if (p->line_len)
					emit_line(p, quiet);
				close(p->fd);
				p->fd = -1;
			}
			return;
		}
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n' || p->line_len == sizeof(p->line)) {
				emit_line(p, quiet);
				if (buf[i] == '\n')
					continue;
			}
			if (buf[i] != '\r')
				p->line[p->line_len++] = buf[i];
		}
	}
}

static void signal_all(int sig)
{
	for (int i = 0; i < nprocs; i++)
		if (!procs[i].exited)
			kill(procs[i].pid, sig);
}

static void reap(void)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (int i = 0; i < nprocs; i++) {
			if (procs[i].pid == pid) {
				procs[i].exited = 1;
				procs[i].status = st;
			}
		}
	}
}

/* --expect-killed N: that many processes are meant to die of SIGKILL (fault
 * injection, kill_at_clock); they are not failures, a different count is. */
static int expect_killed = -1;

static int killed(const struct proc *p)
{
	return p->exited && WIFSIGNALED(p->status) && WTERMSIG(p->status) == SIGKILL;
}

static int failed(const struct proc *p)
{
	if (p->replaced)
		return 0; /* it was started again; its replacement's status counts */
	if (expect_killed > 0 && killed(p))
		return 0;
	return !WIFEXITED(p->status) || WEXITSTATUS(p->status) != 0;
}

static void describe(const struct proc *p)
{
	if (WIFEXITED(p->status))
		fprintf(stderr, "rdmaps-launch: %s exited with status %d\n", p->name,
			WEXITSTATUS(p->status));
	else if (WIFSIGNALED(p->status))
		fprintf(stderr, "rdmaps-launch: %s killed by signal %d (%s)\n", p->name,
			WTERMSIG(p->status), strsignal(WTERMSIG(p->status)));
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Pump output and reap until cond() holds or the deadline passes. */
static int pump(int (*cond)(void), double deadline, int quiet_servers)
{
	struct pollfd pfds[MAX_PROCS];
	int map[MAX_PROCS];

	while (!cond()) {
		int n = 0;

		if (got_signal)
			return -EINTR;
		if (deadline > 0 && now_s() > deadline)
			return -ETIMEDOUT;
		for (int i = 0; i < nprocs; i++) {
			if (procs[i].fd >= 0) {
				pfds[n].fd = procs[i].fd;
				pfds[n].events = POLLIN;
				map[n++] = i;
			}
		}
		int rc = poll(pfds, n, 100);
		if (rc < 0 && errno != EINTR)
			return -errno;
		for (int j = 0; j < n && rc > 0; j++)
			if (pfds[j].revents)
				drain(&procs[map[j]], quiet_servers && !procs[map[j]].is_worker);
		reap();
	}
	return 0;
}

static int workers_done(void)
{
	for (int i = 0; i < nprocs; i++)
		if (procs[i].is_worker && !procs[i].exited)
			return 0;
	return 1;
}

/* Every worker but p has exited cleanly: nothing left to restart for. */
static int workers_done_but(const struct proc *p)
{
	int others = 0;

	for (int i = 0; i < nprocs; i++) {
		if (!procs[i].is_worker || &procs[i] == p || procs[i].replaced)
			continue;
		others++;
		if (!procs[i].exited || failed(&procs[i]))
			return 0;
	}
	return others > 0;
}

/* The scheduler has exited (the job is over for everybody). */
static int sched_done(void)
{
	for (int i = 0; i < nprocs; i++)
		if (!strcmp(procs[i].name, "sched") && !procs[i].exited)
			return 0;
	return 1;
}

static int all_done(void)
{
	for (int i = 0; i < nprocs; i++)
		if (!procs[i].exited || procs[i].fd >= 0)
			return 0;
	return 1;
}

static double now_s(void);
static void describe(const struct proc *p);
static int replicated(void);

/* --restart-*: start dead servers / workers again. 1 if p is (or will be)
 * replaced, 0 if it stays dead. */
static int maybe_restart(struct proc *p)
{
	int kind = p->is_server ? 0 : 1;
	char name[sizeof(p->name)];

	if (p->replaced)
		return 1;
	if (!WIFSIGNALED(p->status))
		return 0; /* it gave up by itself (exit status): that is not a crash */
	if (!(p->is_server ? restart_servers : p->is_worker ? restart_workers : 0) || p->rank < 0 ||
	    p->rank >= MAX_PROCS || restarts[kind][p->rank] >= RESTARTS_MAX || workers_done_but(p))
		return 0;
	if (!p->died_at) {
		p->died_at = now_s();
		describe(p);
		fprintf(stderr, "rdmaps-launch: %s will be started again in %.1f s\n", p->name,
			RESTART_DELAY_S);
	}
	if (now_s() < p->died_at + RESTART_DELAY_S)
		return 1;
	p->replaced = 1;
	restarts[kind][p->rank]++;
	memcpy(name, p->name, sizeof(name));
	if (p->is_server && replicated()) {
		/* its backup serves its shards: the new one joins as a backup
		 * (docs/replication.md) */
		char *sargv[] = { server_bin_path, NULL };

		fprintf(stderr, "rdmaps-launch: starting %s again: it joins as the backup of the "
				"servers that have none (RDMAPS_REPLICAS > 1)\n",
			name);
		spawn(name, 0, 0, sargv, "server", server_host_g, p->rank, 1);
	} else if (p->is_server) {
		const char *dir = getenv("RDMAPS_CHECKPOINT_DIR");
		char *sargv[] = { server_bin_path, "--restore", (char *)(dir ? dir : ""), NULL };

		fprintf(stderr, "rdmaps-launch: starting %s again: rdmaps-server --restore %s\n",
			name, dir ? dir : "(RDMAPS_CHECKPOINT_DIR not set)");
		spawn(name, 0, 0, sargv, "server", server_host_g, p->rank, 1);
	} else {
		fprintf(stderr, "rdmaps-launch: starting %s again (it rejoins as rank %d)\n", name,
			p->rank);
		spawn(name, 1, 0, worker_argv, "worker", worker_host_g, p->rank, 1);
	}
	return 1;
}

/* RDMAPS_REPLICAS > 1: a dead server's backup takes over its shards. */
static int replicated(void)
{
	const char *r = getenv("RDMAPS_REPLICAS");

	return r && atoi(r) > 1;
}

/* A server or the scheduler died while workers still run: the job is lost
 * (unless --restart-servers starts it again, or a backup takes over). */
static int infra_failed_or_workers_done(void)
{
	for (int i = 0; i < nprocs; i++) {
		struct proc *p = &procs[i];

		if (!p->exited || p->replaced ||
		    (WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0))
			continue;
		if ((p->is_server || p->is_worker) && maybe_restart(p))
			continue;
		if (p->is_server && replicated())
			continue; /* its backup takes over (docs/replication.md) */
		if (!p->is_worker)
			return 1; /* a server or the scheduler is gone for good */
	}
	return workers_done();
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "workers", required_argument, NULL, 'w' },
		{ "transport", required_argument, NULL, 't' },
		{ "server-host", required_argument, NULL, 'S' },
		{ "worker-host", required_argument, NULL, 'W' },
		{ "port", required_argument, NULL, 'p' },
		{ "server-port-base", required_argument, NULL, 'B' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "quiet-servers", no_argument, NULL, 'q' },
		{ "expect-killed", required_argument, NULL, 'K' },
		{ "restart-servers", no_argument, NULL, 'R' },
		{ "restart-workers", no_argument, NULL, 'r' },
		{ "consistency", required_argument, NULL, 'C' },
		{ "staleness", required_argument, NULL, 'L' },
		{ "shared-secret", no_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *consistency = NULL, *staleness = NULL;
	int servers = 1, workers = 1, port = 0, quiet = 0, port_base = 0;
	double timeout = 0;
	const char *transport = getenv("RDMAPS_TRANSPORT");
	const char *server_host = "127.0.0.1", *worker_host = "127.0.0.1";
	char dir[PATH_MAX], sched_bin[PATH_MAX + 32], server_bin[PATH_MAX + 32], buf[64];
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "+s:w:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's': servers = atoi(optarg); break;
		case 'w': workers = atoi(optarg); break;
		case 't': transport = optarg; break;
		case 'S': server_host = optarg; break;
		case 'W': worker_host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'B': port_base = atoi(optarg); break;
		case 'T': timeout = atof(optarg); break;
		case 'q': quiet = 1; break;
		case 'K': expect_killed = atoi(optarg); break;
		case 'R': restart_servers = 1; break;
		case 'r': restart_workers = 1; break;
		case 'C': consistency = optarg; break;
		case 'L': staleness = optarg; break;
		case 'X': shared_secret = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "rdmaps-launch: no worker program given (after --)\n");
		usage(stderr);
		return 2;
	}
	if (servers < 1 || workers < 1 || servers + workers + 1 > MAX_PROCS) {
		fprintf(stderr, "rdmaps-launch: need 1 <= servers, 1 <= workers, servers + workers < %d\n",
			MAX_PROCS);
		return 2;
	}
	if (!transport || !*transport)
		transport = "tcp";
	if (strcmp(transport, "tcp") && strcmp(transport, "rdma")) {
		fprintf(stderr, "rdmaps-launch: transport must be tcp or rdma, not '%s'\n", transport);
		return 2;
	}

	if (consistency && strcmp(consistency, "bsp") && strcmp(consistency, "ssp") &&
	    strcmp(consistency, "asp")) {
		fprintf(stderr, "rdmaps-launch: --consistency must be bsp, ssp or asp, not '%s'\n",
			consistency);
		return 2;
	}
	if (staleness) {
		char *end;
		long v = strtol(staleness, &end, 10);

		if (end == staleness || *end || v < 0 || v > 1000000) {
			fprintf(stderr, "rdmaps-launch: --staleness takes a number of clocks >= 0, "
					"not '%s'\n",
				staleness);
			return 2;
		}
		setenv("RDMAPS_STALENESS", staleness, 1);
	}
	if (consistency)
		setenv("RDMAPS_CONSISTENCY", consistency, 1);

	self_dir(dir, sizeof(dir));
	snprintf(sched_bin, sizeof(sched_bin), "%s/rdmaps-sched", dir);
	snprintf(server_bin, sizeof(server_bin), "%s/rdmaps-server", dir);
	snprintf(server_bin_path, sizeof(server_bin_path), "%s", server_bin);
	worker_argv = &argv[optind];
	server_host_g = server_host;
	worker_host_g = worker_host;
	if (replicated() && !shared_secret) {
		/* a backup takes over its primary's rank: it must prove that
		 * identity, which a server's token does not allow */
		shared_secret = 1;
		fprintf(stderr, "rdmaps-launch: RDMAPS_REPLICAS > 1: every process gets the job "
				"secret (--shared-secret): a backup server takes over its "
				"primary's identity, which per-node tokens do not allow yet\n");
	}
	if (restart_servers && !getenv("RDMAPS_CHECKPOINT_DIR") && !replicated()) {
		fprintf(stderr, "rdmaps-launch: --restart-servers needs RDMAPS_CHECKPOINT_DIR (or "
				"RDMAPS_REPLICAS=2: a new server joins as a backup)\n");
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (rps_tool_ensure_secret("rdmaps-launch"))
		return 2;
	snprintf(buf, sizeof(buf), "%d", servers);
	setenv("RDMAPS_NUM_SERVERS", buf, 1);
	snprintf(buf, sizeof(buf), "%d", workers);
	setenv("RDMAPS_NUM_WORKERS", buf, 1);
	setenv("RDMAPS_TRANSPORT", transport, 1);

	/* Start the scheduler on a free port: try, and try another when it
	 * dies at once (port taken). */
	srand((unsigned)(getpid() ^ time(NULL)));
	for (int attempt = 0; attempt < 20; attempt++) {
		int p = port ? port : 20000 + rand() % 40000;
		char *sargv[] = { sched_bin, NULL };

		snprintf(buf, sizeof(buf), "127.0.0.1:%d", p);
		setenv("RDMAPS_SCHEDULER", buf, 1);
		if (spawn("sched", 0, 0, sargv, "scheduler", "127.0.0.1", -1, 0) != 0)
			return 1;
		double until = now_s() + 0.3;
		while (now_s() < until && !procs[nprocs - 1].exited) {
			usleep(20000);
			reap();
		}
		if (!procs[nprocs - 1].exited)
			break;
		pump(all_done, now_s() + 1, 0);
		nprocs--;
		if (port || attempt == 19) {
			fprintf(stderr, "rdmaps-launch: rdmaps-sched (%s) did not start\n", sched_bin);
			return 1;
		}
	}

	for (int i = 0; i < servers; i++) {
		char name[32];
		char *sargv[] = { server_bin, NULL };

		snprintf(name, sizeof(name), "server%d", i);
		if (port_base > 0) {
			snprintf(buf, sizeof(buf), "%d", port_base + i);
			setenv("RDMAPS_PORT", buf, 1);
		}
		if (spawn(name, 0, 0, sargv, "server", server_host, i, 0) != 0)
			goto kill_all;
	}
	if (port_base > 0)
		unsetenv("RDMAPS_PORT");
	for (int i = 0; i < workers; i++) {
		char name[32];

		snprintf(name, sizeof(name), "worker%d", i);
		if (spawn(name, 1, i == 0, &argv[optind], "worker", worker_host, i, 0) != 0)
			goto kill_all;
	}
	fprintf(stderr, "rdmaps-launch: scheduler %s, %d server(s), %d worker(s), transport %s\n",
		getenv("RDMAPS_SCHEDULER"), servers, workers, transport);
	/* what a death does, said before it happens (docs/operations.md) */
	if (restart_servers && replicated())
		fprintf(stderr, "rdmaps-launch: a server that dies is taken over by its backup and "
				"started again: the new one joins as a backup (--restart-servers, "
				"RDMAPS_REPLICAS > 1)\n");
	else if (restart_servers)
		fprintf(stderr, "rdmaps-launch: a server that dies is started again from its last "
				"checkpoint in %s (updates since that checkpoint are lost)\n",
			getenv("RDMAPS_CHECKPOINT_DIR"));
	else
		fprintf(stderr, "rdmaps-launch: a server that dies ends the job (every process is "
				"stopped); --restart-servers with RDMAPS_CHECKPOINT_DIR restarts it "
				"from its checkpoint instead\n");
	fprintf(stderr, "rdmaps-launch: a worker that dies %s\n",
		restart_workers ? "is started again in its rank (--restart-workers): it joins "
				  "at the job's clock"
				: "is dropped; the others go on without it (--restart-workers "
				  "starts it again)");

	double deadline = timeout > 0 ? now_s() + timeout : 0;
	rc = pump(infra_failed_or_workers_done, deadline, quiet);
	if (rc == -EINTR) {
		fprintf(stderr, "rdmaps-launch: signal %d: stopping everything\n", (int)got_signal);
		signal_all(SIGINT);
		got_signal = 0;
		pump(all_done, now_s() + 10, quiet);
		signal_all(SIGKILL);
		pump(all_done, now_s() + 5, quiet);
		return 130;
	}
	if (rc == -ETIMEDOUT)
		fprintf(stderr, "rdmaps-launch: timeout after %.0f s: stopping everything\n", timeout);

	/* Workers done (or infrastructure failed): servers and the scheduler
	 * stop by themselves once every worker left; give them a moment. */
	if (rc == 0 && workers_done()) {
		double until = now_s() + 15;

		/* a server started again just before the end (--restart-servers)
		 * waits for a scheduler that is gone: it is told to stop */
		rc = pump(sched_done, until, quiet);
		if (!rc) /* those that see the scheduler gone leave by themselves */
			(void)pump(all_done, now_s() + 5, quiet);
		for (int i = 0; !rc && !all_done() && i < nprocs; i++)
			if (procs[i].restart && procs[i].is_server && !procs[i].exited)
				kill(procs[i].pid, SIGTERM);
		if (!rc)
			rc = pump(all_done, until, quiet);
	}
kill_all:
	if (!all_done()) {
		signal_all(SIGTERM);
		pump(all_done, now_s() + 5, quiet);
		signal_all(SIGKILL);
		pump(all_done, now_s() + 5, quiet);
	}
	int bad = 0, nkilled = 0;
	for (int i = 0; i < nprocs; i++)
		nkilled += killed(&procs[i]);
	if (expect_killed >= 0 && rc != -ETIMEDOUT && nkilled != expect_killed) {
		fprintf(stderr, "rdmaps-launch: %d process(es) killed by SIGKILL, expected %d\n",
			nkilled, expect_killed);
		bad = 1;
	}
	for (int i = 0; i < nprocs; i++) {
		if (procs[i].exited && failed(&procs[i])) {
			describe(&procs[i]);
			bad = 1;
		} else if (killed(&procs[i])) {
			fprintf(stderr, "rdmaps-launch: %s killed by SIGKILL (expected)\n",
				procs[i].name);
		}
	}
	if (rc == -ETIMEDOUT)
		bad = 1;
	return bad ? 1 : 0;
}
