/* RDMA transport: read access per connection (memory windows, rdma_mw.c,
 * docs/rdma.md "Read access per connection").
 *
 * Windows (RDMAPS_RDMA_MW=auto on rxe, which has type-2 windows): the server
 * (rxe0) registers a region for remote read and grants each connection its
 * own key in on_hello. Each client (rxe1) reads with its own key; a READ on
 * one connection under another connection's key, under the region's own
 * key, or under the key of a connection that closed, ends with -EACCES
 * (remote access error) and closes only that connection, while the server
 * keeps accepting and serving. A key granted on a live connection later
 * (as TABLE_MAP does) is bound before the frame that carries it; granting
 * again gives the same key; deregistering the region drops its windows.
 * Off (RDMAPS_RDMA_MW=off): one registration for all, every connection
 * gets the region's key, and the transport says so in its log.
 * Limits: the listener refuses connections beyond max_conns_per_addr. */
#include <fcntl.h>
#include <sys/stat.h>

#include "test_rdma_util.h"

#define REGION (64 * 1024)
#define MAXCTX 64

static unsigned char *region, *region2;
static struct rps_tr_mr region_mr, region2_mr;

static int on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		    size_t *ack_len_p, const char **why_p)
{
	struct rps_shard_desc d = {.addr = region_mr.remote_addr, .size = REGION};
	int rc = rps_tr_grant(c, &region_mr, &d.remote_key);

	(void)arg, (void)h;
	if (rc) {
		*why_p = "grant failed";
		return rc;
	}
	*ack_len_p = make_ack(ack, 1, &d);
	return 0;
}

struct srv {
	struct rps_conn *by_rank[16];
	atomic_int accepted, closed;
};

static void srv_event(struct poller *p, struct rps_tr_event *ev)
{
	struct srv *s = p->arg;
	uint32_t r = ev->conn ? ev->conn->hello.rank % 16 : 0;

	switch (ev->type) {
	case RPS_TR_EV_ACCEPTED:
		s->by_rank[r] = ev->conn;
		atomic_fetch_add(&s->accepted, 1);
		break;
	case RPS_TR_EV_RECV:
		rps_tr_release(p->t, ev->token);
		break;
	case RPS_TR_EV_CLOSED:
		s->by_rank[r] = NULL;
		rps_tr_close(ev->conn);
		atomic_fetch_add(&s->closed, 1);
		break;
	default:
		break;
	}
}

struct cli {
	atomic_int done[MAXCTX];
	int status[MAXCTX];
	atomic_int got_key;
	uint32_t key; /* aux of the last frame the server sent */
	atomic_int closed;
};

static struct cli cs;

static void cli_event(struct poller *p, struct rps_tr_event *ev)
{
	struct cli *c = p->arg;

	switch (ev->type) {
	case RPS_TR_EV_READ_DONE:
		if (ev->ctx < MAXCTX) {
			c->status[ev->ctx] = ev->status;
			atomic_store(&c->done[ev->ctx], 1);
		}
		break;
	case RPS_TR_EV_RECV:
		c->key = ev->hdr.aux;
		atomic_store(&c->got_key, 1);
		rps_tr_release(p->t, ev->token);
		break;
	case RPS_TR_EV_CLOSED:
		atomic_fetch_add(&c->closed, 1);
		break; /* the test closes its connections itself */
	default:
		break;
	}
}

static int read_wait(struct rps_conn *c, void *buf, uint32_t len, uint64_t raddr, uint32_t key,
		     uint64_t ctx)
{
	struct rps_tr_sge sg = {.addr = buf, .len = len};
	int rc;

	atomic_store(&cs.done[ctx], 0);
	rc = rps_tr_read_remote(c, &sg, 1, raddr, key, ctx);
	if (rc)
		return rc;
	if (!wait_flag(&cs.done[ctx], 15))
		return -ETIMEDOUT;
	return cs.status[ctx];
}

static uint32_t ack_key(const char *ack)
{
	struct rps_shard_desc d;

	memcpy(&d, ack + sizeof(struct rps_hello_ack), sizeof(d));
	return d.remote_key;
}

static void region_fill(void)
{
	region = aligned_alloc(4096, REGION);
	region2 = aligned_alloc(4096, REGION);
	assert_true(region && region2);
	for (int i = 0; i < REGION; i++) {
		region[i] = (unsigned char)(i * 7 + i / 256);
		region2[i] = (unsigned char)(i * 3 + 1);
	}
}

