/* TCP transport over real sockets on 127.0.0.1, a poller thread per side:
 * what only TCP does (recv_dest, frames cut anywhere on a raw socket,
 * backpressure, bad frames from a raw socket). What every transport
 * promises is tested by tests/contract/transport_contract.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
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
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/auth.h"
#include "src/config.h"
#include "src/proto.h"
#include "transport/tcp/tcp_int.h"
#include "transport/transport.h"

#define SECRET	  "s3cret"
#define MAX_MSG	  (16u << 20)
#define BIG_COUNT (2u << 20) /* floats: 8 MiB */
#define WAIT_MS	  5000
#define MAX_RECS  16384

struct rec {
	enum rps_tr_event_type type;
	struct rps_conn *conn;
	int status;
	uint64_t ctx;
	uint32_t rank; /* ACCEPTED: conn->hello.rank, read on the poller thread */
	struct rps_frame_hdr hdr;
	uint8_t fixed[80];
	uint8_t *data; /* copy (keep_data) */
	size_t data_len;
	void *data_ptr; /* where the transport put it */
};

struct side {
	struct rps_transport *t;
	uint16_t port;
	pthread_t th;
	atomic_int stop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rec *recs;
	size_t n;
	int auto_close;	   /* close() on CLOSED */
	int echo;	   /* answer PULL with PULL_RESP {count 1, data = req_id} from the poller */
	atomic_int errors; /* failures seen in the poller thread (no cmocka asserts there) */
	atomic_int use_dest;
	int flood; /* on ACCEPTED, send 1 MiB frames from the poller until one fails */
	atomic_int flood_rc;
	atomic_int flood_sent;
	uint8_t *dest;
	size_t dest_len;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		    size_t *ack_len_p, const char **why_p)
{
	struct rps_hello_ack a = {.server_rank = 3,
				  .num_shards = 2,
				  .num_workers = 4,
				  .chunk_bytes = 4096,
				  .max_msg = MAX_MSG};
	struct rps_shard_desc d[2] = {{.addr = 0x1000, .size = 111}, {.addr = 0x2000, .size = 222}};

	if (h->rank == 99) {
		*why_p = "rank 99 is taken";
		return -EPERM;
	}
	memcpy(ack, &a, sizeof(a));
	memcpy((char *)ack + sizeof(a), d, sizeof(d));
	*ack_len_p = sizeof(a) + sizeof(d);
	return 0;
}

static void *recv_dest(void *arg, struct rps_conn *c, const struct rps_frame_hdr *h,
		       const void *fixed)
{
	struct side *s = arg;

	if (atomic_load(&s->use_dest) && h->op == RPS_OP_PUSH && h->len - 48 <= s->dest_len)
		return s->dest;
	return NULL;
}

static void echo(struct side *s, const struct rps_tr_event *ev)
{
	struct rps_frame_hdr h;
	struct rps_pull p;
	float v = (float)ev->hdr.req_id;
	struct iovec iov[2] = {{&p, sizeof(p)}, {&v, sizeof(v)}};

	memcpy(&p, ev->fixed, sizeof(p));
	p.count = 1;
	rps_proto_hdr_init(&h, RPS_OP_PULL_RESP, sizeof(p) + sizeof(v), ev->hdr.req_id);
	if (rps_tr_post_send(ev->conn, &h, iov, 2, 0) != 0)
		atomic_fetch_add(&s->errors, 1);
}

static void flood(struct side *s, struct rps_conn *c)
{
	static uint8_t chunk[1 << 20];
	int rc, n = 0;

	do {
		struct rps_frame_hdr h;
		struct iovec iov = {chunk, sizeof(chunk)};

		rps_proto_hdr_init(&h, RPS_OP_STATUS, sizeof(chunk), (uint32_t)n);
		rc = rps_tr_post_send(c, &h, &iov, 1, 0);
	} while (rc == 0 && ++n < 200);
	atomic_store(&s->flood_sent, n);
	atomic_store(&s->flood_rc, rc);
}

static void *poller(void *arg)
{
	struct side *s = arg;
	struct rps_tr_event ev[32];

	while (!atomic_load(&s->stop)) {
		int n = rps_tr_poll(s->t, ev, 32, 50);

		if (n < 0)
			atomic_fetch_add(&s->errors, 1);
		for (int i = 0; i < n; i++) {
			struct rec r = {.type = ev[i].type,
					.conn = ev[i].conn,
					.status = ev[i].status,
					.ctx = ev[i].ctx};

			if (ev[i].type == RPS_TR_EV_ACCEPTED)
				r.rank = ev[i].conn->hello.rank;
			if (ev[i].type == RPS_TR_EV_ACCEPTED && s->flood)
				flood(s, ev[i].conn);
			if (ev[i].type == RPS_TR_EV_RECV) {
				int fl = rps_proto_fixed_len(ev[i].hdr.op);

				r.hdr = ev[i].hdr;
				memcpy(r.fixed, ev[i].fixed, (size_t)fl);
				r.data_len = ev[i].data_len;
				r.data_ptr = ev[i].data;
				if (ev[i].data_len) {
					r.data = malloc(ev[i].data_len);
					memcpy(r.data, ev[i].data, ev[i].data_len);
				}
				if (s->echo && ev[i].hdr.op == RPS_OP_PULL)
					echo(s, &ev[i]);
				rps_tr_release(s->t, ev[i].token);
			}
			if (ev[i].type == RPS_TR_EV_CLOSED && s->auto_close)
				rps_tr_close(ev[i].conn);
			pthread_mutex_lock(&s->lock);
			if (s->n < MAX_RECS) /* never reallocated: tests keep pointers */
				s->recs[s->n++] = r;
			else
				atomic_fetch_add(&s->errors, 1);
			pthread_cond_broadcast(&s->cond);
			pthread_mutex_unlock(&s->lock);
		}
	}
	return NULL;
}

