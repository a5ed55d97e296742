/* Fuzz target: what the scheduler does with the frames of its peers: the
 * TCP transport's receive path, then server/sched*.c: REGISTER (ranks,
 * rejoins, refusals), HEARTBEAT with a server's tail, BARRIER, SHUTDOWN,
 * STATUS, and the control requests CHECKPOINT / EXPORT with their parts
 * (requests from rdmaps-ctl, results and data from servers).
 *
 * A real scheduler in-process (rps_sched_create, rps_sched_run in a thread;
 * 127.0.0.1, a job of 1 server and 1 worker, a secret). Inputs are
 * segments (fuzz_segments, fuzz_run_segments): connections opened together,
 * each with the role head % 4 (0 scheduler: refused; 1 server; 2 worker; 3
 * rdmaps-ctl) and the rank (head >> 2) % 4, or any rank (head & 0x80); each
 * does the handshake (fuzz_handshake: hello, CHALLENGE, PROOF, HELLO_ACK;
 * head & 0x10: only up to the CHALLENGE, head & 0x20: none); then the
 * segments' bytes go out as they are, in order, each on its connection (a
 * segment may continue an earlier connection: FUZZ_SEG_MORE), so that a
 * server can answer a request that rdmaps-ctl sent; then every connection
 * is shut for writing and read until the scheduler closed it (at most 1 s).
 * A server and a worker that both register complete the job: the map goes
 * out, and when they go away the job ends and run()
 * returns; the next input then gets a new scheduler.
 *
 * Teardown (docs/security.md "Fuzzing"): the scheduler's thread gives back
 * OpenSSL's per-thread state (OPENSSL_thread_stop) before it ends, and at
 * exit the scheduler is stopped, joined and destroyed before OpenSSL's own
 * atexit cleanup runs (stop_at_exit, registered after OpenSSL's so it runs
 * first): no thread of ours can be inside OpenSSL while OPENSSL_cleanup
 * frees its global state, and LeakSanitizer, which checks last, sees only
 * what is truly lost. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "server/sched.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET	"fuzz-secret"
#define WAIT_MS 1000
#define HELLO_MS 200

static struct rps_sched *sched;
static pthread_t th;
static atomic_int done;
static uint16_t port;
/* One thread runs every scheduler in turn (gen: the scheduler to run next;
 * ran: the last one it ran): a thread per job made thousands of threads,
 * their ids wrapped (pid_max) and LeakSanitizer's registry of clang 14 then
 * took the live thread for a dead one of the same id and reported what only
 * its thread-local storage holds (its OpenSSL state) as leaked. */
static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t run_cv = PTHREAD_COND_INITIALIZER;
static unsigned gen, ran;
static int quit;

static void *run(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&run_mu);
		while (ran == gen && !quit)
			pthread_cond_wait(&run_cv, &run_mu);
		if (quit) {
			pthread_mutex_unlock(&run_mu);
			break;
		}
		ran = gen;
		pthread_mutex_unlock(&run_mu);
		rps_sched_run(sched);
		atomic_store(&done, 1);
	}
	OPENSSL_thread_stop(); /* this thread's DRBGs and error state, now */
	return NULL;
}

/* atexit: no scheduler thread left running when OpenSSL and LSan clean up. */
static void stop_at_exit(void)
{
	if (!sched)
		return;
	rps_sched_stop(sched);
	while (!atomic_load(&done))
		poll(NULL, 0, 5);
	pthread_mutex_lock(&run_mu);
	quit = 1;
	pthread_cond_signal(&run_cv);
	pthread_mutex_unlock(&run_mu);
	pthread_join(th, NULL);
	rps_sched_destroy(sched);
	sched = NULL;
}

static void start(void)
{
	struct rps_sched_opts o;

	rps_sched_opts_init(&o, NULL);
	o.host = "127.0.0.1";
	o.port = 0;
	o.secret = SECRET;
	o.num_servers = 1;
	o.num_workers = 1;
	o.heartbeat_timeout_ms = 5000;
	o.shutdown_grace_ms = 200;
	if (rps_sched_create(&o, &sched)) {
		fprintf(stderr, "fuzz_sched: cannot create the scheduler\n");
		abort();
	}
	port = rps_sched_port(sched);
	fuzz_quiet(); /* after the configuration set its level */
	atomic_store(&done, 0);
	pthread_mutex_lock(&run_mu);
	gen++;
	pthread_cond_signal(&run_cv);
	pthread_mutex_unlock(&run_mu);
}

/* The job ended: a new scheduler for the next input (the same thread runs
 * it: run() went back to waiting after it set done). */
static void restart_if_ended(void)
{
	if (!atomic_load(&done))
		return;
	fuzz_debug("the job ended: a new scheduler");
	rps_sched_destroy(sched);
	start();
	fuzz_debug("the new scheduler listens on port %u", port);
}

static int ended(void)
{
	return atomic_load(&done);
}

/* A peer's connection: role head % 4, rank (head >> 2) % 4 or UINT32_MAX
 * (head & 0x80); head & 0x20: no handshake, the segment's bytes are all the
 * peer sends, its hello included; head & 0x10: a real hello (fresh nonce)
 * and the scheduler's CHALLENGE, then the bytes take the PROOF's place. The job of the last input may end while this one starts
 * (its nodes' connections close asynchronously): then a new scheduler, and
 * a second try. */
static int open_peer(uint8_t head)
{
	uint8_t role = head % 4u;
	uint32_t rank = head & 0x80 ? UINT32_MAX : (head >> 2) % 4u;

	for (int attempt = 0; attempt < 2; attempt++) {
		int fd = fuzz_connect_retry(port);

		if (fd >= 0 && (head & 0x20))
			return fd; /* no handshake: the bytes are the hello and the rest */
		if (fd >= 0 && (head & 0x10)) {
			struct rps_hello h;
			struct rps_auth_challenge ch;

			/* half of it: the bytes are the proof phase and the rest */
			if (!fuzz_hello_challenge(fd, role, rank, fuzz_now_ms() + HELLO_MS, &h,
						  &ch))
				return fd;
		} else if (fd >= 0 && !fuzz_handshake(fd, role, rank, SECRET, HELLO_MS))
			return fd;
		if (fd >= 0)
			close(fd);
		else if (!ended()) {
			fprintf(stderr, "fuzz_sched: cannot connect to the scheduler under test (127.0.0.1:%u): %s\n",
				port, strerror(-fd));
			abort(); /* the scheduler stopped accepting: a finding */
		}
		if (!ended())
			return -1; /* refused */
		restart_if_ended();
	}
	return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	struct fuzz_seg seg[FUZZ_SEG_MAX];
	int n;

	if (!init) {
		/* OpenSSL registers its atexit cleanup here, ours after it: ours
		 * runs first. (Options 0 would be a no-op that registers nothing:
		 * OpenSSL's atexit would then come with the first handshake, after
		 * ours, and run before it.) */
		if (!OPENSSL_init_crypto(OPENSSL_INIT_ADD_ALL_DIGESTS, NULL) || atexit(stop_at_exit))
			abort();
		if (pthread_create(&th, NULL, run, NULL))
			abort();
		start();
		fuzz_stream_stop = ended;
		init = 1;
	}
	restart_if_ended();
	n = fuzz_segments(data, size, seg, FUZZ_SEG_MAX);
	fuzz_run_segments(seg, n, open_peer, WAIT_MS);
	return 0;
}
