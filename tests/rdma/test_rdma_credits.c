/* RDMA transport: SENDs under credit flow control.
 * The server's shard has 16 receive buffers; two client connections (two
 * threads) send 600 PUSH frames each of varying size into that one SRQ. The
 * server's poll thread hands each RECV token to an "update thread" that
 * checks order and contents, sometimes stalls, answers every 10th frame with a
 * PUSH_ACK and release()s the buffer (re-post). Peers are asked for RNR retry
 * 0, so an overrun receive queue would kill the connection: every frame must
 * arrive. Also: SEND_DONE for frames with a ctx, -EMSGSIZE / -EINVAL from
 * post_send, and a malformed frame closing only its own connection. */
#include "test_rdma_util.h"

#define NCONN	2
#define NFRAMES 600
#define NBUFS	16
#define MAXF	((4096 + 256 - 24 - 48) / 4) /* RDMAPS_RDMA_BUF_BYTES 4096 + headroom */

struct sconn {
	int idx;
	uint32_t next; /* next expected req_id */
	int bad;
	atomic_int closed;
};

struct srv {
	struct rps_transport *t;
	struct sconn sc[NCONN + 1];
	atomic_int naccepted;
	atomic_int got[NCONN + 1];
	/* the "priority ring": tokens waiting for the update thread */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rps_tr_event q[4 * NBUFS];
	int qh, qt;
	int stop;
	int max_held;
	atomic_int overflows; /* frames held beyond the queue (the poller counts) */
};

static void srv_event(struct poller *p, struct rps_tr_event *ev)
{
	struct srv *s = p->arg;

	switch (ev->type) {
	case RPS_TR_EV_ACCEPTED: {
		int i = atomic_fetch_add(&s->naccepted, 1);

		if (i <= NCONN) {
			s->sc[i].idx = i;
			ev->conn->user = &s->sc[i];
		}
		break;
	}
	case RPS_TR_EV_RECV:
		pthread_mutex_lock(&s->mu);
		if (s->qt - s->qh >= (int)RPS_ARRAY_SIZE(s->q)) {
			fprintf(stderr, "more frames held than buffers exist\n");
			atomic_fetch_add(&s->overflows, 1);
			rps_tr_release(p->t, ev->token);
		} else {
			s->q[s->qt++ % RPS_ARRAY_SIZE(s->q)] = *ev;
			if (s->qt - s->qh > s->max_held)
				s->max_held = s->qt - s->qh;
		}
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
		break;
	case RPS_TR_EV_CLOSED: {
		struct sconn *c = ev->conn->user;

		if (c)
			atomic_store(&c->closed, 1);
		rps_tr_close(ev->conn);
		break;
	}
	default:
		break;
	}
}

static void *update_main(void *arg)
{
	struct srv *s = arg;
	uint64_t n = 0;

	for (;;) {
		struct rps_tr_event ev;
		struct sconn *c;
		struct rps_push push;
		const float *v;

		pthread_mutex_lock(&s->mu);
		while (s->qh == s->qt && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->qh == s->qt) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		ev = s->q[s->qh++ % RPS_ARRAY_SIZE(s->q)];
		pthread_mutex_unlock(&s->mu);
		c = ev.conn->user;
		if (ev.hdr.op == RPS_OP_PUSH && c) {
			memcpy(&push, ev.fixed, sizeof(push));
			v = ev.data;
			if (ev.hdr.req_id != c->next) {
				fprintf(stderr, "conn %d: req_id %u, expected %u\n", c->idx,
					ev.hdr.req_id, c->next);
				c->bad++;
			}
			c->next = ev.hdr.req_id + 1;
			if (ev.data_len != push.count * sizeof(float))
				c->bad++;
			for (uint32_t k = 0; k < push.count; k++)
				if (v[k] != (float)(ev.hdr.req_id * 3 + k)) {
					fprintf(stderr, "conn %d frame %u: v[%u] = %g\n",
						c->idx, ev.hdr.req_id, k, v[k]);
					c->bad++;
					break;
				}
			if (ev.hdr.req_id % 10 == 9) {
				int rc =
				    send_simple(s->t, ev.conn, RPS_OP_PUSH_ACK, ev.hdr.req_id, 0);

				if (rc) {
					fprintf(stderr, "PUSH_ACK: %s\n", strerror(-rc));
					c->bad++;
				}
			}
			atomic_fetch_add(&s->got[c->idx], 1);
		}
		/* stall now and then, like a busy optimizer */
		if (++n % 97 == 0)
			usleep(20000);
		rps_tr_release(s->t, ev.token);
	}
	return NULL;
}

/* The update thread of the running test, for update_stop() in teardown(). */
static pthread_t upd;
static int upd_running;
static struct srv *upd_srv;