/* The option table's defaults, as every transport's caller passes them. */
static void tparams(struct rps_tr_params *p_p)
{
	struct rps_config cfg;

	assert_int_equal(rps_config_init(&cfg), 0);
	rps_tr_params_from_config(&cfg, p_p);
}

/* Limits the next side_start applies on top of the defaults (0: default). */
static struct rps_tr_params side_limits;

static void side_start(struct side *s, const char *secret, int timeout_ms, int listen)
{
	struct rps_tr_params p;

	tparams(&p);
	if (side_limits.sq_max)
		p.sq_max = side_limits.sq_max;
	if (side_limits.frame_timeout_ms)
		p.frame_timeout_ms = side_limits.frame_timeout_ms;
	if (side_limits.idle_timeout_ms)
		p.idle_timeout_ms = side_limits.idle_timeout_ms;
	if (side_limits.max_conns)
		p.max_conns = side_limits.max_conns;
	if (side_limits.max_conns_per_addr)
		p.max_conns_per_addr = side_limits.max_conns_per_addr;
	p.secret = secret;
	p.max_msg = MAX_MSG;
	p.timeout_ms = timeout_ms;
	p.on_hello = on_hello;
	p.recv_dest = recv_dest;
	p.arg = s;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->recs = calloc(MAX_RECS, sizeof(*s->recs));
	assert_non_null(s->recs);
	assert_int_equal(rps_transport_create("tcp", &p, &s->t), 0);
	if (listen) {
		assert_int_equal(rps_tr_listen(s->t, "127.0.0.1", 0, &s->port), 0);
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
	rps_transport_destroy(s->t);
	for (size_t i = 0; i < s->n; i++)
		free(s->recs[i].data);
	free(s->recs);
	free(s->dest);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
}

/* Number of records of a type (for conn, or any conn if NULL). */
static size_t count_locked(struct side *s, enum rps_tr_event_type type, struct rps_conn *c)
{
	size_t k = 0;

	for (size_t i = 0; i < s->n; i++)
		if (s->recs[i].type == type && (!c || s->recs[i].conn == c))
			k++;
	return k;
}

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

/* The k-th record (0-based) of a type, or NULL. Records are never removed. */
static struct rec *nth(struct side *s, enum rps_tr_event_type type, struct rps_conn *c, size_t k)
{
	struct rec *r = NULL;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++)
		if (s->recs[i].type == type && (!c || s->recs[i].conn == c) && k-- == 0) {
			r = &s->recs[i];
			break;
		}
	pthread_mutex_unlock(&s->lock);
	return r;
}

static struct rps_conn *client_connect(struct side *cl, struct side *srv, const char *secret,
				       uint32_t rank, int *rc_p)
{
	struct rps_hello h;
	uint8_t ack[RPS_TR_ACK_MAX];
	size_t ack_len = 0;
	struct rps_conn *c = NULL;

	rps_proto_hello_init(&h, RPS_ROLE_WORKER, rank);
	*rc_p = rps_tr_connect(cl->t, "127.0.0.1", srv->port, &h, ack, sizeof(ack), &ack_len,
				    2000, &c);
	return c;
}

/* ctx 0 only, unless the send is expected to fail: p is on the stack. */
static int send_pull(struct rps_transport *t, struct rps_conn *c, uint32_t req_id, uint64_t ctx)
{
	struct rps_frame_hdr h;
	struct rps_pull p = {.key = req_id, .count = 1};
	struct iovec iov = {&p, sizeof(p)};

	rps_proto_hdr_init(&h, RPS_OP_PULL, sizeof(p), req_id);
	return rps_tr_post_send(c, &h, &iov, 1, ctx);
}

/* ---- raw sockets ---- */

static int raw_connect(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct timeval tv = {.tv_sec = 3};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n <= 0)
			return n == 0 ? 0 : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 1;
}

