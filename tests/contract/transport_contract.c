/* The transport contract (transport/transport.h), tested on every transport
 * the same way, as UCX instantiates its tests per transport. A one-line
 * wrapper per transport defines CONTRACT_TR and includes this file:
 *   tests/unit/test_transport_contract.c   "tcp", over 127.0.0.1
 *   tests/unit/test_transport_contract_tls.c  "tcp" with TLS (CONTRACT_TLS)
 *   tests/rdma/test_rdma_contract.c        "rdma", in the SoftRoCE guest: a
 *       listener on RDMAPS_RXE_DEV0/IP0, a client on RDMAPS_RXE_DEV1 (exit 77,
 *       skipped, where those are not set)
 * Transport-specific cases stay in the transport's own tests
 * (test_transport_tcp.c: recv_dest, partial frames on a raw socket). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/config.h"
#include "src/proto.h"
#include "transport/transport.h"

#ifndef CONTRACT_TR
#error "define CONTRACT_TR (the transport's name) before including this file"
#endif

#define SECRET	 "contract-secret"
#define WAIT_MS	 10000
#define MAX_RECS 4096
#define ACK_TAG	 0x41434b21u /* "ACK!" */

/* Where the two sides live. */
static struct {
	const char *host;    /* the listener's address, which the client connects to */
	const char *srv_dev; /* device of the listening transport (NULL: by address) */
	const char *cli_dev;
} env;

struct rec {
	enum rps_tr_event_type type;
	struct rps_conn *conn;
	int status;
	uint64_t ctx;
	uint32_t rank; /* ACCEPTED: the peer's hello, read on the poller thread */
	uint8_t role;
	struct rps_frame_hdr hdr;
	uint8_t *data; /* RECV: a copy */
	size_t data_len;
	void *token; /* RECV, when held */
};

struct side {
	struct rps_transport *t;
	uint16_t port;
	pthread_t th;
	atomic_int stop;
	atomic_int hold; /* RECV: keep this many more tokens instead of releasing */
	atomic_int errors;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rec *recs;
	size_t n;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Accept, with an ack that echoes the rank, unless the rank is 99. */
static int on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		    size_t *ack_len_p, const char **why_p)
{
	uint32_t a[2] = {ACK_TAG, h->rank};

	(void)arg, (void)c;
	if (h->rank == 99) {
		*why_p = "rank 99 is refused";
		return -EPERM;
	}
	memcpy(ack, a, sizeof(a));
	*ack_len_p = sizeof(a);
	return 0;
}

