/* RDMA transport: a peer dies or closes mid-transfer -> CLOSED, not a hang.
 * Processes (forked before any verbs use):
 *   A  client on rxe1 streaming SENDs and READs to the parent's listener;
 *      the parent kills it (SIGKILL) mid-stream: the parent's server side
 *      must get CLOSED for that connection.
 *   B  client on rxe1 streaming likewise; the parent close()s the connection
 *      mid-stream: B must see post_send fail with -ECONNRESET or a CLOSED
 *      event within 15 s, with every READ it posted completed first (B exits
 *      0 when so).
 *   C  a server on rxe0 (its own port); the parent streams to it as a client
 *      and kills C: the parent's client side must get CLOSED / -ECONNRESET.
 * Meanwhile the parent's listener keeps serving: a last connection from the
 * parent's own client works.
 * The children are forked in main(), before cmocka runs the test: a failed
 * cmocka assert in a child then just exits it (non-zero). */
#include <signal.h>
#include <sys/wait.h>

#include "test_rdma_util.h"

#define REGION 16384

struct stream {
	struct rps_transport *t;
	struct rps_conn *c;
	struct rps_shard_desc d;
	atomic_int stop;
	atomic_int sent;
	atomic_int reads_posted, reads_done;
	atomic_int closed;
	atomic_int after_close;
	int send_rc;
};

static void stream_event(struct poller *p, struct rps_tr_event *ev)
{
	struct stream *s = p->arg;

	if (atomic_load(&s->closed) && ev->conn == s->c)
		atomic_fetch_add(&s->after_close, 1);
	switch (ev->type) {
	case RPS_TR_EV_RECV:
		rps_tr_release(p->t, ev->token);
		break;
	case RPS_TR_EV_READ_DONE:
		atomic_fetch_add(&s->reads_done, 1);
		break;
	case RPS_TR_EV_CLOSED:
		if (ev->conn == s->c) {
			/* the streaming thread may still use it: closed after the join */
			atomic_store(&s->closed, 1);
		} else {
			rps_tr_close(ev->conn);
		}
		break;
	default:
		break;
	}
}

/* Send PUSH frames and post READs until told to stop or the connection
 * fails; returns the failing status (0 if stopped). */
static void *stream_main(void *arg)
{
	struct stream *s = arg;
	static _Thread_local float v[256];
	static _Thread_local unsigned char rb[8][1024];

	for (uint32_t i = 0; !atomic_load(&s->stop); i++) {
		int rc = send_push(s->t, s->c, i, 200, (float)i, 0, v);

		if (rc) {
			s->send_rc = rc;
			break;
		}
		atomic_fetch_add(&s->sent, 1);
		if (s->d.remote_key && i % 4 == 0 &&
		    atomic_load(&s->reads_posted) - atomic_load(&s->reads_done) < 8) {
			struct rps_tr_sge sg = {.addr = rb[i % 8], .len = 1024};

			rc = rps_tr_read_remote(s->c, &sg, 1, s->d.addr + (i % 16) * 1024,
						    s->d.remote_key, 1 + i);
			if (rc == 0)
				atomic_fetch_add(&s->reads_posted, 1);
		}
	}
	return NULL;
}

/* ---------------------------------------------------------- server side */

static unsigned char region[REGION] __attribute__((aligned(4096)));
static struct rps_tr_mr region_mr;

static int on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		    size_t *ack_len_p, const char **why_p)
{
	struct rps_shard_desc d = {.addr = region_mr.remote_addr, .size = REGION};
	int rc = rps_tr_grant(c, &region_mr, &d.remote_key); /* this connection's key */

	if (rc)
		return rc;
	*ack_len_p = make_ack(ack, 1, &d);
	return 0;
}

struct srv {
	struct rps_conn *by_rank[8];
	atomic_int frames[8];
	atomic_int closed[8];
};