static void write_full(int fd, const void *buf, size_t len)
{
	assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* The handshake by hand with SECRET (HELLO, CHALLENGE, PROOF), then the
 * server's HELLO_ACK. */
static void raw_hello(int fd)
{
	struct {
		struct rps_frame_hdr h;
		struct rps_hello hello;
	} f;
	struct {
		struct rps_frame_hdr h;
		struct rps_auth_proof proof;
	} pf;
	struct rps_auth_challenge ch;
	struct rps_frame_hdr a;
	uint8_t ack[RPS_TR_ACK_MAX];

	rps_proto_hdr_init(&f.h, RPS_OP_HELLO, sizeof(f.hello), 0);
	rps_proto_hello_init(&f.hello, RPS_ROLE_WORKER, 1);
	assert_int_equal(rps_auth_nonce(&f.hello), 0);
	write_full(fd, &f, sizeof(f));
	assert_int_equal(read_full(fd, &a, sizeof(a)), 1);
	assert_int_equal(a.op, RPS_OP_CHALLENGE);
	assert_int_equal(a.len, sizeof(ch));
	assert_int_equal(read_full(fd, &ch, sizeof(ch)), 1);
	rps_proto_hdr_init(&pf.h, RPS_OP_PROOF, sizeof(pf.proof), 0);
	assert_int_equal(rps_auth_challenge_answer(SECRET, &f.hello, &ch, &pf.proof), 0);
	write_full(fd, &pf, sizeof(pf));
	assert_int_equal(read_full(fd, &a, sizeof(a)), 1);
	assert_int_equal(a.magic, RPS_PROTO_MAGIC);
	assert_int_equal(a.op, RPS_OP_HELLO_ACK);
	assert_true(a.len <= sizeof(ack));
	assert_int_equal(read_full(fd, ack, a.len), 1);
}

/* The server's answer to a bad frame: an ERROR frame with status, then EOF. */
static void raw_expect_error(int fd, int status)
{
	struct rps_frame_hdr h;
	char text[512];

	assert_int_equal(read_full(fd, &h, sizeof(h)), 1);
	assert_int_equal(h.magic, RPS_PROTO_MAGIC);
	assert_int_equal(h.op, RPS_OP_ERROR);
	assert_int_equal(h.status, status);
	assert_true(h.len > 0 && h.len < sizeof(text));
	assert_int_equal(read_full(fd, text, h.len), 1);
	assert_int_equal(read(fd, text, 1), 0); /* then closed */
}

/* ---- tests ---- */

static void test_handshake(void **state)
{
	struct side srv, cl;
	struct rps_hello h;
	struct rps_hello_ack a;
	struct rps_shard_desc d[2];
	uint8_t ack[RPS_TR_ACK_MAX];
	size_t ack_len = 0;
	struct rps_conn *c = NULL;
	struct rec *r;

	side_start(&srv, SECRET, 2000, 1);
	side_start(&cl, SECRET, 2000, 0);
	assert_int_equal(srv.t->caps, RPS_TR_CAP_RECV_DEST);
	assert_false(rps_tr_has(srv.t, RPS_TR_CAP_READ));
	assert_false(rps_tr_has(srv.t, RPS_TR_CAP_READ_NOTIFY));
	assert_false(rps_tr_has(srv.t, RPS_TR_CAP_PROGRESS));
	/* optional ops without their capability: stubs, never NULL */
	assert_int_equal(rps_tr_progress(srv.t, NULL, 0), -EOPNOTSUPP);
	assert_int_equal(srv.t->max_frame, (uint64_t)MAX_MSG + 24);
	assert_string_equal(srv.t->ops->name, "tcp");

	rps_proto_hello_init(&h, RPS_ROLE_WORKER, 5);
	h.channel = 0;
	assert_int_equal(rps_tr_connect(cl.t, "127.0.0.1", srv.port, &h, ack, sizeof(ack),
					    &ack_len, 2000, &c),
			 0);
	assert_non_null(c);
	assert_int_equal(rps_tr_read_remote(c, NULL, 0, 0, 0, 1), -EOPNOTSUPP);
	assert_int_equal(ack_len, sizeof(a) + sizeof(d));
	memcpy(&a, ack, sizeof(a));
	memcpy(d, ack + sizeof(a), sizeof(d));
	assert_int_equal(a.server_rank, 3);
	assert_int_equal(a.num_shards, 2);
	assert_int_equal(a.max_msg, MAX_MSG);
	assert_int_equal(d[1].addr, 0x2000);
	assert_int_equal(d[1].size, 222);

	assert_true(wait_count(&srv, RPS_TR_EV_ACCEPTED, NULL, 1));
	r = nth(&srv, RPS_TR_EV_ACCEPTED, NULL, 0);
	assert_int_equal(r->conn->hello.rank, 5);
	assert_int_equal(r->conn->hello.role, RPS_ROLE_WORKER);
	assert_int_equal(strncmp(r->conn->peer, "127.0.0.1:", 10), 0);
	assert_ptr_equal(r->conn->tr, srv.t);

	/* on_hello refusal: its status reaches connect() */
	{
		struct rps_conn *c2 = NULL;
		int rc;

		c2 = client_connect(&cl, &srv, SECRET, 99, &rc);
		assert_int_equal(rc, -EPERM);
		assert_null(c2);
	}
	/* an ack that does not fit */
	{
		struct rps_conn *c3 = NULL;

		assert_int_equal(rps_tr_connect(cl.t, "127.0.0.1", srv.port, &h, ack, 10,
						    &ack_len, 2000, &c3),
				 -EMSGSIZE);
		assert_null(c3);
	}
	/* nobody listening */
	{
		struct rps_conn *c4 = NULL;

		assert_int_equal(rps_tr_connect(cl.t, "127.0.0.1", 1, &h, ack, sizeof(ack),
						    &ack_len, 2000, &c4),
				 -ECONNREFUSED);
	}
	/* a frame both ways after the hello */
	assert_int_equal(send_pull(cl.t, c, 7, 0), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 1));
	r = nth(&srv, RPS_TR_EV_RECV, NULL, 0);
	assert_int_equal(r->hdr.op, RPS_OP_PULL);
	assert_int_equal(r->hdr.req_id, 7);
	assert_ptr_equal(r->conn, nth(&srv, RPS_TR_EV_ACCEPTED, NULL, 0)->conn);

	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
}

enum bad_kind {
	BAD_GARBAGE,
	BAD_MAGIC,
	BAD_VERSION,
	BAD_TOO_LONG,
	BAD_UNKNOWN_OP,
	BAD_PUSH_COUNT,
	BAD_TRUNCATED,
};