static void record(struct side *s, const struct rps_tr_event *ev)
{
	struct rec r = {.type = ev->type, .conn = ev->conn, .status = ev->status, .ctx = ev->ctx};

	if (ev->type == RPS_TR_EV_ACCEPTED) {
		r.rank = ev->conn->hello.rank;
		r.role = ev->conn->hello.role;
	}
	if (ev->type == RPS_TR_EV_RECV) {
		r.hdr = ev->hdr;
		r.data_len = ev->data_len;
		r.data = malloc(ev->data_len ? ev->data_len : 1);
		if (!r.data || (ev->data_len && !ev->data))
			atomic_fetch_add(&s->errors, 1);
		else if (ev->data_len)
			memcpy(r.data, ev->data, ev->data_len);
		if (atomic_load(&s->hold) > 0) {
			atomic_fetch_sub(&s->hold, 1);
			r.token = ev->token;
		} else {
			rps_tr_release(s->t, ev->token);
		}
	}
	pthread_mutex_lock(&s->lock);
	if (s->n < MAX_RECS)
		s->recs[s->n++] = r;
	else
		atomic_fetch_add(&s->errors, 1);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void *poller(void *arg)
{
	struct side *s = arg;
	struct rps_tr_event ev[16];

	while (!atomic_load(&s->stop)) {
		int n = rps_tr_poll(s->t, ev, 16, 100);

		if (n < 0) {
			atomic_fetch_add(&s->errors, 1);
			break;
		}
		for (int i = 0; i < n; i++)
			record(s, &ev[i]);
	}
	return NULL;
}

static void params(struct rps_tr_params *p_p, const char *dev)
{
	struct rps_config cfg;

	assert_int_equal(rps_config_init(&cfg), 0);
	/* small pools, so that the tests cycle through them */
	cfg.max_msg = 1u << 20;
	cfg.rdma_buf_bytes = 4096;
	cfg.rdma_recv_bufs = 32;
	cfg.rdma_credits = 8;
	cfg.timeout_ms = WAIT_MS;
	rps_tr_params_from_config(&cfg, p_p);
	p_p->secret = SECRET;
	p_p->device = dev;
#ifdef CONTRACT_TLS
	p_p->tls = 1; /* RDMAPS_TLS=1: every case again through TLS */
#endif
}

static void side_start(struct side *s, int listen)
{
	struct rps_tr_params p;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->recs = calloc(MAX_RECS, sizeof(*s->recs));
	assert_non_null(s->recs);
	params(&p, listen ? env.srv_dev : env.cli_dev);
	if (listen) {
		p.on_hello = on_hello;
		p.arg = s;
	}
	assert_int_equal(rps_transport_create(CONTRACT_TR, &p, &s->t), 0);
	if (listen) {
		assert_int_equal(rps_tr_listen(s->t, env.host, 0, &s->port), 0);
		assert_true(s->port != 0);
	}
	assert_int_equal(pthread_create(&s->th, NULL, poller, s), 0);
}

static void side_stop(struct side *s)
{
	atomic_store(&s->stop, 1);
	rps_tr_wake(s->t);
	pthread_join(s->th, NULL);
	assert_int_equal(atomic_load(&s->errors), 0);
	for (size_t i = 0; i < s->n; i++) {
		if (s->recs[i].token)
			rps_tr_release(s->t, s->recs[i].token);
		free(s->recs[i].data);
	}
	rps_transport_destroy(s->t);
	free(s->recs);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
}

static size_t count_locked(struct side *s, enum rps_tr_event_type type, struct rps_conn *c)
{
	size_t k = 0;

	for (size_t i = 0; i < s->n; i++)
		if (s->recs[i].type == type && (!c || s->recs[i].conn == c))
			k++;
	return k;
}

static size_t count(struct side *s, enum rps_tr_event_type type, struct rps_conn *c)
{
	size_t k;

	pthread_mutex_lock(&s->lock);
	k = count_locked(s, type, c);
	pthread_mutex_unlock(&s->lock);
	return k;
}

/* Wait until at least `want` events of a type (of conn c, or any). */
static int wait_count(struct side *s, enum rps_tr_event_type type, struct rps_conn *c, size_t want)
{
	uint64_t end = now_ms() + WAIT_MS;
	int ok;

	pthread_mutex_lock(&s->lock);
	while (!(ok = count_locked(s, type, c) >= want) && now_ms() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

/* The k-th record of a type (0-based); records are never removed. */
static struct rec *nth(struct side *s, enum rps_tr_event_type type, struct rps_conn *c, size_t k)
{
	struct rec *r = NULL;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n && !r; i++)
		if (s->recs[i].type == type && (!c || s->recs[i].conn == c) && k-- == 0)
			r = &s->recs[i];
	pthread_mutex_unlock(&s->lock);
	return r;
}

static int try_connect(struct side *cl, struct side *srv, uint32_t rank, const char *secret,
		       void (*spoil)(struct rps_hello *), struct rps_conn **c_p)
{
	uint8_t ack[RPS_TR_ACK_MAX];
	size_t ack_len = 0;
	struct rps_hello h;
	uint32_t a[2];
	int rc;

	*c_p = NULL;
	rps_proto_hello_init(&h, RPS_ROLE_WORKER, rank);
	h.channel = 0;
	if (spoil)
		spoil(&h);
	if (strcmp(secret, SECRET) != 0) {
		/* a client of another secret (or none): a transport of its own,
		 * refused in the handshake */
		struct rps_transport *t;
		struct rps_tr_params p;

		params(&p, env.cli_dev);
		p.secret = secret;
		p.insecure = 1;
#ifdef CONTRACT_TLS
		if (!secret[0])
			p.tls = 0; /* no key without a secret: a plain client, told at once */
#endif
		assert_int_equal(rps_transport_create(CONTRACT_TR, &p, &t), 0);
		rc = rps_tr_connect(t, env.host, srv->port, &h, ack, sizeof(ack), &ack_len,
				    WAIT_MS, c_p);
		assert_int_not_equal(rc, 0);
		*c_p = NULL;
		rps_transport_destroy(t);
		return rc;
	}
	rc = rps_tr_connect(cl->t, env.host, srv->port, &h, ack, sizeof(ack), &ack_len, WAIT_MS,
			    c_p);
	if (rc)
		return rc;
	assert_non_null(*c_p);
	assert_int_equal(ack_len, sizeof(a));
	memcpy(a, ack, sizeof(a));
	assert_int_equal(a[0], ACK_TAG);
	assert_int_equal(a[1], rank);
	return 0;
}

/* A connected pair: client conn *c_p, the server's accepted conn *sc_p. */
static void pair(struct side *srv, struct side *cl, struct rps_conn **c_p, struct rps_conn **sc_p)
{
	struct rec *r;

	side_start(srv, 1);
	side_start(cl, 0);
	assert_int_equal(try_connect(cl, srv, 5, SECRET, NULL, c_p), 0);
	assert_true(wait_count(srv, RPS_TR_EV_ACCEPTED, NULL, 1));
	r = nth(srv, RPS_TR_EV_ACCEPTED, NULL, 0);
	*sc_p = r->conn;
}

static uint8_t pattern(uint32_t frame, size_t i)
{
	return (uint8_t)(frame * 31u + i * 7u + (i >> 8));
}

/* Send a STATUS frame of len payload bytes (pattern of frame id). */
static int send_frame(struct rps_conn *c, uint32_t id, size_t len, uint8_t *buf)
{
	struct rps_frame_hdr h;
	struct iovec v = {buf, len};

	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(id, i);
	rps_proto_hdr_init(&h, RPS_OP_STATUS, (uint32_t)len, id);
	return rps_tr_post_send(c, &h, &v, len ? 1 : 0, 0);
}

static void check_frame(const struct rec *r, uint32_t id, size_t len)
{
	assert_non_null(r);
	assert_int_equal(r->hdr.op, RPS_OP_STATUS);
	assert_int_equal(r->hdr.req_id, id);
	assert_int_equal(r->hdr.len, len);
	assert_int_equal(r->data_len, len);
	for (size_t i = 0; i < len; i++)
		if (r->data[i] != pattern(id, i))
			fail_msg("frame %u byte %zu: 0x%02x, want 0x%02x", id, i, r->data[i],
				 pattern(id, i));
}

/* ---- the contract ---- */

static void spoil_magic(struct rps_hello *h)
{
	h->magic ^= 0x01010101u;
}

static void spoil_version(struct rps_hello *h)
{
	h->version = 99;
}

static void test_hello(void **state)
{
	struct side srv, cl;
	struct rps_conn *c, *x;
	struct rec *r;

	(void)state;
	side_start(&srv, 1);
	side_start(&cl, 0);
	assert_string_equal(srv.t->ops->name, CONTRACT_TR);
	assert_true(srv.t->max_frame > sizeof(struct rps_frame_hdr));

	assert_int_equal(try_connect(&cl, &srv, 5, SECRET, NULL, &c), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_ACCEPTED, NULL, 1));
	r = nth(&srv, RPS_TR_EV_ACCEPTED, NULL, 0);
	assert_int_equal(r->rank, 5);
	assert_int_equal(r->role, RPS_ROLE_WORKER);
	assert_ptr_equal(r->conn->tr, srv.t);
	assert_ptr_equal(c->tr, cl.t);

	/* refusals reach connect() with their status, and no connection */
	assert_int_equal(try_connect(&cl, &srv, 99, SECRET, NULL, &x), -EPERM);
	assert_null(x);
	assert_int_equal(try_connect(&cl, &srv, 6, "wrong-secret", NULL, &x), -EACCES);
	assert_null(x);
#ifdef CONTRACT_TLS
	assert_int_equal(try_connect(&cl, &srv, 6, "", NULL, &x), -EPROTO); /* mixed TLS */
#else
	assert_int_equal(try_connect(&cl, &srv, 6, "", NULL, &x), -EACCES);
#endif
	assert_null(x);
	assert_int_equal(try_connect(&cl, &srv, 6, SECRET, spoil_magic, &x), -EPROTO);
	assert_null(x);
	assert_int_equal(try_connect(&cl, &srv, 6, SECRET, spoil_version, &x), -EPROTO);
	assert_null(x);
	/* the first connection still works, and no refused one was accepted */
	assert_int_equal(try_connect(&cl, &srv, 7, SECRET, NULL, &x), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_ACCEPTED, NULL, 2));
	assert_int_equal(nth(&srv, RPS_TR_EV_ACCEPTED, NULL, 1)->rank, 7);
	usleep(100 * 1000);
	assert_int_equal(count(&srv, RPS_TR_EV_ACCEPTED, NULL), 2);

	rps_tr_close(x);
	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
}

