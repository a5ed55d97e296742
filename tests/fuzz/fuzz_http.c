/* Fuzz target: HTTP requests to the /metrics endpoint (http/http.c on GNU
 * libmicrohttpd), served by the real server in-process.
 *
 * Once: rps_http_start on 127.0.0.1, an ephemeral port, a registry with a
 * counter, a gauge and a labelled gauge, the metrics handler of
 * rdmaps-server and rdmaps-sched (rps_http_metrics_handler), a 1 s idle
 * timeout and a 1 KiB request limit (small, so that the 431 path is near).
 * Per input: a new connection, the input's bytes as the raw request, our
 * side shut for writing, then read until the server closes or 2 s pass
 * (only a request that is still incomplete waits: the server answers and
 * closes at the end of a request, or at EOF). An answer, when there is
 * one, must be an HTTP/1.x status line. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "src/metrics.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WAIT_MS 2000

static struct rps_http_server *srv;
static struct rps_metrics *reg;
static uint16_t port;

static void start(void)
{
	struct rps_http_opts o = {.timeout_ms = 1000, .max_request = 1024, .max_clients = 8};
	struct rps_metric *m;

	fuzz_quiet();
	if (rps_metrics_create(&reg) || rps_metrics_counter(reg, "rdmaps_fuzz_total", "inputs", NULL, &m) ||
	    rps_metrics_gauge(reg, "rdmaps_fuzz_gauge", "a gauge", "shard=\"0\"", &m) ||
	    rps_metrics_gauge(reg, "rdmaps_fuzz_gauge", "a gauge", "shard=\"1\"", &m)) {
		fprintf(stderr, "fuzz_http: metrics registry\n");
		abort();
	}
	rps_metric_set(m, 2.5);
	if (rps_http_start("127.0.0.1", 0, &o, rps_http_metrics_handler, reg, &srv)) {
		fprintf(stderr, "fuzz_http: cannot start the server\n");
		abort();
	}
	port = rps_http_port(srv);
}

/* Read the whole answer into buf (what fits); its length. */
static size_t read_answer(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t got = 0;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		uint64_t now = fuzz_now_ms();
		char tmp[4096];
		ssize_t k;

		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			return got;
		k = read(fd, tmp, sizeof(tmp));
		if (k <= 0)
			return got;
		if (got < cap) {
			size_t take = (size_t)k < cap - got ? (size_t)k : cap - got;

			memcpy(buf + got, tmp, take);
			got += take;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	uint64_t deadline;
	char answer[256];
	size_t sent = 0, got;
	int fd;

	pthread_once(&once, start);
	fd = fuzz_connect_or_die(port, "fuzz_http");
	deadline = fuzz_now_ms() + WAIT_MS;
	while (sent < size) {
		ssize_t k = write(fd, data + sent, size - sent);

		if (k <= 0)
			break; /* it closed early (an error answer) */
		sent += (size_t)k;
	}
	shutdown(fd, SHUT_WR);
	got = read_answer(fd, answer, sizeof(answer), deadline);
	close(fd);
	if (got >= 12 && strncmp(answer, "HTTP/1.", 7)) {
		fprintf(stderr, "fuzz_http: answer does not start with a status line\n");
		abort();
	}
	return 0;
}
