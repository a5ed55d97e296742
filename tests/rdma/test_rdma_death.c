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
 * parent's own client works. */
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
	struct rps_shard_desc d = {
	    .addr = region_mr.remote_addr, .size = REGION, .remote_key = region_mr.remote_key};

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
				       struct srv *s, struct poller *ps, uint16_t *port_p)
{
	struct rps_transport *t = tr_create(cfg, dev, 1, on_hello, s);
	int rc;

	for (int i = 0; i < REGION; i++)
		region[i] = (unsigned char)(i * 13);
	rc = rps_tr_reg_mem(t, region, REGION, RPS_TR_ACCESS_REMOTE_READ, &region_mr);
	REQUIRE(rc == 0, "reg_mem: %s", strerror(-rc));
	rc = rps_tr_listen(t, ip, 0, port_p);
	REQUIRE(rc == 0, "listen: %s", strerror(-rc));
	poller_start(ps, t, srv_event, s);
	return t;
}

/* ------------------------------------------------------------ children */

static void read_all(int fd, void *p, size_t n)
{
	REQUIRE(read(fd, p, n) == (ssize_t)n, "pipe read");
}

/* A and B: connect to the port the parent sends, stream. B checks the end. */
static int child_client(int in, int rank, int expect_close)
{
	struct tenv e;
	struct rps_config cfg;
	struct stream s = {0};
	struct poller pc;
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
	poller_start(&pc, s.t, stream_event, &s);
	s.c = tr_connect(s.t, e.ip0, port, (uint32_t)rank, 0, ack, sizeof(ack), &alen, &rc);
	REQUIRE(rc == 0, "child %d: connect: %s", rank, strerror(-rc));
	memcpy(&s.d, ack + sizeof(struct rps_hello_ack), sizeof(s.d));
	REQUIRE(pthread_create(&th, NULL, stream_main, &s) == 0, "pthread_create");
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
	poller_stop(&pc);
	rps_transport_destroy(s.t);
	return 0;
}

/* C: a server; tells the parent its port, serves until killed. */
static int child_server(int in, int out)
{
	struct tenv e;
	struct rps_config cfg;
	struct srv s;
	struct poller ps;
	uint16_t port;
	char go;

	memset(&s, 0, sizeof(s));
	tenv_get(&e);
	read_all(in, &go, 1);
	tcfg_init(&cfg, 1);
	server_up(&cfg, e.dev0, e.ip0, &s, &ps, &port);
	REQUIRE(write(out, &port, sizeof(port)) == sizeof(port), "pipe write");
	for (;;)
		pause();
	return 0;
}