/* Frames of many sizes, up to max_frame, both ways, in order, intact. */
static void test_frames(void **state)
{
	struct side srv, cl;
	struct rps_conn *c, *sc;
	size_t max_len, sizes[16], n = 0;
	uint8_t *buf;

	(void)state;
	pair(&srv, &cl, &c, &sc);
	max_len = (size_t)srv.t->max_frame - sizeof(struct rps_frame_hdr);
	assert_int_equal(cl.t->max_frame, srv.t->max_frame);
	for (size_t s = 0; s < max_len; s = s ? s * 4 + 1 : 1)
		sizes[n++] = s;
	sizes[n++] = max_len - 1;
	sizes[n++] = max_len;
	buf = malloc(max_len);
	assert_non_null(buf);

	for (size_t i = 0; i < n; i++)
		assert_int_equal(send_frame(c, (uint32_t)i, sizes[i], buf), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(send_frame(sc, (uint32_t)(100 + i), sizes[i], buf), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, sc, n));
	assert_true(wait_count(&cl, RPS_TR_EV_RECV, c, n));
	for (size_t i = 0; i < n; i++) {
		check_frame(nth(&srv, RPS_TR_EV_RECV, sc, i), (uint32_t)i, sizes[i]);
		check_frame(nth(&cl, RPS_TR_EV_RECV, c, i), (uint32_t)(100 + i), sizes[i]);
	}
	/* one byte more than max_frame is refused at the sender */
	{
		struct rps_frame_hdr h;
		struct iovec v = {buf, max_len};
		uint8_t extra = 0;
		struct iovec v2[2] = {v, {&extra, 1}};

		rps_proto_hdr_init(&h, RPS_OP_STATUS, (uint32_t)max_len + 1, 1);
		assert_true(rps_tr_post_send(c, &h, v2, 2, 0) < 0);
	}
	free(buf);
	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
}

