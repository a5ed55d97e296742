/* Fuzz target: what the control clients make of the scheduler's answers:
 * rdmaps-ctl's status, checkpoint and export (control/ctl_status.c,
 * control/ctl_cmd.c: RESULT and EXPORT DATA frames, DONE, errors; an export
 * assembles slices and writes an .npz) and a node joining a job
 * (control/control.c, control/control_events.c: MAP, NODE_DEAD,
 * BARRIER_DONE, ERROR, relayed control requests).
 *
 * A fake scheduler in a thread of this process listens on 127.0.0.1; per
 * input, each connection to it gets the listener's side of the handshake,
 * for real with the fuzz secret (src/auth.h: CHALLENGE, the client's PROOF
 * checked, HELLO_ACK), then the input's bytes after byte 0 as they are, then the end of the
 * stream. Byte 0 picks the client (mode % 4): status, checkpoint, export
 * (to a file in a private folder), or join as a worker (then leave). The
 * clients wait 100 ms at most for an answer.
 *
 * One thread serves every input in turn (as in fuzz_sched.c, docs/security.md
 * "Fuzzing"): a thread per input made thousands of threads whose ids wrapped
 * (pid_max), and LeakSanitizer of clang 14 can then take the live thread for a
 * dead one of the same id and report its OpenSSL per-thread state (made by
 * rps_auth_challenge_make) as leaked. The thread gives that state back
 * (OPENSSL_thread_stop) before it ends, and at exit it is stopped and joined
 * before OpenSSL's own atexit cleanup runs (stop_at_exit, registered after
 * OpenSSL's, so it runs first). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include <rdmaps/ctl.h>

#include "control/control.h"
#include "src/auth.h"
#include "src/config.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET	   "fuzz-secret"
#define TIMEOUT_MS 100

static int lfd = -1;
static uint16_t port;
static char dir[] = "/tmp/rps-fuzz-ctl-XXXXXX";
static FILE *devnull;

struct fake {
	const uint8_t *reply;
	size_t len;
};

/* The serving thread: cur is the input being served (NULL between inputs:
 * the thread waits), busy while it uses cur; quit at exit. */
static pthread_t th;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static const struct fake *cur;
static int busy, quit, running;

static void *fake_sched(void *arg);
static void stop_at_exit(void);

static void start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);

	fuzz_quiet();
	signal(SIGPIPE, SIG_IGN);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 64) ||
	    getsockname(lfd, (struct sockaddr *)&a, &al) || !mkdtemp(dir) ||
	    !(devnull = fopen("/dev/null", "w"))) {
		perror("fuzz_ctl: set-up");
		abort();
	}
	port = ntohs(a.sin_port);
	/* OpenSSL registers its atexit cleanup here, ours after it: ours runs
	 * first. (Options 0 would be a no-op that registers nothing.) */
	if (!OPENSSL_init_crypto(OPENSSL_INIT_ADD_ALL_DIGESTS, NULL) || atexit(stop_at_exit) ||
	    pthread_create(&th, NULL, fake_sched, NULL)) {
		fprintf(stderr, "fuzz_ctl: cannot start the fake scheduler's thread\n");
		abort();
	}
	running = 1;
}

/* One connection: the listener's side of the handshake (hello in,
 * CHALLENGE out, PROOF in and checked, HELLO_ACK out), the reply out, end of
 * stream, then read until the client closes (at most 1 s). A client of the
 * library that does not answer the challenge right is a finding (abort). */
