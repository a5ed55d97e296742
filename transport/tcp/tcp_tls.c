/* TCP transport: optional TLS 1.3 on every connection (RDMAPS_TLS=1,
 * docs/security.md "TLS").
 *
 * No certificates: both ends hold an external pre-shared key derived from the
 * job secret,
 *
 *   PSK = HMAC-SHA256(secret, "rdmaps-tls-psk-v1")    identity "rdmaps-job-v1"
 *
 * (a node holding only its token, RDMAPS_TOKEN, finds the same key in the
 * token's "tls" field: rps_auth_tls_psk), so "holds the secret" is "can open
 * the tunnel"; the challenge-response of
 * src/auth.h then runs inside it as without TLS (identities, ranks). The
 * handshake is psk_dhe_ke (ECDHE on top of the PSK: forward secrecy), cipher
 * TLS_AES_128_GCM_SHA256 or TLS_CHACHA20_POLY1305_SHA256, no session tickets.
 *
 * I/O goes through a BIO of our own on the non-blocking socket (send with
 * MSG_NOSIGNAL, like the plain path). SSL_write is in partial-write mode: it
 * returns after each record, and after WANT_WRITE it is called again from the
 * same byte with at least as many bytes (the send queue never changes
 * what it holds, only appends), which is what OpenSSL needs to finish the
 * record it started. One SSL object is used by the poller (SSL_read) and by
 * senders (SSL_write, under slock): c->tlock serialises every call on it.
 *
 * Accepted connections do the handshake in the poller (phase TCP_PH_TLS,
 * before the HELLO), never blocking it; the hello deadline covers it.
 * The connecting side does it in connect(), which blocks anyway.
 *
 * A mixed job (one side with TLS, the other without) is told at once: the
 * first byte of a TLS ClientHello is 0x16, of an rdmaps frame 'R'.
 * Depends on tcp_conn.c and tcp_send.c.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>

#include "src/alloc.h"
#include "src/auth.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/tcp/tcp_int.h"

#define TLS_PSK_ID	  "rdmaps-job-v1"
#define TLS_REC_HANDSHAKE 0x16		/* first byte of a ClientHello record */
#define TLS_READ_AHEAD	  (256u * 1024) /* bytes one read may bring in (read-ahead) */
#define TLS_OUT_BYTES	  (256u * 1024) /* ciphertext gathered before a send */

const char tcp_tls_mismatch_server[] =
    "this listener uses TLS (RDMAPS_TLS=1) and the connecting process does not "
    "(RDMAPS_TLS=0): set RDMAPS_TLS (--tls) the same in every process of the job";

/* ---- the BIO: our non-blocking socket, without SIGPIPE ---- */

struct tls_bio {
	int fd;
	int err;	  /* errno of the last failed call */
	uint8_t first[4]; /* the first bytes read (a plain rdmaps frame?) */
	uint32_t nfirst;
	/* Records are gathered here and sent together (one send per
	 * TLS_OUT_BYTES, not one per 16 KiB record); flushed at the end of
	 * every tcp_tls_sendmsg, by BIO_flush (the handshake) and by the
	 * poller on EPOLLOUT while bytes remain (tcp_tls_flush). */
	uint8_t *out;
	size_t out_len;
};

static pthread_mutex_t meth_lock = PTHREAD_MUTEX_INITIALIZER;
static BIO_METHOD *meth;
static int meth_users;

