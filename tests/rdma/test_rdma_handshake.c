/* RDMA transport: connection handshake.
 * A listener on rxe0 (2 channels) and clients on rxe1 in one process:
 * capabilities; listen on port 0; HELLO_ACK payload delivered to connect();
 * the server sees the client's hello (rank, channel); refusals at connect
 * with the right status: wrong secret -EACCES, bad version -EPROTO, on_hello
 * refusal (its status), channel out of range -EINVAL, nothing listening
 * -ECONNREFUSED; a frame each way on the accepted connection afterwards;
 * closing from the client gives the server a CLOSED event. Set-up errors:
 * an unknown RDMAPS_DEVICE is -ENODEV; a locked-memory limit too small for
 * the buffer pools (CAP_IPC_LOCK dropped) is -ENOMEM at create. */
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "test_rdma_util.h"

struct srv {
	atomic_int accepted, closed, recv;
	struct rps_conn *conn;
	uint32_t rank, channel;
	int hellos;
};

static int on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		    size_t *ack_len_p, const char **why_p)
{
	struct srv *s = arg;
	struct rps_shard_desc d[2] = {{.addr = 0x1000, .size = 4096, .remote_key = 0x77},
				      {.addr = 0x2000, .size = 8192, .remote_key = 0x78}};

	s->hellos++;
	if (h->rank == 99) {
		*why_p = "rank 99 is not welcome";
		return -EPERM;
	}
	if (c->hello.channel != h->channel)
		return -EINVAL;
	*ack_len_p = make_ack(ack, 2, d);
	return 0;
}

static void srv_event(struct poller *p, struct rps_tr_event *ev)
{
	struct srv *s = p->arg;

	switch (ev->type) {
	case RPS_TR_EV_ACCEPTED:
		s->conn = ev->conn;
		s->rank = ev->conn->hello.rank;
		s->channel = ev->conn->hello.channel;
		atomic_fetch_add(&s->accepted, 1);
		break;
	case RPS_TR_EV_RECV:
		if (ev->hdr.op == RPS_OP_BARRIER && ev->hdr.aux == 1234)
			send_simple(p->t, ev->conn, RPS_OP_BARRIER_DONE, ev->hdr.req_id, 4321);
		rps_tr_release(p->t, ev->token);
		atomic_fetch_add(&s->recv, 1);
		break;
	case RPS_TR_EV_CLOSED:
		atomic_fetch_add(&s->closed, 1);
		rps_tr_close(ev->conn);
		break;
	default:
		break;
	}
}

struct cli {
	atomic_int got;
	uint32_t aux;
};

static void cli_event(struct poller *p, struct rps_tr_event *ev)
{
	struct cli *c = p->arg;

	if (ev->type == RPS_TR_EV_RECV) {
		c->aux = ev->hdr.aux;
		rps_tr_release(p->t, ev->token);
		atomic_fetch_add(&c->got, 1);
	}
}