static void test_bad_frames(void **state)
{
	static const struct {
		enum bad_kind kind;
		int status;
	} cases[] = {
	    {BAD_GARBAGE, -EPROTO},	  {BAD_MAGIC, -EPROTO},	     {BAD_VERSION, -EPROTO},
	    {BAD_TOO_LONG, -EMSGSIZE},	  {BAD_UNKNOWN_OP, -EPROTO}, {BAD_PUSH_COUNT, -EPROTO},
	    {BAD_TRUNCATED, -ECONNRESET},
	};
	struct side srv, cl;
	struct rps_conn *good, *good_srv;
	int rc;

	side_start(&srv, SECRET, 2000, 1);
	srv.auto_close = 1;
	side_start(&cl, SECRET, 2000, 0);
	good = client_connect(&cl, &srv, SECRET, 0, &rc);
	assert_int_equal(rc, 0);
	assert_true(wait_count(&srv, RPS_TR_EV_ACCEPTED, NULL, 1));
	good_srv = nth(&srv, RPS_TR_EV_ACCEPTED, NULL, 0)->conn;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rps_frame_hdr h;
		uint8_t buf[24 + 48 + 50];
		size_t len = sizeof(h);
		struct rps_conn *bad;
		struct rec *r;
		size_t before;
		int fd = raw_connect(srv.port);

		raw_hello(fd);
		assert_true(wait_count(&srv, RPS_TR_EV_ACCEPTED, NULL, i + 2));
		bad = nth(&srv, RPS_TR_EV_ACCEPTED, NULL, i + 1)->conn;
		/* a freed connection's address may come back: count from here */
		pthread_mutex_lock(&srv.lock);
		before = count_locked(&srv, RPS_TR_EV_CLOSED, bad);
		pthread_mutex_unlock(&srv.lock);

		rps_proto_hdr_init(&h, RPS_OP_PULL, 32, 1);
		switch (cases[i].kind) {
		case BAD_GARBAGE:
			for (size_t k = 0; k < sizeof(h); k++)
				((uint8_t *)&h)[k] = (uint8_t)(k * 37 + 11);
			break;
		case BAD_MAGIC:
			h.magic = 0x41414141;
			break;
		case BAD_VERSION:
			h.version = 2;
			break;
		case BAD_TOO_LONG:
			rps_proto_hdr_init(&h, RPS_OP_PUSH, MAX_MSG + 1, 1);
			break;
		case BAD_UNKNOWN_OP:
			h.op = 99;
			break;
		case BAD_PUSH_COUNT: {
			struct rps_push p = {.count = 100}; /* but len says 0 elements */

			rps_proto_hdr_init(&h, RPS_OP_PUSH, 48, 1);
			memcpy(buf + sizeof(h), &p, sizeof(p));
			len += sizeof(p);
			break;
		}
		case BAD_TRUNCATED: {
			struct rps_push p = {.count = 100}; /* consistent: 48 + 400 */

			rps_proto_hdr_init(&h, RPS_OP_PUSH, 48 + 400, 1);
			memset(buf + sizeof(h), 0, 50);
			memcpy(buf + sizeof(h), &p, sizeof(p));
			len += 50; /* then close */
			break;
		}
		}
		memcpy(buf, &h, sizeof(h));
		write_full(fd, buf, len);
		if (cases[i].kind == BAD_TRUNCATED)
			close(fd);
		else
			raw_expect_error(fd, cases[i].status);

		assert_true(wait_count(&srv, RPS_TR_EV_CLOSED, bad, before + 1));
		r = nth(&srv, RPS_TR_EV_CLOSED, bad, before);
		assert_int_equal(r->status, cases[i].status);
		if (cases[i].kind != BAD_TRUNCATED)
			close(fd);

		/* the good connection is unaffected */
		assert_int_equal(send_pull(cl.t, good, (uint32_t)i, 0), 0);
		assert_true(wait_count(&srv, RPS_TR_EV_RECV, good_srv, i + 1));
		r = nth(&srv, RPS_TR_EV_RECV, good_srv, i);
		assert_int_equal(r->hdr.req_id, i);
	}
	pthread_mutex_lock(&srv.lock);
	assert_int_equal(count_locked(&srv, RPS_TR_EV_CLOSED, good_srv), 0);
	assert_int_equal(count_locked(&srv, RPS_TR_EV_CLOSED, NULL),
			 sizeof(cases) / sizeof(cases[0]));
	pthread_mutex_unlock(&srv.lock);
	pthread_mutex_lock(&cl.lock);
	assert_int_equal(count_locked(&cl, RPS_TR_EV_CLOSED, NULL), 0);
	pthread_mutex_unlock(&cl.lock);

	rps_tr_close(good);
	side_stop(&cl);
	side_stop(&srv);
}

static void test_bad_hello(void **state)
{
	struct side srv, cl;
	struct rps_frame_hdr h;
	struct rps_conn *c;
	char b;
	uint64_t t0;
	int fd, rc;

	side_start(&srv, SECRET, 300, 1); /* hello timeout 300 ms */
	side_start(&cl, SECRET, 2000, 0);

	/* a frame that is not a hello */
	fd = raw_connect(srv.port);
	rps_proto_hdr_init(&h, RPS_OP_PULL, 32, 1);
	write_full(fd, &h, sizeof(h));
	raw_expect_error(fd, -EPROTO);
	close(fd);

	/* garbage */
	fd = raw_connect(srv.port);
	memset(&h, 0x5a, sizeof(h));
	write_full(fd, &h, sizeof(h));
	raw_expect_error(fd, -EPROTO);
	close(fd);

	/* silence: dropped after the hello timeout */
	fd = raw_connect(srv.port);
	t0 = now_ms();
	assert_int_equal(read(fd, &b, 1), 0);
	assert_true(now_ms() - t0 >= 250);
	assert_true(now_ms() - t0 < 2500);
	close(fd);

	/* none of them was ever announced; a good client still gets in */
	c = client_connect(&cl, &srv, SECRET, 0, &rc);
	assert_int_equal(rc, 0);
	assert_true(wait_count(&srv, RPS_TR_EV_ACCEPTED, NULL, 1));
	pthread_mutex_lock(&srv.lock);
	assert_int_equal(count_locked(&srv, RPS_TR_EV_ACCEPTED, NULL), 1);
	assert_int_equal(count_locked(&srv, RPS_TR_EV_CLOSED, NULL), 0);
	pthread_mutex_unlock(&srv.lock);
	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
}