/* Send what is gathered. 0 all sent, 1 the socket is full, -1 an error (d->err). */
static int out_flush(struct tls_bio *d)
{
	size_t off = 0;
	int rc = 0;

	while (off < d->out_len) {
		ssize_t n =
		    send(d->fd, d->out + off, d->out_len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		d->err = n < 0 ? errno : EPIPE;
		rc = d->err == EAGAIN || d->err == EWOULDBLOCK ? 1 : -1;
		break;
	}
	if (off) {
		memmove(d->out, d->out + off, d->out_len - off);
		d->out_len -= off;
	}
	return rc;
}

static int bio_write(BIO *b, const char *buf, int len)
{
	struct tls_bio *d = BIO_get_data(b);

	BIO_clear_retry_flags(b);
	if (!d->out) {
		d->out = rps_malloc(TLS_OUT_BYTES);
		if (!d->out) {
			d->err = ENOMEM;
			return -1;
		}
	}
	if (d->out_len + (size_t)len > TLS_OUT_BYTES) {
		int rc = out_flush(d);

		if (rc < 0)
			return -1;
		if (d->out_len + (size_t)len > TLS_OUT_BYTES) {
			BIO_set_retry_write(b); /* the socket is full */
			return -1;
		}
	}
	if ((size_t)len > TLS_OUT_BYTES) { /* never: records are 16 KiB */
		d->err = EMSGSIZE;
		return -1;
	}
	memcpy(d->out + d->out_len, buf, (size_t)len);
	d->out_len += (size_t)len;
	return len;
}

static int bio_read(BIO *b, char *buf, int len)
{
	struct tls_bio *d = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	do
		n = recv(d->fd, buf, (size_t)len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		d->err = errno;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			BIO_set_retry_read(b);
		return -1;
	}
	for (ssize_t i = 0; i < n && d->nfirst < sizeof(d->first); i++)
		d->first[d->nfirst++] = (uint8_t)buf[i];
	return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct tls_bio *d = BIO_get_data(b);
	int rc;

	(void)num, (void)ptr;
	if (cmd == BIO_CTRL_WPENDING)
		return d ? (long)d->out_len : 0;
	if (cmd != BIO_CTRL_FLUSH)
		return 0;
	BIO_clear_retry_flags(b);
	rc = d ? out_flush(d) : 0;
	if (rc > 0)
		BIO_set_retry_write(b);
	return rc == 0 ? 1 : -1;
}

static int bio_create(BIO *b)
{
	BIO_set_data(b, NULL);
	BIO_set_init(b, 1);
	return 1;
}

static int bio_destroy(BIO *b)
{
	struct tls_bio *d = BIO_get_data(b);

	if (d)
		rps_free(d->out);
	rps_free(d);
	BIO_set_data(b, NULL);
	return 1;
}

static int meth_get(void)
{
	int rc = 0;

	pthread_mutex_lock(&meth_lock);
	if (!meth) {
		meth = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rdmaps tcp");
		if (!meth || !BIO_meth_set_write(meth, bio_write) ||
		    !BIO_meth_set_read(meth, bio_read) || !BIO_meth_set_ctrl(meth, bio_ctrl) ||
		    !BIO_meth_set_create(meth, bio_create) ||
		    !BIO_meth_set_destroy(meth, bio_destroy)) {
			BIO_meth_free(meth);
			meth = NULL;
			rc = -ENOMEM;
		}
	}
	if (!rc)
		meth_users++;
	pthread_mutex_unlock(&meth_lock);
	return rc;
}

static void meth_put(void)
{
	pthread_mutex_lock(&meth_lock);
	if (--meth_users == 0) {
		BIO_meth_free(meth);
		meth = NULL;
	}
	pthread_mutex_unlock(&meth_lock);
}

static struct tls_bio *ssl_bio(SSL *ssl)
{
	return BIO_get_data(SSL_get_rbio(ssl));
}

/* OpenSSL's reasons, queued for this thread, as text (and the queue emptied). */
static const char *tls_why(char *buf, size_t n)
{
	unsigned long e, last = 0;

	while ((e = ERR_get_error()))
		last = e;
	if (!last)
		snprintf(buf, n, "connection closed by the peer");
	else
		ERR_error_string_n(last, buf, n);
	return buf;
}

/* ---- the context: one per transport ---- */

static const EVP_MD *psk_md(struct tcp_transport *tt)
{
	return SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(tt->psk_sess));
}

/* Client: offer the job's PSK. */
static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		       SSL_SESSION **sess)
{
	struct tcp_transport *tt = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));

	*id = NULL;
	*idlen = 0;
	*sess = NULL;
	if (md && md != psk_md(tt))
		return 1; /* not usable with the suite the server chose */
	if (!SSL_SESSION_up_ref(tt->psk_sess))
		return 0;
	*sess = tt->psk_sess; /* OpenSSL frees this reference */
	*id = (const unsigned char *)TLS_PSK_ID;
	*idlen = strlen(TLS_PSK_ID);
	return 1;
}

/* Server: the job's PSK for its identity (the binder then proves the key). */
static int find_session(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	struct tcp_transport *tt = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));

	*sess = NULL;
	if (idlen != strlen(TLS_PSK_ID) || memcmp(id, TLS_PSK_ID, idlen))
		return 1; /* unknown: no PSK, and without certificates no handshake */
	if (!SSL_SESSION_up_ref(tt->psk_sess))
		return 0;
	*sess = tt->psk_sess;
	return 1;
}

