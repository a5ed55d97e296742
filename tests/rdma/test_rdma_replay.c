/* RDMA transport: a replayed handshake over rdma_cm is refused (issue 20,
 * docs/security.md "Issue 20 against the code").
 *
 * The hello travels in the rdma_cm connect request's private data; the
 * listener answers with a fresh challenge (its nonce Ns and MAC) in the
 * accept's private data, and the client's first frame is its PROOF
 * (transport/rdma/rdma_cm.c, rdma_connect.c; the same src/auth.c calls as
 * TCP). An on-path attacker who captured a legitimate worker's connect
 * request and PROOF can send both again, byte for byte. This test does that:
 *
 *   1. a legitimate worker (rank 3, the job's secret) connects; what it sent
 *      is recorded: the connect request's private data (hello with its nonce
 *      Nc, and the transport's extension) and its PROOF. It pushes values.
 *   2. an attacker (a transport of its own holding NO secret) connects with
 *      exactly the recorded private data in its connect request and sends
 *      exactly the recorded PROOF after the listener's challenge.
 *   3. the listener refuses it: the attacker's connect fails, it gets no
 *      HELLO_ACK (so no shard address or key), the listener's side sees no
 *      ACCEPTED connection and no frame from it, its log names the peer's
 *      address and claim ("refusing 10.9.0.2:PORT, a worker claiming rank 3:
 *      wrong secret ..."); the challenge it was given is not the recorded
 *      one (fresh nonce);
 *   4. the values the legitimate worker pushed are unchanged, its connection
 *      still carries pushes, and a new legitimate connection works.
 *
 * test_replayed_hello does this against a listener of our own (a stand-in
 * shard applying PUSH frames); test_replay_real_server against a real
 * server in-process (rps_server_create over RDMA, standalone: no scheduler),
 * with the worker's DECLARE, PUSH, CLOCK and PULL frames: a replay while the
 * worker is connected is refused as a second connection of a live rank
 * (-EADDRINUSE, before any challenge); once it left, the replay gets a fresh
 * challenge and is refused for its proof; the worker reconnects and finds
 * its values as it left them, and trains on.
 *
 * Recording and replaying go through the library's own connect path, with
 * two link-time wrappers (tests/rdma/replay.cmake: -Wl,--wrap): rdma_connect
 * (librdmacm: copies the private data, or puts the recorded bytes in its
 * place) and rps_auth_challenge_answer (src/auth.c: records the proof, or
 * answers any challenge with the recorded proof, never computing one). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <rdma/rdma_cma.h>

#include <rdmaps/server.h>

#include "server/server_int.h"
#include "src/auth.h"
#include "test_rdma_util.h"

#define RANK	  3
#define NVAL	  8
#define NO_SECRET "not-the-job-secret"

/* ---- the wrappers: off, record, replay ---- */

enum { W_OFF, W_RECORD, W_REPLAY };
static int wmode = W_OFF;
static unsigned char rec_pdata[256];
static uint8_t rec_pdata_len;
static struct rps_auth_proof rec_proof;
static struct rps_auth_challenge rec_chal, replay_chal;
static int rec_have_proof, replay_answered;
static uint16_t last_src_port; /* of the last connect request, host order */

int __real_rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p);
int __wrap_rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p);
int __real_rps_auth_challenge_answer(const char *secret, const struct rps_hello *h,
				     const struct rps_auth_challenge *ch,
				     struct rps_auth_proof *proof_p);
int __wrap_rps_auth_challenge_answer(const char *secret, const struct rps_hello *h,
				     const struct rps_auth_challenge *ch,
				     struct rps_auth_proof *proof_p);

int __wrap_rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct rdma_conn_param q;

	last_src_port = ntohs(rdma_get_src_port(id));
	if (wmode == W_RECORD && p->private_data) { /* private_data_len <= 255 */
		memcpy(rec_pdata, p->private_data, p->private_data_len);
		rec_pdata_len = p->private_data_len;
	} else if (wmode == W_REPLAY) {
		/* the captured connect request, verbatim */
		q = *p;
		q.private_data = rec_pdata;
		q.private_data_len = rec_pdata_len;
		return __real_rdma_connect(id, &q);
	}
	return __real_rdma_connect(id, p);
}

