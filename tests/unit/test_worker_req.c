/* Worker requests: fan-out into pieces, completion accounting, first error,
 * id/ctx lookups and staleness, connection failure, callbacks, waits; direct
 * requests (kept per thread and core, their waits). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "src/util.h"
#include "worker/req.h"

static struct rps_wcore core;
static int fini_calls;

static void count_fini(void *arg, struct rps_piece *p)
{
	(void)arg;
	assert_true(p->kind != 0); /* still intact when the hook runs */
	fini_calls++;
}

static int setup(void **state)
{
	(void)state;
	rps_wcore_init(&core);
	core.piece_fini = count_fini;
	fini_calls = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rps_wcore_fini(&core);
	return 0;
}

static struct rps_piece *alloc(struct rps_req *r, uint8_t kind, uint8_t waits)
{
	struct rps_piece *p;

	pthread_mutex_lock(&core.lock);
	p = rps_piece_alloc_locked(&core, r, kind, waits);
	pthread_mutex_unlock(&core.lock);
	assert_non_null(p);
	return p;
}

static void clear(struct rps_piece *p, unsigned mask, int status)
{
	pthread_mutex_lock(&core.lock);
	rps_piece_clear_locked(&core, p, mask, status);
	pthread_mutex_unlock(&core.lock);
}

static int test_done(struct rps_req *r, int *done)
{
	return rps_req_test(r, done);
}

static void test_fanout_completes_after_last_piece(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *p[3];
	int done = -1;

	(void)state;
	assert_non_null(r);
	p[0] = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	p[1] = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	p[2] = alloc(r, RPS_PK_PUSH, RPS_PW_RESP | RPS_PW_SEND);
	assert_int_equal(r->remaining, 4); /* 3 pieces + the guard */
	/* pieces finishing before the request is sealed do not complete it */
	clear(p[0], RPS_PW_RESP, 0);
	clear(p[1], RPS_PW_RESP, 0);
	assert_int_equal(r->done, 0);
	rps_wreq_seal(r);
	assert_int_equal(r->done, 0);
	/* a zero-copy push needs both its ack and its SEND_DONE */
	clear(p[2], RPS_PW_RESP, 0);
	assert_int_equal(r->done, 0);
	assert_int_equal(fini_calls, 2);
	assert_int_equal(test_done(r, &done), 0);
	assert_int_equal(done, 0);
	clear(p[2], RPS_PW_SEND, 0);
	assert_int_equal(fini_calls, 3);
	pthread_mutex_lock(&core.lock);
	assert_int_equal(rps_wcore_pieces_locked(&core), 0);
	assert_int_equal(core.pieces_total, 3);
	pthread_mutex_unlock(&core.lock);
	assert_int_equal(test_done(r, &done), 0);
	assert_int_equal(done, 1);
}

static void test_first_error_wins(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *a = alloc(r, RPS_PK_PUSH, RPS_PW_RESP | RPS_PW_SEND);
	struct rps_piece *b = alloc(r, RPS_PK_PUSH, RPS_PW_RESP);
	struct rps_piece *c = alloc(r, RPS_PK_PUSH, RPS_PW_RESP);

	(void)state;
	rps_wreq_seal(r);
	clear(c, RPS_PW_RESP, 0);
	/* a's error is recorded first but a finishes only with its SEND_DONE */
	clear(a, RPS_PW_RESP, -EIO);
	clear(b, RPS_PW_RESP, -ENOENT);
	clear(a, RPS_PW_SEND, 0);
	assert_int_equal(rps_req_wait(r, 0), -EIO); /* the first error seen */

	r = rps_wreq_new(&core, NULL, NULL);
	a = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	b = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	rps_wreq_seal(r);
	clear(a, RPS_PW_RESP, -EINVAL);
	clear(b, RPS_PW_RESP, -ENOENT);
	assert_int_equal(rps_req_wait(r, 0), -EINVAL);

	/* an error on the request itself (nothing could be sent) */
	r = rps_wreq_new(&core, NULL, NULL);
	pthread_mutex_lock(&core.lock);
	rps_wreq_fail_locked(r, -ENOMEM);
	pthread_mutex_unlock(&core.lock);
	rps_wreq_seal(r);
	assert_int_equal(rps_req_wait(r, 0), -ENOMEM);
}