static void test_many_small_in_order(void **state)
{
	struct side srv, cl;
	struct rps_conn *c;
	uint64_t created;
	int rc;

	side_start(&srv, SECRET, 2000, 1);
	srv.echo = 1;
	side_start(&cl, SECRET, 2000, 0);
	c = client_connect(&cl, &srv, SECRET, 0, &rc);
	assert_int_equal(rc, 0);
	for (uint32_t i = 0; i < 1000; i++)
		assert_int_equal(send_pull(cl.t, c, i, 0), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 1000));
	assert_true(wait_count(&cl, RPS_TR_EV_RECV, NULL, 1000));
	for (uint32_t i = 0; i < 1000; i++) {
		struct rec *r = nth(&srv, RPS_TR_EV_RECV, NULL, i);
		struct rps_pull p;
		float v;

		assert_int_equal(r->hdr.op, RPS_OP_PULL);
		assert_int_equal(r->hdr.req_id, i);
		memcpy(&p, r->fixed, sizeof(p));
		assert_int_equal(p.key, i);
		assert_int_equal(r->data_len, 0);

		r = nth(&cl, RPS_TR_EV_RECV, c, i);
		assert_int_equal(r->hdr.op, RPS_OP_PULL_RESP);
		assert_int_equal(r->hdr.req_id, i);
		assert_int_equal(r->data_len, 4);
		memcpy(&v, r->data, 4);
		assert_true(v == (float)i);
	}
	/* steady state: once warm, a frame allocates no buffer (one frame in
	 * flight at a time, so the count cannot depend on batching) */
	created = atomic_load(&tcp_tt(srv.t)->pool.created);
	assert_true(created > 0);
	for (uint32_t i = 1000; i < 1200; i++) {
		assert_int_equal(send_pull(cl.t, c, i, 0), 0);
		assert_true(wait_count(&cl, RPS_TR_EV_RECV, NULL, i + 1));
	}
	assert_int_equal(atomic_load(&tcp_tt(srv.t)->pool.created), created);

	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
}

static uint8_t pattern(size_t i, unsigned seed)
{
	return (uint8_t)((i * 2654435761u) >> 13 ^ seed);
}

static void send_big(struct side *cl, struct rps_conn *c, uint8_t *data, unsigned seed,
		     uint64_t ctx)
{
	struct rps_frame_hdr h;
	struct rps_push p = {.key = seed, .count = BIG_COUNT};
	struct iovec iov[3];
	size_t half = BIG_COUNT * 2;

	for (size_t i = 0; i < BIG_COUNT * 4; i++)
		data[i] = pattern(i, seed);
	iov[0].iov_base = &p;
	iov[0].iov_len = sizeof(p);
	iov[1].iov_base = data; /* two pieces: the transport must join them */
	iov[1].iov_len = half;
	iov[2].iov_base = data + half;
	iov[2].iov_len = BIG_COUNT * 4 - half;
	rps_proto_hdr_init(&h, RPS_OP_PUSH, sizeof(p) + BIG_COUNT * 4, seed);
	assert_int_equal(rps_tr_post_send(c, &h, iov, 3, ctx), 0);
	if (!ctx) /* the transport copied what it could not send: scribble */
		memset(data, 0, BIG_COUNT * 4);
}

static void check_big(const uint8_t *d, unsigned seed)
{
	for (size_t i = 0; i < BIG_COUNT * 4; i++)
		if (d[i] != pattern(i, seed))
			fail_msg("byte %zu: %u, want %u", i, d[i], pattern(i, seed));
}

static void test_big_frames(void **state)
{
	struct side srv, cl;
	struct rps_conn *c;
	uint8_t *data = malloc(BIG_COUNT * 4);
	struct rec *r;
	int rc;

	side_start(&srv, SECRET, 2000, 1);
	srv.dest_len = BIG_COUNT * 4;
	srv.dest = malloc(srv.dest_len);
	side_start(&cl, SECRET, 2000, 0);
	c = client_connect(&cl, &srv, SECRET, 0, &rc);
	assert_int_equal(rc, 0);

	/* into a pool buffer, ctx == 0 (copy of the unsent rest) */
	send_big(&cl, c, data, 1, 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 1));
	r = nth(&srv, RPS_TR_EV_RECV, NULL, 0);
	assert_int_equal(r->hdr.req_id, 1);
	assert_int_equal(r->data_len, BIG_COUNT * 4);
	assert_ptr_not_equal(r->data_ptr, srv.dest);
	check_big(r->data, 1);

	/* into a pool buffer, zero copy send: SEND_DONE(ctx) */
	send_big(&cl, c, data, 2, 0xb16);
	assert_true(wait_count(&cl, RPS_TR_EV_SEND_DONE, c, 1));
	assert_int_equal(nth(&cl, RPS_TR_EV_SEND_DONE, c, 0)->ctx, 0xb16);
	assert_int_equal(nth(&cl, RPS_TR_EV_SEND_DONE, c, 0)->status, 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 2));
	check_big(nth(&srv, RPS_TR_EV_RECV, NULL, 1)->data, 2);

	/* zero-copy receive: straight into recv_dest memory */
	atomic_store(&srv.use_dest, 1);
	memset(srv.dest, 0, srv.dest_len);
	send_big(&cl, c, data, 3, 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 3));
	r = nth(&srv, RPS_TR_EV_RECV, NULL, 2);
	assert_ptr_equal(r->data_ptr, srv.dest);
	assert_int_equal(r->data_len, BIG_COUNT * 4);
	check_big(srv.dest, 3);
	{
		struct rps_push p;

		memcpy(&p, r->fixed, sizeof(p));
		assert_int_equal(p.count, BIG_COUNT);
		assert_int_equal(p.key, 3);
	}
	/* a small frame after the big ones still parses */
	assert_int_equal(send_pull(cl.t, c, 4, 0), 0);
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 4));
	assert_int_equal(nth(&srv, RPS_TR_EV_RECV, NULL, 3)->hdr.req_id, 4);

	/* frames beyond max_msg or with a wrong length are refused locally */
	{
		struct rps_frame_hdr h;
		struct iovec iov = {data, 8};

		rps_proto_hdr_init(&h, RPS_OP_PUSH, MAX_MSG + 1, 0);
		assert_int_equal(rps_tr_post_send(c, &h, &iov, 1, 0), -EMSGSIZE);
		rps_proto_hdr_init(&h, RPS_OP_PUSH, 9, 0);
		assert_int_equal(rps_tr_post_send(c, &h, &iov, 1, 0), -EINVAL);
	}

	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
	free(data);
}

#define NTHREADS   4
#define PER_THREAD 250