/* Tokens held by the consumer and given back later from another thread;
 * many more frames than any transport's receive buffers. */
static void test_release(void **state)
{
	struct side srv, cl;
	struct rps_conn *c, *sc;
	enum { HOLD = 4, MANY = 300 };
	uint8_t buf[512];

	(void)state;
	pair(&srv, &cl, &c, &sc);
	atomic_store(&srv.hold, HOLD);
	for (uint32_t i = 0; i < HOLD; i++)
		assert_int_equal(send_frame(c, i, 64, buf), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, sc, HOLD));
	for (size_t i = 0; i < HOLD; i++) {
		struct rec *r = nth(&srv, RPS_TR_EV_RECV, sc, i);

		check_frame(r, (uint32_t)i, 64);
		assert_non_null(r->token);
		rps_tr_release(srv.t, r->token);
		r->token = NULL;
	}
	for (uint32_t i = HOLD; i < MANY; i++)
		assert_int_equal(send_frame(c, i, i % sizeof(buf), buf), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, sc, MANY));
	for (uint32_t i = HOLD; i < MANY; i++)
		check_frame(nth(&srv, RPS_TR_EV_RECV, sc, i), i, i % sizeof(buf));
	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
}

/* The accepted connection of the client with this rank. */
static struct rps_conn *accepted(struct side *srv, uint32_t rank)
{
	for (size_t i = 0; i < count(srv, RPS_TR_EV_ACCEPTED, NULL); i++) {
		struct rec *r = nth(srv, RPS_TR_EV_ACCEPTED, NULL, i);

		if (r->rank == rank)
			return r->conn;
	}
	fail_msg("no ACCEPTED of rank %u", rank);
	return NULL;
}

