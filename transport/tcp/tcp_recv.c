/* TCP transport: the receive state machine (poller only).
 *
 * Bytes are read into a per-connection staging buffer and parsed there
 * (header, check, fixed part, check, data), so a burst of small frames costs
 * one read. Data of at least TCP_DIRECT_MIN bytes is read in place (readv
 * into the destination, with the staging buffer as the second iovec to catch
 * the start of the next frame): into params.recv_dest memory when the
 * callback gives some, else into a pool buffer. The poller reads at most
 * TCP_RX_BUDGET bytes per connection per wake-up. Depends on tcp_listen.c
 * (the hello), tcp_conn.c, tcp_send.c.
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

/* A frame failed a check: log it with what we saw, answer ERROR, close. */
static int rx_bad(struct tcp_conn *c, int status, const char *why)
{
	const struct rps_frame_hdr *h = &c->rx_hdr;

	tcp_conn_fail(c, status, 1, "%s (magic 0x%08x version %u op %u len %u)", why, h->magic,
		      h->version, h->op, h->len);
	return status;
}

static int rx_emit(struct tcp_conn *c)
{
	struct rps_tr_event ev = {.type = RPS_TR_EV_RECV,
				  .conn = &c->base,
				  .hdr = c->rx_hdr,
				  .fixed = c->rx_buf->fixed,
				  .data = c->rx_data_len ? c->rx_dst : NULL,
				  .data_len = c->rx_data_len,
				  .token = c->rx_buf};
	int rc = tcp_evq_push(c->tt, &ev);

	if (rc < 0) {
		tcp_conn_fail(c, rc, 0, "receive: out of memory");
		return rc;
	}
	c->rx_buf = NULL;
	c->rx_dst = NULL;
	c->rx_frames++;
	c->rx_state = TCP_RX_HDR;
	c->rx_deadline = 0; /* the next frame has a deadline of its own */
	return 0;
}

static int rx_hdr_in(struct tcp_conn *c)
{
	uint64_t max = c->phase == TCP_PH_HELLO	  ? sizeof(struct rps_hello)
		       : c->phase == TCP_PH_PROOF ? sizeof(struct rps_auth_proof)
						  : c->tt->max_msg;
	const char *why = NULL;
	int rc;

	/* nothing but the proof after our challenge: said before any length */
	if (c->phase == TCP_PH_PROOF && c->rx_hdr.magic == RPS_PROTO_MAGIC &&
	    c->rx_hdr.op != RPS_OP_PROOF && !(c->rx_hdr.op == RPS_OP_ERROR && c->rx_hdr.len == 0))
		return rx_bad(c, -EACCES, "expected the proof of the handshake");
	rc = rps_proto_hdr_check(&c->rx_hdr, max, &why);
	if (rc && c->phase == TCP_PH_HELLO && !c->ssl && ((uint8_t *)&c->rx_hdr)[0] == 0x16)
		return rx_bad(c, -EPROTO,
			      "the peer speaks TLS (RDMAPS_TLS=1 there) and this process does not "
			      "(RDMAPS_TLS=0): set RDMAPS_TLS (--tls) the same in every process of "
			      "the job");
	if (rc)
		return rx_bad(c, rc, why);
	if (c->phase == TCP_PH_HELLO && c->rx_hdr.op != RPS_OP_HELLO)
		return rx_bad(c, -EPROTO, "expected a hello");
	if (c->phase == TCP_PH_PROOF && c->rx_hdr.op != RPS_OP_PROOF &&
	    !(c->rx_hdr.op == RPS_OP_ERROR && c->rx_hdr.len == 0))
		return rx_bad(c, -EACCES, "expected the proof of the handshake");
	if (c->phase == TCP_PH_OPEN &&
	    (c->rx_hdr.op == RPS_OP_HELLO || c->rx_hdr.op == RPS_OP_PROOF ||
	     c->rx_hdr.op == RPS_OP_CHALLENGE))
		return rx_bad(c, -EPROTO, "unexpected handshake frame");
	c->rx_fixed_len = (uint32_t)rps_proto_fixed_len(c->rx_hdr.op);
	c->rx_data_len = c->rx_hdr.len - c->rx_fixed_len;
	c->rx_got = 0;
	c->rx_state = TCP_RX_FIXED;
	if (c->rx_deadline && c->tt->base.params.frame_min_rate)
		c->rx_deadline += (uint64_t)c->rx_hdr.len * 1000000000ull /
				  c->tt->base.params.frame_min_rate;
	return 0;
}