int tcp_tls_init(struct tcp_transport *tt)
{
	static const unsigned char aes128gcm[2] = {0x13, 0x01}; /* TLS_AES_128_GCM_SHA256 */
	uint8_t psk[32];
	unsigned int len = 0;
	const SSL_CIPHER *cipher;
	SSL_CTX *ctx;
	SSL *tmp;
	char why[256];

	if (!tt->secret[0]) {
		RPS_ERR("tcp: RDMAPS_TLS=1 needs a job secret (RDMAPS_SECRET): the TLS key is "
			"derived from it; --insecure cannot be combined with --tls");
		return -EINVAL;
	}
	if (rps_auth_tls_psk(tt->secret, psk)) {
		RPS_ERR("tcp: RDMAPS_TLS=1 but RDMAPS_TOKEN carries no TLS key (a token made by an "
			"older rdmaps-launch or rdmaps-ctl token): make the tokens again");
		return -EINVAL;
	}
	len = sizeof(psk);
	if (meth_get())
		return -ENOMEM;
	ctx = SSL_CTX_new(TLS_method());
	if (!ctx)
		goto err_ssl;
	tt->ssl_ctx = ctx;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256") ||
	    !SSL_CTX_set_num_tickets(ctx, 0))
		goto err_ssl;
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_default_read_buffer_len(ctx, TLS_READ_AHEAD);
	SSL_CTX_set_app_data(ctx, tt);
	SSL_CTX_set_psk_use_session_callback(ctx, use_session);
	SSL_CTX_set_psk_find_session_callback(ctx, find_session);

	tmp = SSL_new(ctx);
	if (!tmp)
		goto err_ssl;
	cipher = SSL_CIPHER_find(tmp, aes128gcm);
	SSL_free(tmp);
	tt->psk_sess = SSL_SESSION_new();
	if (!cipher || !tt->psk_sess || !SSL_SESSION_set1_master_key(tt->psk_sess, psk, len) ||
	    !SSL_SESSION_set_cipher(tt->psk_sess, cipher) ||
	    !SSL_SESSION_set_protocol_version(tt->psk_sess, TLS1_3_VERSION))
		goto err_ssl;
	OPENSSL_cleanse(psk, sizeof(psk));
	RPS_DEBUG("tcp: TLS 1.3 on (PSK from the job secret)");
	return 0;

err_ssl:
	OPENSSL_cleanse(psk, sizeof(psk));
	RPS_ERR("tcp: TLS setup: %s", tls_why(why, sizeof(why)));
	tcp_tls_fini(tt);
	return -ENOMEM;
}

void tcp_tls_fini(struct tcp_transport *tt)
{
	if (!tt->ssl_ctx)
		return;
	SSL_SESSION_free(tt->psk_sess);
	tt->psk_sess = NULL;
	SSL_CTX_free(tt->ssl_ctx);
	tt->ssl_ctx = NULL;
	meth_put();
}

/* A new SSL on fd, server or client side. NULL on failure (logged). */
static SSL *ssl_new(struct tcp_transport *tt, int fd, int server)
{
	struct tls_bio *d = rps_calloc(1, sizeof(*d));
	SSL *ssl = SSL_new(tt->ssl_ctx);
	BIO *b = BIO_new(meth);

	if (!d || !ssl || !b) {
		char why[256];

		RPS_ERR("tcp: TLS: %s", tls_why(why, sizeof(why)));
		rps_free(d);
		SSL_free(ssl);
		BIO_free(b);
		return NULL;
	}
	d->fd = fd;
	BIO_set_data(b, d);
	SSL_set_bio(ssl, b, b); /* the SSL owns b (one reference for both) */
	if (server)
		SSL_set_accept_state(ssl);
	else
		SSL_set_connect_state(ssl);
	return ssl;
}

void tcp_tls_ssl_free(struct ssl_st *ssl)
{
	SSL_free(ssl); /* NULL is fine */
}

int tcp_tls_attach(struct tcp_conn *c)
{
	c->ssl = ssl_new(c->tt, c->fd, 1);
	if (!c->ssl)
		return -ENOMEM;
	/* read what the socket has, not 5 bytes then one record: the poller
	 * comes back for whole records left inside (tcp_tls_pending) */
	SSL_set_read_ahead(c->ssl, 1);
	return 0;
}

void tcp_tls_opened(struct ssl_st *ssl)
{
	SSL_set_read_ahead(ssl, 1);
}

/* ---- the listening side's handshake (poller) ---- */