/* close() on either side: the other gets CLOSED(-ECONNRESET), and its
 * post_send then fails with -ECONNRESET; the closing side gets no event. */
static void test_close(void **state)
{
	struct side srv, cl;
	struct rps_conn *c1, *c2, *s1, *s2;
	uint8_t buf[16];

	(void)state;
	side_start(&srv, 1);
	side_start(&cl, 0);
	assert_int_equal(try_connect(&cl, &srv, 1, SECRET, NULL, &c1), 0);
	assert_int_equal(try_connect(&cl, &srv, 2, SECRET, NULL, &c2), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_ACCEPTED, NULL, 2));
	s1 = accepted(&srv, 1);
	s2 = accepted(&srv, 2);
	assert_int_equal(send_frame(c1, 1, sizeof(buf), buf), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, s1, 1));

	/* the client closes */
	rps_tr_close(c1);
	assert_true(wait_count(&srv, RPS_TR_EV_CLOSED, s1, 1));
	assert_int_equal(nth(&srv, RPS_TR_EV_CLOSED, s1, 0)->status, -ECONNRESET);
	assert_int_equal(send_frame(s1, 2, sizeof(buf), buf), -ECONNRESET);
	assert_int_equal(send_frame(s1, 3, 0, buf), -ECONNRESET);
	rps_tr_close(s1);

	/* the server closes */
	rps_tr_close(s2);
	assert_true(wait_count(&cl, RPS_TR_EV_CLOSED, c2, 1));
	assert_int_equal(nth(&cl, RPS_TR_EV_CLOSED, c2, 0)->status, -ECONNRESET);
	assert_int_equal(send_frame(c2, 4, sizeof(buf), buf), -ECONNRESET);
	rps_tr_close(c2);

	usleep(100 * 1000);
	assert_int_equal(count(&cl, RPS_TR_EV_CLOSED, c1), 0);
	assert_int_equal(count(&srv, RPS_TR_EV_CLOSED, s2), 0);
	side_stop(&cl);
	side_stop(&srv);
}

static void *waker(void *arg)
{
	usleep(100 * 1000);
	rps_tr_wake(arg);
	return NULL;
}

/* poll() waits its timeout; wake() ends a poll() that waits forever. */
static void test_wake(void **state)
{
	struct rps_tr_params p;
	struct rps_transport *t;
	struct rps_tr_event ev[4];
	pthread_t th;
	uint64_t t0;

	(void)state;
	params(&p, env.cli_dev);
	assert_int_equal(rps_transport_create(CONTRACT_TR, &p, &t), 0);
	assert_int_equal(rps_tr_poll(t, ev, 4, 0), 0);
	t0 = now_ms();
	assert_int_equal(rps_tr_poll(t, ev, 4, 50), 0);
	assert_true(now_ms() - t0 >= 45);
	assert_int_equal(pthread_create(&th, NULL, waker, t), 0);
	t0 = now_ms();
	assert_int_equal(rps_tr_poll(t, ev, 4, -1), 0);
	assert_true(now_ms() - t0 >= 90);
	pthread_join(th, NULL);
	rps_transport_destroy(t);
}