static void test_windows(void **state)
{
	static struct srv s;
	struct tenv e;
	struct rps_config cfg;
	struct rps_transport *ts, *tc;
	struct rps_conn *c1, *c2, *c3, *c4;
	struct rps_rdma_stats st;
	char ack[RPS_TR_ACK_MAX];
	unsigned char b[4096];
	uint32_t k1, k2, k3, k4;
	uint16_t port;
	int rc;

	(void)state;
	memset(&s, 0, sizeof(s));
	memset(&cs, 0, sizeof(cs));
	tenv_get(&e);
	tr_rnr_retry = 0;
	tcfg_init(&cfg, 1);
	snprintf(cfg.rdma_mw, sizeof(cfg.rdma_mw), "on");
	region_fill();
	ts = tr_create(&cfg, e.dev0, 1, on_hello, &s);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	rc = rps_tr_reg_mem(ts, region, REGION, RPS_TR_ACCESS_REMOTE_READ, &region_mr);
	if (rc == -EOPNOTSUPP)
		fail_msg("RDMAPS_RDMA_MW=on: %s has no usable type-2 memory windows here", e.dev0);
	assert_int_equal(rc, 0);
	rps_rdma_get_stats(ts, &st);
	assert_int_equal(st.mw, 1); /* windows per connection */
	assert_int_equal(rps_tr_listen(ts, e.ip0, 0, &port), 0);
	poller_start(ts, srv_event, &s);
	poller_start(tc, cli_event, &cs);

	c1 = tr_connect(tc, e.ip0, port, 1, 0, ack, sizeof(ack), NULL, &rc);
	assert_int_equal(rc, 0);
	k1 = ack_key(ack);
	c2 = tr_connect(tc, e.ip0, port, 2, 0, ack, sizeof(ack), NULL, &rc);
	assert_int_equal(rc, 0);
	k2 = ack_key(ack);
	printf("keys: region %#x, connection 1 %#x, connection 2 %#x\n", region_mr.remote_key, k1,
	       k2);
	assert_int_not_equal(k1, k2);
	assert_int_not_equal(k1, region_mr.remote_key);
	assert_int_not_equal(k2, region_mr.remote_key);
	assert_true(wait_flag(&s.accepted, 10));
	rps_rdma_get_stats(ts, &st);
	assert_int_equal(st.mws, 2); /* one window per connection */

	/* each connection reads under its own key */
	assert_int_equal(read_wait(c1, b, 4096, region_mr.remote_addr, k1, 1), 0);
	assert_memory_equal(b, region, 4096);
	assert_int_equal(read_wait(c2, b, 2048, region_mr.remote_addr + 8192, k2, 2), 0);
	assert_memory_equal(b, region + 8192, 2048);

	/* connection 2 under connection 1's key: a remote access error, c2 closes */
	assert_int_equal(read_wait(c2, b, 64, region_mr.remote_addr, k1, 3), -EACCES);
	assert_true(wait_flag(&cs.closed, 10));
	rps_tr_close(c2);
	/* c1 is untouched */
	assert_int_equal(read_wait(c1, b, 512, region_mr.remote_addr + 100, k1, 4), 0);
	assert_memory_equal(b, region + 100, 512);

	/* the server keeps accepting; the region's own key reads nothing */
	c3 = tr_connect(tc, e.ip0, port, 3, 0, ack, sizeof(ack), NULL, &rc);
	assert_int_equal(rc, 0);
	k3 = ack_key(ack);
	assert_int_equal(read_wait(c3, b, 256, region_mr.remote_addr, k3, 5), 0);
	assert_memory_equal(b, region, 256);
	atomic_store(&cs.closed, 0);
	assert_int_equal(read_wait(c3, b, 64, region_mr.remote_addr, region_mr.remote_key, 6),
			 -EACCES);
	assert_true(wait_flag(&cs.closed, 10));
	rps_tr_close(c3);

	/* connection 1 leaves: its window goes with it, its key is dead */
	atomic_store(&s.closed, 0);
	rps_tr_close(c1);
	{
		double end = now_s() + 10;

		/* c2, c3 and c1 closed on the server: only windows of live ones */
		do {
			rps_rdma_get_stats(ts, &st);
			if (st.mws == 0)
				break;
			usleep(10000);
		} while (now_s() < end);
		assert_int_equal(st.mws, 0); /* windows left after every peer left */
	}
	c4 = tr_connect(tc, e.ip0, port, 4, 0, ack, sizeof(ack), NULL, &rc);
	assert_int_equal(rc, 0);
	k4 = ack_key(ack);
	assert_int_equal(read_wait(c4, b, 128, region_mr.remote_addr + 64, k4, 7), 0);
	assert_memory_equal(b, region + 64, 128);

	/* a grant on a live connection (as TABLE_MAP does): bound before the
	 * frame that carries the key; the same key when granted again */
	assert_int_equal(rps_tr_reg_mem(ts, region2, REGION, RPS_TR_ACCESS_REMOTE_READ,
					&region2_mr),
			 0);
	assert_true(wait_flag(&s.accepted, 10));
	{
		struct rps_conn *sc4 = NULL;
		uint32_t g, g2;
		double end = now_s() + 10;

		while (!(sc4 = s.by_rank[4]) && now_s() < end)
			usleep(1000);
		assert_non_null(sc4);
		assert_int_equal(rps_tr_grant(sc4, &region2_mr, &g), 0);
		assert_int_equal(rps_tr_grant(sc4, &region2_mr, &g2), 0);
		assert_int_equal(g, g2);
		assert_int_equal(send_simple(ts, sc4, RPS_OP_BARRIER_DONE, 9, g), 0);
		assert_true(wait_flag(&cs.got_key, 10));
		assert_int_equal(cs.key, g);
		assert_int_equal(read_wait(c4, b, 4096, region2_mr.remote_addr + 4096, g, 8), 0);
		assert_memory_equal(b, region2 + 4096, 4096);
		rps_rdma_get_stats(ts, &st);
		assert_int_equal(st.mws, 2);
		/* deregistering the region drops its windows first */
		rps_tr_dereg_mem(ts, &region2_mr);
		rps_rdma_get_stats(ts, &st);
		assert_int_equal(st.mws, 1);
	}

	/* c1's key on the newest connection (a key kept after its connection
	 * closed): refused */
	atomic_store(&cs.closed, 0);
	assert_int_equal(read_wait(c4, b, 64, region_mr.remote_addr, k1, 9), -EACCES);
	assert_true(wait_flag(&cs.closed, 10));
	rps_tr_close(c4);

	tr_stop_pollers();
	tr_destroy(tc);
	rps_tr_dereg_mem(ts, &region_mr);
	tr_destroy(ts);
	free(region);
	free(region2);
	region = region2 = NULL;
}