static void srv_event(struct poller *p, struct rps_tr_event *ev)
{
	struct srv *s = p->arg;
	uint32_t r = ev->conn ? ev->conn->hello.rank : 0;

	if (r >= 8)
		r = 7;
	switch (ev->type) {
	case RPS_TR_EV_ACCEPTED:
		s->by_rank[r] = ev->conn;
		break;
	case RPS_TR_EV_RECV:
		atomic_fetch_add(&s->frames[r], 1);
		if (ev->hdr.req_id % 10 == 0)
			send_simple(p->t, ev->conn, RPS_OP_PUSH_ACK, ev->hdr.req_id, 0);
		rps_tr_release(p->t, ev->token);
		break;
	case RPS_TR_EV_CLOSED:
		atomic_store(&s->closed[r], 1);
		rps_tr_close(ev->conn);
		break;
	default:
		break;
	}
}

static struct rps_transport *server_up(struct rps_config *cfg, const char *dev, const char *ip,
				       struct srv *s, struct poller **ps_p, uint16_t *port_p)
{
	struct rps_transport *t = tr_create(cfg, dev, 1, on_hello, s);

	for (int i = 0; i < REGION; i++)
		region[i] = (unsigned char)(i * 13);
	assert_int_equal(rps_tr_reg_mem(t, region, REGION, RPS_TR_ACCESS_REMOTE_READ, &region_mr),
			 0);
	assert_int_equal(rps_tr_listen(t, ip, 0, port_p), 0);
	*ps_p = poller_start(t, srv_event, s);
	return t;
}

/* ------------------------------------------------------------ children */

static void read_all(int fd, void *p, size_t n)
{
	assert_int_equal(read(fd, p, n), n);
}

/* A and B: connect to the port the parent sends, stream. B checks the end. */
static int child_client(int in, int rank, int expect_close)
{
	struct tenv e;
	struct rps_config cfg;
	struct stream s = {0};
	struct poller *pc;
	pthread_t th;
	uint16_t port;
	char ack[RPS_TR_ACK_MAX];
	size_t alen;
	int rc;
	double end;

	tenv_get(&e);
	read_all(in, &port, sizeof(port));
	tcfg_init(&cfg, 1);
	cfg.timeout_ms = 20000;
	s.t = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	pc = poller_start(s.t, stream_event, &s);
	s.c = tr_connect(s.t, e.ip0, port, (uint32_t)rank, 0, ack, sizeof(ack), &alen, &rc);
	if (rc)
		fail_msg("child %d: connect: %s", rank, strerror(-rc));
	memcpy(&s.d, ack + sizeof(struct rps_hello_ack), sizeof(s.d));
	assert_int_equal(pthread_create(&th, NULL, stream_main, &s), 0);
	if (!expect_close) {
		pthread_join(th, NULL); /* until killed */
		return 0;
	}
	end = now_s() + 60;
	while (!atomic_load(&s.closed) && now_s() < end)
		usleep(1000);
	atomic_store(&s.stop, 1);
	pthread_join(th, NULL);
	if (!atomic_load(&s.closed)) {
		fprintf(stderr, "FAIL child B: no CLOSED within 60 s (send rc %d)\n", s.send_rc);
		return 1;
	}
	usleep(200000);
	printf("child B: CLOSED after %d frames; last send: %s; reads %d posted, %d done\n",
	       atomic_load(&s.sent), s.send_rc ? strerror(-s.send_rc) : "ok",
	       atomic_load(&s.reads_posted), atomic_load(&s.reads_done));
	if (s.send_rc && s.send_rc != -ECONNRESET) {
		fprintf(stderr, "FAIL child B: post_send failed with %d, want -ECONNRESET\n",
			s.send_rc);
		return 1;
	}
	if (atomic_load(&s.reads_done) != atomic_load(&s.reads_posted)) {
		fprintf(stderr, "FAIL child B: %d reads posted, %d completed\n",
			atomic_load(&s.reads_posted), atomic_load(&s.reads_done));
		return 1;
	}
	if (atomic_load(&s.after_close)) {
		fprintf(stderr, "FAIL child B: %d events after CLOSED\n",
			atomic_load(&s.after_close));
		return 1;
	}
	rps_tr_close(s.c);
	poller_stop(pc);
	tr_destroy(s.t);
	return 0;
}