/* RPS_TR_CAP_READ: one-sided reads of registered memory, scattered. */
static void test_read_remote(void **state)
{
	enum { LEN = 64 * 1024 };
	struct side srv, cl;
	struct rps_conn *c, *sc;
	struct rps_tr_mr rmr, lmr;
	struct rps_tr_sge sge[2];
	uint32_t rkey = 0;
	uint8_t *remote, *local;
	struct rec *r;

	(void)state;
	pair(&srv, &cl, &c, &sc);
	if (!rps_tr_has(cl.t, RPS_TR_CAP_READ)) {
		assert_int_equal(rps_tr_read_remote(c, NULL, 0, 0, 0, 1), -EOPNOTSUPP);
		rps_tr_close(c);
		side_stop(&cl);
		side_stop(&srv);
		skip();
	}
	remote = aligned_alloc(4096, LEN);
	local = aligned_alloc(4096, LEN);
	assert_non_null(remote);
	assert_non_null(local);
	for (size_t i = 0; i < LEN; i++)
		remote[i] = pattern(9, i);
	memset(local, 0, LEN);
	assert_int_equal(rps_tr_reg_mem(srv.t, remote, LEN, RPS_TR_ACCESS_REMOTE_READ, &rmr), 0);
	assert_int_equal(rps_tr_reg_mem(cl.t, local, LEN, RPS_TR_ACCESS_LOCAL, &lmr), 0);
	/* the key for this connection (rps_tr_grant: a memory window bound to it
	 * where the transport has them), sent after the grant in a frame as a
	 * server does: the client reads once it has it */
	{
		struct rps_frame_hdr h;
		size_t seen = count(&cl, RPS_TR_EV_RECV, c);

		assert_int_equal(rps_tr_grant(sc, &rmr, &rkey), 0);
		rps_proto_hdr_init(&h, RPS_OP_BARRIER_DONE, 0, 1);
		h.aux = rkey;
		assert_int_equal(rps_tr_post_send(sc, &h, NULL, 0, 0), 0);
		assert_true(wait_count(&cl, RPS_TR_EV_RECV, c, seen + 1));
	}

	/* the whole region */
	sge[0] = (struct rps_tr_sge){.addr = local, .len = LEN};
	assert_int_equal(rps_tr_read_remote(c, sge, 1, rmr.remote_addr, rkey, 77), 0);
	assert_true(wait_count(&cl, RPS_TR_EV_READ_DONE, c, 1));
	r = nth(&cl, RPS_TR_EV_READ_DONE, c, 0);
	assert_int_equal(r->ctx, 77);
	assert_int_equal(r->status, 0);
	assert_memory_equal(local, remote, LEN);

	/* [1000, 1000 + 3000) into two pieces, in order */
	memset(local, 0, LEN);
	sge[0] = (struct rps_tr_sge){.addr = local + 8192, .len = 1000};
	sge[1] = (struct rps_tr_sge){.addr = local, .len = 2000};
	assert_int_equal(rps_tr_read_remote(c, sge, 2, rmr.remote_addr + 1000, rkey, 78), 0);
	assert_true(wait_count(&cl, RPS_TR_EV_READ_DONE, c, 2));
	r = nth(&cl, RPS_TR_EV_READ_DONE, c, 1);
	assert_int_equal(r->ctx, 78);
	assert_int_equal(r->status, 0);
	assert_memory_equal(local + 8192, remote + 1000, 1000);
	assert_memory_equal(local, remote + 2000, 2000);

	rps_tr_dereg_mem(cl.t, &lmr);
	rps_tr_dereg_mem(srv.t, &rmr);
	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
	free(local);
	free(remote);
}

static void env_get(void)
{
	if (!strcmp(CONTRACT_TR, "tcp")) {
		env.host = "127.0.0.1";
		return;
	}
	env.host = getenv("RDMAPS_RXE_IP0");
	env.srv_dev = getenv("RDMAPS_RXE_DEV0");
	env.cli_dev = getenv("RDMAPS_RXE_DEV1");
	if (!env.host || !env.srv_dev || !env.cli_dev) {
		printf(
		    "SKIP: RDMAPS_RXE_IP0/DEV0/DEV1 not set; run through tools/softroce/rxe-run\n");
		exit(77);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hello),   cmocka_unit_test(test_frames),
	    cmocka_unit_test(test_release), cmocka_unit_test(test_close),
	    cmocka_unit_test(test_wake),    cmocka_unit_test(test_read_remote),
	};

	signal(SIGPIPE, SIG_IGN);
	env_get();
	return cmocka_run_group_tests_name(CONTRACT_TR, tests, NULL, NULL);
}