static void test_empty_request(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	int done = 0;

	(void)state;
	rps_wreq_seal(r);
	assert_int_equal(rps_req_test(r, &done), 0);
	assert_int_equal(done, 1);
}

static void test_ids_and_staleness(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *p = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	uint32_t id = rps_piece_reqid(p);
	uint64_t ctx = rps_piece_ctx(p, 3);
	struct rps_piece *q;

	(void)state;
	assert_true(ctx != 0);
	assert_int_equal(rps_ctx_sub(ctx), 3);
	assert_ptr_equal(rps_piece_by_reqid(&core, id), p);
	assert_ptr_equal(rps_piece_by_ctx(&core, ctx), p);
	assert_null(rps_piece_by_ctx(&core, 0));
	assert_null(rps_piece_by_reqid(&core, id ^ (1u << 30)));
	assert_null(rps_piece_by_reqid(&core, RPS_REQID_SLOT_MASK)); /* no such block */
	clear(p, RPS_PW_RESP, 0);
	/* finished: its ids are stale at once */
	assert_null(rps_piece_by_reqid(&core, id));
	assert_null(rps_piece_by_ctx(&core, ctx));
	/* the slot is reused (LIFO) with a new generation */
	q = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	assert_ptr_equal(q, p);
	assert_true(rps_piece_reqid(q) != id);
	assert_null(rps_piece_by_reqid(&core, id));
	assert_ptr_equal(rps_piece_by_reqid(&core, rps_piece_reqid(q)), q);
	clear(q, RPS_PW_ALL, 0);
	/* clearing a finished piece again is harmless */
	clear(q, RPS_PW_ALL, -EIO);
	rps_wreq_seal(r);
	assert_int_equal(rps_req_wait(r, 0), 0);
}

static void test_pool_grows(void **state)
{
	enum { N = 3000 }; /* three blocks */
	static struct rps_piece *p[N];
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);

	(void)state;
	for (int i = 0; i < N; i++)
		p[i] = alloc(r, RPS_PK_PUSH, RPS_PW_RESP);
	for (int i = 0; i < N; i++) {
		assert_ptr_equal(rps_piece_by_reqid(&core, rps_piece_reqid(p[i])), p[i]);
		for (int j = i + 1; j < i + 3 && j < N; j++)
			assert_true(p[i]->slot != p[j]->slot);
	}
	assert_true(core.nblocks >= 3);
	rps_wreq_seal(r);
	for (int i = 0; i < N; i++)
		clear(p[i], RPS_PW_RESP, 0);
	assert_int_equal(rps_req_wait(r, 0), 0);
	assert_int_equal(core.pieces_inuse, 0);
}

static void test_fail_conn(void **state)
{
	int a_, b_;
	struct rps_wconn *A = (struct rps_wconn *)&a_, *B = (struct rps_wconn *)&b_;
	struct rps_req *r1 = rps_wreq_new(&core, NULL, NULL);
	struct rps_req *r2 = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *p;
	int done = 0;

	(void)state;
	p = alloc(r1, RPS_PK_PUSH, RPS_PW_RESP | RPS_PW_SEND);
	p->conn = A;
	p = alloc(r1, RPS_PK_PULL, RPS_PW_RESP);
	p->conn = B;
	p = alloc(r2, RPS_PK_PULL, RPS_PW_RESP);
	p->conn = A;
	struct rps_piece *onb = p = alloc(r2, RPS_PK_PULL, RPS_PW_RESP);
	p->conn = B;
	rps_wreq_seal(r1);
	rps_wreq_seal(r2);
	pthread_mutex_lock(&core.lock);
	assert_int_equal(rps_wcore_fail_conn_locked(&core, A, -ECONNRESET), 2);
	pthread_mutex_unlock(&core.lock);
	/* r1 still waits for its piece on B */
	assert_int_equal(rps_req_test(r1, &done), 0);
	assert_int_equal(done, 0);
	pthread_mutex_lock(&core.lock);
	assert_int_equal(rps_wcore_fail_conn_locked(&core, B, -EHOSTDOWN), 2);
	pthread_mutex_unlock(&core.lock);
	(void)onb;
	assert_int_equal(rps_req_wait(r1, 0), -ECONNRESET);
	assert_int_equal(rps_req_wait(r2, 0), -ECONNRESET);
	assert_int_equal(core.pieces_inuse, 0);
}

