/* RDMA transport: one-sided RDMA READ.
 * The server (rxe0) registers a 64 KiB region with remote read and hands its
 * address/remote key out in the HELLO_ACK; the client (rxe1) reads it:
 * one sge; several sges into separate malloc'd buffers (MR cache); the most
 * sges the transport allows; 50 repeated reads (no new registration: cache
 * hits); a read into a reg_mem'd buffer; 20 reads in flight at once.
 * Then a read outside the region: READ_DONE -EACCES and CLOSED on that
 * connection, while a second connection keeps reading and sending and the
 * listener accepts a third. A wrong remote key is refused the same way.
 * read_notify: the completion in a struct rps_tr_done, a READ_DONE wake-up
 * only when armed; a wrong remote key ends it with -EACCES.
 * Torn reads: a shard store (src/store.h) with compact slices (1, 2 and 501
 * floats) and a multi-chunk slice with a short last chunk, rewritten by an
 * update thread with self-checking values while the client READs the slices
 * with the worker's read plans (worker/plan.h) and re-reads torn chunks: no
 * torn value may come back, and each pass reads exactly the slice's bytes. */
#include <sched.h>

#include "src/store.h"
#include "test_rdma_util.h"
#include "worker/plan.h"

#define REGION (64 * 1024)
#define MAXCTX 256

static unsigned char *region;
static struct rps_tr_mr region_mr;
static struct rps_shard_desc hello_desc; /* what the server's HELLO_ACK hands out */
static const struct rps_tr_mr *hello_mr; /* ... for this registration (rps_tr_grant) */

struct srv {
	atomic_int accepted, closed, recv;
};

static int on_hello(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
		    size_t *ack_len_p, const char **why_p)
{
	struct rps_shard_desc d = hello_desc;
	int rc = rps_tr_grant(c, hello_mr, &d.remote_key); /* this connection's key */

	if (rc)
		return rc;
	*ack_len_p = make_ack(ack, 1, &d);
	return 0;
}