static void serve_one(int fd, const struct fake *f)
{
	struct rps_frame_hdr h;
	struct rps_hello hello;
	uint8_t payload[sizeof(struct rps_hello)];
	struct {
		struct rps_frame_hdr h;
		struct rps_auth_challenge ch;
	} cf;
	struct rps_auth_proof proof;
	struct rps_frame_hdr ack;
	uint64_t deadline = fuzz_now_ms() + 1000;
	const char *why = NULL;
	size_t sent = 0;
	char buf[4096];

	if (fuzz_read_frame(fd, &h, payload, sizeof(payload), deadline))
		return;
	if (h.op != RPS_OP_HELLO || rps_proto_hello_decode(payload, h.len, &hello, &why)) {
		fprintf(stderr, "fuzz_ctl: the client's hello: %s\n", why ? why : "not a HELLO");
		abort();
	}
	rps_proto_hdr_init(&cf.h, RPS_OP_CHALLENGE, sizeof(cf.ch), 0);
	if (rps_auth_challenge_make(SECRET, &hello, &cf.ch))
		abort();
	if (write(fd, &cf, sizeof(cf)) != (ssize_t)sizeof(cf))
		return;
	if (fuzz_read_frame(fd, &h, payload, sizeof(payload), deadline))
		return;
	if (h.op != RPS_OP_PROOF || rps_auth_proof_decode(payload, h.len, &proof, &why) ||
	    rps_auth_proof_check(SECRET, &hello, &cf.ch, &proof)) {
		fprintf(stderr, "fuzz_ctl: the client's proof is refused (op %u)\n", h.op);
		abort();
	}
	rps_proto_hdr_init(&ack, RPS_OP_HELLO_ACK, 0, 0);
	if (write(fd, &ack, sizeof(ack)) != (ssize_t)sizeof(ack))
		return;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (fuzz_now_ms() < deadline) {
		struct pollfd pf = {.fd = fd, .events = POLLIN | (sent < f->len ? POLLOUT : 0)};
		ssize_t k;

		if (sent == f->len && sent != SIZE_MAX) {
			shutdown(fd, SHUT_WR);
			sent = SIZE_MAX; /* shut */
		}
		if (poll(&pf, 1, 10) <= 0)
			continue;
		if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
			k = read(fd, buf, sizeof(buf));
			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
				return;
		}
		if ((pf.revents & POLLOUT) && sent < f->len) {
			k = write(fd, f->reply + sent, f->len - sent);
			if (k > 0)
				sent += (size_t)k;
			else if (k < 0 && errno != EAGAIN && errno != EINTR)
				return;
		}
	}
}

static void *fake_sched(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd pf = {.fd = lfd, .events = POLLIN};
		const struct fake *f;
		int fd;

		pthread_mutex_lock(&mu);
		while (!cur && !quit)
			pthread_cond_wait(&cv, &mu);
		if (quit) {
			pthread_mutex_unlock(&mu);
			break;
		}
		f = cur;
		busy = 1;
		pthread_mutex_unlock(&mu);
		if (poll(&pf, 1, 5) > 0) {
			fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				serve_one(fd, f);
				close(fd);
			}
		}
		pthread_mutex_lock(&mu);
		busy = 0;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
	OPENSSL_thread_stop(); /* this thread's DRBGs and error state, now */
	return NULL;
}

/* Serve f until unserve(): the thread picks it up at its next turn. */
static void serve(const struct fake *f)
{
	pthread_mutex_lock(&mu);
	cur = f;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* Stop serving the input; returns once the thread no longer uses it. */
static void unserve(void)
{
	pthread_mutex_lock(&mu);
	cur = NULL;
	while (busy)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

/* atexit: the serving thread stopped and joined before OpenSSL and LSan
 * clean up. */
static void stop_at_exit(void)
{
	if (!running)
		return;
	pthread_mutex_lock(&mu);
	cur = NULL;
	quit = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	running = 0;
}

static void join_leave(const char *sched)
{
	static struct rps_config cfg;
	static int have_cfg;
	struct rps_ctl_join_opts o;
	struct rps_ctl *ctl;
	struct rps_map map;
	struct rps_node nodes[4];

	if (!have_cfg) {
		rps_config_init(&cfg);
		have_cfg = 1;
	}
	rps_ctl_join_opts_init(&o, &cfg, RPS_ROLE_WORKER);
	o.scheduler = sched;
	o.secret = SECRET;
	o.timeout_ms = TIMEOUT_MS;
	o.heartbeat_ms = 50;
	if (rps_ctl_join(&o, &ctl))
		return;
	(void)rps_ctl_map(ctl, &map, nodes, 4);
	rps_ctl_leave(ctl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct rps_ctl_opts o;
	struct fake f;
	char path[64];

	pthread_once(&once, start);
	if (size < 1)
		return 0;
	f.reply = data + 1;
	f.len = size - 1;
	serve(&f);
	memset(&o, 0, sizeof(o));
	o.field_mask = RPS_CTL_OPT_SCHEDULER | RPS_CTL_OPT_SECRET | RPS_CTL_OPT_TIMEOUT_MS;
	snprintf(o.scheduler, sizeof(o.scheduler), "127.0.0.1:%u", port);
	snprintf(o.secret, sizeof(o.secret), "%s", SECRET);
	o.timeout_ms = TIMEOUT_MS;
	switch (data[0] % 4) {
	case 0:
		(void)rps_ctl_status_print(&o, devnull);
		break;
	case 1:
		(void)rps_ctl_checkpoint(&o, devnull);
		break;
	case 2:
		snprintf(path, sizeof(path), "%s/model.npz", dir);
		(void)rps_ctl_export(&o, path, devnull);
		unlink(path);
		break;
	default:
		join_leave(o.scheduler);
		break;
	}
	unserve();
	fuzz_quiet(); /* the clients set the level from the configuration */
	return 0;
}
