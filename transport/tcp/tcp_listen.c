/* TCP transport, listening side: listen(), accepting sockets, and the
 * handshake: the peer's HELLO (its form checked) is answered with a
 * CHALLENGE, its PROOF is checked against params.secret (src/auth.h), then
 * params.on_hello; a refusal is answered with ERROR and the socket closed,
 * an acceptance with HELLO_ACK and an ACCEPTED event. An accepted socket
 * must finish the handshake within the timeout. Nothing else is read
 * before. Depends on tcp_conn.c and tcp_send.c.
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
#include "src/log.h"
#include "src/util.h"
#include "transport/tcp/tcp_int.h"

int tcp_listen(struct rps_transport *t, const char *host, uint16_t port, uint16_t *port_p)
{
	struct tcp_transport *tt = tcp_tt(t);
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	struct tcp_listener *l;
	struct epoll_event e = {.events = EPOLLIN};
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ports[8];
	int fd = -1, rc, one = 1;

	if (host && (!host[0] || !strcmp(host, "*")))
		host = NULL;
	snprintf(ports, sizeof(ports), "%u", port);
	rc = getaddrinfo(host, ports, &hints, &res);
	if (rc) {
		RPS_ERR("listen %s:%u: %s", host ? host : "*", port, gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0)
			break;
		rc = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		RPS_ERR("listen %s:%u: %s", host ? host : "*", port, strerror(-rc));
		return rc;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		RPS_ERR("listen %s:%u: getsockname: %m", host ? host : "*", port);
		goto err_close;
	}
	l = rps_calloc(1, sizeof(*l));
	if (!l) {
		rc = -ENOMEM;
		goto err_close;
	}
	l->kind = TCP_K_LISTENER;
	l->fd = fd;
	l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	pthread_mutex_lock(&tt->lock);
	if (tt->nlisteners == TCP_MAX_LISTENERS) {
		pthread_mutex_unlock(&tt->lock);
		RPS_ERR("listen %s:%u: more than %d listeners", host ? host : "*", port,
			TCP_MAX_LISTENERS);
		rc = -EMFILE;
		goto err_free;
	}
	tt->listeners[tt->nlisteners++] = l;
	pthread_mutex_unlock(&tt->lock);
	/* given up when out of descriptors, to accept and close the newest
	 * connection instead of leaving the listener readable (tcp_limits.c) */
	if (tt->reserve_fd < 0)
		tt->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	e.data.ptr = &l->kind;
	if (epoll_ctl(tt->ep, EPOLL_CTL_ADD, fd, &e) < 0) {
		rc = -errno;
		RPS_ERR("listen %s:%u: epoll_ctl: %m", host ? host : "*", port);
		pthread_mutex_lock(&tt->lock);
		tt->nlisteners--;
		pthread_mutex_unlock(&tt->lock);
		goto err_free;
	}
	RPS_DEBUG("tcp: listening on %s:%u", host ? host : "*", l->port);
	if (port_p)
		*port_p = l->port;
	return 0;

err_free:
	rps_free(l);
err_close:
	close(fd);
	return rc;
}

void tcp_accept(struct tcp_transport *tt, struct tcp_listener *l)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct tcp_conn *c;
		char peer[64];
		char ip[sizeof(peer)];
		int one = 1;
		int fd;

		fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				tcp_accept_failed(tt, l, errno);
			return;
		}
		tcp_sockaddr_str((struct sockaddr *)&ss, peer, sizeof(peer));
		memcpy(ip, peer, sizeof(ip));
		if (strrchr(ip, ':'))
			*strrchr(ip, ':') = '\0'; /* "[::1]" or "10.0.0.1" */
		if (tcp_admit(tt, ip, peer) < 0) {
			close(fd);
			continue;
		}
		tcp_set_nodelay(fd);
		/* a vanished peer is found even when nothing is sent (docs/options.md) */
		if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) == 0) {
			int idle = 60, intvl = 10, cnt = 6;

			setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
		}
		c = tcp_conn_new(tt, fd, peer, TCP_PH_HELLO);
		if (!c) {
			RPS_ERR("tcp: accept %s: out of memory", peer);
			close(fd);
			continue;
		}
		c->accepted = 1;
		if (tt->ssl_ctx) {
			if (tcp_tls_attach(c) < 0) {
				tcp_conn_destroy(c);
				continue;
			}
			c->phase = TCP_PH_TLS; /* the TLS handshake before the hello */
		}
		snprintf(c->ip, sizeof(c->ip), "%s", ip);
		c->last_rx_ns = rps_now_ns();
		if (tcp_conn_add(tt, c) < 0) {
			RPS_ERR("tcp: accept %s: epoll_ctl: %m", peer);
			tcp_conn_destroy(c);
			continue;
		}
		tt->naccepted++;
		c->counted = 1;
		c->hello_deadline = rps_now_ns() + (uint64_t)tt->timeout_ms * 1000000ull;
		c->hprev = tt->hello_tail;
		if (tt->hello_tail)
			tt->hello_tail->hnext = c;
		else
			tt->hello_head = c;
		tt->hello_tail = c;
		RPS_DEBUG("tcp: accepted %s", peer);
	}
}

