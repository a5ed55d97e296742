/* TCP transport, connecting side: connect() is a blocking TCP connect (with
 * the timeout), a HELLO frame, the listener's CHALLENGE (checked: it must
 * know the secret), our PROOF, then HELLO_ACK (its payload is returned) or
 * ERROR at any step (its status is returned, its text logged). src/auth.h
 * has the cryptography. Depends on tcp_conn.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/auth.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/tcp/tcp_int.h"

/* Blocking I/O of exactly len bytes on a non-blocking socket (through ssl
 * when not NULL), until deadline. */
static int io_full(struct ssl_st *ssl, int fd, void *buf, size_t len, uint64_t deadline,
		   int writing)
{
	char *p = buf;

	if (ssl)
		return tcp_tls_io_full(ssl, fd, buf, len, deadline, writing);
	while (len) {
		ssize_t n = writing ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			struct pollfd pfd = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
			uint64_t now = rps_now_ns();

			if (now >= deadline)
				return -ETIMEDOUT;
			n = poll(&pfd, 1, (int)RPS_MAX((deadline - now) / 1000000ull, 1));
			if (n < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		return errno == EPIPE ? -ECONNRESET : -errno;
	}
	return 0;
}

/* TCP connect to one address, up to deadline. fd or -errno. */
static int connect_one(const struct addrinfo *ai, uint64_t deadline)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err = 0;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			err = errno;
			goto err_close;
		}
		for (;;) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			uint64_t now = rps_now_ns();
			int n;

			if (now >= deadline) {
				err = ETIMEDOUT;
				goto err_close;
			}
			n = poll(&pfd, 1, (int)RPS_MAX((deadline - now) / 1000000ull, 1));
			if (n > 0)
				break;
			if (n < 0 && errno != EINTR) {
				err = errno;
				goto err_close;
			}
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		if (err)
			goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return -err;
}

struct tcp_hello_frame {
	struct rps_frame_hdr h;
	struct rps_hello hello;
};

_Static_assert(sizeof(struct tcp_hello_frame) == 72, "hello frame without padding");

struct tcp_proof_frame {
	struct rps_frame_hdr h;
	struct rps_auth_proof proof;
};

_Static_assert(sizeof(struct tcp_proof_frame) == 56, "proof frame without padding");

/* The listener's answer in the handshake: a frame of op `want` (at most cap
 * bytes, into buf) or an ERROR (its status returned, its text logged). */
static int read_answer(struct ssl_st *ssl, int fd, const char *peer, uint8_t want, void *buf,
		       size_t cap, uint32_t *len_p, uint64_t deadline)
{
	struct rps_frame_hdr h;
	int rc = io_full(ssl, fd, &h, sizeof(h), deadline, 0);

	if (rc)
		goto err_io;
	if (h.magic != RPS_PROTO_MAGIC || h.version != RPS_PROTO_VERSION ||
	    (h.op != want && h.op != RPS_OP_ERROR) || h.len > RPS_TR_ACK_MAX) {
		RPS_ERR("connect %s: bad answer to the %s (magic 0x%08x version %u op %u len %u)",
			peer, want == RPS_OP_CHALLENGE ? "hello" : "proof", h.magic, h.version, h.op,
			h.len);
		return -EPROTO;
	}
	if (h.op == RPS_OP_ERROR) {
		char text[RPS_TR_ACK_MAX + 1], why[RPS_LOG_ESC_BUF];

		rc = io_full(ssl, fd, text, h.len, deadline, 0);
		if (rc)
			goto err_io;
		text[h.len] = 0;
		rc = h.status < 0 ? h.status : -EPROTO;
		RPS_ERR("connect %s: refused: %s (%s)", peer,
			rps_log_escape(text, h.len, why, sizeof(why)), strerror(-rc));
		return rc;
	}
	if (h.len > cap || (h.len && !buf)) {
		RPS_ERR("connect %s: hello ack of %u bytes, room for %zu", peer, h.len, cap);
		return -EMSGSIZE;
	}
	rc = io_full(ssl, fd, buf, h.len, deadline, 0);
	if (rc)
		goto err_io;
	*len_p = h.len;
	return 0;

err_io:
	RPS_ERR("connect %s: hello: %s", peer, strerror(-rc));
	return rc;
}