int __wrap_rps_auth_challenge_answer(const char *secret, const struct rps_hello *h,
				     const struct rps_auth_challenge *ch,
				     struct rps_auth_proof *proof_p)
{
	int rc;

	if (wmode == W_REPLAY) {
		/* no secret here: answer with the captured proof */
		replay_chal = *ch;
		replay_answered = 1;
		*proof_p = rec_proof;
		return 0;
	}
	rc = __real_rps_auth_challenge_answer(secret, h, ch, proof_p);
	if (wmode == W_RECORD && !rc) {
		rec_chal = *ch;
		rec_proof = *proof_p;
		rec_have_proof = 1;
	}
	return rc;
}

/* ---- the listener: a stand-in for a server's shard ---- */

struct srv {
	atomic_int accepted, closed, pushes, hellos;
	pthread_mutex_t lock;
	float values[NVAL]; /* SGD, lr 1: values -= pushed */
	struct rps_conn *conns[4];
	int bad; /* a frame of a connection we never accepted */
};

static int on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		    size_t *ack_len_p, const char **why_p)
{
	struct srv *s = arg;
	struct rps_shard_desc d = {.addr = 0x1000, .size = 4096, .remote_key = 0x77};

	(void)c;
	(void)h;
	(void)why_p;
	atomic_fetch_add(&s->hellos, 1);
	*ack_len_p = make_ack(ack, 1, &d);
	return 0;
}

static void srv_event(struct poller *p, struct rps_tr_event *ev)
{
	struct srv *s = p->arg;
	int known = 0;

	pthread_mutex_lock(&s->lock);
	switch (ev->type) {
	case RPS_TR_EV_ACCEPTED:
		for (int i = 0; i < 4; i++)
			if (!s->conns[i]) {
				s->conns[i] = ev->conn;
				break;
			}
		atomic_fetch_add(&s->accepted, 1);
		break;
	case RPS_TR_EV_RECV:
		for (int i = 0; i < 4; i++)
			known |= s->conns[i] == ev->conn;
		if (!known) {
			s->bad++;
		} else if (ev->hdr.op == RPS_OP_PUSH && ev->data_len == NVAL * sizeof(float)) {
			float v[NVAL];

			memcpy(v, ev->data, sizeof(v));
			for (int k = 0; k < NVAL; k++)
				s->values[k] -= v[k];
			atomic_fetch_add(&s->pushes, 1);
		}
		rps_tr_release(p->t, ev->token);
		break;
	case RPS_TR_EV_CLOSED:
		for (int i = 0; i < 4; i++)
			if (s->conns[i] == ev->conn)
				s->conns[i] = NULL;
		atomic_fetch_add(&s->closed, 1);
		rps_tr_close(ev->conn);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&s->lock);
}

static void cli_event(struct poller *p, struct rps_tr_event *ev)
{
	if (ev->type == RPS_TR_EV_RECV)
		rps_tr_release(p->t, ev->token);
}

/* Wait until the listener has taken n pushes. */
static int wait_pushes(struct srv *s, int n)
{
	double end = now_s() + 10;

	while (atomic_load(&s->pushes) < n && now_s() < end)
		usleep(1000);
	return atomic_load(&s->pushes) >= n;
}

/* Wait until the listener has accepted n connections in all. */
static int wait_accepted(struct srv *s, int n)
{
	double end = now_s() + 10;

	while (atomic_load(&s->accepted) < n && now_s() < end)
		usleep(1000);
	return atomic_load(&s->accepted) >= n;
}

static void expect_values(struct srv *s, int pushes)
{
	/* send_push sends base + k; every push here has base 1 */
	pthread_mutex_lock(&s->lock);
	for (int k = 0; k < NVAL; k++)
		assert_float_equal(s->values[k], -(float)pushes * (1.0f + (float)k), 0);
	pthread_mutex_unlock(&s->lock);
}

/* ---- the log, captured from stderr ---- */

static char logpath[] = "/tmp/rdma-replay-log-XXXXXX";
static int saved_stderr = -1;

