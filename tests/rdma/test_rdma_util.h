/* Shared set-up of the RDMA transport tests (tests/rdma/test_rdma_*.c), which
 * are cmocka tests like tests/unit. They run where tools/softroce/rxe-run made
 * rxe0 (10.9.0.1) and rxe1 (10.9.0.2): a listener on RDMAPS_RXE_DEV0/IP0,
 * clients on RDMAPS_RXE_DEV1; tenv_get() exits 77 (skip) outside it.
 * Transports made with tr_create() and pollers started with poller_start()
 * are remembered, so that tr_teardown() (a cmocka teardown) stops and frees
 * whatever a failed assertion left behind before the next test runs.
 * Poller threads must not call cmocka asserts: they count failures, the test
 * thread asserts on the counts. Forked children must not either (they would
 * continue cmocka's run): they exit non-zero instead. */
#ifndef TEST_RDMA_UTIL_H
#define TEST_RDMA_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
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
#include "src/log.h"
#include "src/proto.h"
#include "src/util.h"
#include "transport/rdma/rdma.h"
#include "transport/transport.h"

#define SECRET "rdma-test-secret"

#define TR_MAX_TRANSPORTS 8
#define TR_MAX_POLLERS	  8

/* Transports tr_create() made and not yet tr_destroy()ed. */
static struct rps_transport *tr_live[TR_MAX_TRANSPORTS];

struct tenv {
	const char *dev0, *dev1, *ip0, *ip1;
};

static inline void tenv_get(struct tenv *e)
{
	e->dev0 = getenv("RDMAPS_RXE_DEV0");
	e->dev1 = getenv("RDMAPS_RXE_DEV1");
	e->ip0 = getenv("RDMAPS_RXE_IP0");
	e->ip1 = getenv("RDMAPS_RXE_IP1");
	if (!e->dev0 || !e->dev1 || !e->ip0 || !e->ip1) {
		printf("SKIP: RDMAPS_RXE_* not set; run through tools/softroce/rxe-run\n");
		exit(77);
	}
	if (getenv("RDMAPS_LOG_LEVEL")) {
		int l = rps_log_level_parse(getenv("RDMAPS_LOG_LEVEL"));

		if (l >= 0)
			rps_log_set_level(l);
	}
}

/* A config with small pools (the guest is emulated and slow). */
static inline void tcfg_init(struct rps_config *cfg, int event_mode)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->rdma_buf_bytes = 4096;
	cfg->rdma_recv_bufs = 32;
	cfg->rdma_credits = 8;
	cfg->rdma_max_rd = 16;
	cfg->rdma_event_mode = event_mode;
	cfg->timeout_ms = 10000;
	cfg->max_msg = 1 << 20;
	cfg->num_workers = 2;
	cfg->num_servers = 1;
	cfg->shards = 2;
	/* retransmission: the option table's defaults (memset would say 0) */
	cfg->rdma_ack_timeout = 14;
	cfg->rdma_retry_count = 7;
	cfg->rdma_rnr_timer = 12;
	cfg->rdma_rnr_retry = 7;
}

/* RNR retries of the transports tr_create makes (0: an overrun receive
 * queue is an error instead of a stall). */
static int tr_rnr_retry = 7;

static inline struct rps_transport *
tr_create(const struct rps_config *cfg, const char *dev, uint32_t nchannels,
	  int (*on_hello)(void *, struct rps_conn *, const struct rps_hello *, void *, size_t *,
			  const char **),
	  void *arg)
{
	struct rps_tr_params p;
	struct rps_transport *t = NULL;
	int rc;

	rps_tr_params_from_config(cfg, &p);
	p.secret = SECRET;
	p.nchannels = nchannels;
	p.device = dev;
	p.rdma.rnr_retry = tr_rnr_retry;
	p.on_hello = on_hello;
	p.arg = arg;
	rc = rps_transport_create("rdma", &p, &t);
	if (rc)
		fail_msg("create rdma transport on %s: %s", dev, strerror(-rc));
	for (int i = 0; i < TR_MAX_TRANSPORTS; i++)
		if (!tr_live[i]) {
			tr_live[i] = t;
			return t;
		}
	fail_msg("more than %d live transports", TR_MAX_TRANSPORTS);
	return NULL;
}

static inline void tr_destroy(struct rps_transport *t)
{
	for (int i = 0; i < TR_MAX_TRANSPORTS; i++)
		if (tr_live[i] == t)
			tr_live[i] = NULL;
	rps_transport_destroy(t);
}

/* A HELLO_ACK payload: rps_hello_ack + nshards shard descriptors. */
static inline size_t make_ack(void *buf, uint32_t nshards, const struct rps_shard_desc *d)
{
	struct rps_hello_ack a = {0};

	a.server_rank = 7;
	a.num_shards = nshards;
	a.num_workers = 2;
	a.chunk_bytes = 256;
	a.max_msg = 1 << 20;
	memcpy(buf, &a, sizeof(a));
	for (uint32_t i = 0; i < nshards; i++)
		memcpy((char *)buf + sizeof(a) + i * sizeof(*d), &d[i], sizeof(*d));
	return sizeof(a) + nshards * sizeof(*d);
}

