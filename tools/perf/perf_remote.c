/* rdmaps-perf, perftest-like: `rdmaps-perf` (no host) is the server side, it
 * starts rdmaps-sched on PORT+1 and the servers, and waits on PORT for one
 * client; `rdmaps-perf HOST` is the client, a worker of that cluster.
 *
 * The control connection (TCP, PORT) carries text lines:
 *   client: RDMAPS-PERF 1 transport=T consistency=C|- servers=N|- workers=W mode=M
 *   server: OK scheduler-port=P servers=N consistency=C | ERR reason
 *   client: START i        server: OK             (server CPU sampled)
 *   client: STOP i         server: CPU secs window  (server CPU since START)
 *   client: BYE            server: BYE
 * Parameters that must agree are checked there, like perftest does; the key
 * sizes are checked by the server itself when the client declares its keys
 * (another length for a key already there is -EEXIST). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perflib.h"

#define LINE_MAX_LEN 512

static int send_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int send_line(int fd, const char *fmt, ...)
{
	char buf[LINE_MAX_LEN];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(buf) - 1)
		return -EMSGSIZE;
	buf[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -ECONNRESET;
		off += (int)w;
	}
	return 0;
}

/* One line (without the newline); timeout_ms < 0: no limit. */
static int recv_line(int fd, char *buf, size_t len, int timeout_ms)
{
	size_t n = 0;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		char c;
		ssize_t r;
		int pr = poll(&pf, 1, timeout_ms);

		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0)
			return -ETIMEDOUT;
		if (pr < 0)
			return -errno;
		r = recv(fd, &c, 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -ECONNRESET;
		if (c == '\n') {
			buf[n] = '\0';
			return 0;
		}
		if (n + 1 < len)
			buf[n++] = c;
	}
}

static const char *field(const char *line, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);

	for (const char *p = line; (p = strstr(p, name)); p += nl) {
		if ((p == line || p[-1] == ' ') && p[nl] == '=') {
			size_t i = 0;

			p += nl + 1;
			while (p[i] && p[i] != ' ' && i + 1 < len) {
				out[i] = p[i];
				i++;
			}
			out[i] = '\0';
			return out;
		}
	}
	return NULL;
}

/* ---- server side ---- */