struct sender {
	struct side *cl;
	struct rps_conn *c;
	uint32_t id;
	float vals[PER_THREAD][16]; /* zero-copy senders: valid until SEND_DONE */
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	int zero_copy = s->id & 1;

	for (uint32_t i = 0; i < PER_THREAD; i++) {
		struct rps_frame_hdr h;
		struct rps_push p = {.key = s->id, .offset = i, .count = 16};
		float local[16];
		float *v = zero_copy ? s->vals[i] : local;
		struct iovec iov[2] = {{&p, sizeof(p)}, {v, sizeof(local)}};

		for (int k = 0; k < 16; k++)
			v[k] = (float)(s->id * 100000 + i * 16 + (uint32_t)k);
		rps_proto_hdr_init(&h, RPS_OP_PUSH, sizeof(p) + sizeof(local), s->id << 16 | i);
		if (rps_tr_post_send(s->c, &h, iov, 2,
					     zero_copy ? (uint64_t)s->id << 32 | i : 0) != 0)
			return (void *)1;
	}
	return NULL;
}

static void test_concurrent_senders(void **state)
{
	struct side srv, cl;
	struct sender *snd = calloc(NTHREADS, sizeof(*snd));
	pthread_t th[NTHREADS];
	uint32_t next[NTHREADS] = {0};
	struct rps_conn *c;
	int rc;

	side_start(&srv, SECRET, 2000, 1);
	side_start(&cl, SECRET, 2000, 0);
	c = client_connect(&cl, &srv, SECRET, 0, &rc);
	assert_int_equal(rc, 0);
	for (uint32_t t = 0; t < NTHREADS; t++) {
		snd[t].cl = &cl;
		snd[t].c = c;
		snd[t].id = t;
		assert_int_equal(pthread_create(&th[t], NULL, sender_main, &snd[t]), 0);
	}
	for (uint32_t t = 0; t < NTHREADS; t++) {
		void *ret;

		pthread_join(th[t], &ret);
		assert_null(ret);
	}
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, NTHREADS * PER_THREAD));
	for (size_t i = 0; i < NTHREADS * PER_THREAD; i++) {
		struct rec *r = nth(&srv, RPS_TR_EV_RECV, NULL, i);
		uint32_t t = r->hdr.req_id >> 16, k = r->hdr.req_id & 0xffff;
		struct rps_push p;

		assert_true(t < NTHREADS);
		assert_int_equal(k, next[t]); /* each thread's frames in its order */
		next[t]++;
		memcpy(&p, r->fixed, sizeof(p));
		assert_int_equal(p.key, t);
		assert_int_equal(p.offset, k);
		assert_int_equal(r->data_len, 64);
		for (int j = 0; j < 16; j++) {
			float v;

			memcpy(&v, r->data + 4 * j, 4);
			assert_true(v == (float)(t * 100000 + k * 16 + (uint32_t)j));
		}
	}
	/* the two zero-copy threads got all their SEND_DONEs, each thread's in order */
	assert_true(wait_count(&cl, RPS_TR_EV_SEND_DONE, c, NTHREADS / 2 * PER_THREAD));
	memset(next, 0, sizeof(next));
	for (size_t i = 0; i < NTHREADS / 2 * PER_THREAD; i++) {
		struct rec *r = nth(&cl, RPS_TR_EV_SEND_DONE, c, i);
		uint32_t t = (uint32_t)(r->ctx >> 32), k = (uint32_t)r->ctx;

		assert_true(t & 1);
		assert_int_equal(r->status, 0);
		assert_int_equal(k, next[t]);
		next[t]++;
	}
	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
	free(snd);
}

static void test_send_done(void **state)
{
	struct side srv, cl;
	struct rps_conn *c;
	int rc;

	side_start(&srv, SECRET, 2000, 1);
	side_start(&cl, SECRET, 2000, 0);
	c = client_connect(&cl, &srv, SECRET, 0, &rc);
	assert_int_equal(rc, 0);
	static struct rps_pull pulls[10]; /* zero copy: valid until SEND_DONE */

	for (uint32_t i = 0; i < 10; i++) {
		struct rps_frame_hdr h;
		struct iovec iov = {&pulls[i], sizeof(pulls[i])};

		pulls[i].key = i;
		rps_proto_hdr_init(&h, RPS_OP_PULL, sizeof(pulls[i]), i);
		assert_int_equal(rps_tr_post_send(c, &h, &iov, 1, i % 2 ? 100 + i : 0), 0);
	}
	assert_true(wait_count(&cl, RPS_TR_EV_SEND_DONE, c, 5));
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 10));
	usleep(50 * 1000);
	pthread_mutex_lock(&cl.lock);
	assert_int_equal(count_locked(&cl, RPS_TR_EV_SEND_DONE, NULL), 5); /* none for ctx 0 */
	pthread_mutex_unlock(&cl.lock);
	for (uint32_t i = 0; i < 5; i++) {
		struct rec *r = nth(&cl, RPS_TR_EV_SEND_DONE, c, i);

		assert_int_equal(r->ctx, 100 + 2 * i + 1);
		assert_int_equal(r->status, 0);
	}
	rps_tr_close(c);
	side_stop(&cl);
	side_stop(&srv);
}

/* A server that says hello and then never reads. */
struct mute {
	int lfd;
	uint16_t port;
	int fd;
	atomic_int done;
};