/* Client side of the challenge-response (src/auth.h); then the HELLO_ACK. */
static int handshake(struct tcp_transport *tt, struct ssl_st *ssl, int fd, const char *peer,
		     struct rps_hello *hello, void *ack, size_t ack_cap, uint32_t *ack_len_p,
		     uint64_t deadline)
{
	struct tcp_hello_frame req;
	struct tcp_proof_frame pf;
	struct rps_auth_challenge ch;
	const char *why = NULL;
	uint32_t len = 0;
	int rc;

	rc = rps_auth_nonce(hello);
	if (rc)
		return rc;
	rps_proto_hdr_init(&req.h, RPS_OP_HELLO, sizeof(req.hello), 0);
	req.hello = *hello;
	rc = io_full(ssl, fd, &req, sizeof(req), deadline, 1);
	if (rc)
		goto err_io;
	rc = read_answer(ssl, fd, peer, RPS_OP_CHALLENGE, &ch, sizeof(ch), &len, deadline);
	if (rc)
		return rc;
	rc = rps_auth_challenge_decode(&ch, len, &ch, &why);
	if (rc) {
		RPS_ERR("connect %s: %s", peer, why);
		return rc;
	}
	rps_proto_hdr_init(&pf.h, RPS_OP_PROOF, sizeof(pf.proof), 0);
	rc = rps_auth_challenge_answer(tt->secret, hello, &ch, &pf.proof);
	if (rc) {
		/* say so (an ERROR without text), so that the listener logs us */
		rps_proto_hdr_init(&pf.h, RPS_OP_ERROR, 0, 0);
		pf.h.status = -EACCES;
		io_full(ssl, fd, &pf.h, sizeof(pf.h), deadline, 1);
		RPS_ERR("connect %s: wrong secret: the listener does not know our job secret "
			"(another RDMAPS_SECRET, or not an rdmaps process of this job)",
			peer);
		return -EACCES;
	}
	rc = io_full(ssl, fd, &pf, sizeof(pf), deadline, 1);
	if (rc)
		goto err_io;
	return read_answer(ssl, fd, peer, RPS_OP_HELLO_ACK, ack, ack_cap, ack_len_p, deadline);

err_io:
	RPS_ERR("connect %s: hello: %s", peer, strerror(-rc));
	return rc;
}

int tcp_connect(struct rps_transport *t, const char *host, uint16_t port,
		const struct rps_hello *hello, void *ack, size_t ack_cap, size_t *ack_len_p,
		int timeout_ms, struct rps_conn **conn_p)
{
	struct tcp_transport *tt = tcp_tt(t);
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	struct rps_hello mine;
	struct tcp_conn *c;
	struct ssl_st *ssl = NULL;
	char ports[8], peer[64];
	uint64_t deadline;
	uint32_t ack_len = 0;
	int fd = -1, rc;

	if (!host || !hello || !conn_p)
		return -EINVAL;
	if (timeout_ms <= 0)
		timeout_ms = tt->timeout_ms;
	deadline = rps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	snprintf(ports, sizeof(ports), "%u", port);
	snprintf(peer, sizeof(peer), "%s:%u", host, port);
	rc = getaddrinfo(host, ports, &hints, &res);
	if (rc) {
		/* once per 30 s: callers retry (rps_ctl_join sums up with a count) */
		RPS_LOG_RATELIMITED_EX(RPS_LOG_ERROR, 30000, 1, "connect %s: %s", peer,
				       gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	rc = -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai, deadline);
		if (fd >= 0) {
			tcp_sockaddr_str(ai->ai_addr, peer, sizeof(peer));
			break;
		}
		rc = fd;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		/* callers retry a peer that is not up yet: that is not an error */
		if (rc == -ECONNREFUSED)
			RPS_DEBUG("connect %s: %s", peer, strerror(-rc));
		else /* a mistyped host: said once, callers retry and count */
			RPS_LOG_RATELIMITED_EX(RPS_LOG_ERROR, 30000, 1, "connect %s: %s", peer,
					       strerror(-rc));
		return rc;
	}
	tcp_set_nodelay(fd);

	if (tt->ssl_ctx) {
		rc = tcp_tls_connect(tt, fd, peer, deadline, &ssl);
		if (rc)
			goto err_close;
	}
	mine = *hello;
	rc = handshake(tt, ssl, fd, peer, &mine, ack, ack_cap, &ack_len, deadline);
	if (rc)
		goto err_close;

	c = tcp_conn_new(tt, fd, peer, TCP_PH_OPEN);
	if (!c) {
		rc = -ENOMEM;
		RPS_ERR("connect %s: out of memory", peer);
		goto err_close;
	}
	c->base.hello = mine;
	if (ssl)
		tcp_tls_opened(ssl);
	c->ssl = ssl; /* the connection owns it now */
	ssl = NULL;
	rc = tcp_conn_add(tt, c);
	if (rc) {
		RPS_ERR("connect %s: epoll_ctl: %s", peer, strerror(-rc));
		tcp_conn_destroy(c); /* closes fd */
		return rc;
	}
	if (ack_len_p)
		*ack_len_p = ack_len;
	*conn_p = &c->base;
	return 0;

err_close:
	tcp_tls_ssl_free(ssl);
	close(fd);
	return rc;
}