static pid_t spawn(int (*fn)(int, int, int), int a, int b, int *in_p, int *out_p)
{
	int pin[2], pout[2];
	pid_t pid;

	REQUIRE(!pipe(pin) && !pipe(pout), "pipe");
	pid = fork();
	REQUIRE(pid >= 0, "fork");
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

int main(void)
{
	struct tenv e;
	struct rps_config cfg;
	struct srv s;
	struct poller ps, pc;
	struct stream cl = {0};
	struct rps_transport *ts, *tc;
	pid_t pa, pb, pcc;
	int ina, outa, inb, outb, inc, outc, st;
	uint16_t port, cport;
	pthread_t th;
	char ack[RPS_TR_ACK_MAX];
	size_t alen;
	int rc;

	rps_log_set_ident("test_rdma_death", -1);
	tenv_get(&e);
	signal(SIGPIPE, SIG_IGN);
	pa = spawn(run_a, 0, 0, &ina, &outa);
	pb = spawn(run_b, 0, 0, &inb, &outb);
	pcc = spawn(run_c, 0, 0, &inc, &outc);

	memset(&s, 0, sizeof(s));
	tcfg_init(&cfg, 1);
	ts = server_up(&cfg, e.dev0, e.ip0, &s, &ps, &port);
	REQUIRE(write(ina, &port, sizeof(port)) == sizeof(port), "pipe");
	REQUIRE(write(inb, &port, sizeof(port)) == sizeof(port), "pipe");

	/* A: killed mid-stream */
	CHECK(wait_count(&s.frames[1], 200, 60), "A: %d frames arrived", atomic_load(&s.frames[1]));
	kill(pa, SIGKILL);
	waitpid(pa, &st, 0);
	CHECK(wait_count(&s.closed[1], 1, 20), "A killed: the server saw no CLOSED within 20 s");
	printf("A: killed after %d frames; server CLOSED: %s\n", atomic_load(&s.frames[1]),
	       atomic_load(&s.closed[1]) ? "yes" : "no");

	/* B: the server closes it mid-stream */
	CHECK(wait_count(&s.frames[2], 200, 60), "B: %d frames arrived", atomic_load(&s.frames[2]));
	if (s.by_rank[2])
		rps_tr_close(s.by_rank[2]);
	st = wait_child(pb, 70);
	CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "B: child status 0x%x (it must see CLOSED / -ECONNRESET)", st);

	/* C: our peer server is killed while we stream to it */
	REQUIRE(write(inc, "g", 1) == 1, "pipe");
	read_all(outc, &cport, sizeof(cport));
	cfg.timeout_ms = 20000;
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	cl.t = tc;
	poller_start(&pc, tc, stream_event, &cl);
	cl.c = tr_connect(tc, e.ip0, cport, 3, 0, ack, sizeof(ack), &alen, &rc);
	REQUIRE(rc == 0, "C: connect: %s", strerror(-rc));
	memcpy(&cl.d, ack + sizeof(struct rps_hello_ack), sizeof(cl.d));
	REQUIRE(pthread_create(&th, NULL, stream_main, &cl) == 0, "pthread_create");
	CHECK(wait_count(&cl.sent, 200, 60), "C: %d frames sent", atomic_load(&cl.sent));
	kill(pcc, SIGKILL);
	waitpid(pcc, &st, 0);
	CHECK(wait_count(&cl.closed, 1, 30), "C killed: the client saw no CLOSED within 30 s");
	atomic_store(&cl.stop, 1);
	pthread_join(th, NULL);
	if (atomic_load(&cl.closed))
		rps_tr_close(cl.c);
	CHECK(cl.send_rc == 0 || cl.send_rc == -ECONNRESET || cl.send_rc == -ETIMEDOUT,
	      "C: post_send ended with %d", cl.send_rc);
	usleep(200000);
	CHECK(atomic_load(&cl.reads_done) == atomic_load(&cl.reads_posted),
	      "C: %d reads posted, %d completed", atomic_load(&cl.reads_posted),
	      atomic_load(&cl.reads_done));
	CHECK(atomic_load(&cl.after_close) == 0, "C: %d events after CLOSED",
	      atomic_load(&cl.after_close));
	printf("C: server killed after %d frames; client CLOSED: %s; post_send: %s\n",
	       atomic_load(&cl.sent), atomic_load(&cl.closed) ? "yes" : "no",
	       cl.send_rc ? strerror(-cl.send_rc) : "ok");

	/* our listener still serves */
	{
		struct stream last = {0};

		last.t = tc;
		last.c = tr_connect(tc, e.ip0, port, 4, 0, NULL, 0, NULL, &rc);
		CHECK(rc == 0, "last connection to the surviving listener: %s", strerror(-rc));
		if (last.c) {
			static float v[8];

			rc = send_push(tc, last.c, 10, 8, 0, 0, v);
			CHECK(rc == 0, "last connection: send: %s", strerror(-rc));
			CHECK(wait_count(&s.frames[4], 1, 10),
			      "last connection: frame not received");
		}
	}
	poller_stop(&pc);
	poller_stop(&ps);
	rps_transport_destroy(tc);
	rps_tr_dereg_mem(ts, &region_mr);
	rps_transport_destroy(ts);
	return tr_finish("test_rdma_death");
}