static void test_abort_detaches_parked_pieces(void **state)
{
	int a_, b_;
	struct rps_wconn *A = (struct rps_wconn *)&a_, *B = (struct rps_wconn *)&b_;
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	float dest[4];
	struct rps_piece *pa, *pull_b, *landing_b, *push_b;
	int done = 0;

	(void)state;
	pa = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	pa->conn = A;
	pull_b = alloc(r, RPS_PK_PULL, RPS_PW_RESP); /* parked on a healthy server */
	pull_b->conn = B;
	pull_b->u.pull.dest = dest;
	pull_b->u.pull.receiving = 0;
	landing_b = alloc(r, RPS_PK_PULL, RPS_PW_RESP); /* its data is arriving */
	landing_b->conn = B;
	landing_b->u.pull.dest = dest + 2;
	landing_b->u.pull.receiving = 1;
	push_b = alloc(r, RPS_PK_PUSH, RPS_PW_RESP | RPS_PW_SEND);
	push_b->conn = B;
	rps_wreq_seal(r);

	/* an error of the server's own (a key) does not abort */
	pthread_mutex_lock(&core.lock);
	rps_wcore_abort_scan_locked(&core);
	assert_int_equal(r->aborted, 0);
	/* connection A dies */
	assert_int_equal(rps_wcore_fail_conn_locked(&core, A, -ECONNRESET), 1);
	assert_int_equal(r->aborted, 1);
	assert_int_equal(core.abort_pending, 1);
	rps_wcore_abort_scan_locked(&core);
	/* the parked pull is detached: its answer will be thrown away */
	assert_null(pull_b->req);
	assert_null(pull_b->u.pull.dest);
	assert_int_equal(pull_b->kind, RPS_PK_PULL);
	/* not the one landing, nor the push whose data the transport still has */
	assert_ptr_equal(landing_b->req, r);
	assert_ptr_equal(push_b->req, r);
	pthread_mutex_unlock(&core.lock);
	assert_int_equal(rps_req_test(r, &done), 0);
	assert_int_equal(done, 0);
	/* SEND_DONE: now the push can go too */
	pthread_mutex_lock(&core.lock);
	rps_piece_clear_locked(&core, push_b, RPS_PW_SEND, 0);
	assert_int_equal(rps_piece_detach_locked(&core, push_b), 1);
	pthread_mutex_unlock(&core.lock);
	/* the landing pull completes normally: the request is done, with the error */
	clear(landing_b, RPS_PW_RESP, 0);
	assert_int_equal(rps_req_wait(r, 0), -ECONNRESET);
	/* detached pieces finish later without a request */
	assert_int_equal(core.pieces_inuse, 2);
	clear(pull_b, RPS_PW_RESP, 0);
	clear(push_b, RPS_PW_RESP, 0);
	assert_int_equal(core.pieces_inuse, 0);
}

static void test_key_error_does_not_abort(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *a = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	struct rps_piece *b = alloc(r, RPS_PK_PULL, RPS_PW_RESP);

	(void)state;
	rps_wreq_seal(r);
	clear(a, RPS_PW_RESP, -ENOENT);
	assert_int_equal(r->aborted, 0);
	assert_int_equal(core.abort_pending, 0);
	clear(b, RPS_PW_RESP, 0);
	assert_int_equal(rps_req_wait(r, 0), -ENOENT);
}

/* An RDMA pull's piece records its connection's loss when the READ_DONE (a
 * flushed READ) or a failed post comes, and finishes later with status 0:
 * the request is aborted all the same, so a piece parked on another server
 * (a BSP clock wait) does not keep it waiting (test_server_killed_during_wait). */
