/* rdmaps-perf: a cluster on this machine — rdmaps-sched and rdmaps-server
 * processes started from beside our own executable — and worker processes
 * forked from us that run the measuring loops and report over pipes, while
 * we sample the servers' CPU time around each timed part. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/job_secret.h"
#include "perflib.h"

#define MSG_START  1
#define MSG_RESULT 2
#define MSG_END	   3

struct perf_msg {
	int type;
	int size_idx;
	int rc;
	int pad;
	struct rps_perf_result res;
};

static void self_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);
	char *slash;

	if (n <= 0) {
		snprintf(dir, len, ".");
		return;
	}
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
}

/* A free TCP port on host (bound, read back, closed: the usual small race,
 * covered by the retries of the caller). */
static int free_port(const char *host, uint16_t *port_p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd, rc = 0;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len))
		rc = -errno;
	else
		*port_p = ntohs(sa.sin_port);
	close(fd);
	return rc;
}

static void set_default_env(const char *name, const char *value)
{
	if (!getenv(name))
		setenv(name, value, 1);
}


/* fork + exec bin with the environment plus role/host/port; the child dies
 * with us (PR_SET_PDEATHSIG) and never writes to our stdout. */
static pid_t spawn(const char *bin, const char *role, const char *host, const char *port,
		   const char *device, int quiet)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "rdmaps-perf: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (quiet) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
	} else {
		dup2(STDERR_FILENO, STDOUT_FILENO);
	}
	setenv("RDMAPS_ROLE", role, 1);
	if (host)
		setenv("RDMAPS_HOST", host, 1);
	if (port)
		setenv("RDMAPS_PORT", port, 1);
	else
		unsetenv("RDMAPS_PORT");
	if (device)
		setenv("RDMAPS_DEVICE", device, 1);
	execl(bin, bin, (char *)NULL);
	fprintf(stderr, "rdmaps-perf: cannot start %s: %s\n", bin, strerror(errno));
	_exit(127);
}

/* Has pid exited? 1 (status in *st_p), 0 running, -errno. */
static int reaped(pid_t pid, int *st_p)
{
	pid_t r = waitpid(pid, st_p, WNOHANG);

	if (r == pid)
		return 1;
	return r == 0 ? 0 : -errno;
}