static void *mute_main(void *arg)
{
	struct mute *m = arg;
	struct {
		struct rps_frame_hdr h;
		struct rps_hello hello;
	} f;
	struct {
		struct rps_frame_hdr h;
		struct rps_auth_challenge ch;
	} cf;
	struct {
		struct rps_frame_hdr h;
		struct rps_auth_proof proof;
	} pf;
	struct rps_frame_hdr a;

	m->fd = accept(m->lfd, NULL, NULL);
	if (m->fd < 0 || read_full(m->fd, &f, sizeof(f)) != 1)
		return (void *)1;
	/* a listener that knows the secret: the challenge-response, then mute */
	rps_proto_hdr_init(&cf.h, RPS_OP_CHALLENGE, sizeof(cf.ch), 0);
	if (rps_auth_challenge_make(SECRET, &f.hello, &cf.ch) ||
	    send(m->fd, &cf, sizeof(cf), MSG_NOSIGNAL) != sizeof(cf) ||
	    read_full(m->fd, &pf, sizeof(pf)) != 1 ||
	    rps_auth_proof_check(SECRET, &f.hello, &cf.ch, &pf.proof))
		return (void *)1;
	rps_proto_hdr_init(&a, RPS_OP_HELLO_ACK, 0, 0);
	if (send(m->fd, &a, sizeof(a), MSG_NOSIGNAL) != sizeof(a))
		return (void *)1;
	while (!atomic_load(&m->done))
		usleep(10 * 1000);
	return NULL;
}

static void test_backpressure(void **state)
{
	struct mute m = {.fd = -1};
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	struct side cl;
	struct rps_hello h;
	struct rps_conn *c = NULL;
	pthread_t th;
	size_t ack_len = 0;
	uint8_t *chunk = calloc(1, 1 << 20);
	int sent = 0, rc = 0;
	uint64_t t0, t_fail = 0;
	void *ret;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	m.lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(m.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(m.lfd, 1), 0);
	getsockname(m.lfd, (struct sockaddr *)&a, &al);
	m.port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&th, NULL, mute_main, &m), 0);

	side_start(&cl, SECRET, 300, 0); /* send timeout 300 ms */
	rps_proto_hello_init(&h, RPS_ROLE_WORKER, 0);
	assert_int_equal(
	    rps_tr_connect(cl.t, "127.0.0.1", m.port, &h, NULL, 0, &ack_len, 2000, &c), 0);
	assert_int_equal(ack_len, 0);

	t0 = now_ms();
	while (sent < 200) {
		struct rps_frame_hdr fh;
		struct iovec iov = {chunk, 1 << 20};
		uint64_t before = now_ms();

		rps_proto_hdr_init(&fh, RPS_OP_ERROR, 1 << 20, (uint32_t)sent);
		rc = rps_tr_post_send(c, &fh, &iov, 1, 0);
		if (rc) {
			t_fail = now_ms() - before;
			break;
		}
		sent++;
	}
	/* queued up to the 64 MiB bound (plus what the sockets hold), then waited and gave up */
	assert_int_equal(rc, -ETIMEDOUT);
	assert_true(sent >= 64);
	assert_true(sent < 120);
	assert_true(t_fail >= 250);
	assert_true(now_ms() - t0 < 5000);

	rps_tr_close(c);
	side_stop(&cl);
	atomic_store(&m.done, 1);
	pthread_join(th, &ret);
	assert_null(ret);
	close(m.fd);
	close(m.lfd);
	free(chunk);
}

/* A valid frame trickling in a byte at a time, then two frames in one write. */
static void test_fragmented(void **state)
{
	struct side srv;
	struct {
		struct rps_frame_hdr h;
		struct rps_push p;
		float v[10];
	} f[2];
	struct rec *r;
	int fd;

	side_start(&srv, SECRET, 2000, 1);
	fd = raw_connect(srv.port);
	raw_hello(fd);
	for (int k = 0; k < 2; k++) {
		memset(&f[k].p, 0, sizeof(f[k].p));
		f[k].p.key = 40 + (unsigned)k;
		f[k].p.count = 10;
		for (int i = 0; i < 10; i++)
			f[k].v[i] = (float)(i + 10 * k);
		rps_proto_hdr_init(&f[k].h, RPS_OP_PUSH, sizeof(f[k].p) + sizeof(f[k].v),
				   (uint32_t)k);
	}
	for (size_t i = 0; i < sizeof(f[0]); i++) {
		write_full(fd, (uint8_t *)&f[0] + i, 1);
		if (i % 8 == 0)
			usleep(300);
	}
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 1));
	f[0].h.req_id = 2;
	write_full(fd, f, sizeof(f)); /* f[0] again (req 2), then f[1] */
	assert_true(wait_count(&srv, RPS_TR_EV_RECV, NULL, 3));
	for (int k = 0; k < 3; k++) {
		int src = k == 2 ? 1 : 0;

		r = nth(&srv, RPS_TR_EV_RECV, NULL, (size_t)k);
		assert_int_equal(r->hdr.req_id, k == 0 ? 0 : k == 1 ? 2 : 1);
		assert_int_equal(r->data_len, sizeof(f[0].v));
		assert_memory_equal(r->fixed, &f[src].p, sizeof(f[src].p));
		assert_memory_equal(r->data, f[src].v, sizeof(f[src].v));
	}
	close(fd);
	side_stop(&srv);
}

/* post_send on the poller thread itself, to an accepted peer that never
 * reads: the peer is cut once its queue would pass sq_max, at once (no
 * wait: the poller serves everybody else), and its CLOSED event follows. */
static void test_backpressure_on_poller(void **state)
{
	struct side srv;
	uint64_t t0;
	int fd;

	memset(&side_limits, 0, sizeof(side_limits));
	side_limits.sq_max = 64ull << 20;
	side_start(&srv, SECRET, 5000, 1);
	memset(&side_limits, 0, sizeof(side_limits));
	srv.flood = 1;
	fd = raw_connect(srv.port);
	t0 = now_ms();
	raw_hello(fd); /* then never read */
	assert_true(wait_count(&srv, RPS_TR_EV_ACCEPTED, NULL, 1));
	assert_true(wait_count(&srv, RPS_TR_EV_CLOSED, NULL, 1));
	assert_int_equal(atomic_load(&srv.flood_rc), -ECONNRESET);
	assert_true(atomic_load(&srv.flood_sent) >= 64);
	assert_true(atomic_load(&srv.flood_sent) < 120);
	assert_true(now_ms() - t0 < 4000); /* well before the 5 s timeout */
	close(fd);
	side_stop(&srv);
}