static void update_stop(struct srv *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(upd, NULL);
	upd_running = 0;
}

struct cli {
	atomic_int acks, send_done, closed[NCONN + 1];
	struct rps_conn *conn[NCONN + 1];
};

static void cli_event(struct poller *p, struct rps_tr_event *ev)
{
	struct cli *c = p->arg;

	switch (ev->type) {
	case RPS_TR_EV_RECV:
		if (ev->hdr.op == RPS_OP_PUSH_ACK)
			atomic_fetch_add(&c->acks, 1);
		rps_tr_release(p->t, ev->token);
		break;
	case RPS_TR_EV_SEND_DONE:
		if (ev->status == 0 && ev->ctx >= 1000)
			atomic_fetch_add(&c->send_done, 1);
		break;
	case RPS_TR_EV_CLOSED: {
		int mine = 0;

		for (int i = 0; i <= NCONN; i++)
			if (c->conn[i] == ev->conn) {
				atomic_store(&c->closed[i], 1);
				mine = 1;
			}
		if (!mine) /* the test's own connections: it closes them */
			rps_tr_close(ev->conn);
		break;
	}
	default:
		break;
	}
}

struct sender {
	struct rps_transport *t;
	struct rps_conn *c;
	int rc;
	int with_ctx;
};

static void *sender_main(void *arg)
{
	struct sender *sd = arg;
	static _Thread_local float scratch[MAXF];

	for (uint32_t i = 0; i < NFRAMES; i++) {
		uint32_t n = (i * 37) % (MAXF + 1);
		uint64_t ctx = i % 7 == 0 ? 1000 + i : 0;
		int rc = send_push(sd->t, sd->c, i, n, (float)(i * 3), ctx, scratch);

		if (rc) {
			fprintf(stderr, "send %u: %s\n", i, strerror(-rc));
			sd->rc = rc;
			return NULL;
		}
		if (ctx)
			sd->with_ctx++;
	}
	return NULL;
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
	struct sender sd[NCONN];
	pthread_t th[NCONN];
	struct rps_rdma_stats sst, cst;
	uint16_t port = 0;
	double t0, t1;
	int rc, with_ctx = 0;

	memset(&s, 0, sizeof(s));
	memset(&cs, 0, sizeof(cs));
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	tenv_get(&e);
	tr_rnr_retry = 0;
	tcfg_init(&cfg, event_mode);
	cfg.rdma_recv_bufs = NBUFS;
	cfg.rdma_credits = 8;
	cfg.num_workers = NCONN; /* each connection gets 16 / 2 - 1 = 7 credits */
	ts = tr_create(&cfg, e.dev0, 1, NULL, NULL);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	s.t = ts;
	upd_srv = &s;
	rc = rps_tr_listen(ts, e.ip0, 0, &port);
	assert_int_equal(rc, 0);
	ps = poller_start(ts, srv_event, &s);
	pc = poller_start(tc, cli_event, &cs);
	assert_int_equal(pthread_create(&upd, NULL, update_main, &s), 0);
	upd_running = 1;

	for (int i = 0; i < NCONN; i++) {
		cs.conn[i] = tr_connect(tc, e.ip0, port, (uint32_t)i, 0, NULL, 0, NULL, &rc);
		assert_int_equal(rc, 0);
	}
	{
		atomic_int *n = &s.naccepted;
		double end = now_s() + 10;

		while (atomic_load(n) < NCONN && now_s() < end)
			usleep(1000);
		assert_int_equal(atomic_load(n), NCONN);
	}

	/* post_send argument errors */
	{
		static float big[MAXF + 2];
		struct rps_frame_hdr h;
		struct iovec iov = {big, 8};

		/* a frame over the buffer */
		assert_int_equal(send_push(tc, cs.conn[0], 0, MAXF + 1, 0, 0, big), -EMSGSIZE);
		/* an iov shorter than hdr.len */
		rps_proto_hdr_init(&h, RPS_OP_PUSH, 48, 0);
		assert_int_equal(rps_tr_post_send(cs.conn[0], &h, &iov, 1, 0), -EINVAL);
	}

	t0 = now_s();
	for (int i = 0; i < NCONN; i++) {
		sd[i] = (struct sender){.t = tc, .c = cs.conn[i]};
		assert_int_equal(pthread_create(&th[i], NULL, sender_main, &sd[i]), 0);
	}
	for (int i = 0; i < NCONN; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NCONN; i++) {
		assert_int_equal(sd[i].rc, 0); /* sender i failed */
		with_ctx += sd[i].with_ctx;
	}
	{
		double end = now_s() + 30;

		while (now_s() < end &&
		       (atomic_load(&s.got[0]) < NFRAMES || atomic_load(&s.got[1]) < NFRAMES ||
			atomic_load(&cs.acks) < NCONN * NFRAMES / 10 ||
			atomic_load(&cs.send_done) < with_ctx))
			usleep(2000);
	}
	t1 = now_s();
	rps_rdma_get_stats(ts, &sst);
	rps_rdma_get_stats(tc, &cst);
	printf("%d frames in %.2f s (%.0f frames/s); client waited for credits %llu times; "
	       "server sent %llu credit frames; %d buffers held at most; SRQ low water %lld\n",
	       NCONN * NFRAMES, t1 - t0, NCONN * NFRAMES / (t1 - t0),
	       (unsigned long long)cst.credit_waits, (unsigned long long)sst.ctrl_sent, s.max_held,
	       (long long)sst.srq_low_water);
	for (int i = 0; i < NCONN; i++) {
		assert_int_equal(atomic_load(&s.got[i]), NFRAMES); /* frames the server got */
		assert_int_equal(s.sc[i].bad, 0);
		assert_false(atomic_load(&s.sc[i].closed)); /* closed on the server */
		assert_false(atomic_load(&cs.closed[i]));   /* closed on the client */
	}
	assert_int_equal(atomic_load(&s.overflows), 0);
	assert_int_equal(atomic_load(&cs.acks), NCONN * NFRAMES / 10); /* PUSH_ACKs */
	assert_int_equal(atomic_load(&cs.send_done), with_ctx); /* for frames with a ctx */
	/* and each connection's handshake PROOF (its first frame, src/auth.h) */
	assert_int_equal(cst.frames_sent, NCONN * NFRAMES + NCONN);
	/* the client waited for credits (else the test is too weak) */
	assert_true(cst.credit_waits > 0);
	assert_true(sst.ctrl_sent > 0); /* the server sent credit frames */
	if (sst.srq_low_water < 0)
		fail_msg("SRQ low water %lld", (long long)sst.srq_low_water);
	assert_in_range(s.max_held, 0, NBUFS); /* buffers held, with NBUFS in the SRQ */

	/* a malformed frame closes its connection only */
	cs.conn[NCONN] = tr_connect(tc, e.ip0, port, 9, 0, NULL, 0, NULL, &rc);
	if (rc == -ENOBUFS) {
		/* the two connections hold all 16 buffers: make room */
		double end = now_s() + 10;

		rps_tr_close(cs.conn[1]);
		cs.conn[1] = NULL;
		do {
			usleep(100000);
			cs.conn[NCONN] = tr_connect(tc, e.ip0, port, 9, 0, NULL, 0, NULL, &rc);
		} while (rc == -ENOBUFS && now_s() < end);
	}
	assert_int_equal(rc, 0); /* the connection for the bad frame */
	{
		double end = now_s() + 10;

		while (atomic_load(&s.naccepted) < NCONN + 1 && now_s() < end)
			usleep(1000);
	}
	{
		struct rps_frame_hdr h;

		rps_proto_hdr_init(&h, RPS_OP_BARRIER, 0, 1);
		h.magic = 0x41414141;
		assert_int_equal(rps_tr_post_send(cs.conn[NCONN], &h, NULL, 0, 0), 0);
	}
	assert_true(wait_flag(&s.sc[NCONN].closed, 10)); /* the server closed it */
	assert_true(wait_flag(&cs.closed[NCONN], 10));	 /* the client saw CLOSED */
	rps_tr_close(cs.conn[NCONN]);
	{
		static float v[4];
		int before = atomic_load(&s.got[0]);

		pthread_mutex_lock(&s.mu);
		s.sc[0].next = 5000;
		pthread_mutex_unlock(&s.mu);
		double end;

		assert_int_equal(send_push(tc, cs.conn[0], 5000, 4, 15000, 0, v), 0);
		end = now_s() + 10;
		while (atomic_load(&s.got[0]) == before && now_s() < end)
			usleep(1000);
		assert_int_equal(atomic_load(&s.got[0]), before + 1); /* the good one still works */
		assert_int_equal(s.sc[0].bad, 0);
	}

	poller_stop(pc);
	poller_stop(ps);
	update_stop(&s);
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

/* After a failed assertion: the pollers, then the update thread (it
 * releases tokens), then the transports. */
static int teardown(void **state)
{
	tr_stop_pollers();
	if (upd_running)
		update_stop(upd_srv);
	return tr_teardown(state);
}

/* argv[1], if given: a cmocka test name filter (e.g. "test_busy_poll"). */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_event_mode, teardown),
	    cmocka_unit_test_teardown(test_busy_poll, teardown),
	};
	struct tenv e;

	rps_log_set_ident("test_rdma_credits", -1);
	tenv_get(&e);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("rdma_credits", tests, NULL, NULL);
}
