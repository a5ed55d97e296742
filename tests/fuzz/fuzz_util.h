/* Helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.c): quiet
 * logging, an input as a file, and the raw-socket client of the stream
 * targets (fuzz_sched, fuzz_server), which do the handshake with
 * fuzz_handshake() and then send the input's bytes as they are.
 *
 * The handshake (src/auth.h: HELLO with a nonce -> CHALLENGE -> PROOF ->
 * HELLO_ACK) is the one thing a stream target does with the library's
 * encoders: fuzz_handshake() does the client side for real with the fuzz
 * secret; fuzz_hello_challenge() only its first half, so that the input's
 * bytes can be the proof phase. Its decoders have entries in fuzz_hello.c. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "src/auth.h"
#include "src/log.h"
#include "src/proto.h"

#define F_FN static __attribute__((unused))
#define RPS_FUZZ_MIN(a, b) ((a) < (b) ? (a) : (b))

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

/* FUZZ_DEBUG=1: the stream targets say what they do, with times (ms). */
F_FN uint64_t fuzz_now_ms(void);
F_FN void fuzz_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
F_FN void fuzz_debug(const char *fmt, ...)
{
	static int on = -1;
	va_list ap;

	if (on < 0)
		on = getenv("FUZZ_DEBUG") && !strcmp(getenv("FUZZ_DEBUG"), "1");
	if (!on)
		return;
	fprintf(stderr, "fuzz %llu: ", (unsigned long long)(fuzz_now_ms() % 100000));
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
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

/* ---- the handshake's fixed parts (fuzz_hello.c and its seeds) ---- */

/* The client's hello of fuzz_hello.c's challenge entry: a worker of rank 1,
 * channel 0, nonce bytes 0, 1, ..., 31. */
F_FN void fuzz_auth_hello(struct rps_hello *h)
{
	rps_proto_hello_init(h, RPS_ROLE_WORKER, 1);
	for (int i = 0; i < RPS_NONCE_LEN; i++)
		h->nonce[i] = (uint8_t)i;
}

/* The listener's challenge of fuzz_hello.c's proof entry for hello h: Ns
 * bytes 0xa0, 0xa1, ..., and mac_s of secret. */
F_FN void fuzz_auth_challenge(const char *secret, const struct rps_hello *h,
			      struct rps_auth_challenge *ch)
{
	for (int i = 0; i < RPS_NONCE_LEN; i++)
		ch->nonce[i] = (uint8_t)(0xa0 + i);
	rps_auth_mac(secret, 'S', h, ch->nonce, ch->mac);
}

/* ---- stream targets: raw TCP clients on 127.0.0.1 ---- */

F_FN int fuzz_connect(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd, one = 1;

	signal(SIGPIPE, SIG_IGN); /* a peer that closed early is no crash */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int rc = -errno;

		/* a signal (libFuzzer's -timeout alarm) interrupted it: the
		 * connection goes on in the background; wait for its outcome */
		if (rc == -EINTR) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			int err = 0, n;
			socklen_t l = sizeof(err);

			while ((n = poll(&p, 1, 5000)) < 0 && errno == EINTR)
				;
			if (n > 0 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) && !err)
				return fd;
			rc = n > 0 ? (err ? -err : -EIO) : -ETIMEDOUT;
		}
		close(fd);
		return rc;
	}
	return fd;
}

/* fuzz_connect, but out of local ports (EADDRNOTAVAIL: a long run leaves
 * tens of thousands of closed connections in TIME_WAIT, more with two
 * targets at once) or of descriptors in this process (EMFILE) is the
 * machine, not the server: wait and try again, for up to 5 s. */
F_FN int fuzz_connect_retry(uint16_t port)
{
	int fd = -EAGAIN;

	for (int i = 0; i < 50; i++) {
		fd = fuzz_connect(port);
		if (fd >= 0 || (fd != -EADDRNOTAVAIL && fd != -EMFILE && fd != -ENFILE))
			break;
		poll(NULL, 0, 100);
	}
	return fd;
}

/* fuzz_connect_retry for a target whose server must always accept: a
 * refusal is a finding (abort, with the reason on stderr). */