static void test_conn_status_recorded_before_finish_aborts(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *dead = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	struct rps_piece *parked = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	int done = 0;

	(void)state;
	parked->u.pull.receiving = 0;
	rps_wreq_seal(r);
	pthread_mutex_lock(&core.lock);
	dead->status = -ECONNRESET;
	rps_piece_clear_locked(&core, dead, RPS_PW_RESP, 0);
	assert_int_equal(r->aborted, 1);
	assert_int_equal(core.abort_pending, 1);
	rps_wcore_abort_scan_locked(&core);
	assert_null(parked->req);
	pthread_mutex_unlock(&core.lock);
	assert_int_equal(rps_req_test(r, &done), -ECONNRESET);
	assert_int_equal(done, 1);
	clear(parked, RPS_PW_RESP, 0);
	assert_int_equal(core.pieces_inuse, 0);
}

/* RDMA's "retries exceeded" (-ETIMEDOUT) is how a killed peer shows with a
 * short ACK timeout: a connection lost with it aborts like -ECONNRESET. */
static void test_conn_lost_any_status_aborts(void **state)
{
	int a_;
	struct rps_wconn *A = (struct rps_wconn *)&a_;
	struct rps_req *r1 = rps_wreq_new(&core, NULL, NULL);
	struct rps_req *r2 = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *p1 = alloc(r1, RPS_PK_RPULL, RPS_PW_READ);
	struct rps_piece *parked1 = alloc(r1, RPS_PK_PULL, RPS_PW_RESP);
	struct rps_piece *p2 = alloc(r2, RPS_PK_PULL, RPS_PW_RESP);
	struct rps_piece *parked2 = alloc(r2, RPS_PK_PULL, RPS_PW_RESP);
	int done = 0;

	(void)state;
	parked1->u.pull.receiving = 0;
	parked2->u.pull.receiving = 0;
	p2->conn = A;
	rps_wreq_seal(r1);
	rps_wreq_seal(r2);
	pthread_mutex_lock(&core.lock);
	/* a READ completion with retries exceeded: the piece fails, the request aborts */
	rps_piece_conn_lost_locked(&core, p1, -ETIMEDOUT);
	assert_int_equal(p1->status, -ETIMEDOUT);
	assert_int_equal(r1->aborted, 1);
	rps_piece_clear_locked(&core, p1, RPS_PW_READ, 0);
	/* the connection's end with the same reason */
	assert_int_equal(rps_wcore_fail_conn_locked(&core, A, -ETIMEDOUT), 1);
	assert_int_equal(r2->aborted, 1);
	rps_wcore_abort_scan_locked(&core);
	pthread_mutex_unlock(&core.lock);
	assert_int_equal(rps_req_test(r1, &done), -ETIMEDOUT);
	assert_int_equal(done, 1);
	assert_int_equal(rps_req_test(r2, &done), -ETIMEDOUT);
	assert_int_equal(done, 1);
	clear(parked1, RPS_PW_RESP, 0);
	clear(parked2, RPS_PW_RESP, 0);
	assert_int_equal(core.pieces_inuse, 0);
}

static int cb_calls, cb_status;
static void *cb_arg;

static void done_cb(int status, void *arg)
{
	cb_calls++;
	cb_status = status;
	cb_arg = arg;
}

static void test_callback_runs_on_drain(void **state)
{
	int tag;
	struct rps_req *r = rps_wreq_new(&core, done_cb, &tag);
	struct rps_piece *p = alloc(r, RPS_PK_PUSH, RPS_PW_RESP);

	(void)state;
	cb_calls = 0;
	rps_wreq_seal(r);
	clear(p, RPS_PW_RESP, -EACCES);
	assert_int_equal(cb_calls, 0); /* callbacks only run when drained */
	assert_int_equal(rps_wcore_drain(&core), 1);
	assert_int_equal(cb_calls, 1);
	assert_int_equal(cb_status, -EACCES);
	assert_ptr_equal(cb_arg, &tag);
	assert_int_equal(rps_wcore_drain(&core), 0);
	/* a handle API call on a callback request is refused */
	r = rps_wreq_new(&core, done_cb, NULL);
	assert_int_equal(rps_req_wait(r, 0), -EINVAL);
	rps_wreq_seal(r);
	assert_int_equal(rps_wcore_drain(&core), 1);
	assert_int_equal(cb_calls, 2);
	assert_int_equal(cb_status, 0);
}

