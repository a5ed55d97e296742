/* RDMA transport: connection handshake.
 * A listener on rxe0 (2 channels) and clients on rxe1 in one process:
 * capabilities; listen on port 0; HELLO_ACK payload delivered to connect();
 * the server sees the client's hello (rank, channel); refusals at connect
 * with the right status: channel out of range -EINVAL, nothing listening
 * -ECONNREFUSED; a frame each way on the accepted connection afterwards;
 * closing from the client gives the server a CLOSED event. Set-up errors:
 * an unknown RDMAPS_DEVICE is -ENODEV; a locked-memory limit too small for
 * the buffer pools (CAP_IPC_LOCK dropped) is -ENOMEM at create.
 * Refusals every transport makes (wrong secret -EACCES, bad version -EPROTO,
 * on_hello's refusal with its status) are in the transport contract
 * (tests/contract/transport_contract.c, test_rdma_contract.c here). */
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
	/* static: the pollers may still touch them after a failed assertion */
	static struct srv s;
	static struct cli cs;
	struct poller *ps, *pc;
	struct rps_transport *ts, *tc;
	struct rps_conn *c;
	uint16_t port = 0;
	char ack[RPS_TR_ACK_MAX];
	size_t ack_len = 0;
	struct rps_hello_ack a;
	struct rps_shard_desc d1;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(&cs, 0, sizeof(cs));
	tenv_get(&e);
	tcfg_init(&cfg, event_mode);
	ts = tr_create(&cfg, e.dev0, 2, on_hello, &s);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	assert_true(ts->caps & RPS_TR_CAP_READ);
	assert_true(ts->caps & RPS_TR_CAP_CHANNELS);
	assert_int_equal(ts->max_frame, cfg.rdma_buf_bytes + 256);
	assert_in_range(ts->max_read_sge, 1, 30);

	rc = rps_tr_listen(ts, e.ip0, 0, &port);
	assert_int_equal(rc, 0);
	assert_int_not_equal(port, 0);
	ps = poller_start(ts, srv_event, &s);
	pc = poller_start(tc, cli_event, &cs);

	/* the good connection, on channel 1 */
	c = tr_connect(tc, e.ip0, port, 3, 1, ack, sizeof(ack), &ack_len, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(ack_len, sizeof(a) + 2 * sizeof(d1));
	memcpy(&a, ack, sizeof(a));
	memcpy(&d1, ack + sizeof(a) + sizeof(d1), sizeof(d1));
	assert_int_equal(a.server_rank, 7);
	assert_int_equal(a.num_shards, 2);
	assert_int_equal(d1.addr, 0x2000);
	assert_int_equal(d1.size, 8192);
	assert_int_equal(d1.remote_key, 0x78);
	assert_true(wait_flag(&s.accepted, 10)); /* an ACCEPTED event on the server */
	assert_int_equal(s.rank, 3);
	assert_int_equal(s.channel, 1);

	/* refusals (the others every transport makes: the contract test) */
	tr_connect(tc, e.ip0, port, 5, 2, NULL, 0, NULL, &rc);
	assert_int_equal(rc, -EINVAL); /* channel 2 of 2 */
	tr_connect(tc, e.ip0, (uint16_t)(port + 1), 5, 0, NULL, 0, NULL, &rc);
	assert_int_equal(rc, -ECONNREFUSED); /* no listener */
	assert_int_equal(atomic_load(&s.accepted), 1);

	/* the good connection still carries frames both ways */
	assert_int_equal(send_simple(tc, c, RPS_OP_BARRIER, 1, 1234), 0);
	assert_true(wait_flag(&cs.got, 10)); /* an answer from the server */
	assert_int_equal(cs.aux, 4321);
	{
		struct rps_rdma_stats st;

		rps_rdma_get_stats(tc, &st);
		assert_int_equal(st.conns, 1);
	}

	/* close from the client: the server sees CLOSED */
	rps_tr_close(c);
	assert_true(wait_flag(&s.closed, 10));

	poller_stop(pc);
	poller_stop(ps);
	tr_destroy(tc);
	tr_destroy(ts);
}

static void test_event_mode(void **state)
{
	(void)state;
	run(1);
}

static void test_busy_poll(void **state)
{
	(void)state;
	run(0);
}

/* In a child (before any verbs use in this process: the first test): no
 * CAP_IPC_LOCK, a 64 KiB memlock limit, pools of 128 KiB -> create must say
 * -ENOMEM. The child exits 0 when so (no cmocka asserts there). */
static void test_memlock(void **state)
{
	pid_t pid;
	int st;

	(void)state;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
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
		if (setrlimit(RLIMIT_MEMLOCK, &rl)) {
			perror("setrlimit");
			exit(1);
		}
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
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_nodev(void **state)
{
	struct rps_config cfg;
	struct rps_tr_params p = {0};
	struct rps_transport *t = NULL;
	int rc;

	(void)state;
	tcfg_init(&cfg, 1);
	rps_tr_params_from_config(&cfg, &p);
	p.secret = SECRET;
	p.device = "nosuchdev7";
	rc = rps_transport_create("rdma", &p, &t);
	if (!rc)
		rps_transport_destroy(t);
	assert_int_equal(rc, -ENODEV);
}

/* argv[1], if given: a cmocka test name filter (e.g. "test_busy_poll"). */
int main(int argc, char **argv)
{
	/* test_memlock forks: it must come before any verbs use in this process */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_memlock),
	    cmocka_unit_test(test_nodev),
	    cmocka_unit_test_teardown(test_event_mode, tr_teardown),
	    cmocka_unit_test_teardown(test_busy_poll, tr_teardown),
	};
	struct tenv e;

	rps_log_set_ident("test_rdma_handshake", -1);
	tenv_get(&e);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("rdma_handshake", tests, NULL, NULL);
}