static int rx_fixed_in(struct tcp_conn *c)
{
	struct tcp_transport *tt = c->tt;
	const struct rps_tr_params *p = &tt->base.params;
	const char *why = NULL;
	void *dest = NULL;
	int rc;

	if (c->rx_fixed_len) {
		rc = rps_proto_payload_check(&c->rx_hdr, c->rx_fixed, &why);
		if (rc)
			return rx_bad(c, rc, why);
	}
	if (c->phase != TCP_PH_OPEN) {
		rc = c->phase == TCP_PH_HELLO ? tcp_hello_in(c) : tcp_proof_in(c);
		if (rc == 0)
			c->rx_state = TCP_RX_HDR;
		return rc;
	}
	if (c->rx_data_len && p->recv_dest)
		dest = p->recv_dest(p->arg, &c->base, &c->rx_hdr, c->rx_fixed);
	c->rx_buf = tcp_pool_get(&tt->pool, dest ? 0 : c->rx_data_len);
	if (!c->rx_buf) {
		tcp_conn_fail(c, -ENOMEM, 1, "no buffer for a %llu-byte frame",
			      (unsigned long long)c->rx_hdr.len);
		return -ENOMEM;
	}
	memcpy(c->rx_buf->fixed, c->rx_fixed, c->rx_fixed_len);
	c->rx_dst = dest ? dest : c->rx_buf->data;
	if (!c->rx_data_len)
		return rx_emit(c);
	c->rx_state = TCP_RX_DATA;
	return 0;
}

/* Consume the staged bytes. <0: the connection failed; 1: the peer had its
 * frames for this call (the rest stays staged). */
static int rx_parse(struct tcp_conn *c)
{
	for (;;) {
		size_t avail = c->stage_len - c->stage_pos;
		uint8_t *p = c->stage + c->stage_pos;
		size_t n;
		int rc;

		switch (c->rx_state) {
		case TCP_RX_HDR:
			if (avail < sizeof(c->rx_hdr))
				return 0;
			if (c->accepted && c->rx_frames >= TCP_RX_FRAMES)
				return 1;
			memcpy(&c->rx_hdr, p, sizeof(c->rx_hdr));
			c->stage_pos += sizeof(c->rx_hdr);
			rc = rx_hdr_in(c);
			break;
		case TCP_RX_FIXED:
			if (avail < c->rx_fixed_len)
				return 0;
			memcpy(c->rx_fixed, p, c->rx_fixed_len);
			c->stage_pos += c->rx_fixed_len;
			rc = rx_fixed_in(c);
			break;
		default: /* TCP_RX_DATA */
			n = (size_t)RPS_MIN((uint64_t)avail, c->rx_data_len - c->rx_got);
			if (n == 0)
				return 0;
			memcpy(c->rx_dst + c->rx_got, p, n);
			c->rx_got += n;
			c->stage_pos += n;
			if (c->rx_got < c->rx_data_len)
				return 0;
			rc = rx_emit(c);
			break;
		}
		if (rc)
			return rc;
	}
}

void tcp_again_add(struct tcp_conn *c)
{
	if (c->again_listed)
		return;
	c->again_listed = 1;
	c->again_next = c->tt->again;
	c->tt->again = c;
}

void tcp_again_del(struct tcp_conn *c)
{
	struct tcp_conn **pp = &c->tt->again;

	if (!c->again_listed)
		return;
	while (*pp && *pp != c)
		pp = &(*pp)->again_next;
	if (*pp)
		*pp = c->again_next;
	c->again_listed = 0;
}

