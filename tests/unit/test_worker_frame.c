/* Worker frames: a DECLARE_ACK's slice geometry (hdr.aux) as worker/frame.c
 * takes it into the key table, on an offline worker (no network): compact
 * and chunked slices, an older server's aux 0, and malformed geometries
 * refused with -EPROTO. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/worker.h>

#include "src/keymap.h"
#include "src/log.h"
#include "src/store.h"
#include "worker/worker_int.h"

#define SERVER_CB 4096u /* the server's (largest) chunk */

static struct rps_worker *w;

static int setup(void **state)
{
	struct rps_keymap km;

	(void)state;
	assert_int_equal(rps_keymap_init(&km, RPS_KEYMAP_HASH, 1, 1, 0, 1u << 20), 0);
	assert_int_equal(rps_worker_create_offline(&km, &w), 0);
	w->servers[0].chunk_bytes = SERVER_CB;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rps_worker_destroy(w);
	w = NULL;
	return 0;
}

/* One DECLARE of nelems answered with (offset, aux); its status. */
static int ack(uint64_t nelems, uint64_t offset, uint32_t aux, struct rps_wslice *sl)
{
	struct rps_wconn *wc = &w->servers[0].conns[0];
	struct rps_declare_ack a = {
	    .key = 5, .slice = 0, .shard = 0, .offset = offset, .nelems = nelems};
	struct rps_tr_event ev;
	struct rps_piece *p;
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);

	assert_non_null(req);
	pthread_mutex_lock(&w->core.lock);
	p = rps_piece_alloc_locked(&w->core, req, RPS_PK_DECLARE, RPS_PW_RESP);
	assert_non_null(p);
	p->conn = wc;
	p->server = 0;
	p->shard = 0;
	memset(&p->u.decl.fixed, 0, sizeof(p->u.decl.fixed));
	p->u.decl.fixed.key = 5;
	p->u.decl.fixed.nelems = nelems;
	p->u.decl.out = sl;
	memset(&ev, 0, sizeof(ev));
	ev.type = RPS_TR_EV_RECV;
	rps_proto_hdr_init(&ev.hdr, RPS_OP_DECLARE_ACK, sizeof(a), rps_piece_reqid(p));
	ev.hdr.aux = aux;
	ev.fixed = &a;
	rps_wrecv_locked(w, wc, &ev);
	rps_wcore_unlock(&w->core);
	rps_wreq_seal(req);
	return rps_wreq_wait_internal(req, 1000);
}

static void test_compact(void **state)
{
	struct rps_wslice sl;

	(void)state;
	/* an 8-byte tensor */
	memset(&sl, 0, sizeof(sl));
	assert_int_equal(ack(2, 1000, RPS_DECLARE_ACK_COMPACT | 8, &sl), 0);
	assert_int_equal(sl.store_off, 1000);
	assert_int_equal(sl.chunk_bytes, 8);
	assert_int_equal(sl.line, RPS_STORE_WORD);
	assert_int_equal(sl.last_bytes, 8);
	/* an odd count, and the largest compact chunk */
	assert_int_equal(ack(3, 2000, RPS_DECLARE_ACK_COMPACT | 16, &sl), 0);
	assert_true(sl.chunk_bytes == 16 && sl.line == 8 && sl.last_bytes == 16);
	assert_int_equal(ack(SERVER_CB / 4, 3000, RPS_DECLARE_ACK_COMPACT | SERVER_CB, &sl), 0);
	assert_true(sl.chunk_bytes == SERVER_CB && sl.line == 8 && sl.last_bytes == SERVER_CB);
}

static void test_chunked(void **state)
{
	struct rps_wslice sl;

	(void)state;
	memset(&sl, 0, sizeof(sl));
	/* 2 chunks, the last with 1 float in 64 bytes */
	assert_int_equal(ack(SERVER_CB / 4 + 1, 4096 + 64, SERVER_CB, &sl), 0);
	assert_int_equal(sl.store_off, 4096 + 64);
	assert_true(sl.chunk_bytes == SERVER_CB && sl.line == RPS_STORE_LINE);
	assert_int_equal(sl.last_bytes, 64);
	/* an older server: aux 0 = its chunk size, 64-byte lines, whole chunks */
	assert_int_equal(ack(3, 8192 + 64, 0, &sl), 0);
	assert_true(sl.chunk_bytes == SERVER_CB && sl.line == RPS_STORE_LINE);
	assert_int_equal(sl.last_bytes, SERVER_CB);
	assert_int_equal(sl.store_off, 8192 + 64);
}

static void test_refused(void **state)
{
	struct rps_wslice sl, before;

	(void)state;
	memset(&sl, 0, sizeof(sl));
	sl.store_off = 77;
	before = sl;
	rps_log_level_cur = -1; /* the expected errors */
	/* larger than the server's chunk */
	assert_int_equal(ack(10, 1000, RPS_DECLARE_ACK_COMPACT | (SERVER_CB + 8), &sl), -EPROTO);
	assert_int_equal(ack(5000, 1000, 2 * SERVER_CB, &sl), -EPROTO);
	/* 64-byte lines need a multiple of 64; words a multiple of 8 */
	assert_int_equal(ack(5000, 1000, 1000, &sl), -EPROTO);
	assert_int_equal(ack(3, 1000, RPS_DECLARE_ACK_COMPACT | 12, &sl), -EPROTO);
	/* a compact chunk too small for the slice, and no bytes at all */
	assert_int_equal(ack(5, 1000, RPS_DECLARE_ACK_COMPACT | 16, &sl), -EPROTO);
	assert_int_equal(ack(1, 1000, RPS_DECLARE_ACK_COMPACT, &sl), -EPROTO);
	rps_log_level_cur = RPS_LOG_INFO;
	/* nothing of a refused ack was taken */
	assert_memory_equal(&sl, &before, sizeof(sl));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_compact),
	    cmocka_unit_test(test_chunked),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