/* C: a server; tells the parent its port, serves until killed. */
static int child_server(int in, int out)
{
	struct tenv e;
	struct rps_config cfg;
	struct srv s;
	struct poller *ps;
	uint16_t port;
	char go;

	memset(&s, 0, sizeof(s));
	tenv_get(&e);
	read_all(in, &go, 1);
	tcfg_init(&cfg, 1);
	server_up(&cfg, e.dev0, e.ip0, &s, &ps, &port);
	assert_int_equal(write(out, &port, sizeof(port)), sizeof(port));
	for (;;)
		pause();
	return 0;
}

static pid_t spawn(int (*fn)(int, int, int), int a, int b, int *in_p, int *out_p)
{
	int pin[2], pout[2];
	pid_t pid;

	assert_int_equal(pipe(pin), 0);
	assert_int_equal(pipe(pout), 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pin[1]);
		close(pout[0]);
		exit(fn(pin[0], pout[1], a * 0 + b));
	}
	close(pin[0]);
	close(pout[1]);
	*in_p = pin[1];
	*out_p = pout[0];
	return pid;
}

static int run_a(int in, int out, int x)
{
	return child_client(in, 1, 0);
}

static int run_b(int in, int out, int x)
{
	return child_client(in, 2, 1);
}

static int run_c(int in, int out, int x)
{
	return child_server(in, out);
}