/* Refuse a connection in its handshake: log the peer and its claim in
 * words, answer ERROR, free it. */
static int refuse(struct tcp_conn *c, int rc, const char *why)
{
	char claim[64];

	if (!why)
		why = "refused";
	/* a flood of bad handshakes must not flood the log */
	RPS_LOG_RATELIMITED_EX(
	    RPS_LOG_WARN, RPS_LOG_RL_MS, 20, "refusing %s, %s: %s", c->base.peer,
	    rps_proto_claim_text(c->base.hello.role, c->base.hello.rank, claim, sizeof(claim)),
	    why);
	tcp_send_error(c, rc, why);
	tcp_conn_fail(c, rc, 0, NULL);
	return rc;
}

int tcp_hello_in(struct tcp_conn *c)
{
	struct tcp_transport *tt = c->tt;
	struct rps_frame_hdr h;
	struct rps_hello hello;
	const char *why = NULL;
	struct iovec v;
	int rc;

	rc = rps_proto_hello_decode(c->rx_fixed, sizeof(hello), &hello, &why);
	if (rc) {
		memcpy(&c->base.hello, c->rx_fixed, sizeof(c->base.hello));
		return refuse(c, rc, why);
	}
	c->base.hello = hello;
	rc = rps_auth_challenge_make(tt->secret, &hello, &c->chal);
	if (rc)
		return refuse(c, rc, "server error: no random bytes");
	c->phase = TCP_PH_PROOF;
	rps_proto_hdr_init(&h, RPS_OP_CHALLENGE, sizeof(c->chal), 0);
	v.iov_base = &c->chal;
	v.iov_len = sizeof(c->chal);
	rc = tcp_send_internal(c, &h, &v, 1);
	if (rc) {
		tcp_conn_fail(c, rc, 0, "challenge: %s", strerror(-rc));
		return rc;
	}
	return 0;
}

int tcp_proof_in(struct tcp_conn *c)
{
	struct tcp_transport *tt = c->tt;
	const struct rps_tr_params *p = &tt->base.params;
	struct rps_auth_proof proof;
	struct rps_frame_hdr h;
	const char *why = NULL;
	size_t ack_len = 0;
	struct iovec v;
	int rc;

	if (c->rx_hdr.op == RPS_OP_ERROR) /* it refused our challenge */
		return refuse(c, -EACCES,
			      "wrong secret: it says our challenge does not match its secret");
	rc = rps_auth_proof_decode(c->rx_fixed, sizeof(proof), &proof, &why);
	if (rc)
		return refuse(c, rc, why);
	if (rps_auth_proof_check(tt->secret, &c->base.hello, &c->chal, &proof))
		return refuse(c, -EACCES, rps_auth_refusal(tt->secret, &c->base.hello));
	if (p->on_hello) {
		rc = p->on_hello(p->arg, &c->base, &c->base.hello, tt->ack, &ack_len, &why);
		if (rc > 0)
			rc = -EPERM;
		if (!rc && ack_len > RPS_TR_ACK_MAX) {
			RPS_ERR("tcp: on_hello gave a %zu-byte ack (at most %d)", ack_len,
				RPS_TR_ACK_MAX);
			rc = -EMSGSIZE;
			why = "server error: ack too large";
		}
		if (rc)
			return refuse(c, rc, why);
	}
	tcp_hello_unlink(tt, c);
	c->phase = TCP_PH_OPEN;
	rps_proto_hdr_init(&h, RPS_OP_HELLO_ACK, (uint32_t)ack_len, 0);
	v.iov_base = tt->ack;
	v.iov_len = ack_len;
	rc = tcp_send_internal(c, &h, &v, ack_len ? 1 : 0);
	if (rc) {
		tcp_conn_fail(c, rc, 0, "hello ack: %s", strerror(-rc));
		return rc;
	}
	RPS_DEBUG("tcp: %s authenticated (role %u rank %u)", c->base.peer, c->base.hello.role,
		  c->base.hello.rank);
	{
		struct rps_tr_event ev = {.type = RPS_TR_EV_ACCEPTED, .conn = &c->base};

		rc = tcp_evq_push(tt, &ev);
		if (rc) {
			tcp_conn_fail(c, rc, 0, "accept: out of memory");
			return rc;
		}
	}
	return 0;
}