static int listen_on(const char *host, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd, one = 1;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "rdmaps-perf: --host %s: not an IPv4 address\n", host);
		return -EINVAL;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4)) {
		int rc = -errno;

		fprintf(stderr, "rdmaps-perf: cannot listen on %s:%u: %s\n", host, port,
			strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

/* The consistency of our side: the option, else the servers' setting
 * (RDMAPS_CONSISTENCY or its default). */
static const char *our_consistency(const struct rps_perf_remote_opts *o)
{
	static char cons[16];
	struct rps_config *cfg;
	const char *s = "asp";

	if (o->consistency)
		return o->consistency;
	if (!cons[0]) {
		if (rps_config_create(&cfg) == 0)
			rps_config_get_str(cfg, "consistency", &s);
		snprintf(cons, sizeof(cons), "%s", s);
		rps_config_destroy(cfg);
	}
	return cons;
}

/* Check the client's hello against our side; reason on mismatch. */
static int check_hello(const struct rps_perf_remote_opts *o, const char *line, char *why,
		       size_t len)
{
	char v[64];
	const char *cons = our_consistency(o);

	if (strncmp(line, "RDMAPS-PERF 1 ", 14)) {
		snprintf(why, len, "not an rdmaps-perf client of protocol 1");
		return -EPROTO;
	}
	if (!field(line, "transport", v, sizeof(v)) || strcmp(v, o->transport)) {
		snprintf(why, len, "transport: client %s, server side %s",
			 field(line, "transport", v, sizeof(v)) ? v : "?", o->transport);
		return -EINVAL;
	}
	if (field(line, "consistency", v, sizeof(v)) && strcmp(v, "-") && strcmp(v, cons)) {
		snprintf(why, len, "consistency: client %s, server side %s", v, cons);
		return -EINVAL;
	}
	if (field(line, "servers", v, sizeof(v)) && strcmp(v, "-") && atoi(v) != o->servers) {
		snprintf(why, len, "servers: client %s, server side %d", v, o->servers);
		return -EINVAL;
	}
	if (field(line, "workers", v, sizeof(v)) && atoi(v) != o->workers) {
		snprintf(why, len, "worker processes: client %s, server side %d", v, o->workers);
		return -EINVAL;
	}
	return 0;
}

static int serve_client(const struct rps_perf_remote_opts *o, struct rps_perf_cluster *cl, int fd,
			FILE *out)
{
	char line[LINE_MAX_LEN], why[256];
	uint64_t cpu0 = 0, wall0 = 0;
	int rc;

	rc = recv_line(fd, line, sizeof(line), 10000);
	if (rc)
		return rc;
	if (check_hello(o, line, why, sizeof(why))) {
		fprintf(stderr, "rdmaps-perf: client refused: %s\n", why);
		send_line(fd, "ERR %s", why);
		return -EINVAL;
	}
	send_line(fd, "OK scheduler-port=%u servers=%d consistency=%s", o->port + 1, o->servers,
		  our_consistency(o));
	for (;;) {
		int idx = -1;

		rc = recv_line(fd, line, sizeof(line), -1);
		if (rc)
			return rc == -ECONNRESET ? 0 : rc; /* client gone: done */
		if (sscanf(line, "START %d", &idx) == 1) {
			wall0 = perf_now_ns();
			if (rps_perf_cluster_cpu_ns(cl, &cpu0))
				cpu0 = UINT64_MAX;
			send_line(fd, "OK");
		} else if (sscanf(line, "STOP %d", &idx) == 1) {
			uint64_t cpu1, wall1 = perf_now_ns();

			if (cpu0 == UINT64_MAX || rps_perf_cluster_cpu_ns(cl, &cpu1)) {
				send_line(fd, "CPU -1 -1");
				continue;
			}
			double secs = (double)(cpu1 - cpu0) / 1e9,
			       win = (double)(wall1 - wall0) / 1e9;

			send_line(fd, "CPU %.6f %.6f", secs, win);
			fprintf(out, "run %d: server CPU %.2f%% of one core (%.3f s over %.3f s)\n",
				idx, win > 0 ? secs / win * 100 : 0, secs, win);
			fflush(out);
		} else if (!strcmp(line, "BYE")) {
			send_line(fd, "BYE");
			return 0;
		} else {
			send_line(fd, "ERR unknown request");
		}
	}
}

int rps_perf_remote_server(const struct rps_perf_remote_opts *o, FILE *out)
{
	struct rps_perf_cluster_opts co = {
	    .transport = o->transport,
	    .consistency = o->consistency,
	    .sched_host = o->host,
	    .sched_port = (uint16_t)(o->port + 1),
	    .server_host = o->host,
	    .servers = o->servers,
	    .workers = o->workers,
	};
	struct rps_perf_cluster cl;
	int lfd, fd, rc;

	lfd = listen_on(o->host, o->port);
	if (lfd < 0)
		return lfd;
	rc = rps_perf_cluster_start(&co, &cl);
	if (rc) {
		close(lfd);
		return rc;
	}
	fprintf(out,
		"rdmaps-perf server side: %d server(s), transport %s, scheduler %s\n"
		"waiting for a client: rdmaps-perf [options] %s%s\n",
		o->servers, o->transport, cl.sched_addr, o->host,
		o->port == RPS_PERF_DEFAULT_PORT ? "" : " (with -p PORT)");
	fflush(out);
	for (;;) {
		struct pollfd pf = {.fd = lfd, .events = POLLIN};

		if (rps_perf_cluster_check(&cl)) {
			rc = -ECHILD;
			goto out_stop;
		}
		if (poll(&pf, 1, 500) > 0)
			break;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	lfd = -1;
	if (fd < 0) {
		rc = -errno;
		goto out_stop;
	}
	rc = serve_client(o, &cl, fd, out);
	close(fd);
	/* the cluster ends once the client's worker left */
	if (rps_perf_cluster_stop(&cl, rc ? 2000 : 15000) && !rc)
		fprintf(stderr, "rdmaps-perf: note: the servers did not exit cleanly\n");
	return rc;
out_stop:
	if (lfd >= 0)
		close(lfd);
	rps_perf_cluster_stop(&cl, 0);
	return rc;
}

/* ---- client side ---- */

struct client_ctx {
	int fd;
};

static int client_start(void *arg, int idx)
{
	struct client_ctx *cc = arg;
	char line[LINE_MAX_LEN];
	int rc = send_line(cc->fd, "START %d", idx);

	if (!rc)
		rc = recv_line(cc->fd, line, sizeof(line), 10000);
	if (!rc && strcmp(line, "OK"))
		rc = -EPROTO;
	return rc;
}

static int client_stop(void *arg, int idx, struct rps_perf_result *res)
{
	struct client_ctx *cc = arg;
	char line[LINE_MAX_LEN];
	double secs, win;
	int rc = send_line(cc->fd, "STOP %d", idx);

	if (!rc)
		rc = recv_line(cc->fd, line, sizeof(line), 10000);
	if (rc)
		return rc;
	if (sscanf(line, "CPU %lf %lf", &secs, &win) != 2)
		return -EPROTO;
	if (secs >= 0 && win > 0) {
		res->server_cpu_s = secs;
		res->window_s = win;
		res->server_cpu_pct = secs / win * 100;
	}
	return 0;
}

static int connect_to(const char *host, uint16_t port, int timeout_s)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	char ps[16];
	int fd = -1, rc, one = 1;
	uint64_t until = perf_now_ns() + (uint64_t)(timeout_s > 0 ? timeout_s : 10) * 1000000000ull;

	snprintf(ps, sizeof(ps), "%u", port);
	rc = getaddrinfo(host, ps, &hints, &ai);
	if (rc) {
		fprintf(stderr, "rdmaps-perf: %s: %s\n", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	/* like perftest's client, retry while the server side comes up */
	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			break;
		}
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			rc = fd;
			break;
		}
		rc = -errno;
		close(fd);
		if (perf_now_ns() > until) {
			fprintf(stderr, "rdmaps-perf: cannot reach the server side at %s:%u: %s\n",
				host, port, strerror(-rc));
			break;
		}
		usleep(200000);
	}
	freeaddrinfo(ai);
	return rc;
}

int rps_perf_remote_client(const struct rps_perf_remote_opts *o, const struct rps_perf_params *p,
			   struct rps_perf_result *results)
{
	struct client_ctx cc;
	struct rps_perf_hooks hooks = {.start = client_start, .stop = client_stop, .arg = &cc};
	char line[LINE_MAX_LEN], v[64], servers[16], sched[256];
	struct rps_perf_params pc = *p;
	struct rps_worker_opts wo;
	struct rps_worker *w;
	struct rps_config *cfg = NULL;
	int rc;

	if (o->servers > 0)
		snprintf(servers, sizeof(servers), "%d", o->servers);
	else
		snprintf(servers, sizeof(servers), "-");
	cc.fd = connect_to(o->host, o->port, o->timeout_s);
	if (cc.fd < 0)
		return cc.fd;
	rc = send_line(cc.fd,
		       "RDMAPS-PERF 1 transport=%s consistency=%s servers=%s workers=1 mode=%s",
		       o->transport, o->consistency ? o->consistency : "-", servers,
		       rps_perf_mode_name(p->mode));
	if (!rc)
		rc = recv_line(cc.fd, line, sizeof(line), 30000);
	if (rc) {
		fprintf(stderr, "rdmaps-perf: no answer from the server side: %s\n",
			rps_strerror(rc));
		goto out_close;
	}
	if (strncmp(line, "OK ", 3)) {
		fprintf(stderr, "rdmaps-perf: the server side refused: %s\n",
			strncmp(line, "ERR ", 4) ? line : line + 4);
		rc = -EINVAL;
		goto out_close;
	}
	if (!field(line, "scheduler-port", v, sizeof(v))) {
		rc = -EPROTO;
		goto out_close;
	}
	snprintf(sched, sizeof(sched), "%s:%s", o->host, v);
	setenv("RDMAPS_SCHEDULER", sched, 1);
	setenv("RDMAPS_TRANSPORT", o->transport, 1);
	setenv("RDMAPS_NUM_WORKERS", "1", 1);
	if (field(line, "servers", v, sizeof(v)))
		setenv("RDMAPS_NUM_SERVERS", v, 1);
	rc = rps_config_create(&cfg); /* a bad variable was reported there */
	if (rc)
		goto out_close;
	pc.config = cfg;
	rps_worker_opts_init(&wo);
	wo.field_mask |= RPS_WORKER_OPT_CONFIG;
	wo.config = cfg;
	rc = rps_worker_create(&wo, &w);
	if (rc) {
		fprintf(stderr, "rdmaps-perf: cannot join the cluster at %s: %s\n", sched,
			rps_strerror(rc));
		goto out_close;
	}
	rc = rps_perf_run(w, &pc, rps_worker_rank(w), &hooks, results);
	rps_worker_destroy(w);
	if (!send_line(cc.fd, "BYE"))
		recv_line(cc.fd, line, sizeof(line), 5000);
out_close:
	rps_config_destroy(cfg);
	close(cc.fd);
	return rc;
}