int tcp_tls_accept_step(struct tcp_conn *c)
{
	char why[256];
	int rc, err;

	if (!c->tls_seen) {
		uint8_t b;
		ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return 0;
			tcp_conn_fail(c, -ECONNRESET, 0, "read: %m");
			return -ECONNRESET;
		}
		if (n == 0) {
			tcp_conn_fail(c, -ECONNRESET, 0, "peer closed before its hello");
			return -ECONNRESET;
		}
		if (b != TLS_REC_HANDSHAKE) {
			/* a plain peer: told in plain words it can read */
			SSL_free(c->ssl);
			c->ssl = NULL;
			tcp_conn_fail(c, -EPROTO, 1, "%s", tcp_tls_mismatch_server);
			return -EPROTO;
		}
		c->tls_seen = 1;
	}
	pthread_mutex_lock(&c->tlock);
	ERR_clear_error();
	rc = SSL_do_handshake(c->ssl);
	err = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, rc);
	if (err != SSL_ERROR_NONE && err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
		tls_why(why, sizeof(why));
	pthread_mutex_unlock(&c->tlock);
	switch (err) {
	case SSL_ERROR_NONE:
		tcp_want_out(c, 0);
		c->phase = TCP_PH_HELLO;
		return 0;
	case SSL_ERROR_WANT_READ:
		tcp_want_out(c, 0);
		return 0;
	case SSL_ERROR_WANT_WRITE:
		tcp_want_out(c, 1);
		return 0;
	default:
		tcp_conn_fail(c, -EACCES, 0,
			      "TLS handshake failed: %s (a peer with another RDMAPS_SECRET, or "
			      "not an rdmaps process of this job)",
			      why);
		return -EACCES;
	}
}

/* ---- the connecting side (blocking, up to deadline) ---- */

/* Wait for fd to be readable or writable, up to deadline. 0 or -ETIMEDOUT. */
static int wait_fd(int fd, int writing, uint64_t deadline)
{
	struct pollfd pfd = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
	uint64_t now = rps_now_ns();

	if (now >= deadline)
		return -ETIMEDOUT;
	if (poll(&pfd, 1, (int)RPS_MAX((deadline - now) / 1000000ull, 1)) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

int tcp_tls_connect(struct tcp_transport *tt, int fd, const char *peer, uint64_t deadline,
		    struct ssl_st **ssl_p)
{
	SSL *ssl = ssl_new(tt, fd, 0);
	char why[256];

	if (!ssl)
		return -ENOMEM;
	for (;;) {
		int rc, err;

		ERR_clear_error();
		rc = SSL_do_handshake(ssl);
		if (rc == 1)
			break;
		err = SSL_get_error(ssl, rc);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			rc = wait_fd(fd, err == SSL_ERROR_WANT_WRITE, deadline);
			if (rc) {
				RPS_ERR("connect %s: TLS handshake: %s", peer, strerror(-rc));
				SSL_free(ssl);
				return rc;
			}
			continue;
		}
		tls_why(why, sizeof(why));
		{
			struct tls_bio *d = ssl_bio(ssl);
			uint32_t magic = RPS_PROTO_MAGIC;

			if (d->nfirst >= 4 && !memcmp(d->first, &magic, 4)) {
				RPS_ERR(
				    "connect %s: the listener does not use TLS (RDMAPS_TLS=0 "
				    "there) and this process does (RDMAPS_TLS=1): set RDMAPS_TLS "
				    "(--tls) the same in every process of the job",
				    peer);
				SSL_free(ssl);
				return -EPROTO;
			}
			if (d->nfirst == 0) {
				/* closed before answering: nothing says TLS was the cause */
				RPS_ERR("connect %s: TLS handshake: the listener closed the "
					"connection (%s)",
					peer, why);
				SSL_free(ssl);
				return -ECONNRESET;
			}
		}
		RPS_ERR("connect %s: TLS handshake failed: %s: the listener does not know our "
			"key (another RDMAPS_SECRET, or not an rdmaps process of this job)",
			peer, why);
		SSL_free(ssl);
		return -EACCES;
	}
	*ssl_p = ssl;
	return 0;
}

int tcp_tls_io_full(struct ssl_st *ssl, int fd, void *buf, size_t len, uint64_t deadline,
		    int writing)
{
	char *p = buf;

	while (len) {
		int n, err, rc;

		ERR_clear_error();
		n = writing ? SSL_write(ssl, p, (int)RPS_MIN(len, (size_t)INT_MAX))
			    : SSL_read(ssl, p, (int)RPS_MIN(len, (size_t)INT_MAX));
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		err = SSL_get_error(ssl, n);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			rc = wait_fd(fd, err == SSL_ERROR_WANT_WRITE, deadline);
			if (rc)
				return rc;
			continue;
		}
		ERR_clear_error();
		return -ECONNRESET;
	}
	if (writing) {
		struct tls_bio *d = ssl_bio(ssl);
		int rc;

		while ((rc = out_flush(d)) > 0) {
			rc = wait_fd(fd, 1, deadline);
			if (rc)
				return rc;
		}
		if (rc < 0)
			return -ECONNRESET;
	}
	return 0;
}