/* RDMAPS_RDMA_MW=off: the region's key for every connection, said in the log. */
static void test_off(void **state)
{
	static struct srv s;
	struct tenv e;
	struct rps_config cfg;
	struct rps_transport *ts, *tc;
	struct rps_conn *c1, *c2;
	struct rps_rdma_stats st;
	char ack[RPS_TR_ACK_MAX], logbuf[4096], path[] = "/tmp/rdma_mw_log.XXXXXX";
	unsigned char b[256];
	uint32_t k1, k2;
	uint16_t port;
	ssize_t n;
	int rc, fd, saved;

	(void)state;
	memset(&s, 0, sizeof(s));
	memset(&cs, 0, sizeof(cs));
	tenv_get(&e);
	tcfg_init(&cfg, 1);
	snprintf(cfg.rdma_mw, sizeof(cfg.rdma_mw), "off");
	region_fill();
	ts = tr_create(&cfg, e.dev0, 1, on_hello, &s);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	/* the decision is logged once, at the first registration for reads */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	rc = rps_tr_reg_mem(ts, region, REGION, RPS_TR_ACCESS_REMOTE_READ, &region_mr);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, logbuf, sizeof(logbuf) - 1, 0);
	close(fd);
	unlink(path);
	assert_int_equal(rc, 0);
	logbuf[n > 0 ? n : 0] = 0;
	printf("log: %s", logbuf);
	assert_non_null(strstr(logbuf, "RDMAPS_RDMA_MW=off"));
	rps_rdma_get_stats(ts, &st);
	assert_int_equal(st.mw, 2);
	assert_int_equal(rps_tr_listen(ts, e.ip0, 0, &port), 0);
	poller_start(ts, srv_event, &s);
	poller_start(tc, cli_event, &cs);
	c1 = tr_connect(tc, e.ip0, port, 1, 0, ack, sizeof(ack), NULL, &rc);
	assert_int_equal(rc, 0);
	k1 = ack_key(ack);
	c2 = tr_connect(tc, e.ip0, port, 2, 0, ack, sizeof(ack), NULL, &rc);
	assert_int_equal(rc, 0);
	k2 = ack_key(ack);
	assert_int_equal(k1, region_mr.remote_key);
	assert_int_equal(k2, region_mr.remote_key);
	rps_rdma_get_stats(ts, &st);
	assert_int_equal(st.mws, 0);
	/* the weakness windows remove: any connection reads under any key */
	assert_int_equal(read_wait(c2, b, sizeof(b), region_mr.remote_addr, k1, 1), 0);
	assert_memory_equal(b, region, sizeof(b));
	rps_tr_close(c1);
	rps_tr_close(c2);
	tr_stop_pollers();
	tr_destroy(tc);
	rps_tr_dereg_mem(ts, &region_mr);
	tr_destroy(ts);
	free(region);
	free(region2);
	region = region2 = NULL;
}