void tcp_again_run(struct tcp_transport *tt)
{
	struct tcp_conn *c = tt->again;

	tt->again = NULL;
	while (c) {
		struct tcp_conn *next = c->again_next;

		c->again_listed = 0;
		/* open connections only: no one frees them here (tcp_conn_free unlists) */
		if (!c->failed && c->fd >= 0 && !tcp_rx_pause_check(c))
			tcp_rx(c);
		c = next;
	}
}

/* The peer had its frames for this call: come back to it next round. */
static int rx_budget_out(struct tcp_conn *c)
{
	tcp_again_add(c);
	tcp_rx_mark(c, c->last_rx_ns);
	return 0;
}

int tcp_rx(struct tcp_conn *c)
{
	uint64_t total = 0;

	c->rx_frames = 0;
	for (;;) {
		struct iovec v[2];
		size_t direct = 0, want;
		ssize_t n;
		int cnt = 0, rc, short_read;

		rc = rx_parse(c);
		if (rc > 0)
			return rx_budget_out(c);
		if (rc)
			return rc;
		if (total >= TCP_RX_BUDGET) {
			if (c->accepted)
				tcp_rx_mark(c, c->last_rx_ns);
			/* level-triggered: epoll reports the rest, but not what
			 * TLS decrypted already */
			if (c->ssl && tcp_tls_pending(c))
				tcp_again_add(c);
			return 0;
		}
		if (c->stage_pos) {
			memmove(c->stage, c->stage + c->stage_pos, c->stage_len - c->stage_pos);
			c->stage_len -= c->stage_pos;
			c->stage_pos = 0;
		}
		if (c->rx_state == TCP_RX_DATA && c->rx_data_len - c->rx_got >= TCP_DIRECT_MIN) {
			/* the staging buffer is empty here: rx_parse consumed it */
			direct = (size_t)(c->rx_data_len - c->rx_got);
			v[cnt].iov_base = c->rx_dst + c->rx_got;
			v[cnt++].iov_len = direct;
		}
		v[cnt].iov_base = c->stage + c->stage_len;
		v[cnt++].iov_len = TCP_STAGE_BYTES - c->stage_len;
		want = direct + (TCP_STAGE_BYTES - c->stage_len);
		n = c->ssl ? tcp_tls_readv(c, v, cnt) : readv(c->fd, v, cnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (c->accepted)
					tcp_rx_mark(c, c->last_rx_ns);
				return 0;
			}
			tcp_conn_fail(c, -ECONNRESET, 0, "read: %m");
			return -ECONNRESET;
		}
		if (n > 0 && c->accepted)
			c->last_rx_ns = rps_now_ns();
		if (n == 0) {
			int mid = c->rx_state != TCP_RX_HDR || c->stage_len;

			if (c->phase != TCP_PH_OPEN)
				tcp_conn_fail(c, -ECONNRESET, 0, "peer closed before its hello");
			else
				tcp_conn_fail(c, -ECONNRESET, 0, "peer closed%s",
					      mid ? " in the middle of a frame" : "");
			return -ECONNRESET;
		}
		total += (uint64_t)n;
		short_read = (size_t)n < want;
		if (direct) {
			size_t k = RPS_MIN((size_t)n, direct);

			c->rx_got += k;
			n -= (ssize_t)k;
			if (c->rx_got == c->rx_data_len) {
				rc = rx_emit(c);
				if (rc)
					return rc;
			}
		}
		c->stage_len += (size_t)n;
		if (short_read) {
			/* the socket is drained: parse what came and stop */
			rc = rx_parse(c);
			if (rc > 0)
				return rx_budget_out(c);
			if (rc == 0 && c->accepted)
				tcp_rx_mark(c, c->last_rx_ns);
			return rc < 0 ? rc : 0;
		}
	}
}