int tcp_tls_flush(struct tcp_conn *c)
{
	struct tls_bio *d;
	int rc;

	pthread_mutex_lock(&c->tlock);
	d = ssl_bio(c->ssl);
	rc = out_flush(d);
	if (rc < 0)
		rc = -(d->err ? d->err : EPIPE);
	pthread_mutex_unlock(&c->tlock);
	return rc;
}

int tcp_tls_out_pending(struct tcp_conn *c)
{
	int n;

	pthread_mutex_lock(&c->tlock);
	n = ssl_bio(c->ssl)->out_len > 0;
	pthread_mutex_unlock(&c->tlock);
	return n;
}

/* ---- data: what readv and sendmsg are without TLS ---- */

ssize_t tcp_tls_readv(struct tcp_conn *c, const struct iovec *v, int cnt)
{
	ssize_t total = 0;
	int err = SSL_ERROR_NONE, syserr = 0;

	pthread_mutex_lock(&c->tlock);
	for (int i = 0; i < cnt && err == SSL_ERROR_NONE; i++) {
		char *p = v[i].iov_base;
		size_t left = v[i].iov_len;

		while (left) {
			int n;

			ERR_clear_error();
			n = SSL_read(c->ssl, p, (int)RPS_MIN(left, (size_t)INT_MAX));
			if (n <= 0) {
				err = SSL_get_error(c->ssl, n);
				syserr = ssl_bio(c->ssl)->err;
				break;
			}
			p += n;
			left -= (size_t)n;
			total += n;
		}
	}
	if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL) {
		char why[256];

		if (!total)
			RPS_DEBUG("tcp: %s: TLS read: %s", c->base.peer, tls_why(why, sizeof(why)));
		ERR_clear_error();
	}
	pthread_mutex_unlock(&c->tlock);
	if (total)
		return total; /* an end or error is seen again on the next call */
	switch (err) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	default:
		errno = syserr ? syserr : ECONNRESET;
		if (errno == EAGAIN)
			errno = ECONNRESET;
		return -1;
	}
}

int tcp_tls_pending(struct tcp_conn *c)
{
	int n;

	pthread_mutex_lock(&c->tlock);
	n = SSL_has_pending(c->ssl); /* decrypted, or read ahead */
	pthread_mutex_unlock(&c->tlock);
	return n;
}

/* slock held. Every iovec is written by SSL_write in turn, one record at a
 * time: records never span two frames. The records are gathered in the BIO
 * and sent at the end; what the socket did not take stays there (at most
 * TLS_OUT_BYTES) and the caller arms EPOLLOUT (tcp_tls_out_pending). */
ssize_t tcp_tls_sendmsg(struct tcp_conn *c, const struct msghdr *msg)
{
	ssize_t total = 0;
	int err = SSL_ERROR_NONE, syserr = 0;

	pthread_mutex_lock(&c->tlock);
	for (size_t i = 0; i < msg->msg_iovlen && err == SSL_ERROR_NONE; i++) {
		const char *p = msg->msg_iov[i].iov_base;
		size_t left = msg->msg_iov[i].iov_len;

		while (left) {
			int n;

			ERR_clear_error();
			n = SSL_write(c->ssl, p, (int)RPS_MIN(left, (size_t)INT_MAX));
			if (n <= 0) {
				err = SSL_get_error(c->ssl, n);
				syserr = ssl_bio(c->ssl)->err;
				break;
			}
			p += n;
			left -= (size_t)n;
			total += n;
		}
	}
	if (err != SSL_ERROR_NONE && err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_WANT_READ)
		ERR_clear_error();
	else if (out_flush(ssl_bio(c->ssl)) < 0 && !total)
		err = SSL_ERROR_SYSCALL; /* a broken socket; a full one waits for EPOLLOUT */
	syserr = syserr ? syserr : ssl_bio(c->ssl)->err;
	pthread_mutex_unlock(&c->tlock);
	if (total || err == SSL_ERROR_NONE)
		return total; /* (0 only for empty iovecs) */
	if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
		errno = EAGAIN;
		return -1;
	}
	errno = syserr && syserr != EAGAIN ? syserr : ECONNRESET;
	return -1;
}