/* Has the server closed fd (EOF or reset) within ms? */
static int raw_closed_within(int fd, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	uint64_t end = now_ms() + (uint64_t)ms;
	char buf[4096];

	while (now_ms() < end) {
		ssize_t n;

		if (poll(&pfd, 1, 20) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			return 1;
	}
	return 0;
}

/* A frame begun and never finished is cut after frame_timeout_ms (+ its size
 * at frame_min_rate); a connection between frames is not. */
static void test_frame_deadline(void **state)
{
	struct side srv;
	struct {
		struct rps_frame_hdr h;
		struct rps_push p;
	} f;
	uint64_t t0;
	int fd, quiet;

	memset(&side_limits, 0, sizeof(side_limits));
	side_limits.frame_timeout_ms = 300;
	side_start(&srv, SECRET, 5000, 1);
	memset(&side_limits, 0, sizeof(side_limits));
	fd = raw_connect(srv.port);
	quiet = raw_connect(srv.port);
	raw_hello(fd);
	raw_hello(quiet);
	memset(&f, 0, sizeof(f));
	f.p.count = 1000;
	rps_proto_hdr_init(&f.h, RPS_OP_PUSH, sizeof(f.p) + 4000, 1);
	t0 = now_ms();
	write_full(fd, &f, sizeof(f));
	write_full(fd, "0123456789", 10); /* 10 of 4000 bytes, then nothing */
	assert_true(raw_closed_within(fd, 3000));
	assert_true(now_ms() - t0 >= 250);
	assert_true(wait_count(&srv, RPS_TR_EV_CLOSED, NULL, 1));
	assert_int_equal(nth(&srv, RPS_TR_EV_CLOSED, NULL, 0)->status, -ETIMEDOUT);
	assert_false(raw_closed_within(quiet, 300)); /* idle, between frames: kept */
	close(fd);
	close(quiet);
	side_stop(&srv);
}

/* idle_timeout_ms closes an established connection that sends nothing. */
static void test_idle_timeout(void **state)
{
	struct side srv;
	uint64_t t0;
	int fd;

	memset(&side_limits, 0, sizeof(side_limits));
	side_limits.idle_timeout_ms = 300;
	side_start(&srv, SECRET, 5000, 1);
	memset(&side_limits, 0, sizeof(side_limits));
	fd = raw_connect(srv.port);
	raw_hello(fd);
	t0 = now_ms();
	assert_true(raw_closed_within(fd, 3000));
	assert_true(now_ms() - t0 >= 250);
	assert_true(wait_count(&srv, RPS_TR_EV_CLOSED, NULL, 1));
	close(fd);
	side_stop(&srv);
}

/* max_conns_per_addr and max_conns: sockets beyond them are closed at once,
 * the ones inside keep working, and a slot that frees is taken again. */
static void test_conn_caps(void **state)
{
	struct side srv;
	int fd[5];

	memset(&side_limits, 0, sizeof(side_limits));
	side_limits.max_conns_per_addr = 3;
	side_start(&srv, SECRET, 5000, 1);
	memset(&side_limits, 0, sizeof(side_limits));
	for (int i = 0; i < 3; i++) {
		fd[i] = raw_connect(srv.port);
		raw_hello(fd[i]);
	}
	fd[3] = raw_connect(srv.port);
	assert_true(raw_closed_within(fd[3], 2000));
	close(fd[3]);
	close(fd[0]);
	usleep(100 * 1000); /* the server sees fd[0] go */
	fd[3] = raw_connect(srv.port);
	raw_hello(fd[3]);
	assert_false(raw_closed_within(fd[3], 200));
	for (int i = 1; i < 4; i++)
		close(fd[i]);
	side_stop(&srv);

	side_limits.max_conns = 2;
	side_start(&srv, SECRET, 5000, 1);
	memset(&side_limits, 0, sizeof(side_limits));
	fd[0] = raw_connect(srv.port);
	fd[1] = raw_connect(srv.port); /* counted before its hello */
	fd[2] = raw_connect(srv.port);
	assert_true(raw_closed_within(fd[2], 2000));
	raw_hello(fd[0]);
	raw_hello(fd[1]);
	for (int i = 0; i < 3; i++)
		close(fd[i]);
	side_stop(&srv);
}

/* TCP registers nothing: reg_mem records the region, rkey 0. (wake():
 * tests/contract/transport_contract.c.) */
static void test_reg_mem(void **state)
{
	struct rps_tr_params p;
	struct rps_transport *t;
	struct rps_tr_mr mr;
	char buf[64];

	(void)state;
	tparams(&p);
	p.secret = SECRET;
	p.max_msg = 4096;
	assert_int_equal(rps_transport_create("tcp", &p, &t), 0);
	assert_int_equal(t->max_frame, 4096 + 24);
	assert_int_equal(rps_tr_reg_mem(t, buf, sizeof(buf), RPS_TR_ACCESS_REMOTE_READ, &mr), 0);
	assert_ptr_equal(mr.addr, buf);
	assert_int_equal(mr.len, sizeof(buf));
	assert_int_equal(mr.remote_key, 0);
	rps_tr_dereg_mem(t, &mr);
	rps_transport_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_handshake),
	    cmocka_unit_test(test_bad_frames),
	    cmocka_unit_test(test_bad_hello),
	    cmocka_unit_test(test_many_small_in_order),
	    cmocka_unit_test(test_big_frames),
	    cmocka_unit_test(test_concurrent_senders),
	    cmocka_unit_test(test_send_done),
	    cmocka_unit_test(test_backpressure),
	    cmocka_unit_test(test_backpressure_on_poller),
	    cmocka_unit_test(test_frame_deadline),
	    cmocka_unit_test(test_idle_timeout),
	    cmocka_unit_test(test_conn_caps),
	    cmocka_unit_test(test_fragmented),
	    cmocka_unit_test(test_reg_mem),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
