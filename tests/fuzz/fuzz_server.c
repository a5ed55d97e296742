/* Fuzz target: what a server does with the frames of a worker: the TCP
 * transport's receive state machine (transport/tcp/tcp_recv.c: header,
 * checks, fixed part, data), the server's frame handling (server/frame.c:
 * DECLARE with optimizer specs, PUSH, ASSIGN, PULL, CLOCK, SYNC, ERROR), the
 * shards' checks and the update threads behind them.
 *
 * Once: a real server in-process (rps_server_create, rps_server_serve in a
 * thread; TCP on 127.0.0.1, 2 workers, 2 shards of 1 MiB in 256-byte
 * chunks, BSP, SGD, 64 KiB frames, a secret). It lives as long as the
 * process: what one input declares, the next may push to.
 * Per input: segments (fuzz_segments, fuzz_run_segments): connections of
 * workers of rank head % 2 (head & 0x80: asking for rank UINT32_MAX, which
 * the server refuses), each doing the handshake (fuzz_handshake) and then
 * sending its segments' bytes as they are, in order (head & 0x20: no
 * handshake, the bytes are the hello and what follows; head & 0x10: a real
 * hello and the server's CHALLENGE, then the bytes are the proof phase and
 * what follows); then our sides are shut for writing and we read until the
 * server closed them (at most 1 s).
 *
 * At exit (stop_at_exit, as fuzz_sched.c): the server is stopped, its thread
 * gives back OpenSSL's per-thread state and is joined, and the server is
 * destroyed, all before OpenSSL's own atexit cleanup. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "server/server_int.h"
#include "src/config.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET	"fuzz-secret"
#define WAIT_MS 1000

static struct rps_server *srv;
static pthread_t srv_th;
static uint16_t port;

static atomic_int stopping;

static void *serve(void *arg)
{
	(void)arg;
	rps_server_serve(srv);
	if (!atomic_load(&stopping)) {
		fprintf(stderr, "fuzz_server: the server stopped serving\n");
		abort();
	}
	OPENSSL_thread_stop(); /* this thread's DRBGs and error state, now */
	return NULL;
}

/* atexit, registered after OpenSSL's (so it runs first): no server thread
 * left running when OpenSSL and LeakSanitizer clean up. */
static void stop_at_exit(void)
{
	if (!srv)
		return;
	atomic_store(&stopping, 1);
	rps_server_stop(srv);
	pthread_join(srv_th, NULL);
	rps_server_destroy(srv);
	srv = NULL;
}

static void start(void)
{
	struct rps_server_opts o;

	setenv("RDMAPS_NUM_WORKERS", "2", 1);
	setenv("RDMAPS_SHARDS", "2", 1);
	setenv("RDMAPS_SHARD_BYTES", "1M", 1);
	setenv("RDMAPS_CHUNK_BYTES", "256", 1);
	setenv("RDMAPS_CONSISTENCY", "bsp", 1);
	setenv("RDMAPS_OPTIMIZER", "sgd", 1);
	setenv("RDMAPS_SECRET", SECRET, 1);
	setenv("RDMAPS_HOST", "127.0.0.1", 1);
	setenv("RDMAPS_PORT", "0", 1);
	setenv("RDMAPS_MAX_MSG", "64K", 1);
	setenv("RDMAPS_RING_SIZE", "16", 1);
	/* a real option: OPENSSL_init_crypto(0, NULL) registers nothing */
	if (!OPENSSL_init_crypto(OPENSSL_INIT_ADD_ALL_DIGESTS, NULL) || atexit(stop_at_exit))
		abort();
	rps_server_opts_init(&o);
	o.ncores = 1;
	o.cores[0] = 0;
	if (rps_server_create(&o, &srv)) {
		fprintf(stderr, "fuzz_server: cannot create the server\n");
		abort();
	}
	port = rps_server_port(srv);
	fuzz_quiet(); /* after the configuration set its level */
	if (pthread_create(&srv_th, NULL, serve, NULL))
		abort();
}

/* A worker's connection: rank head % 2, or UINT32_MAX (head & 0x80); with
 * head & 0x20 no handshake: the segment's bytes are all the peer sends,
 * hello included (the transport's hello phase and the server's admission);
 * with head & 0x10 half of it: a real hello (fresh nonce) and the server's
 * CHALLENGE, then the segment's bytes take the PROOF's place. */
static int open_worker(uint8_t head)
{
	uint32_t rank = head & 0x80 ? UINT32_MAX : head % 2u;
	int fd = fuzz_connect_or_die(port, "fuzz_server");

	if (head & 0x20)
		return fd;
	if (head & 0x10) {
		struct rps_hello h;
		struct rps_auth_challenge ch;

		if (fuzz_hello_challenge(fd, RPS_ROLE_WORKER, rank, fuzz_now_ms() + WAIT_MS, &h,
					 &ch)) {
			close(fd);
			return -1;
		}
		return fd;
	}
	if (fuzz_handshake(fd, RPS_ROLE_WORKER, rank, SECRET, WAIT_MS)) {
		close(fd);
		return -1;
	}
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct fuzz_seg seg[FUZZ_SEG_MAX];
	int n;

	pthread_once(&once, start);
	n = fuzz_segments(data, size, seg, FUZZ_SEG_MAX);
	fuzz_run_segments(seg, n, open_worker, WAIT_MS);
	return 0;
}