static int wait_child(pid_t pid, double secs)
{
	double end = now_s() + secs;
	int st;

	while (now_s() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return st;
		usleep(10000);
	}
	if (getenv("RDMA_TEST_GDB")) { /* debugging aid: where is it stuck? */
		char cmd[128];

		snprintf(cmd, sizeof(cmd),
			 "gdb -p %d -batch -ex 'thread apply all bt 15' 2>&1 | "
			 "grep -E '^#|^Thread' >&2",
			 (int)pid);
		if (system(cmd) != 0)
			fprintf(stderr, "gdb failed\n");
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static int wait_count(atomic_int *n, int want, double secs)
{
	double end = now_s() + secs;

	while (atomic_load(n) < want && now_s() < end)
		usleep(1000);
	return atomic_load(n) >= want;
}

/* The children (forked in main) and the parent's ends of their pipes. */
static pid_t pa, pb, pcc;
static int ina, outa, inb, outb, inc, outc;
/* The parent's stream to C, for teardown() after a failed assertion. */
static struct stream cl;
static pthread_t cl_th;
static int cl_th_live;

static void test_death(void **state)
{
	static struct srv s; /* static: the poller may still touch it after a failure */
	struct tenv e;
	struct rps_config cfg;
	struct poller *ps, *pc;
	struct rps_transport *ts, *tc;
	int st, sent_ok, closed_ok;
	uint16_t port, cport;
	char ack[RPS_TR_ACK_MAX];
	size_t alen;
	int rc;

	(void)state;
	tenv_get(&e);
	memset(&s, 0, sizeof(s));
	memset(&cl, 0, sizeof(cl));
	tcfg_init(&cfg, 1);
	ts = server_up(&cfg, e.dev0, e.ip0, &s, &ps, &port);
	assert_int_equal(write(ina, &port, sizeof(port)), sizeof(port));
	assert_int_equal(write(inb, &port, sizeof(port)), sizeof(port));

	/* A: killed mid-stream */
	if (!wait_count(&s.frames[1], 200, 60))
		fail_msg("A: %d frames arrived, want 200", atomic_load(&s.frames[1]));
	kill(pa, SIGKILL);
	waitpid(pa, &st, 0);
	pa = 0;
	/* A killed: the server sees CLOSED within 20 s */
	assert_true(wait_count(&s.closed[1], 1, 20));
	printf("A: killed after %d frames; server CLOSED: %s\n", atomic_load(&s.frames[1]),
	       atomic_load(&s.closed[1]) ? "yes" : "no");

	/* B: the server closes it mid-stream */
	if (!wait_count(&s.frames[2], 200, 60))
		fail_msg("B: %d frames arrived, want 200", atomic_load(&s.frames[2]));
	if (s.by_rank[2])
		rps_tr_close(s.by_rank[2]);
	st = wait_child(pb, 70);
	pb = 0;
	/* B exits 0 when it saw CLOSED / -ECONNRESET */
	if (!(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fail_msg("B: child status 0x%x (it must see CLOSED / -ECONNRESET)", st);

	/* C: our peer server is killed while we stream to it */
	assert_int_equal(write(inc, "g", 1), 1);
	read_all(outc, &cport, sizeof(cport));
	cfg.timeout_ms = 20000;
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	cl.t = tc;
	pc = poller_start(tc, stream_event, &cl);
	cl.c = tr_connect(tc, e.ip0, cport, 3, 0, ack, sizeof(ack), &alen, &rc);
	assert_int_equal(rc, 0);
	memcpy(&cl.d, ack + sizeof(struct rps_hello_ack), sizeof(cl.d));
	assert_int_equal(pthread_create(&cl_th, NULL, stream_main, &cl), 0);
	cl_th_live = 1;
	sent_ok = wait_count(&cl.sent, 200, 60);
	kill(pcc, SIGKILL);
	waitpid(pcc, &st, 0);
	pcc = 0;
	closed_ok = wait_count(&cl.closed, 1, 30);
	atomic_store(&cl.stop, 1);
	pthread_join(cl_th, NULL);
	cl_th_live = 0;
	if (!sent_ok)
		fail_msg("C: %d frames sent, want 200", atomic_load(&cl.sent));
	/* C killed: the client sees CLOSED within 30 s */
	assert_true(closed_ok);
	rps_tr_close(cl.c);
	if (cl.send_rc != 0 && cl.send_rc != -ECONNRESET && cl.send_rc != -ETIMEDOUT)
		fail_msg("C: post_send ended with %d, want 0, -ECONNRESET or -ETIMEDOUT",
			 cl.send_rc);
	usleep(200000);
	/* every READ posted completed, and no event came after CLOSED */
	assert_int_equal(atomic_load(&cl.reads_done), atomic_load(&cl.reads_posted));
	assert_int_equal(atomic_load(&cl.after_close), 0);
	printf("C: server killed after %d frames; client CLOSED: %s; post_send: %s\n",
	       atomic_load(&cl.sent), atomic_load(&cl.closed) ? "yes" : "no",
	       cl.send_rc ? strerror(-cl.send_rc) : "ok");

	/* our listener still serves: a last connection to it */
	{
		struct rps_conn *last = tr_connect(tc, e.ip0, port, 4, 0, NULL, 0, NULL, &rc);
		static float v[8];

		assert_int_equal(rc, 0);
		assert_int_equal(send_push(tc, last, 10, 8, 0, 0, v), 0);
		assert_true(wait_count(&s.frames[4], 1, 10)); /* the frame arrived */
	}
	poller_stop(pc);
	poller_stop(ps);
	tr_destroy(tc);
	rps_tr_dereg_mem(ts, &region_mr);
	tr_destroy(ts);
}

/* After a failed assertion: the parent's stream thread, the children, the
 * pollers and transports. */
static int teardown(void **state)
{
	pid_t *kids[] = {&pa, &pb, &pcc};

	if (cl_th_live) {
		atomic_store(&cl.stop, 1);
		pthread_join(cl_th, NULL);
		cl_th_live = 0;
	}
	for (size_t i = 0; i < RPS_ARRAY_SIZE(kids); i++)
		if (*kids[i] > 0) {
			kill(*kids[i], SIGKILL);
			waitpid(*kids[i], NULL, 0);
			*kids[i] = 0;
		}
	return tr_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_death, teardown),
	};
	struct tenv e;

	rps_log_set_ident("test_rdma_death", -1);
	tenv_get(&e);
	signal(SIGPIPE, SIG_IGN);
	/* before any verbs use in this process */
	pa = spawn(run_a, 0, 0, &ina, &outa);
	pb = spawn(run_b, 0, 0, &inb, &outb);
	pcc = spawn(run_c, 0, 0, &inc, &outc);
	return cmocka_run_group_tests_name("rdma_death", tests, NULL, NULL);
}