static void log_capture(void)
{
	int fd;

	snprintf(logpath, sizeof(logpath), "/tmp/rdma-replay-log-XXXXXX");
	fd = mkstemp(logpath);

	assert_true(fd >= 0);
	fflush(stderr);
	saved_stderr = dup(2);
	assert_true(saved_stderr >= 0);
	assert_true(dup2(fd, 2) == 2);
	close(fd);
}

/* Is text in the captured log (waiting up to secs for it)? */
static int log_has(const char *text, double secs)
{
	double end = now_s() + secs;
	static char buf[1 << 16];

	do {
		int fd = open(logpath, O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			if (strstr(buf, text))
				return 1;
		}
		usleep(5000);
	} while (now_s() < end);
	return 0;
}

/* Restore stderr and show what was logged. */
static void log_release(void)
{
	char buf[4096];
	int fd;
	ssize_t n;

	if (saved_stderr < 0)
		return;
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
	fd = open(logpath, O_RDONLY);
	fprintf(stderr, "---- the test's log:\n");
	while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stderr);
	if (fd >= 0)
		close(fd);
	unlink(logpath);
}

static int teardown(void **state)
{
	wmode = W_OFF;
	log_release();
	return tr_teardown(state);
}

static struct rps_transport *attacker_transport(const struct rps_config *cfg, const char *dev)
{
	struct rps_tr_params p;
	struct rps_transport *t = NULL;

	rps_tr_params_from_config(cfg, &p);
	p.secret = NO_SECRET;
	p.device = dev;
	p.rdma.rnr_retry = 7;
	assert_int_equal(rps_transport_create("rdma", &p, &t), 0);
	for (int i = 0; i < TR_MAX_TRANSPORTS; i++)
		if (!tr_live[i]) {
			tr_live[i] = t; /* tr_teardown frees it after a failed assertion */
			break;
		}
	return t;
}

static void test_replayed_hello(void **state)
{
	struct tenv e;
	struct rps_config cfg;
	static struct srv s; /* static: a poller may still touch it after a failure */
	struct rps_transport *ts, *tc, *ta;
	struct rps_conn *legit, *replay, *again;
	struct rps_hello rec_hello;
	uint16_t port = 0;
	char ack[RPS_TR_ACK_MAX], ip[INET6_ADDRSTRLEN], want[160];
	size_t ack_len = 0;
	float scratch[NVAL];
	int rc;

	(void)state;
	memset(&s, 0, sizeof(s));
	pthread_mutex_init(&s.lock, NULL);
	tenv_get(&e);
	tcfg_init(&cfg, 1);
	cfg.rdma_recv_bufs = 64;
	log_capture();
	ts = tr_create(&cfg, e.dev0, 1, on_hello, &s);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	ta = attacker_transport(&cfg, e.dev1);
	assert_int_equal(rps_tr_listen(ts, e.ip0, 0, &port), 0);
	poller_start(ts, srv_event, &s);
	poller_start(tc, cli_event, NULL);
	poller_start(ta, cli_event, NULL);

	/* 1. the legitimate worker, recorded */
	wmode = W_RECORD;
	legit = tr_connect(tc, e.ip0, port, RANK, 0, ack, sizeof(ack), &ack_len, &rc);
	wmode = W_OFF;
	assert_int_equal(rc, 0);
	assert_true(wait_flag(&s.accepted, 10));
	assert_true(rec_have_proof);
	assert_true(rec_pdata_len >= sizeof(rec_hello));
	memcpy(&rec_hello, rec_pdata, sizeof(rec_hello));
	assert_int_equal(rec_hello.role, RPS_ROLE_WORKER);
	assert_int_equal(rec_hello.rank, RANK);
	for (int i = 0; i < 2; i++)
		assert_int_equal(send_push(tc, legit, (uint32_t)(10 + i), NVAL, 1.0f, 0, scratch),
				 0);
	assert_true(wait_pushes(&s, 2));
	expect_values(&s, 2);

	/* 2. the replay: the same private data, the same proof, no secret */
	wmode = W_REPLAY;
	ack_len = 0;
	replay = tr_connect(ta, e.ip0, port, RANK, 0, ack, sizeof(ack), &ack_len, &rc);
	wmode = W_OFF;
	printf("replayed connect: %d (%s)\n", rc, strerror(-rc));

	/* 3. refused, logged with the peer's address and claim */
	assert_null(replay);
	assert_true(rc < 0);
	assert_int_equal(ack_len, 0); /* no HELLO_ACK: no shard address, no key */
	assert_true(replay_answered); /* it got as far as the challenge ... */
	assert_memory_not_equal(replay_chal.nonce, rec_chal.nonce, sizeof(rec_chal.nonce));
	assert_true(atomic_load(&s.hellos) == 2); /* ... which was fresh */
	snprintf(ip, sizeof(ip), "%s", e.ip1);
	snprintf(want, sizeof(want), "refusing %s:%u, a worker claiming rank %d: wrong secret", ip,
		 last_src_port, RANK);
	assert_true(log_has(want, 10));
	assert_int_equal(atomic_load(&s.accepted), 1);
	pthread_mutex_lock(&s.lock);
	assert_int_equal(s.bad, 0);
	pthread_mutex_unlock(&s.lock);

	/* 4. the legitimate worker's values unchanged; it keeps working, and a
	 * new legitimate connection works */
	expect_values(&s, 2);
	assert_int_equal(send_push(tc, legit, 12, NVAL, 1.0f, 0, scratch), 0);
	assert_true(wait_pushes(&s, 3));
	expect_values(&s, 3);
	again = tr_connect(tc, e.ip0, port, RANK + 1, 0, ack, sizeof(ack), &ack_len, &rc);
	assert_int_equal(rc, 0);
	assert_true(wait_accepted(&s, 2));
	assert_int_equal(send_push(tc, again, 13, NVAL, 1.0f, 0, scratch), 0);
	assert_true(wait_pushes(&s, 4));
	expect_values(&s, 4);
	assert_int_equal(atomic_load(&s.accepted), 2);

	rps_tr_close(again);
	rps_tr_close(legit);
	tr_stop_pollers();
	tr_destroy(ta);
	tr_destroy(tc);
	tr_destroy(ts);
	log_release();
}

