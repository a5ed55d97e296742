/* RDMA transport: the retransmission settings reach the QPs (lossy RoCE,
 * docs/rdma.md). A listener on rxe0 and a client on rxe1 made with
 * RDMAPS_RDMA_ACK_TIMEOUT 12, RDMAPS_RDMA_RETRY_COUNT 5, RDMAPS_RDMA_RNR_TIMER
 * 9, RDMAPS_RDMA_RNR_RETRY 6: ibv_query_qp of both ends' QPs shows them
 * (timeout, retry_cnt, rnr_retry, min_rnr_timer). With ACK timeout 0 the
 * QPs keep rdma_cm's own timeout, which differs from 12. */
#include <infiniband/verbs.h>

#include "test_rdma_util.h"
#include "transport/rdma/rdma_int.h"

struct srv {
	atomic_int accepted;
	struct rps_conn *conn;
};

static void srv_event(struct poller *p, struct rps_tr_event *ev)
{
	struct srv *s = p->arg;

	if (ev->type == RPS_TR_EV_ACCEPTED) {
		s->conn = ev->conn;
		atomic_fetch_add(&s->accepted, 1);
	} else if (ev->type == RPS_TR_EV_RECV) {
		rps_tr_release(p->t, ev->token);
	} else if (ev->type == RPS_TR_EV_CLOSED) {
		rps_tr_close(ev->conn);
	}
}

static void cli_event(struct poller *p, struct rps_tr_event *ev)
{
	if (ev->type == RPS_TR_EV_RECV)
		rps_tr_release(p->t, ev->token);
}

static void query(struct rps_conn *c, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr ia;
	int rc;

	memset(a, 0, sizeof(*a));
	rc = ibv_query_qp(rps_rdma_c(c)->qp, a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_MIN_RNR_TIMER,
			  &ia);
	assert_int_equal(rc, 0);
	assert_int_equal(a->qp_state, IBV_QPS_RTS);
}

/* One connection with these settings; *srv_p / *cli_p: its QPs' attributes. */
static void conn_attrs(int ack_timeout, int retry, int rnr_timer, int rnr_retry,
		       struct ibv_qp_attr *srv_p, struct ibv_qp_attr *cli_p)
{
	struct tenv e;
	struct rps_config cfg;
	static struct srv s;
	struct poller *ps, *pc;
	struct rps_transport *ts, *tc;
	struct rps_conn *c;
	uint16_t port = 0;
	int rc;

	memset(&s, 0, sizeof(s));
	tenv_get(&e);
	tcfg_init(&cfg, 1);
	cfg.rdma_ack_timeout = ack_timeout;
	cfg.rdma_retry_count = retry;
	cfg.rdma_rnr_timer = rnr_timer;
	tr_rnr_retry = rnr_retry;
	ts = tr_create(&cfg, e.dev0, 1, NULL, NULL);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	assert_int_equal(rps_tr_listen(ts, e.ip0, 0, &port), 0);
	ps = poller_start(ts, srv_event, &s);
	pc = poller_start(tc, cli_event, NULL);
	c = tr_connect(tc, e.ip0, port, 1, 0, NULL, 0, NULL, &rc);
	assert_int_equal(rc, 0);
	assert_true(wait_flag(&s.accepted, 10));
	query(s.conn, srv_p);
	query(c, cli_p);
	rps_tr_close(c);
	poller_stop(pc);
	poller_stop(ps);
	tr_destroy(tc);
	tr_destroy(ts);
	tr_rnr_retry = 7;
}

static void test_settings_reach_qps(void **state)
{
	struct ibv_qp_attr sa, ca;

	(void)state;
	conn_attrs(12, 5, 9, 6, &sa, &ca);
	printf("server QP: timeout %u retry %u rnr_retry %u min_rnr_timer %u\n", sa.timeout,
	       sa.retry_cnt, sa.rnr_retry, sa.min_rnr_timer);
	printf("client QP: timeout %u retry %u rnr_retry %u min_rnr_timer %u\n", ca.timeout,
	       ca.retry_cnt, ca.rnr_retry, ca.min_rnr_timer);
	/* the requester's side: ACK timeout and retries of what each end sends */
	assert_int_equal(ca.timeout, 12);
	assert_int_equal(sa.timeout, 12);
	assert_int_equal(ca.retry_cnt, 5);
	assert_int_equal(sa.retry_cnt, 5);
	assert_int_equal(ca.rnr_retry, 6);
	assert_int_equal(sa.rnr_retry, 6);
	/* the responder's side: the RNR NAK delay it asks of the other end */
	assert_int_equal(ca.min_rnr_timer, 9);
	assert_int_equal(sa.min_rnr_timer, 9);
}

static void test_zero_keeps_rdma_cm_default(void **state)
{
	struct ibv_qp_attr sa, ca;

	(void)state;
	conn_attrs(0, 7, 12, 7, &sa, &ca);
	printf("rdma_cm's own ACK timeout: client %u, server %u\n", ca.timeout, sa.timeout);
	assert_int_not_equal(ca.timeout, 12);
	assert_int_equal(ca.retry_cnt, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_settings_reach_qps, tr_teardown),
	    cmocka_unit_test_teardown(test_zero_keeps_rdma_cm_default, tr_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