static void srv_event(struct poller *p, struct rps_tr_event *ev)
{
	struct srv *s = p->arg;

	switch (ev->type) {
	case RPS_TR_EV_ACCEPTED:
		atomic_fetch_add(&s->accepted, 1);
		break;
	case RPS_TR_EV_RECV:
		send_simple(p->t, ev->conn, RPS_OP_BARRIER_DONE, ev->hdr.req_id, 77);
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
	atomic_int done[MAXCTX];
	int status[MAXCTX];
	atomic_int acks;
	struct rps_conn *watch;
	atomic_int watch_closed;
	int closed_status;
	atomic_int events_after_close;
};

static void cli_event(struct poller *p, struct rps_tr_event *ev)
{
	struct cli *c = p->arg;

	if (atomic_load(&c->watch_closed) && ev->conn == c->watch)
		atomic_fetch_add(&c->events_after_close, 1);
	switch (ev->type) {
	case RPS_TR_EV_READ_DONE:
		if (ev->ctx < MAXCTX) {
			c->status[ev->ctx] = ev->status;
			atomic_store(&c->done[ev->ctx], 1);
		}
		break;
	case RPS_TR_EV_RECV:
		atomic_fetch_add(&c->acks, 1);
		rps_tr_release(p->t, ev->token);
		break;
	case RPS_TR_EV_CLOSED:
		if (ev->conn == c->watch) {
			/* the test still checks calls on it; it closes it itself */
			c->closed_status = ev->status;
			atomic_store(&c->watch_closed, 1);
		} else {
			rps_tr_close(ev->conn);
		}
		break;
	default:
		break;
	}
}

static struct cli cs;

static int read_wait(struct rps_transport *t, struct rps_conn *c, const struct rps_tr_sge *sg,
		     int n, uint64_t raddr, uint32_t remote_key, uint64_t ctx)
{
	int rc;

	atomic_store(&cs.done[ctx], 0);
	rc = rps_tr_read_remote(c, sg, n, raddr, remote_key, ctx);
	if (rc)
		return rc;
	if (!wait_flag(&cs.done[ctx], 10))
		return -ETIMEDOUT;
	return cs.status[ctx];
}

static void run(int event_mode)
{
	struct tenv e;
	struct rps_config cfg;
	static struct srv s; /* static: the pollers may still touch it after a failure */
	struct poller *ps, *pc;
	struct rps_transport *ts, *tc;
	struct rps_conn *c1, *c2, *c3;
	struct rps_shard_desc d, d2;
	struct rps_rdma_stats st0, st1;
	char ack[RPS_TR_ACK_MAX], ack2[RPS_TR_ACK_MAX];
	size_t ack_len;
	uint16_t port;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(&cs, 0, sizeof(cs));
	tenv_get(&e);
	tr_rnr_retry = 0;
	tcfg_init(&cfg, event_mode);
	ts = tr_create(&cfg, e.dev0, 1, on_hello, &s);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	region = aligned_alloc(4096, REGION);
	assert_non_null(region);
	for (int i = 0; i < REGION; i++)
		region[i] = (unsigned char)(i * 7 + i / 256);
	rc = rps_tr_reg_mem(ts, region, REGION, RPS_TR_ACCESS_REMOTE_READ, &region_mr);
	assert_int_equal(rc, 0);
	hello_desc = (struct rps_shard_desc){
	    .addr = region_mr.remote_addr, .size = REGION, .remote_key = region_mr.remote_key};
	hello_mr = &region_mr;
	/* unknown access bits */
	assert_int_equal(rps_tr_reg_mem(ts, region, REGION, 2u, &(struct rps_tr_mr){0}), -EINVAL);
	rc = rps_tr_listen(ts, e.ip0, 0, &port);
	assert_int_equal(rc, 0);
	ps = poller_start(ts, srv_event, &s);
	pc = poller_start(tc, cli_event, &cs);

	c1 = tr_connect(tc, e.ip0, port, 1, 0, ack, sizeof(ack), &ack_len, &rc);
	assert_int_equal(rc, 0);
	c2 = tr_connect(tc, e.ip0, port, 2, 0, ack2, sizeof(ack2), NULL, &rc);
	assert_int_equal(rc, 0);
	memcpy(&d2, ack2 + sizeof(struct rps_hello_ack), sizeof(d2));
	assert_int_equal(ack_len, sizeof(struct rps_hello_ack) + sizeof(d));
	memcpy(&d, ack + sizeof(struct rps_hello_ack), sizeof(d));
	/* c1's own key (a memory window bound to c1 where the device has them);
	 * c2's reads below use c2's */
	assert_int_not_equal(d.remote_key, 0);
	assert_int_equal(d.addr, region_mr.remote_addr);

	/* one sge */
	{
		unsigned char *b = malloc(4096);
		struct rps_tr_sge sg = {.addr = b, .len = 4096};

		assert_non_null(b);
		assert_int_equal(read_wait(tc, c1, &sg, 1, d.addr, d.remote_key, 1), 0);
		assert_memory_equal(b, region, 4096);
		free(b);
	}
	/* three sges into separate buffers, then 50 times more */
	{
		unsigned char *b0 = malloc(100), *b1 = malloc(3000), *b2 = malloc(5000);
		struct rps_tr_sge sg[3] = {
		    {.addr = b0, .len = 100}, {.addr = b1, .len = 3000}, {.addr = b2, .len = 5000}};
		int bad = 0;

		assert_true(b0 && b1 && b2);
		assert_int_equal(read_wait(tc, c1, sg, 3, d.addr + 1000, d.remote_key, 2), 0);
		assert_memory_equal(b0, region + 1000, 100);
		assert_memory_equal(b1, region + 1100, 3000);
		assert_memory_equal(b2, region + 4100, 5000);
		rps_rdma_get_stats(tc, &st0);
		for (int i = 0; i < 50; i++) {
			uint64_t off = (uint64_t)(i * 811) % (REGION - 8100);

			memset(b1, 0, 3000);
			rc = read_wait(tc, c1, sg, 3, d.addr + off, d.remote_key, 3);
			if (rc || memcmp(b0, region + off, 100) ||
			    memcmp(b1, region + off + 100, 3000) ||
			    memcmp(b2, region + off + 3100, 5000))
				bad++;
		}
		rps_rdma_get_stats(tc, &st1);
		assert_int_equal(bad, 0); /* of 50 repeated reads */
		/* no new registrations, and 3 cache hits a read */
		assert_int_equal(st1.mr_cache_regs, st0.mr_cache_regs);
		if (st1.mr_cache_hits < st0.mr_cache_hits + 150)
			fail_msg("cache hits %llu -> %llu, want 150 more",
				 (unsigned long long)st0.mr_cache_hits,
				 (unsigned long long)st1.mr_cache_hits);
		printf("MR cache: %llu registrations, %llu hits\n",
		       (unsigned long long)st1.mr_cache_regs,
		       (unsigned long long)st1.mr_cache_hits);
		free(b0);
		free(b1);
		free(b2);
	}
	/* as many sges as allowed, 64 bytes each, scattered in one buffer */
	{
		int n = tc->max_read_sge;
		unsigned char *b = calloc(1, 128 * 30);
		struct rps_tr_sge sg[30];
		int bad = 0;

		assert_non_null(b);
		assert_in_range(n, 1, 30);
		for (int i = 0; i < n; i++)
			sg[i] = (struct rps_tr_sge){.addr = b + 128 * i, .len = 64};
		assert_int_equal(read_wait(tc, c1, sg, n, d.addr + 256, d.remote_key, 4), 0);
		for (int i = 0; i < n; i++)
			bad += memcmp(b + 128 * i, region + 256 + 64 * i, 64) != 0;
		assert_int_equal(bad, 0); /* pieces that differ */
		/* one sge more than max_read_sge */
		assert_int_equal(rps_tr_read_remote(c1, sg, n + 1, d.addr, d.remote_key, 5), -EINVAL);
		free(b);
	}
	/* into a reg_mem'd buffer: its own lkey, no cache registration */
	{
		unsigned char *b = aligned_alloc(4096, 8192);
		struct rps_tr_mr mr;
		struct rps_tr_sge sg = {.addr = b + 100, .len = 5000};

		assert_non_null(b);
		assert_int_equal(rps_tr_reg_mem(tc, b, 8192, RPS_TR_ACCESS_LOCAL, &mr), 0);
		rps_rdma_get_stats(tc, &st0);
		rc = read_wait(tc, c1, &sg, 1, d.addr + 20000, d.remote_key, 6);
		rps_rdma_get_stats(tc, &st1);
		assert_int_equal(rc, 0);
		assert_memory_equal(b + 100, region + 20000, 5000);
		/* the reg_mem'd buffer is not registered again */
		assert_int_equal(st1.mr_cache_regs, st0.mr_cache_regs);
		rps_tr_dereg_mem(tc, &mr);
		free(b);
	}
	/* 20 reads in flight */
	{
		static unsigned char b[20][1024];
		int bad = 0;

		for (int i = 0; i < 20; i++) {
			struct rps_tr_sge sg = {.addr = b[i], .len = 1024};

			atomic_store(&cs.done[10 + i], 0);
			rc = rps_tr_read_remote(c1, &sg, 1, d.addr + 1024 * (uint64_t)i * 3,
						  d.remote_key, 10 + (uint64_t)i);
			assert_int_equal(rc, 0);
		}
		for (int i = 0; i < 20; i++) {
			if (!wait_flag(&cs.done[10 + i], 10) || cs.status[10 + i] ||
			    memcmp(b[i], region + 1024 * i * 3, 1024))
				bad++;
		}
		assert_int_equal(bad, 0); /* of 20 concurrent reads */
	}

	/* latency of small reads, for the record (emulated: ratios only); this
	 * thread polls the client transport itself */
	{
		static double lat[200];
		unsigned char b[64];
		struct rps_tr_sge sg = {.addr = b, .len = 64};
		struct rps_tr_event ev[8];
		double sum = 0;
		int i;

		poller_stop(pc);
		for (i = 0; i < 200; i++) {
			double t0 = now_s(), end = t0 + 10;
			int done = 0;

			rc = rps_tr_read_remote(c1, &sg, 1, d.addr + 64 * (uint64_t)i, d.remote_key, 7);
			while (!rc && !done && now_s() < end) {
				int n = rps_tr_poll(tc, ev, 8, 100);

				for (int k = 0; k < n; k++)
					if (ev[k].type == RPS_TR_EV_READ_DONE && ev[k].ctx == 7) {
						done = 1;
						rc = ev[k].status;
					}
			}
			lat[i] = (now_s() - t0) * 1e6;
			sum += lat[i];
			if (rc || !done)
				break;
		}
		pc = poller_start(tc, cli_event, &cs);
		if (i != 200)
			fail_msg("latency reads: stopped at %d: %s", i, strerror(-rc));
		for (int x = 1; x < 200; x++)
			for (int j = x; j > 0 && lat[j] < lat[j - 1]; j--) {
				double v = lat[j];

				lat[j] = lat[j - 1];
				lat[j - 1] = v;
			}
		printf(
		    "64 B RDMA READ through the transport (%s): median %.1f us, average %.1f us, "
		    "p99 %.1f us\n",
		    event_mode ? "event mode" : "busy poll", lat[100], sum / 200, lat[198]);
	}

	/* read_notify: the completion lands in a struct rps_tr_done, with a
	 * READ_DONE (ctx RPS_TR_CTX_NOTIFY) only when a sleeper asked for one.
	 * This thread reaps, so nobody completes a READ before it is armed. */
	{
		unsigned char b[512];
		struct rps_tr_sge sg = {.addr = b, .len = 512};
		struct rps_tr_done dn;
		struct rps_tr_event ev[8];
		int woken = 0, st, armed;

		poller_stop(pc);
		for (int arm = 1; arm >= 0; arm--) {
			double end = now_s() + 10;

			memset(b, 0, sizeof(b));
			woken = 0;
			rc = rps_tr_read_notify(c1, &sg, 1, d.addr + 3000 + 512 * (uint64_t)arm,
						  d.remote_key, &dn);
			assert_int_equal(rc, 0);
			st = RPS_TR_PENDING;
			armed = arm && atomic_compare_exchange_strong(&dn.state, &st,
								      RPS_TR_PENDING_WAKE);
			if (arm && !armed)
				fail_msg("read_notify: state %d before anyone reaped", st);
			while (!rc && now_s() < end &&
			       (atomic_load(&dn.state) != RPS_TR_DONE || (arm && !woken))) {
				int n = rps_tr_poll(tc, ev, 8, 100);

				for (int k = 0; k < n; k++)
					if (ev[k].type == RPS_TR_EV_READ_DONE &&
					    ev[k].ctx == RPS_TR_CTX_NOTIFY)
						woken++;
			}
			assert_int_equal(atomic_load(&dn.state), RPS_TR_DONE);
			assert_int_equal(dn.status, 0);
			assert_memory_equal(b, region + 3000 + 512 * arm, 512);
			assert_int_equal(woken, arm); /* wake-up events: one iff armed */
		}
		pc = poller_start(tc, cli_event, &cs);
	}

	/* outside the region: refused, that connection closes, the others stay */
	cs.watch = c1;
	{
		unsigned char b[256];
		struct rps_tr_sge sg = {.addr = b, .len = 256};

		rc = read_wait(tc, c1, &sg, 1, d.addr + REGION + 4096, d.remote_key, 100);
		assert_int_equal(rc, -EACCES);
		assert_true(wait_flag(&cs.watch_closed, 10)); /* CLOSED after the refused read */
		assert_int_equal(cs.closed_status, -EACCES);
		/* a read on the closed connection */
		assert_int_equal(rps_tr_read_remote(c1, &sg, 1, d.addr, d.remote_key, 101), -ECONNRESET);
	}
	rps_tr_close(c1);
	assert_true(wait_flag(&s.closed, 10)); /* the server's CLOSED of the failed one */
	{
		unsigned char b[2048];
		struct rps_tr_sge sg = {.addr = b, .len = 2048};

		/* the second connection reads and sends after the failure */
		assert_int_equal(read_wait(tc, c2, &sg, 1, d.addr + 4096, d2.remote_key, 102), 0);
		assert_memory_equal(b, region + 4096, 2048);
		assert_int_equal(send_simple(tc, c2, RPS_OP_BARRIER, 5, 0), 0);
		assert_true(wait_flag(&cs.acks, 10));
	}
	c3 = tr_connect(tc, e.ip0, port, 3, 0, NULL, 0, NULL, &rc);
	assert_int_equal(rc, 0); /* a third connection after the failure */
	{
		unsigned char b[512];
		struct rps_tr_sge sg = {.addr = b, .len = 512};

		/* a wrong remote_key: refused the same way */
		cs.watch = c3;
		atomic_store(&cs.watch_closed, 0);
		assert_int_equal(read_wait(tc, c3, &sg, 1, d.addr, d.remote_key ^ 0x5a5a00, 103), -EACCES);
		assert_true(wait_flag(&cs.watch_closed, 10)); /* CLOSED after the wrong remote_key */
		/* a read after CLOSED */
		assert_int_equal(read_wait(tc, c3, &sg, 1, d.addr, d.remote_key, 105), -ECONNRESET);
		rps_tr_close(c3);
	}
	/* read_notify with a wrong remote_key: done, -EACCES (the poller reaps) */
	c3 = tr_connect(tc, e.ip0, port, 4, 0, NULL, 0, NULL, &rc);
	assert_int_equal(rc, 0); /* a fourth connection */
	{
		unsigned char b[64];
		struct rps_tr_sge sg = {.addr = b, .len = 64};
		struct rps_tr_done dn;
		double end = now_s() + 10;

		cs.watch = c3;
		atomic_store(&cs.watch_closed, 0);
		rc = rps_tr_read_notify(c3, &sg, 1, d.addr, d.remote_key ^ 0x5a5a00, &dn);
		assert_int_equal(rc, 0);
		while (atomic_load(&dn.state) != RPS_TR_DONE && now_s() < end)
			usleep(1000);
		assert_int_equal(atomic_load(&dn.state), RPS_TR_DONE);
		assert_int_equal(dn.status, -EACCES);
		assert_true(wait_flag(&cs.watch_closed, 10)); /* CLOSED after the wrong remote_key */
		/* read_notify after CLOSED */
		assert_int_equal(rps_tr_read_notify(c3, &sg, 1, d.addr, d.remote_key, &dn), -ECONNRESET);
		rps_tr_close(c3);
	}
	usleep(100000);
	assert_int_equal(atomic_load(&cs.events_after_close), 0);
	{
		unsigned char b[64];
		struct rps_tr_sge sg = {.addr = b, .len = 64};

		/* the second connection at the end */
		assert_int_equal(read_wait(tc, c2, &sg, 1, d.addr + 64, d2.remote_key, 104), 0);
		assert_memory_equal(b, region + 64, 64);
	}

	poller_stop(pc);
	poller_stop(ps);
	tr_destroy(tc);
	rps_tr_dereg_mem(ts, &region_mr);
	tr_destroy(ts);
	free(region);
	region = NULL;
}

/* ---- torn reads against a live store ---- */

#define TORN_SECS    3.0
#define TORN_CB	     4096u /* the store's chunk: 1024 floats */
#define TORN_NSL     4
#define TORN_CTX     200
#define TORN_MAX_SGE ((int)(2 + 2 * RPS_RPLAN_MAX_CHUNKS))

/* compact 4 bytes (padding to 8), an 8-byte tensor, compact odd (2004 of
 * 2008 bytes), chunked: 3 full chunks and 77 floats (308 bytes -> 320) */
static const uint64_t torn_n[TORN_NSL] = {1, 2, 501, 3 * 1024 + 77};
static struct rps_store tstore;
static int tstore_live; /* for torn_teardown() */
static struct rps_store_slice tsl[TORN_NSL];
static atomic_int torn_stop;
static _Atomic uint64_t torn_gens;
static pthread_t torn_wt;
static int torn_wt_live;

/* Element e of a slice at generation g (1..16383): g * 1024 + e % 1024
 * (exact in a float), so a chunk is clean iff every element gives the same
 * g; g 0 (the zeroed store) is never read: reads start after generation 1. */
static void *torn_writer(void *arg)
{
	uint32_t gen = 0;

	(void)arg;
	while (!atomic_load_explicit(&torn_stop, memory_order_relaxed)) {
		gen = gen % 16383 + 1;
		for (int k = 0; k < TORN_NSL; k++) {
			const struct rps_store_slice *sl = &tsl[k];

			for (uint64_t c = 0; c < sl->nchunks; c++) {
				float *d = rps_store_chunk_data(&tstore, sl, c);
				uint64_t e0 = c * sl->epc;
				uint64_t n = RPS_MIN((uint64_t)sl->epc, sl->nelems - e0);

				rps_store_write_begin(&tstore, sl, c);
				for (uint64_t i = 0; i < n; i++)
					d[i] = (float)((uint64_t)gen * 1024 + (e0 + i) % 1024);
				rps_store_write_end(&tstore, sl, c);
			}
			sched_yield(); /* 2 vCPUs: leave room for the READ responder */
		}
		atomic_fetch_add(&torn_gens, 1);
	}
	return NULL;
}

/* The client's registered buffers, apart so the planner merges nothing by accident. */
static struct {
	float dst[4 * 1024];
	char gap1[64];
	char lines[RPS_RPLAN_LINES * RPS_RPLAN_MAX_CHUNKS];
	char gap2[64];
	char junk[TORN_CB];
} __attribute__((aligned(4096))) tbuf;

struct torn_stats {
	uint64_t reads, passes, rereads, bad_chunks, bad_bytes, failed;
};

/* One READ, waited for by polling the client transport on this thread. */
static int read_sync(struct rps_transport *t, struct rps_conn *c, const struct rps_tr_sge *sge,
		     int nsge, uint64_t raddr, uint32_t remote_key)
{
	struct rps_tr_event ev[8];
	double end = now_s() + 10;
	int rc = rps_tr_read_remote(c, sge, nsge, raddr, remote_key, TORN_CTX);

	while (!rc && now_s() < end) {
		int n = rps_tr_poll(t, ev, 8, 100);

		for (int k = 0; k < n; k++)
			if (ev[k].type == RPS_TR_EV_READ_DONE && ev[k].ctx == TORN_CTX)
				return ev[k].status;
	}
	return rc ? rc : -ETIMEDOUT;
}

/* Read slice k as a worker does: the plan from the DECLARE_ACK's offset and
 * aux, READs of as many chunks as the sges allow, torn chunks read again
 * alone until clean; then check every chunk holds one generation. */
static void torn_read_slice(struct rps_transport *tc, struct rps_conn *c,
			    const struct rps_shard_desc *d, int k, int max_sge,
			    struct torn_stats *st)
{
	const struct rps_store_slice *sl = &tsl[k];
	uint64_t ack_off = sl->off + sl->line;	/* DECLARE_ACK offset */
	uint32_t aux = rps_store_slice_aux(sl); /* DECLARE_ACK hdr.aux */
	struct rps_rplan p = {0};
	struct rps_tr_sge sge[TORN_MAX_SGE];
	uint64_t lo = 0, nch, bytes = 0, raddr, reread = 0;
	uint64_t vb[RPS_RPLAN_MAX_CHUNKS] = {0}, ve[RPS_RPLAN_MAX_CHUNKS] = {0}; /* accepted */
	int nsge, n, rc;

	p.chunk_bytes = aux & RPS_DECLARE_ACK_BYTES;
	p.line = aux & RPS_DECLARE_ACK_COMPACT ? RPS_STORE_WORD : RPS_STORE_LINE;
	p.last_bytes = rps_store_geom_last(p.chunk_bytes, p.line, sl->nelems);
	p.nelems = sl->nelems;
	p.raddr0 = d->addr + ack_off - p.line;
	nch = rps_rplan_nchunks(&p);
	while (lo < nch) {
		uint64_t torn;

		n = rps_rplan_build(&p, lo, RPS_RPLAN_MAX_CHUNKS, tbuf.dst, tbuf.lines, tbuf.junk,
				    sge, max_sge, &nsge, &raddr);
		if (n < 1) {
			st->failed++;
			return;
		}
		for (int i = 0; i < nsge; i++)
			bytes += sge[i].len;
		rc = read_sync(tc, c, sge, nsge, raddr, d->remote_key);
		st->reads++;
		if (rc) {
			st->failed++;
			return;
		}
		torn = rps_rplan_torn(tbuf.lines, (uint64_t)n, p.line);
		for (int i = 0; i < n && lo + (uint64_t)i < RPS_RPLAN_MAX_CHUNKS; i++) {
			memcpy(&vb[lo + (uint64_t)i],
			       tbuf.lines + rps_rplan_lines_off(&p, (uint64_t)i), 8);
			memcpy(&ve[lo + (uint64_t)i],
			       tbuf.lines + rps_rplan_lines_off(&p, (uint64_t)i) + p.line, 8);
		}
		for (int tries = 0; torn && tries < 100000; tries++) {
			uint64_t b = (uint64_t)__builtin_ctzll(torn);
			char *ln = tbuf.lines + rps_rplan_lines_off(&p, b);

			if (rps_rplan_build(&p, lo + b, 1, tbuf.dst, ln, tbuf.junk, sge, max_sge,
					    &nsge, &raddr) != 1 ||
			    read_sync(tc, c, sge, nsge, raddr, d->remote_key)) {
				st->failed++;
				return;
			}
			st->reads++;
			st->rereads++;
			if (lo + b < RPS_RPLAN_MAX_CHUNKS) {
				memcpy(&vb[lo + b], ln, 8);
				memcpy(&ve[lo + b], ln + p.line, 8);
				reread |= 1ull << (lo + b);
			}
			if (!rps_rplan_torn(ln, 1, p.line))
				torn &= ~(1ull << b);
		}
		if (torn) {
			st->failed++;
			return;
		}
		lo += (uint64_t)n;
	}
	if (bytes != rps_store_slice_span(sl))
		st->bad_bytes++;
	st->passes++;
	for (uint64_t ch = 0; ch < nch; ch++) {
		uint64_t e0 = ch * (p.chunk_bytes / 4);
		uint64_t e1 = RPS_MIN(e0 + p.chunk_bytes / 4, sl->nelems);
		double g0 = (double)tbuf.dst[e0] - (double)(e0 % 1024);

		for (uint64_t e = e0; e < e1; e++) {
			double g = (double)tbuf.dst[e] - (double)(e % 1024);

			if (g != g0 || g < 1024 || g > 16383.0 * 1024 || (uint64_t)g % 1024) {
				if (st->bad_chunks < 10)
					printf("torn value: slice of %llu (line %u) chunk %llu%s: "
					       "versions %llu/%llu; element %llu of [%llu, %llu): "
					       "generation %.3f, element %llu's %.3f\n",
					       (unsigned long long)sl->nelems, p.line,
					       (unsigned long long)ch,
					       reread >> ch & 1 ? " (re-read)" : "",
					       (unsigned long long)vb[ch],
					       (unsigned long long)ve[ch], (unsigned long long)e,
					       (unsigned long long)e0, (unsigned long long)e1,
					       g / 1024, (unsigned long long)e0, g0 / 1024);
				st->bad_chunks++;
				break;
			}
		}
	}
}

static void run_torn(int event_mode)
{
	struct tenv e;
	struct rps_config cfg;
	static struct srv s; /* static: the poller may still touch it after a failure */
	struct poller *ps;
	struct rps_transport *ts, *tc;
	struct rps_conn *c;
	struct rps_shard_desc d;
	struct rps_tr_mr smr, cmr;
	struct torn_stats st = {0};
	struct rps_store_slice pad;
	char ack[RPS_TR_ACK_MAX];
	size_t ack_len;
	uint64_t g0, g1, live;
	double end;
	int cmr_ok, max_sge, rc;

	memset(&s, 0, sizeof(s));
	tenv_get(&e);
	tr_rnr_retry = 0; /* as in run() */
	tcfg_init(&cfg, event_mode);
	ts = tr_create(&cfg, e.dev0, 1, on_hello, &s);
	tc = tr_create(&cfg, e.dev1, 0, NULL, NULL);
	rc = rps_store_init(&tstore, 0, 1 << 20, TORN_CB);
	assert_int_equal(rc, 0);
	tstore_live = 1;
	rc = rps_store_alloc(&tstore, 5, &pad); /* the slices do not start at data_off */
	assert_int_equal(rc, 0);
	for (int k = 0; k < TORN_NSL; k++)
		assert_int_equal(rps_store_alloc(&tstore, torn_n[k], &tsl[k]), 0);
	/* the small slices are compact */
	assert_int_equal(tsl[0].line, 8);
	assert_int_equal(tsl[1].line, 8);
	assert_int_equal(tsl[2].line, 8);
	/* the chunked one: 4 chunks, the last of 320 bytes */
	assert_int_equal(tsl[3].line, 64);
	assert_int_equal(tsl[3].nchunks, 4);
	assert_int_equal(rps_store_chunk_len(&tsl[3], 3), 320);
	rc = rps_tr_reg_mem(ts, tstore.base, tstore.size, RPS_TR_ACCESS_REMOTE_READ, &smr);
	assert_int_equal(rc, 0);
	hello_desc =
	    (struct rps_shard_desc){.addr = smr.remote_addr, .size = tstore.size, .remote_key = smr.remote_key};
	hello_mr = &smr;
	cmr_ok = rps_tr_reg_mem(tc, &tbuf, sizeof(tbuf), RPS_TR_ACCESS_LOCAL, &cmr) == 0;
	{
		uint16_t port;

		rc = rps_tr_listen(ts, e.ip0, 0, &port);
		assert_int_equal(rc, 0);
		ps = poller_start(ts, srv_event, &s);
		c = tr_connect(tc, e.ip0, port, 1, 0, ack, sizeof(ack), &ack_len, &rc);
		assert_int_equal(rc, 0);
	}
	memcpy(&d, ack + sizeof(struct rps_hello_ack), sizeof(d));
	max_sge = RPS_MIN(tc->max_read_sge, TORN_MAX_SGE);
	assert_in_range(max_sge, RPS_RPLAN_MIN_SGE, TORN_MAX_SGE);

	atomic_store(&torn_stop, 0);
	atomic_store(&torn_gens, 0); /* a fresh store: read once the writer went over it */
	assert_int_equal(pthread_create(&torn_wt, NULL, torn_writer, NULL), 0);
	torn_wt_live = 1;
	while (atomic_load(&torn_gens) < 1)
		usleep(1000);
	g0 = atomic_load(&torn_gens);
	end = now_s() + TORN_SECS;
	while (now_s() < end && !st.failed)
		for (int k = 0; k < TORN_NSL && !st.failed; k++)
			torn_read_slice(tc, c, &d, k, max_sge, &st);
	g1 = atomic_load(&torn_gens);
	live = st.passes;
	atomic_store(&torn_stop, 1);
	pthread_join(torn_wt, NULL);
	torn_wt_live = 0;
	/* and once more at rest: every slice holds the last generation */
	for (int k = 0; k < TORN_NSL; k++)
		torn_read_slice(tc, c, &d, k, max_sge, &st);

	printf("torn reads (%s): %llu slice passes (%llu during the writes), %llu READs, "
	       "%llu torn chunks re-read, %llu writer generations meanwhile\n",
	       event_mode ? "event mode" : "busy poll", (unsigned long long)st.passes,
	       (unsigned long long)live, (unsigned long long)st.reads,
	       (unsigned long long)st.rereads, (unsigned long long)(g1 - g0));
	assert_int_equal(st.failed, 0);	   /* slice reads that failed */
	assert_int_equal(st.bad_chunks, 0); /* torn chunks returned as clean */
	assert_int_equal(st.bad_bytes, 0);  /* passes that read other than the slice's bytes */
	if (live < TORN_NSL)
		fail_msg("only %llu slice passes during the writes", (unsigned long long)live);
	if (g1 - g0 < 2)
		fail_msg("the writer made %llu generations during the reads",
			 (unsigned long long)(g1 - g0));

	rps_tr_close(c);
	if (cmr_ok)
		rps_tr_dereg_mem(tc, &cmr);
	poller_stop(ps);
	tr_destroy(tc);
	rps_tr_dereg_mem(ts, &smr);
	tr_destroy(ts);
	rps_store_fini(&tstore);
	tstore_live = 0;
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

static void test_torn_event_mode(void **state)
{
	(void)state;
	run_torn(1);
}

static void test_torn_busy_poll(void **state)
{
	(void)state;
	run_torn(0);
}

/* After a failed assertion: the writer thread, the pollers and transports,
 * then the memory they used. */
static int teardown(void **state)
{
	if (torn_wt_live) {
		atomic_store(&torn_stop, 1);
		pthread_join(torn_wt, NULL);
		torn_wt_live = 0;
	}
	tr_teardown(state);
	if (tstore_live)
		rps_store_fini(&tstore);
	tstore_live = 0;
	free(region);
	region = NULL;
	return 0;
}

/* argv[1], if given: a cmocka test name filter (e.g. "test_torn_*"). */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_event_mode, teardown),
	    cmocka_unit_test_teardown(test_busy_poll, teardown),
	    cmocka_unit_test_teardown(test_torn_event_mode, teardown),
	    cmocka_unit_test_teardown(test_torn_busy_poll, teardown),
	};
	struct tenv e;

	rps_log_set_ident("test_rdma_read", -1);
	tenv_get(&e);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("rdma_read", tests, NULL, NULL);
}