/* ---- against a real server ---- */

static struct rps_server *rsrv;
static pthread_t rsrv_th;

static void *rsrv_main(void *arg)
{
	(void)arg;
	rps_server_serve(rsrv);
	return NULL;
}

static void rsrv_stop(void)
{
	if (!rsrv)
		return;
	rps_server_stop(rsrv);
	pthread_join(rsrv_th, NULL);
	rps_server_destroy(rsrv);
	rsrv = NULL;
}

/* What a worker got back: the answers by request id. */
struct mbox {
	pthread_mutex_t mu;
	int n;
	struct {
		uint8_t op;
		int status;
		uint32_t req_id;
		size_t nval;
		float v[NVAL];
	} m[64];
};

static void mbox_event(struct poller *p, struct rps_tr_event *ev)
{
	struct mbox *b = p->arg;

	if (ev->type != RPS_TR_EV_RECV)
		return;
	pthread_mutex_lock(&b->mu);
	if (b->n < 64) {
		b->m[b->n].op = ev->hdr.op;
		b->m[b->n].status = ev->hdr.status;
		b->m[b->n].req_id = ev->hdr.req_id;
		b->m[b->n].nval = 0;
		if (ev->hdr.op == RPS_OP_PULL_RESP && ev->data_len == NVAL * sizeof(float)) {
			memcpy(b->m[b->n].v, ev->data, ev->data_len);
			b->m[b->n].nval = NVAL;
		}
		b->n++;
	}
	pthread_mutex_unlock(&b->mu);
	rps_tr_release(p->t, ev->token);
}

/* The answer op to req_id, within 10 s: its status (values into v), or
 * -ETIMEDOUT. */
static int mbox_wait(struct mbox *b, uint32_t req_id, uint8_t op, float *v)
{
	double end = now_s() + 10;

	do {
		pthread_mutex_lock(&b->mu);
		for (int i = 0; i < b->n; i++)
			if (b->m[i].req_id == req_id && b->m[i].op == op) {
				int st = b->m[i].status;

				if (v)
					memcpy(v, b->m[i].v, sizeof(b->m[i].v));
				pthread_mutex_unlock(&b->mu);
				return st;
			}
		pthread_mutex_unlock(&b->mu);
		usleep(1000);
	} while (now_s() < end);
	return -ETIMEDOUT;
}

