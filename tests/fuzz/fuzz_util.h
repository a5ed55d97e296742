/* Helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.c): quiet
 * logging, an input as a file, and the raw-socket client of the stream
 * targets (fuzz_sched, fuzz_server), which do the handshake with
 * fuzz_handshake() and then send the input's bytes as they are.
 *
 * The handshake is the one thing a stream target does with the library's
 * encoder: a new handshake (issue 20, challenge-response) changes
 * fuzz_handshake() only, and its decoder gets an entry in fuzz_hello.c. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "src/log.h"
#include "src/proto.h"

#define F_FN static __attribute__((unused))

/* Read every byte of [p, p + n): ASan checks that it is all ours. */
static volatile uint8_t fuzz_sink;
F_FN void fuzz_touch(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint8_t x = 0;

	for (size_t i = 0; i < n; i++)
		x ^= b[i];
	fuzz_sink = x;
}

/* Logging off (every input would print its refusal), unless FUZZ_LOG=1. */
F_FN void fuzz_quiet(void)
{
	const char *v = getenv("FUZZ_LOG");

	if (!v || strcmp(v, "1"))
		rps_log_level_cur = -1;
}

F_FN uint64_t fuzz_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The input as a file: an anonymous memory file, rewritten for each input;
 * its path (/proc/self/fd/N) into path. Aborts if the system refuses (not an
 * input's fault). */
F_FN const char *fuzz_file(const uint8_t *data, size_t size, char *path, size_t len)
{
	static int fd = -1;

	if (fd < 0) {
		fd = memfd_create("fuzz-input", MFD_CLOEXEC);
		if (fd < 0) {
			perror("memfd_create");
			abort();
		}
	}
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
		perror("fuzz input file");
		abort();
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return path;
}

/* ---- stream targets: raw TCP clients on 127.0.0.1 ---- */

F_FN int fuzz_connect(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* Read exactly n bytes (or fail) within the deadline. */
F_FN int fuzz_read_full(int fd, void *buf, size_t n, uint64_t deadline_ms)
{
	uint8_t *p = buf;

	while (n) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		uint64_t now = fuzz_now_ms();
		ssize_t k;

		if (now >= deadline_ms || poll(&pf, 1, (int)(deadline_ms - now)) <= 0)
			return -ETIMEDOUT;
		k = read(fd, p, n);
		if (k <= 0)
			return k ? -errno : -ECONNRESET;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The client side of today's handshake: a HELLO frame, then the answer (a
 * HELLO_ACK with its payload, or an ERROR), read whole. 0: accepted. */
F_FN int fuzz_handshake(int fd, uint8_t role, uint32_t rank, const char *secret, int timeout_ms)
{
	struct {
		struct rps_frame_hdr h;
		struct rps_hello hello;
	} f;
	struct rps_frame_hdr ack;
	uint8_t payload[4096];
	uint64_t deadline = fuzz_now_ms() + (uint64_t)timeout_ms;

	rps_proto_hdr_init(&f.h, RPS_OP_HELLO, sizeof(f.hello), 0);
	rps_proto_hello_init(&f.hello, role, rank, secret);
	if (write(fd, &f, sizeof(f)) != (ssize_t)sizeof(f))
		return -EIO;
	if (fuzz_read_full(fd, &ack, sizeof(ack), deadline))
		return -EIO;
	if (ack.len > sizeof(payload) || fuzz_read_full(fd, payload, ack.len, deadline))
		return -EIO;
	return ack.op == RPS_OP_HELLO_ACK && ack.status == 0 ? 0 : -EACCES;
}

/* Send out[i] (len[i] bytes) on fds[i], one after the other, while reading
 * and discarding whatever the peer answers on every fd (so that it never
 * blocks on us); when all is sent, shut down our writing sides and read
 * until each peer closes or timeout_ms passed. Returns how many peers
 * closed. */
F_FN int fuzz_stream(const int *fds, int n, const uint8_t *const *out, const size_t *len,
		     int timeout_ms)
{
	size_t sent[8] = {0};
	int eof[8] = {0}, shut[8] = {0}, closed = 0, cur = 0;
	uint64_t deadline = fuzz_now_ms() + (uint64_t)timeout_ms;

	if (n > 8)
		abort();
	for (int i = 0; i < n; i++)
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	while (closed < n) {
		struct pollfd pf[8];
		uint64_t now = fuzz_now_ms();
		char buf[65536];

		if (now >= deadline)
			break;
		/* the next stream to send, in order; all shut down once sent */
		while (cur < n && sent[cur] == len[cur])
			cur++;
		if (cur == n)
			for (int i = 0; i < n; i++)
				if (!shut[i]) {
					shutdown(fds[i], SHUT_WR);
					shut[i] = 1;
				}
		for (int i = 0; i < n; i++) {
			pf[i].fd = eof[i] ? -1 : fds[i];
			pf[i].events = POLLIN | (i == cur ? POLLOUT : 0);
			pf[i].revents = 0;
		}
		if (poll(pf, (nfds_t)n, (int)(deadline - now)) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				ssize_t k = read(fds[i], buf, sizeof(buf));

				if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
					eof[i] = 1;
					closed++;
					sent[i] = len[i]; /* it hung up: send no more */
				}
			}
			if (i == cur && (pf[i].revents & POLLOUT) && sent[i] < len[i]) {
				ssize_t k = write(fds[i], out[i] + sent[i], len[i] - sent[i]);

				if (k > 0)
					sent[i] += (size_t)k;
				else if (k < 0 && errno != EAGAIN && errno != EINTR)
					sent[i] = len[i];
			}
		}
	}
	return closed;
}

#endif