static int woken;
static void wake_fn(void *arg)
{
	(void)arg;
	woken++;
}

static void test_wake_when_queued_off_progress(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, done_cb, NULL);

	(void)state;
	core.wake = wake_fn;
	woken = 0;
	rps_wreq_seal(r); /* completes here: not the progress thread, so wake */
	assert_int_equal(woken, 1);
	rps_wcore_drain(&core);
	core.wake = NULL;
}

static void test_wait_timeout_and_orphan(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *p = alloc(r, RPS_PK_PULL, RPS_PW_RESP);

	(void)state;
	rps_wreq_seal(r);
	assert_int_equal(rps_req_wait(r, 20), -ETIMEDOUT);
	assert_int_equal(rps_wcore_quiesce(&core, 10), -ETIMEDOUT);
	/* still alive: wait again after it completes */
	clear(p, RPS_PW_RESP, -EPIPE);
	assert_int_equal(rps_req_wait(r, 20), -EPIPE);
	assert_int_equal(rps_wcore_quiesce(&core, 10), 0);

	/* internal waits orphan the request on timeout; it is freed on drain */
	r = rps_wreq_new(&core, NULL, NULL);
	p = alloc(r, RPS_PK_DECLARE, RPS_PW_RESP);
	rps_wreq_seal(r);
	assert_int_equal(rps_wreq_wait_internal(r, 10), -ETIMEDOUT);
	assert_int_equal(r->orphan, 1);
	clear(p, RPS_PW_RESP, 0);
	assert_int_equal(rps_wcore_drain(&core), 1);
}

static struct rps_piece *bg_piece;
static void *complete_later(void *arg)
{
	struct timespec ts = { 0, 30 * 1000000L };

	(void)arg;
	nanosleep(&ts, NULL);
	clear(bg_piece, RPS_PW_RESP, 0);
	return NULL;
}

static void test_wait_forever_wakes(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	pthread_t t;

	(void)state;
	bg_piece = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	rps_wreq_seal(r);
	pthread_create(&t, NULL, complete_later, NULL);
	assert_int_equal(rps_req_wait(r, -1), 0);
	pthread_join(t, NULL);
}

/* ---- callers that reap their own completions (core.spin) ---- */

static int spin_calls, spin_finish_at;
static struct rps_piece *spin_piece;

/* Stands in for the transport's progress(): the spin_finish_at-th call
 * "reaps" the completion of spin_piece (0: never). */
static void spin_fn(void *arg)
{
	(void)arg;
	if (++spin_calls == spin_finish_at && spin_piece)
		clear(spin_piece, RPS_PW_RESP, 0);
}

static void spin_setup(uint64_t spin_ns, int finish_at, struct rps_piece *p)
{
	core.spin = spin_fn;
	core.spin_ns = spin_ns;
	core.wake = wake_fn;
	spin_calls = 0;
	spin_finish_at = finish_at;
	spin_piece = p;
	woken = 0;
}

static void test_wait_reaps_itself(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *p = alloc(r, RPS_PK_PULL, RPS_PW_RESP);

	(void)state;
	rps_wreq_seal(r);
	spin_setup(5000000000ull, 3, p);
	assert_int_equal(rps_req_wait(r, 5000), 0);
	assert_int_equal(spin_calls, 3); /* stopped as soon as it was done */
	assert_int_equal(woken, 0);	 /* nothing left for the progress thread */
	assert_true(atomic_load(&core.spin_last_ns) > 0);
}

static void test_wait_spin_gives_up_and_wakes(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	pthread_t t;

	(void)state;
	bg_piece = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	rps_wreq_seal(r);
	spin_setup(2000000ull, 0, NULL); /* 2 ms, never reaps it */
	pthread_create(&t, NULL, complete_later, NULL);
	assert_int_equal(rps_req_wait(r, -1), 0); /* completed by the other thread */
	pthread_join(t, NULL);
	assert_true(spin_calls > 0);
	assert_int_equal(woken, 1); /* still open when spinning ended: wake */
}