static int w_declare(struct rps_transport *t, struct rps_conn *c, struct mbox *b, uint32_t id)
{
	struct rps_frame_hdr h;
	struct rps_declare d = {.key = 42, .nelems = NVAL, .init_kind = RPS_INIT_ZEROS};
	struct iovec iov = {&d, sizeof(d)};

	(void)t;
	rps_proto_hdr_init(&h, RPS_OP_DECLARE, sizeof(d), id);
	if (rps_tr_post_send(c, &h, &iov, 1, 0))
		return -EIO;
	return mbox_wait(b, id, RPS_OP_DECLARE_ACK, NULL);
}

/* One step: PUSH (1 + k) at clock, its ack, CLOCK. */
static int w_step(struct rps_transport *t, struct rps_conn *c, struct mbox *b, uint32_t id,
		  uint32_t clock)
{
	struct {
		struct rps_clock c;
		uint32_t pushes[1];
	} ck = {{clock, 1}, {1}};
	struct rps_frame_hdr h;
	struct iovec iov = {&ck, sizeof(ck)};
	float scratch[NVAL];
	int rc;

	(void)t;
	/* send_push: key 42, clock = req_id; so req_id = clock here */
	if (send_push(t, c, clock, NVAL, 1.0f, 0, scratch))
		return -EIO;
	rc = mbox_wait(b, clock, RPS_OP_PUSH_ACK, NULL);
	if (rc)
		return rc;
	(void)id;
	rps_proto_hdr_init(&h, RPS_OP_CLOCK, sizeof(ck), 0);
	return rps_tr_post_send(c, &h, &iov, 1, 0);
}

static int w_pull(struct rps_conn *c, struct mbox *b, uint32_t id, float *v)
{
	struct rps_frame_hdr h;
	struct rps_pull p = {.key = 42, .count = NVAL};
	struct iovec iov = {&p, sizeof(p)};

	rps_proto_hdr_init(&h, RPS_OP_PULL, sizeof(p), id);
	if (rps_tr_post_send(c, &h, &iov, 1, 0))
		return -EIO;
	return mbox_wait(b, id, RPS_OP_PULL_RESP, v);
}

static void assert_steps(const float *v, int steps)
{
	for (int k = 0; k < NVAL; k++)
		assert_float_equal(v[k], -(float)steps * (1.0f + (float)k), 0);
}

static int teardown_real(void **state)
{
	wmode = W_OFF;
	tr_stop_pollers();
	rsrv_stop();
	log_release();
	return tr_teardown(state);
}