static void run(int event_mode)
{
	struct tenv e;
	struct rps_config cfg;
	struct srv s = {0};
	struct cli cs = {0};
	struct poller ps, pc;
	struct rps_transport *ts, *tc;
	struct rps_conn *c;
	uint16_t port = 0;
	char ack[RPS_TR_ACK_MAX];
	size_t ack_len = 0;
	struct rps_hello_ack a;
	struct rps_shard_desc d1;
	struct rps_hello h;
	int rc;

	tenv_get(&e);
	tcfg_init(&cfg, event_mode);
	ts = tr_create(&cfg, e.dev0, 2, on_hello, &s);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	CHECK(ts->caps & RPS_TR_CAP_READ, "caps 0x%x lack READ", ts->caps);
	CHECK(ts->caps & RPS_TR_CAP_CHANNELS, "caps 0x%x lack CHANNELS", ts->caps);
	CHECK(ts->max_frame == cfg.rdma_buf_bytes + 256, "max_frame %llu",
	      (unsigned long long)ts->max_frame);
	CHECK(ts->max_read_sge >= 1 && ts->max_read_sge <= 30, "max_read_sge %d", ts->max_read_sge);

	rc = rps_tr_listen(ts, e.ip0, 0, &port);
	REQUIRE(rc == 0, "listen %s:0: %s", e.ip0, strerror(-rc));
	CHECK(port != 0, "listen on port 0 gave port 0");
	poller_start(&ps, ts, srv_event, &s);
	poller_start(&pc, tc, cli_event, &cs);

	/* the good connection, on channel 1 */
	c = tr_connect(tc, e.ip0, port, 3, 1, ack, sizeof(ack), &ack_len, &rc);
	REQUIRE(rc == 0, "connect %s:%u: %s", e.ip0, port, strerror(-rc));
	CHECK(ack_len == sizeof(a) + 2 * sizeof(d1), "ack_len %zu", ack_len);
	memcpy(&a, ack, sizeof(a));
	memcpy(&d1, ack + sizeof(a) + sizeof(d1), sizeof(d1));
	CHECK(a.server_rank == 7 && a.num_shards == 2, "ack: rank %u shards %u", a.server_rank,
	      a.num_shards);
	CHECK(d1.addr == 0x2000 && d1.size == 8192 && d1.remote_key == 0x78, "ack: shard 1 desc");
	CHECK(wait_flag(&s.accepted, 10), "no ACCEPTED event on the server");
	CHECK(s.rank == 3 && s.channel == 1, "server saw rank %u channel %u", s.rank, s.channel);

	/* refusals */
	rps_proto_hello_init(&h, RPS_ROLE_WORKER, 4, "not-the-secret");
	{
		struct rps_conn *x = NULL;
		size_t al;

		rc = rps_tr_connect(tc, e.ip0, port, &h, ack, sizeof(ack), &al, 10000, &x);
		CHECK(rc == -EACCES, "wrong secret: connect returned %d (%s), want -EACCES", rc,
		      strerror(-rc));
		rps_proto_hello_init(&h, RPS_ROLE_WORKER, 4, SECRET);
		h.version = 99;
		rc = rps_tr_connect(tc, e.ip0, port, &h, ack, sizeof(ack), &al, 10000, &x);
		CHECK(rc == -EPROTO, "bad version: connect returned %d (%s), want -EPROTO", rc,
		      strerror(-rc));
	}
	tr_connect(tc, e.ip0, port, 99, 0, NULL, 0, NULL, &rc);
	CHECK(rc == -EPERM, "on_hello refusal: connect returned %d (%s), want -EPERM", rc,
	      strerror(-rc));
	tr_connect(tc, e.ip0, port, 5, 2, NULL, 0, NULL, &rc);
	CHECK(rc == -EINVAL, "channel 2 of 2: connect returned %d (%s), want -EINVAL", rc,
	      strerror(-rc));
	tr_connect(tc, e.ip0, (uint16_t)(port + 1), 5, 0, NULL, 0, NULL, &rc);
	CHECK(rc == -ECONNREFUSED, "no listener: connect returned %d (%s), want -ECONNREFUSED", rc,
	      strerror(-rc));
	CHECK(atomic_load(&s.accepted) == 1, "%d accepted", atomic_load(&s.accepted));

	/* the good connection still carries frames both ways */
	rc = send_simple(tc, c, RPS_OP_BARRIER, 1, 1234);
	CHECK(rc == 0, "send: %s", strerror(-rc));
	CHECK(wait_flag(&cs.got, 10), "no answer from the server");
	CHECK(cs.aux == 4321, "answer aux %u", cs.aux);
	{
		struct rps_rdma_stats st;

		rps_rdma_get_stats(tc, &st);
		CHECK(st.conns == 1, "client has %u connections", st.conns);
	}

	/* close from the client: the server sees CLOSED */
	rps_tr_close(c);
	CHECK(wait_flag(&s.closed, 10), "server saw no CLOSED after the client closed");

	poller_stop(&pc);
	poller_stop(&ps);
	rps_transport_destroy(tc);
	rps_transport_destroy(ts);
}

/* In a child (before any verbs use in this process): no CAP_IPC_LOCK, a
 * 64 KiB memlock limit, pools of 128 KiB -> create must say -ENOMEM. */
static void check_memlock(void)
{
	pid_t pid = fork();
	int st;

	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct d[2];
		struct rlimit rl = {64 << 10, 64 << 10};
		struct rps_config cfg;
		struct rps_tr_params p = {0};
		struct rps_transport *t = NULL;
		struct tenv e;
		int rc;

		tenv_get(&e);
		if (syscall(SYS_capget, &h, d) == 0) {
			d[0].effective &= ~(1u << CAP_IPC_LOCK);
			d[0].permitted &= ~(1u << CAP_IPC_LOCK);
			d[0].inheritable &= ~(1u << CAP_IPC_LOCK);
			syscall(SYS_capset, &h, d);
		}
		REQUIRE(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, "setrlimit");
		tcfg_init(&cfg, 1);
		rps_tr_params_from_config(&cfg, &p);
		p.secret = SECRET;
		p.device = e.dev0;
		rc = rps_transport_create("rdma", &p, &t);
		if (rc != -ENOMEM) {
			fprintf(stderr,
				"FAIL: create under a 64 KiB memlock limit: %d, want -ENOMEM\n",
				rc);
			exit(1);
		}
		exit(0);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "memlock check failed (status 0x%x)", st);
}

static void check_nodev(void)
{
	struct rps_config cfg;
	struct rps_tr_params p = {0};
	struct rps_transport *t = NULL;
	int rc;

	tcfg_init(&cfg, 1);
	rps_tr_params_from_config(&cfg, &p);
	p.secret = SECRET;
	p.device = "nosuchdev7";
	rc = rps_transport_create("rdma", &p, &t);
	CHECK(rc == -ENODEV, "create on an unknown device: %d, want -ENODEV", rc);
}

int main(int argc, char **argv)
{
	int mode = argc > 1 ? atoi(argv[1]) : -1;
	struct tenv e;

	rps_log_set_ident("test_rdma_handshake", -1);
	tenv_get(&e);
	check_memlock();
	check_nodev();
	if (mode < 0 || mode == 1) {
		printf("== event mode\n");
		run(1);
	}
	if (mode < 0 || mode == 0) {
		printf("== busy-poll mode\n");
		run(0);
	}
	return tr_finish("test_rdma_handshake");
}