static void test_wait_spin_wakes_for_others(void **state)
{
	struct rps_req *r1 = rps_wreq_new(&core, NULL, NULL);
	struct rps_req *r2 = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *p1 = alloc(r1, RPS_PK_PULL, RPS_PW_RESP);
	struct rps_piece *p2 = alloc(r2, RPS_PK_PUSH, RPS_PW_RESP);

	(void)state;
	rps_wreq_seal(r1);
	rps_wreq_seal(r2);
	spin_setup(5000000000ull, 1, p1);
	assert_int_equal(rps_req_wait(r1, 5000), 0);
	assert_int_equal(woken, 1); /* r2 is still in flight */
	woken = 0;
	spin_piece = NULL;
	assert_int_equal(rps_req_wait(r2, 0), -ETIMEDOUT); /* no spin past the timeout */
	clear(p2, RPS_PW_RESP, 0);
	assert_int_equal(rps_req_wait(r2, 0), 0);
}

static void test_test_reaps_and_seal_kicks(void **state)
{
	struct rps_req *r = rps_wreq_new(&core, NULL, NULL);
	struct rps_piece *p = alloc(r, RPS_PK_PULL, RPS_PW_RESP);
	struct rps_req *cbr;
	int done = 0;

	(void)state;
	rps_wreq_seal(r);
	spin_setup(5000000000ull, 1, p);
	assert_int_equal(rps_req_test(r, &done), 0);
	assert_int_equal(done, 1); /* rps_req_test reaped it on the way */
	assert_int_equal(spin_calls, 1);

	/* a callback request sealed while no caller spun lately: no kick */
	atomic_store(&core.spin_last_ns, 0);
	cbr = rps_wreq_new(&core, done_cb, NULL);
	p = alloc(cbr, RPS_PK_PUSH, RPS_PW_RESP);
	woken = 0;
	rps_wreq_seal(cbr);
	assert_int_equal(woken, 0);
	clear(p, RPS_PW_RESP, 0);
	rps_wcore_drain(&core);
	/* ... and right after a spin: the progress thread is told */
	atomic_store(&core.spin_last_ns, rps_now_ns());
	cbr = rps_wreq_new(&core, done_cb, NULL);
	p = alloc(cbr, RPS_PK_PUSH, RPS_PW_RESP);
	woken = 0;
	rps_wreq_seal(cbr);
	assert_int_equal(woken, 1);
	core.wake = NULL;
	clear(p, RPS_PW_RESP, 0);
	rps_wcore_drain(&core);
}

/* ---- direct requests (their READ is the RDMA test's; here the hooks) ---- */

static int dstep_ret, dstep_status, dfini_calls, darmed;

static int fake_direct_step(void *arg, struct rps_req *req, int arm)
{
	(void)arg;
	darmed += arm;
	if (dstep_ret)
		req->status = dstep_status;
	return dstep_ret;
}

static void fake_direct_fini(void *arg, struct rps_req *req)
{
	(void)arg;
	dfini_calls++;
	req->dr.lines = NULL;
}

static void direct_hooks(struct rps_wcore *c)
{
	c->direct_step = fake_direct_step;
	c->direct_fini_locked = fake_direct_fini;
	dstep_ret = 1;
	dstep_status = 0;
	dfini_calls = 0;
	darmed = 0;
}