static void describe_exit(const char *name, int st)
{
	if (WIFEXITED(st))
		fprintf(stderr, "rdmaps-perf: %s exited with status %d\n", name, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		fprintf(stderr, "rdmaps-perf: %s killed by signal %d (%s)\n", name, WTERMSIG(st),
			strsignal(WTERMSIG(st)));
}

int rps_perf_cluster_start(const struct rps_perf_cluster_opts *o, struct rps_perf_cluster *c)
{
	char dir[PATH_MAX], sched_bin[PATH_MAX + 32], server_bin[PATH_MAX + 32], buf[64];
	const char *sh = o->sched_host ? o->sched_host : "127.0.0.1";
	int st;

	memset(c, 0, sizeof(*c));
	c->sched = -1;
	if (o->servers < 1 || o->servers > RPS_PERF_MAX_SERVERS || o->workers < 1) {
		fprintf(stderr, "rdmaps-perf: need 1..%d servers and at least one worker\n",
			RPS_PERF_MAX_SERVERS);
		return -EINVAL;
	}
	if (o->bindir)
		snprintf(dir, sizeof(dir), "%s", o->bindir);
	else
		self_dir(dir, sizeof(dir));
	snprintf(sched_bin, sizeof(sched_bin), "%s/rdmaps-sched", dir);
	snprintf(server_bin, sizeof(server_bin), "%s/rdmaps-server", dir);
	if (access(sched_bin, X_OK) || access(server_bin, X_OK)) {
		fprintf(stderr,
			"rdmaps-perf: need %s and %s (build them: cmake --build BUILD "
			"--target rdmaps-sched rdmaps-server)\n",
			sched_bin, server_bin);
		return -ENOENT;
	}

	/* what the scheduler and the servers (and our workers) read */
	if (o->make_secret && rps_tool_ensure_secret("rdmaps-perf"))
		return -EIO;
	snprintf(buf, sizeof(buf), "%d", o->servers);
	setenv("RDMAPS_NUM_SERVERS", buf, 1);
	snprintf(buf, sizeof(buf), "%d", o->workers);
	setenv("RDMAPS_NUM_WORKERS", buf, 1);
	setenv("RDMAPS_TRANSPORT", o->transport ? o->transport : "tcp", 1);
	if (o->consistency)
		setenv("RDMAPS_CONSISTENCY", o->consistency, 1);
	set_default_env("RDMAPS_LOG_LEVEL", "warn");
	if (o->shard_bytes) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)o->shard_bytes);
		setenv("RDMAPS_SHARD_BYTES", buf, 1);
	}

	for (int attempt = 0; attempt < 8; attempt++) {
		uint16_t port = o->sched_port;
		int rc;

		if (!port && (rc = free_port(sh, &port))) {
			fprintf(stderr, "rdmaps-perf: no free port on %s: %s\n", sh, strerror(-rc));
			return rc;
		}
		snprintf(c->sched_addr, sizeof(c->sched_addr), "%s:%u", sh, port);
		setenv("RDMAPS_SCHEDULER", c->sched_addr, 1);
		c->sched = spawn(sched_bin, "scheduler", sh, NULL, NULL, o->quiet);
		if (c->sched < 0)
			return -ECHILD;
		/* it dies at once when the port is taken: then try another */
		usleep(150000);
		if (reaped(c->sched, &st) != 1)
			break;
		c->sched = -1;
		if (o->sched_port || attempt == 7) {
			describe_exit("rdmaps-sched", st);
			fprintf(stderr, "rdmaps-perf: rdmaps-sched did not start on %s\n",
				c->sched_addr);
			return -ECHILD;
		}
	}
	for (int i = 0; i < o->servers; i++) {
		char port[16];

		if (o->server_port)
			snprintf(port, sizeof(port), "%d", o->server_port + i);
		c->servers[i] =
		    spawn(server_bin, "server", o->server_host ? o->server_host : "127.0.0.1",
			  o->server_port ? port : NULL, o->server_device, o->quiet);
		if (c->servers[i] < 0) {
			rps_perf_cluster_stop(c, 0);
			return -ECHILD;
		}
		c->nservers++;
	}
	return 0;
}

int rps_perf_cluster_cpu_ns(const struct rps_perf_cluster *c, uint64_t *ns_p)
{
	uint64_t sum = 0;

	for (int i = 0; i < c->nservers; i++) {
		uint64_t ns;
		int rc;

		if (c->servers[i] <= 0)
			continue;
		rc = rps_perf_proc_cpu_ns(c->servers[i], &ns);
		if (rc)
			return rc;
		sum += ns;
	}
	*ns_p = sum;
	return 0;
}

static void reap_one(struct rps_perf_cluster *c, pid_t *pid, const char *name)
{
	int st;

	if (*pid <= 0 || reaped(*pid, &st) != 1)
		return;
	*pid = -1;
	c->exited++;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		describe_exit(name, st);
		c->failed++;
	}
}

int rps_perf_cluster_check(struct rps_perf_cluster *c)
{
	for (int i = 0; i < c->nservers; i++) {
		char name[32];

		snprintf(name, sizeof(name), "rdmaps-server %d", i);
		reap_one(c, &c->servers[i], name);
	}
	reap_one(c, &c->sched, "rdmaps-sched");
	return c->exited ? -ECHILD : 0;
}

/* Wait for the pids to exit by themselves until deadline; then signal. */
static int wait_all(pid_t *pids, int n, int timeout_ms, int *bad_p)
{
	uint64_t deadline = perf_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int left;

	do {
		left = 0;
		for (int i = 0; i < n; i++) {
			int st;

			if (pids[i] <= 0)
				continue;
			if (reaped(pids[i], &st) == 1) {
				if (!WIFEXITED(st) || WEXITSTATUS(st))
					(*bad_p)++;
				pids[i] = -1;
			} else {
				left++;
			}
		}
		if (left)
			usleep(20000);
	} while (left && perf_now_ns() < deadline);
	return left;
}