F_FN int fuzz_connect_or_die(uint16_t port, const char *who)
{
	int fd = fuzz_connect_retry(port);

	if (fd < 0) {
		fprintf(stderr, "%s: cannot connect to the server under test (127.0.0.1:%u): %s\n",
			who, port, strerror(-fd));
		abort(); /* the server stopped accepting: a finding */
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

/* Read one frame whose payload fits in cap bytes: header into *h_p, payload
 * into buf. 0, or -EIO (closed, timed out, or a payload longer than cap). */
F_FN int fuzz_read_frame(int fd, struct rps_frame_hdr *h_p, void *buf, size_t cap,
			 uint64_t deadline_ms)
{
	if (fuzz_read_full(fd, h_p, sizeof(*h_p), deadline_ms))
		return -EIO;
	if (h_p->len > cap || fuzz_read_full(fd, buf, h_p->len, deadline_ms))
		return -EIO;
	return 0;
}

/* The first half of the client side of the handshake (src/auth.h): a HELLO
 * frame with a fresh nonce (rps_auth_nonce), then the listener's CHALLENGE,
 * read whole and decoded (rps_auth_challenge_decode). The hello as sent into
 * *h_p, the challenge into *ch_p. 0: a challenge came; -EACCES: the listener
 * refused the hello (an ERROR or anything but a CHALLENGE); -EIO. */
F_FN int fuzz_hello_challenge(int fd, uint8_t role, uint32_t rank, uint64_t deadline_ms,
			      struct rps_hello *h_p, struct rps_auth_challenge *ch_p)
{
	struct {
		struct rps_frame_hdr h;
		struct rps_hello hello;
	} f;
	struct rps_frame_hdr ans;
	uint8_t payload[4096];
	const char *why = NULL;

	rps_proto_hdr_init(&f.h, RPS_OP_HELLO, sizeof(f.hello), 0);
	rps_proto_hello_init(&f.hello, role, rank);
	if (rps_auth_nonce(&f.hello))
		abort(); /* no random bytes: not an input's fault */
	if (write(fd, &f, sizeof(f)) != (ssize_t)sizeof(f))
		return -EIO;
	if (fuzz_read_frame(fd, &ans, payload, sizeof(payload), deadline_ms))
		return -EIO;
	if (ans.op != RPS_OP_CHALLENGE || ans.status)
		return -EACCES;
	if (rps_auth_challenge_decode(payload, ans.len, ch_p, &why))
		return -EIO;
	*h_p = f.hello;
	return 0;
}

/* The client side of the handshake, for real (as transport/tcp/tcp_connect.c
 * handshake() does it): hello with a fresh nonce, CHALLENGE, check of the
 * listener's MAC and our PROOF (rps_auth_challenge_answer), then the answer
 * (a HELLO_ACK with its payload, or an ERROR), read whole. 0: accepted. A
 * listener that does not prove it knows the secret is a finding (abort):
 * the targets' listeners hold the fuzz secret. */
F_FN int fuzz_handshake(int fd, uint8_t role, uint32_t rank, const char *secret,
			int timeout_ms)
{
	struct {
		struct rps_frame_hdr h;
		struct rps_auth_proof proof;
	} pf;
	struct rps_hello hello;
	struct rps_auth_challenge ch;
	struct rps_frame_hdr ack;
	uint8_t payload[4096];
	uint64_t deadline = fuzz_now_ms() + (uint64_t)timeout_ms;
	int rc;

	rc = fuzz_hello_challenge(fd, role, rank, deadline, &hello, &ch);
	if (rc)
		return rc;
	if (rps_auth_challenge_answer(secret, &hello, &ch, &pf.proof)) {
		fprintf(stderr, "fuzz: the listener's challenge does not prove the secret\n");
		abort();
	}
	rps_proto_hdr_init(&pf.h, RPS_OP_PROOF, sizeof(pf.proof), 0);
	if (write(fd, &pf, sizeof(pf)) != (ssize_t)sizeof(pf))
		return -EIO;
	if (fuzz_read_frame(fd, &ack, payload, sizeof(payload), deadline))
		return -EIO;
	return ack.op == RPS_OP_HELLO_ACK && ack.status == 0 ? 0 : -EACCES;
}

/* The stream targets' inputs: up to max segments, each a header byte, a
 * length (2 bytes, little-endian; cut to what is left) and that many bytes.
 * A header byte with FUZZ_SEG_MORE set continues connection
 * (head & FUZZ_SEG_CONN) of this input (modulo those open; the first
 * connection if none is); otherwise the segment opens a new connection and
 * the target makes of the header what it wants (role, rank). Returns the
 * count. */
#define FUZZ_SEG_MORE 0x40
#define FUZZ_SEG_CONN 0x03
#define FUZZ_SEG_MAX  8

struct fuzz_seg {
	uint8_t head;
	const uint8_t *p;
	size_t len;
};

F_FN int fuzz_segments(const uint8_t *data, size_t size, struct fuzz_seg *seg, int max)
{
	int n = 0;

	while (size >= 3 && n < max) {
		size_t l = (size_t)data[1] | (size_t)data[2] << 8;

		seg[n].head = data[0];
		data += 3;
		size -= 3;
		if (l > size)
			l = size;
		seg[n].p = data;
		seg[n].len = l;
		data += l;
		size -= l;
		n++;
	}
	return n;
}

/* Read and discard what the peers send until they have been quiet for 3 ms
 * (at most 30 ms); note those that closed. */
F_FN void fuzz_settle(const int *fds, int nfds, int *eof, int *closed)
{
	uint64_t end = fuzz_now_ms() + 30;

	while (fuzz_now_ms() < end) {
		struct pollfd pf[FUZZ_SEG_MAX];
		char buf[65536];
		int n;

		for (int i = 0; i < nfds; i++) {
			pf[i].fd = eof[i] ? -1 : fds[i];
			pf[i].events = POLLIN;
			pf[i].revents = 0;
		}
		n = poll(pf, (nfds_t)nfds, 3);
		if (n <= 0)
			return;
		for (int i = 0; i < nfds; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t k = read(fds[i], buf, sizeof(buf));

			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
				eof[i] = 1;
				(*closed)++;
			}
		}
	}
}

/* Send chunk k (out[k], len[k] bytes) on fds[conn[k]], in order, while
 * reading and discarding whatever the peers answer on every fd (so that
 * none blocks on us); when all is sent, shut down our writing sides and
 * read until each peer closed or timeout_ms passed. Returns how many
 * peers closed. */
/* Set by a target whose peer can stop answering for good (the scheduler at
 * the end of a job): fuzz_stream stops waiting when it returns non-zero. */
static int (*fuzz_stream_stop)(void);

F_FN int fuzz_stream(const int *fds, int nfds, const int *conn, const uint8_t *const *out,
		     const size_t *len, int nchunks, int timeout_ms)
{
	int eof[FUZZ_SEG_MAX] = {0}, closed = 0, cur = 0, shut = 0;
	size_t sent = 0;
	uint64_t deadline = fuzz_now_ms() + (uint64_t)timeout_ms;

	if (nfds > FUZZ_SEG_MAX)
		abort();
	for (int i = 0; i < nfds; i++)
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	while (closed < nfds) {
		struct pollfd pf[FUZZ_SEG_MAX];
		uint64_t now = fuzz_now_ms();
		char buf[65536];
		int wfd;

		if (now >= deadline || (fuzz_stream_stop && fuzz_stream_stop()))
			break;
		/* the next chunk to send, in order; all shut down once sent */
		while (cur < nchunks && (sent == len[cur] || eof[conn[cur]])) {
			cur++;
			sent = 0;
			/* the peer sees each connection's bytes in order, but not
			 * different connections': before another connection
			 * speaks, let it handle what came (until it has been
			 * quiet for 3 ms, at most 30 ms) */
			if (cur < nchunks && conn[cur] != conn[cur - 1])
				fuzz_settle(fds, nfds, eof, &closed);
		}
		if (cur == nchunks && !shut) {
			for (int i = 0; i < nfds; i++)
				shutdown(fds[i], SHUT_WR);
			shut = 1;
		}
		wfd = cur < nchunks ? conn[cur] : -1;
		for (int i = 0; i < nfds; i++) {
			pf[i].fd = eof[i] ? -1 : fds[i];
			pf[i].events = POLLIN | (i == wfd ? POLLOUT : 0);
			pf[i].revents = 0;
		}
		if (poll(pf, (nfds_t)nfds, (int)RPS_FUZZ_MIN(deadline - now, 10)) <= 0)
			continue;
		for (int i = 0; i < nfds; i++) {
			if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				ssize_t k = read(fds[i], buf, sizeof(buf));

				if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
					eof[i] = 1; /* it hung up: send it no more */
					closed++;
				}
			}
			if (i == wfd && !eof[i] && (pf[i].revents & POLLOUT)) {
				ssize_t k = write(fds[i], out[cur] + sent, len[cur] - sent);

				if (k > 0)
					sent += (size_t)k;
				else if (k < 0 && errno != EAGAIN && errno != EINTR)
					sent = len[cur];
			}
		}
	}
	return closed;
}