static void test_direct_kept(void **state)
{
	static char blk1[64], blk2[64];
	struct rps_req *r1, *r2, *r3;
	int done = 0;

	(void)state;
	direct_hooks(&core);
	r1 = rps_wreq_new_direct(&core);
	assert_non_null(r1);
	assert_true(r1->direct);
	assert_null(r1->dr.lines);
	r1->dr.lines = blk1;
	assert_int_equal(rps_req_wait(r1, 0), 0); /* finished: kept, not freed */
	assert_int_equal(dfini_calls, 0);
	r2 = rps_wreq_new_direct(&core);
	assert_ptr_equal(r2, r1); /* the thread's kept one, with its scratch */
	assert_ptr_equal(r2->dr.lines, blk1);
	assert_true(r2->direct);
	r3 = rps_wreq_new_direct(&core); /* nothing kept: from the pool */
	assert_ptr_not_equal(r3, r2);
	r3->dr.lines = blk2;
	dstep_status = -ECONNRESET;
	assert_int_equal(rps_req_wait(r2, 0), -ECONNRESET); /* the READ's status */
	dstep_status = 0;
	assert_int_equal(rps_req_test(r3, &done), 0);
	assert_int_equal(done, 1);
	/* r3 took the slot; r2 went back to the pool with its scratch */
	assert_int_equal(dfini_calls, 1);
	r1 = rps_wreq_new_direct(&core);
	assert_ptr_equal(r1, r3);
	assert_ptr_equal(r1->dr.lines, blk2);
	assert_int_equal(r1->status, 0);
	assert_int_equal(rps_req_wait(r1, 0), 0);
	/* not in the count destroy waits for */
	assert_int_equal(rps_wcore_quiesce(&core, 0), 0);
}

/* One thread, two workers, pulls alternating: each keeps its own request
 * (none is lost, none goes back and forth through the pool). */
static void test_direct_two_cores(void **state)
{
	static char blk1[64], blk2[64];
	struct rps_wcore c2;
	struct rps_req *k1 = NULL, *k2 = NULL;

	(void)state;
	rps_wcore_init(&c2);
	direct_hooks(&core);
	direct_hooks(&c2);
	for (int i = 0; i < 1000; i++) {
		struct rps_req *a = rps_wreq_new_direct(&core), *b = rps_wreq_new_direct(&c2);

		assert_non_null(a);
		assert_non_null(b);
		if (!i) {
			a->dr.lines = blk1;
			b->dr.lines = blk2;
			k1 = a;
			k2 = b;
		}
		assert_ptr_equal(a, k1);
		assert_ptr_equal(b, k2);
		assert_int_equal(rps_req_wait(a, 0), 0);
		assert_int_equal(rps_req_wait(b, 0), 0);
	}
	assert_int_equal(dfini_calls, 0);
	rps_wcore_fini(&c2);
}

static void test_direct_wait_times_out(void **state)
{
	struct rps_req *r;
	uint64_t s0, n0, s1, n1;

	(void)state;
	direct_hooks(&core);
	r = rps_wreq_new_direct(&core);
	assert_non_null(r);
	dstep_ret = 0; /* its READ never comes back */
	s0 = atomic_load(&core.stat_direct_sleeps);
	n0 = atomic_load(&core.stat_direct_naps);
	assert_int_equal(rps_req_wait(r, 30), -ETIMEDOUT);
	s1 = atomic_load(&core.stat_direct_sleeps);
	n1 = atomic_load(&core.stat_direct_naps);
	assert_true(darmed > 0);   /* it asked for a wake-up before sleeping */
	assert_true(s1 > s0);      /* and slept */
	assert_true(n1 > n0);      /* to the end of its nap: nobody woke it */
	dstep_ret = 1;             /* the request stays the caller's */
	assert_int_equal(rps_req_wait(r, 0), 0);
	/* the progress thread (a callback) cannot wait for one when nobody
	 * else reaps */
	r = rps_wreq_new_direct(&core);
	dstep_ret = 0;
	rps_wcore_be_progress(&core);
	assert_int_equal(rps_req_wait(r, 1000), -EDEADLK);
	dstep_ret = 1;
	assert_int_equal(rps_req_wait(r, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fanout_completes_after_last_piece, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_first_error_wins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ids_and_staleness, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_grows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fail_conn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_detaches_parked_pieces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_error_does_not_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_conn_status_recorded_before_finish_aborts,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_conn_lost_any_status_aborts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_callback_runs_on_drain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wake_when_queued_off_progress, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wait_timeout_and_orphan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_forever_wakes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_reaps_itself, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_spin_gives_up_and_wakes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_spin_wakes_for_others, setup, teardown),
		cmocka_unit_test_setup_teardown(test_test_reaps_and_seal_kicks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_two_cores, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_wait_times_out, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