static inline struct rps_conn *tr_connect(struct rps_transport *t, const char *ip, uint16_t port,
					  uint32_t rank, uint32_t channel, void *ack,
					  size_t ack_cap, size_t *ack_len_p, int *rc_p)
{
	struct rps_hello h;
	struct rps_conn *c = NULL;
	size_t alen = 0;
	char dummy[RPS_TR_ACK_MAX];

	rps_proto_hello_init(&h, RPS_ROLE_WORKER, rank);
	h.channel = channel;
	*rc_p = rps_tr_connect(t, ip, port, &h, ack ? ack : dummy, ack ? ack_cap : sizeof(dummy),
				&alen, 10000, &c);
	if (ack_len_p)
		*ack_len_p = alen;
	return *rc_p ? NULL : c;
}

/* A PUSH frame of n floats: v[k] = base + k. */
static inline int send_push(struct rps_transport *t, struct rps_conn *c, uint32_t req_id,
			    uint32_t n, float base, uint64_t ctx, float *scratch)
{
	struct rps_frame_hdr h;
	struct rps_push p = {0};
	struct iovec iov[2];

	for (uint32_t k = 0; k < n; k++)
		scratch[k] = base + (float)k;
	p.key = 42;
	p.count = n;
	p.clock = req_id;
	rps_proto_hdr_init(&h, RPS_OP_PUSH, (uint32_t)(sizeof(p) + n * sizeof(float)), req_id);
	iov[0].iov_base = &p;
	iov[0].iov_len = sizeof(p);
	iov[1].iov_base = scratch;
	iov[1].iov_len = n * sizeof(float);
	return rps_tr_post_send(c, &h, iov, n ? 2 : 1, ctx);
}

static inline int send_simple(struct rps_transport *t, struct rps_conn *c, uint8_t op,
			      uint32_t req_id, uint32_t aux)
{
	struct rps_frame_hdr h;

	rps_proto_hdr_init(&h, op, 0, req_id);
	h.aux = aux;
	return rps_tr_post_send(c, &h, NULL, 0, 0);
}

/* A thread polling one transport, handing every event to a callback. The
 * pollers live here, not on a test's stack, so that tr_teardown() can stop
 * them after a failed assertion left the test function. */
struct poller {
	struct rps_transport *t;
	pthread_t th;
	atomic_int stop;
	int used;
	void (*on_event)(struct poller *p, struct rps_tr_event *ev);
	void *arg;
};

static struct poller tr_pollers[TR_MAX_POLLERS];

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	struct rps_tr_event ev[16];

	while (!atomic_load(&p->stop)) {
		int n = rps_tr_poll(p->t, ev, 16, 50);

		for (int i = 0; i < n; i++)
			p->on_event(p, &ev[i]);
	}
	return NULL;
}

static inline struct poller *poller_start(struct rps_transport *t,
					  void (*fn)(struct poller *, struct rps_tr_event *),
					  void *arg)
{
	struct poller *p = NULL;

	for (int i = 0; i < TR_MAX_POLLERS && !p; i++)
		if (!tr_pollers[i].used)
			p = &tr_pollers[i];
	if (!p)
		fail_msg("more than %d pollers", TR_MAX_POLLERS);
	p->t = t;
	p->on_event = fn;
	p->arg = arg;
	atomic_store(&p->stop, 0);
	assert_int_equal(pthread_create(&p->th, NULL, poller_main, p), 0);
	p->used = 1;
	return p;
}

static inline void poller_stop(struct poller *p)
{
	atomic_store(&p->stop, 1);
	rps_tr_wake(p->t);
	pthread_join(p->th, NULL);
	p->used = 0;
}

static inline double now_s(void)
{
	return (double)rps_now_ns() / 1e9;
}

/* Wait until *flag != 0 or the time runs out; returns the flag. */
static inline int wait_flag(atomic_int *flag, double secs)
{
	double end = now_s() + secs;

	while (!atomic_load(flag) && now_s() < end)
		usleep(1000);
	return atomic_load(flag);
}

/* cmocka teardown: stop the pollers and free the transports a test left
 * (after a failed assertion), and restore the defaults tests change. */
static inline void tr_stop_pollers(void)
{
	for (int i = 0; i < TR_MAX_POLLERS; i++)
		if (tr_pollers[i].used)
			poller_stop(&tr_pollers[i]);
}

static inline int tr_teardown(void **state)
{
	(void)state;
	tr_stop_pollers();
	for (int i = 0; i < TR_MAX_TRANSPORTS; i++)
		if (tr_live[i])
			tr_destroy(tr_live[i]);
	tr_rnr_retry = 7;
	return 0;
}

#endif