static void test_replay_real_server(void **state)
{
	struct tenv e;
	struct rps_config cfg;
	struct rps_server_opts o;
	static struct mbox mb, ma; /* static: a poller may still touch them after a failure */
	struct rps_transport *tc, *ta;
	struct rps_conn *legit, *replay;
	char ack[RPS_TR_ACK_MAX], want[160];
	size_t ack_len = 0;
	float v[NVAL];
	uint16_t port;
	int rc, tries = 0;
	uint32_t id = 1000;

	(void)state;
	memset(&mb, 0, sizeof(mb));
	memset(&ma, 0, sizeof(ma));
	pthread_mutex_init(&mb.mu, NULL);
	pthread_mutex_init(&ma.mu, NULL);
	tenv_get(&e);
	log_capture();
	setenv("RDMAPS_TRANSPORT", "rdma", 1);
	setenv("RDMAPS_DEVICE", e.dev0, 1);
	setenv("RDMAPS_HOST", e.ip0, 1);
	setenv("RDMAPS_PORT", "0", 1);
	setenv("RDMAPS_SECRET", SECRET, 1);
	setenv("RDMAPS_NUM_WORKERS", "2", 1);
	setenv("RDMAPS_SHARDS", "1", 1);
	setenv("RDMAPS_SHARD_BYTES", "1M", 1);
	setenv("RDMAPS_CONSISTENCY", "asp", 1);
	setenv("RDMAPS_OPTIMIZER", "sgd", 1);
	setenv("RDMAPS_LR", "1", 1);
	setenv("RDMAPS_RDMA_RECV_BUFS", "64", 1);
	setenv("RDMAPS_RDMA_BUF_BYTES", "4096", 1);
	rps_server_opts_init(&o);
	o.ncores = 1;
	o.cores[0] = 0;
	assert_int_equal(rps_server_create(&o, &rsrv), 0);
	port = rps_server_port(rsrv);
	assert_int_equal(pthread_create(&rsrv_th, NULL, rsrv_main, NULL), 0);

	tcfg_init(&cfg, 1);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	ta = attacker_transport(&cfg, e.dev1);
	poller_start(tc, mbox_event, &mb);
	poller_start(ta, mbox_event, &ma);

	/* the worker (rank 0), recorded: declares, trains 2 steps */
	rec_have_proof = 0;
	wmode = W_RECORD;
	legit = tr_connect(tc, e.ip0, port, 0, 0, ack, sizeof(ack), &ack_len, &rc);
	wmode = W_OFF;
	assert_int_equal(rc, 0);
	assert_true(rec_have_proof);
	assert_int_equal(w_declare(tc, legit, &mb, id++), 0);
	assert_int_equal(w_step(tc, legit, &mb, id++, 0), 0);
	assert_int_equal(w_step(tc, legit, &mb, id++, 1), 0);
	assert_int_equal(w_pull(legit, &mb, id++, v), 0);
	assert_steps(v, 2);

	/* the replay while the worker is connected: a second connection of a
	 * live rank, refused before any challenge */
	replay_answered = 0;
	wmode = W_REPLAY;
	ack_len = 0;
	replay = tr_connect(ta, e.ip0, port, 0, 0, ack, sizeof(ack), &ack_len, &rc);
	wmode = W_OFF;
	printf("replay while the worker is connected: %d (%s)\n", rc, strerror(-rc));
	assert_null(replay);
	assert_int_equal(rc, -EADDRINUSE);
	assert_int_equal(ack_len, 0);
	assert_false(replay_answered);

	/* the worker leaves; the replay then (once the server saw it leave) */
	rps_tr_close(legit);
	do {
		replay_answered = 0;
		wmode = W_REPLAY;
		ack_len = 0;
		replay = tr_connect(ta, e.ip0, port, 0, 0, ack, sizeof(ack), &ack_len, &rc);
		wmode = W_OFF;
	} while (rc == -EADDRINUSE && ++tries < 100 && (usleep(20000), 1));
	printf("replay after the worker left: %d (%s), %d refusal(s) as live before\n", rc,
	       strerror(-rc), tries);
	assert_null(replay);
	assert_true(rc < 0 && rc != -EADDRINUSE);
	assert_int_equal(ack_len, 0); /* no HELLO_ACK: no shard address, no key */
	assert_true(replay_answered);
	assert_memory_not_equal(replay_chal.nonce, rec_chal.nonce, sizeof(rec_chal.nonce));
	snprintf(want, sizeof(want), "refusing %s:%u, a worker claiming rank 0: wrong secret",
		 e.ip1, last_src_port);
	assert_true(log_has(want, 10));

	/* the worker comes back: its values as it left them; it trains on */
	legit = tr_connect(tc, e.ip0, port, 0, 0, ack, sizeof(ack), &ack_len, &rc);
	for (tries = 0; rc == -EADDRINUSE && tries < 100; tries++) {
		usleep(20000);
		legit = tr_connect(tc, e.ip0, port, 0, 0, ack, sizeof(ack), &ack_len, &rc);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(w_pull(legit, &mb, id++, v), 0);
	assert_steps(v, 2);
	assert_int_equal(w_step(tc, legit, &mb, id++, 2), 0);
	assert_int_equal(w_pull(legit, &mb, id++, v), 0);
	assert_steps(v, 3);
	pthread_mutex_lock(&ma.mu);
	assert_int_equal(ma.n, 0); /* the attacker never got a frame */
	pthread_mutex_unlock(&ma.mu);

	rps_tr_close(legit);
	tr_stop_pollers();
	rsrv_stop();
	tr_destroy(ta);
	tr_destroy(tc);
	log_release();
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_replayed_hello, teardown),
	    cmocka_unit_test_teardown(test_replay_real_server, teardown_real),
	};
	struct tenv e;

	rps_log_set_ident("test_rdma_replay", -1);
	tenv_get(&e);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("rdma_replay", tests, NULL, NULL);
}