int rps_perf_cluster_stop(struct rps_perf_cluster *c, int timeout_ms)
{
	pid_t pids[RPS_PERF_MAX_SERVERS + 1];
	int n = 0, bad = 0;

	for (int i = 0; i < c->nservers; i++)
		pids[n++] = c->servers[i];
	pids[n++] = c->sched;
	if (wait_all(pids, n, timeout_ms, &bad)) {
		for (int i = 0; i < n; i++)
			if (pids[i] > 0)
				kill(pids[i], SIGTERM);
		if (wait_all(pids, n, 5000, &bad)) {
			for (int i = 0; i < n; i++)
				if (pids[i] > 0)
					kill(pids[i], SIGKILL);
			wait_all(pids, n, 5000, &bad);
		}
		bad++; /* they did not stop by themselves */
	}
	for (int i = 0; i < c->nservers; i++)
		c->servers[i] = -1;
	c->sched = -1;
	return bad || c->failed ? -ECHILD : 0;
}

/* ---- worker processes ---- */

struct child_ctx {
	int fd;
};

static int write_msg(int fd, const struct perf_msg *m)
{
	const char *p = (const char *)m;
	size_t left = sizeof(*m);

	while (left) {
		ssize_t n = write(fd, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EPIPE;
		p += n;
		left -= (size_t)n;
	}
	return 0;
}

static int child_start(void *arg, int idx)
{
	struct child_ctx *cc = arg;
	struct perf_msg m = {.type = MSG_START, .size_idx = idx};

	return write_msg(cc->fd, &m);
}

static int child_stop(void *arg, int idx, struct rps_perf_result *res)
{
	struct child_ctx *cc = arg;
	struct perf_msg m = {.type = MSG_RESULT, .size_idx = idx, .res = *res};

	return write_msg(cc->fd, &m);
}

static void worker_child(int fd, const struct rps_perf_local_opts *lo,
			 const struct rps_perf_params *p)
{
	struct child_ctx cc = {.fd = fd};
	struct rps_perf_hooks hooks = {.start = child_start, .stop = child_stop, .arg = &cc};
	struct perf_msg end = {.type = MSG_END};
	struct rps_perf_result *res;
	struct rps_worker_opts wo;
	struct rps_perf_params pc = *p;
	struct rps_worker *w;
	struct rps_config *cfg = NULL;
	int rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setenv("RDMAPS_ROLE", "worker", 1);
	setenv("RDMAPS_HOST", lo->worker_host ? lo->worker_host : "127.0.0.1", 1);
	unsetenv("RDMAPS_PORT");
	if (lo->worker_device)
		setenv("RDMAPS_DEVICE", lo->worker_device, 1);
	rc = rps_config_create(&cfg); /* a bad variable was reported there */
	if (rc)
		goto out;
	pc.config = cfg;
	res = calloc((size_t)p->nsizes, sizeof(*res));
	if (!res) {
		rc = -ENOMEM;
		goto out;
	}
	rps_worker_opts_init(&wo);
	wo.field_mask |= RPS_WORKER_OPT_CONFIG;
	wo.config = cfg;
	rc = rps_worker_create(&wo, &w);
	if (rc) {
		fprintf(stderr, "rdmaps-perf: worker: cannot join the cluster at %s: %s\n",
			wo.scheduler ? wo.scheduler : "?", rps_strerror(rc));
		goto out;
	}
	rc = rps_perf_run(w, &pc, rps_worker_rank(w), &hooks, res);
	rps_worker_destroy(w);
	free(res);
out:
	rps_config_destroy(cfg);
	end.rc = rc;
	write_msg(fd, &end);
	fflush(stderr);
	_exit(rc ? 1 : 0);
}

/* Default shard capacity: room for every key of every size on one shard
 * (hashing may put them all there), never below the server's default. */
static uint64_t shard_bytes_for(const struct rps_perf_params *p, int procs)
{
	uint64_t need = 0, bytes;

	if (getenv("RDMAPS_SHARD_BYTES"))
		return 0;
	for (int i = 0; i < p->nsizes; i++)
		need += p->sizes[i];
	need *= (uint64_t)p->keys * (uint64_t)p->threads * (uint64_t)procs;
	bytes = need + need / 4 + (4ull << 20);
	bytes = PERF_ALIGN_UP(bytes, 1ull << 20);
	if (bytes <= (64ull << 20))
		return 0;
	if (bytes > (2ull << 30)) {
		fprintf(stderr,
			"rdmaps-perf: the keys need %llu MiB per shard at worst; "
			"capped at 2 GiB (set RDMAPS_SHARD_BYTES to override)\n",
			(unsigned long long)(bytes >> 20));
		bytes = 2ull << 30;
	}
	return bytes;
}

static int read_msg(int fd, struct perf_msg *m)
{
	char *p = (char *)m;
	size_t got = 0;

	while (got < sizeof(*m)) {
		ssize_t n = read(fd, p + got, sizeof(*m) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		got += (size_t)n;
	}
	return 0;
}

struct size_state {
	int starts, results;
	uint64_t cpu0, wall0;
	int cpu_ok;
	struct rps_perf_result per[RPS_PERF_MAX_PROCS];
};

int rps_perf_local_run(const struct rps_perf_local_opts *lo, const struct rps_perf_params *p,
		       struct rps_perf_result *results)
{
	struct rps_perf_cluster_opts co = lo->cluster;
	struct rps_perf_cluster cl;
	struct size_state *ss;
	pid_t kids[RPS_PERF_MAX_PROCS];
	int fds[RPS_PERF_MAX_PROCS], ended[RPS_PERF_MAX_PROCS];
	int nprocs = co.workers, nkids = 0, rc, alive, failed = 0;
	uint64_t deadline, dead_since = 0;

	if (nprocs < 1 || nprocs > RPS_PERF_MAX_PROCS) {
		fprintf(stderr, "rdmaps-perf: 1..%d worker processes\n", RPS_PERF_MAX_PROCS);
		return -EINVAL;
	}
	ss = calloc((size_t)p->nsizes, sizeof(*ss));
	if (!ss)
		return -ENOMEM;
	if (!co.shard_bytes)
		co.shard_bytes = shard_bytes_for(p, nprocs);
	co.make_secret = 1;
	rc = rps_perf_cluster_start(&co, &cl);
	if (rc) {
		free(ss);
		return rc;
	}
	deadline = lo->timeout_s > 0 ? perf_now_ns() + (uint64_t)lo->timeout_s * 1000000000ull : 0;

	for (int i = 0; i < nprocs; i++) {
		int pfd[2];
		pid_t pid;

		if (pipe2(pfd, O_CLOEXEC)) {
			rc = -errno;
			fprintf(stderr, "rdmaps-perf: pipe: %s\n", strerror(errno));
			goto out_kill;
		}
		fflush(stdout);
		fflush(stderr);
		pid = fork();
		if (pid < 0) {
			rc = -errno;
			fprintf(stderr, "rdmaps-perf: fork: %s\n", strerror(errno));
			close(pfd[0]);
			close(pfd[1]);
			goto out_kill;
		}
		if (pid == 0) {
			close(pfd[0]);
			for (int j = 0; j < nkids; j++)
				close(fds[j]);
			dup2(STDERR_FILENO, STDOUT_FILENO); /* our stdout may be JSON */
			worker_child(pfd[1], lo, p);
		}
		close(pfd[1]);
		kids[nkids] = pid;
		fds[nkids] = pfd[0];
		ended[nkids] = 0;
		nkids++;
	}

	alive = nkids;
	while (alive) {
		struct pollfd pf[RPS_PERF_MAX_PROCS];
		int map[RPS_PERF_MAX_PROCS], n = 0;

		if (deadline && perf_now_ns() > deadline) {
			fprintf(stderr, "rdmaps-perf: timeout after %d s: stopping\n",
				lo->timeout_s);
			rc = -ETIMEDOUT;
			goto out_kill;
		}
		/* servers and scheduler leave by themselves after the last
		 * worker; before that, give the workers 3 s to report */
		if (rps_perf_cluster_check(&cl) && !dead_since)
			dead_since = perf_now_ns();
		if (dead_since && perf_now_ns() - dead_since > 3000000000ull) {
			fprintf(stderr,
				"rdmaps-perf: a server or the scheduler ended during the run\n");
			rc = -ECHILD;
			goto out_kill;
		}
		for (int i = 0; i < nkids; i++) {
			if (fds[i] >= 0) {
				pf[n].fd = fds[i];
				pf[n].events = POLLIN;
				map[n++] = i;
			}
		}
		if (poll(pf, (nfds_t)n, 200) < 0 && errno != EINTR) {
			rc = -errno;
			goto out_kill;
		}
		for (int j = 0; j < n; j++) {
			int i = map[j];
			struct perf_msg m;

			if (!pf[j].revents)
				continue;
			if (read_msg(fds[i], &m)) {
				close(fds[i]);
				fds[i] = -1;
				alive--;
				if (!ended[i]) {
					fprintf(stderr,
						"rdmaps-perf: worker process %d ended "
						"without a result\n",
						i);
					failed++;
				}
				continue;
			}
			if (m.size_idx < 0 || m.size_idx >= p->nsizes)
				continue;
			struct size_state *s = &ss[m.size_idx];

			switch (m.type) {
			case MSG_START:
				if (s->starts++ == 0) {
					s->wall0 = perf_now_ns();
					s->cpu_ok = rps_perf_cluster_cpu_ns(&cl, &s->cpu0) == 0;
				}
				break;
			case MSG_RESULT:
				if (s->results < RPS_PERF_MAX_PROCS)
					s->per[s->results] = m.res;
				if (++s->results == nprocs) {
					struct rps_perf_result *r = &results[m.size_idx];
					uint64_t cpu1 = 0, wall1 = perf_now_ns();

					rps_perf_aggregate(s->per, nprocs, p->mode, r);
					if (s->cpu_ok && !rps_perf_cluster_cpu_ns(&cl, &cpu1) &&
					    wall1 > s->wall0) {
						r->server_cpu_s = (double)(cpu1 - s->cpu0) / 1e9;
						r->window_s = (double)(wall1 - s->wall0) / 1e9;
						r->server_cpu_pct =
						    r->server_cpu_s / r->window_s * 100;
					}
				}
				break;
			case MSG_END:
				ended[i] = 1;
				if (m.rc)
					failed++;
				break;
			default:
				break;
			}
		}
	}
	for (int i = 0; i < nkids; i++) {
		int st;

		if (waitpid(kids[i], &st, 0) == kids[i] && (!WIFEXITED(st) || WEXITSTATUS(st))) {
			if (!failed)
				describe_exit("worker process", st);
			failed++;
		}
		kids[i] = -1;
	}
	rc = failed ? -ECHILD : 0;
	for (int i = 0; i < p->nsizes && !rc; i++)
		if (ss[i].results != nprocs)
			rc = -EPROTO;
	/* the servers and the scheduler leave once every worker left */
	if (rps_perf_cluster_stop(&cl, 15000) && !rc)
		fprintf(stderr, "rdmaps-perf: note: the servers did not exit cleanly\n");
	free(ss);
	return rc;

out_kill:
	for (int i = 0; i < nkids; i++) {
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
		if (fds[i] >= 0)
			close(fds[i]);
	}
	rps_perf_cluster_stop(&cl, 0);
	free(ss);
	return rc;
}