/* Open the connections of an input's segments and send them: a new
 * connection per segment without FUZZ_SEG_MORE, opened with open_fn (which
 * connects and does the handshake; a negative return skips the segment),
 * then fuzz_stream. Closes them. */
F_FN void fuzz_run_segments(const struct fuzz_seg *seg, int n, int (*open_fn)(uint8_t head),
			    int timeout_ms)
{
	int fds[FUZZ_SEG_MAX], conn[FUZZ_SEG_MAX], nfds = 0, nch = 0;
	const uint8_t *out[FUZZ_SEG_MAX];
	size_t len[FUZZ_SEG_MAX];

	for (int i = 0; i < n; i++) {
		int c;

		if (seg[i].head & FUZZ_SEG_MORE) {
			if (!nfds)
				continue;
			c = (seg[i].head & FUZZ_SEG_CONN) % nfds;
		} else {
			int fd = open_fn(seg[i].head);

			fuzz_debug("segment %d: connection (head 0x%02x): %d", i, seg[i].head, fd);
			if (fd < 0)
				continue;
			c = nfds;
			fds[nfds++] = fd;
		}
		conn[nch] = c;
		out[nch] = seg[i].p;
		len[nch] = seg[i].len;
		nch++;
	}
	fuzz_debug("%d connection(s) open, sending %d chunk(s)", nfds, nch);
	n = fuzz_stream(fds, nfds, conn, out, len, nch, timeout_ms);
	fuzz_debug("%d of %d connection(s) closed by the peer", n, nfds);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

#endif