/* The RDMA listener's admission limits (rdma_limits.c): max_conns_per_addr
 * and max_conns refuse a request beyond them; a slot freed by a close is
 * taken again. */
static void test_limits(void **state)
{
	static struct srv s;
	struct tenv e;
	struct rps_config cfg;
	struct rps_transport *ts, *tc;
	struct rps_conn *c[3];
	uint16_t port;
	int rc;

	(void)state;
	memset(&s, 0, sizeof(s));
	memset(&cs, 0, sizeof(cs));
	tenv_get(&e);
	tcfg_init(&cfg, 1);
	region_fill();
	ts = tr_create(&cfg, e.dev0, 1, on_hello, &s);
	/* set after tr_create's rps_tr_params_from_config: the params are copied */
	ts->params.max_conns_per_addr = 2;
	ts->params.max_conns = 3;
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	assert_int_equal(rps_tr_reg_mem(ts, region, REGION, RPS_TR_ACCESS_REMOTE_READ, &region_mr),
			 0);
	assert_int_equal(rps_tr_listen(ts, e.ip0, 0, &port), 0);
	poller_start(ts, srv_event, &s);
	poller_start(tc, cli_event, &cs);
	c[0] = tr_connect(tc, e.ip0, port, 1, 0, NULL, 0, NULL, &rc);
	assert_int_equal(rc, 0);
	c[1] = tr_connect(tc, e.ip0, port, 2, 0, NULL, 0, NULL, &rc);
	assert_int_equal(rc, 0);
	/* a third from the same address: refused, the others stay */
	c[2] = tr_connect(tc, e.ip0, port, 3, 0, NULL, 0, NULL, &rc);
	assert_null(c[2]);
	assert_int_equal(rc, -EADDRINUSE);
	/* one leaves: its place is free again once the server closed it */
	atomic_store(&s.closed, 0);
	rps_tr_close(c[0]);
	assert_true(wait_flag(&s.closed, 10));
	{
		double end = now_s() + 10;

		do {
			c[2] = tr_connect(tc, e.ip0, port, 3, 0, NULL, 0, NULL, &rc);
			if (!rc)
				break;
			usleep(100000);
		} while (now_s() < end);
	}
	assert_int_equal(rc, 0);
	rps_tr_close(c[1]);
	rps_tr_close(c[2]);
	tr_stop_pollers();
	tr_destroy(tc);
	rps_tr_dereg_mem(ts, &region_mr);
	tr_destroy(ts);
	free(region);
	free(region2);
	region = region2 = NULL;
}

static int teardown(void **state)
{
	tr_teardown(state);
	free(region);
	free(region2);
	region = region2 = NULL;
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_windows, teardown),
	    cmocka_unit_test_teardown(test_off, teardown),
	    cmocka_unit_test_teardown(test_limits, teardown),
	};
	struct tenv e;

	rps_log_set_ident("test_rdma_mw", -1);
	tenv_get(&e);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("rdma_mw", tests, NULL, NULL);
}
