/* Worker planning: frame splitting sizes and RDMA read plans. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/store.h"
#include "src/util.h"
#include "worker/plan.h"

static void test_frame_elems(void **state)
{
	(void)state;
	/* PUSH: 48-byte fixed part, 4 bytes an element */
	assert_int_equal(rps_wplan_push_elems(48 + 4 * 100, 0), 100);
	assert_int_equal(rps_wplan_push_elems(48 + 4 * 100 + 3, 0), 100);
	assert_int_equal(rps_wplan_push_elems(48 + 3, 0), 0);
	assert_int_equal(rps_wplan_push_elems(48, 0), 0);
	assert_int_equal(rps_wplan_push_elems(10, 0), 0);
	/* PULL_RESP: 32-byte fixed part */
	assert_int_equal(rps_wplan_pull_elems(32 + 4 * 7, 0), 7);
	/* a frame limit (RDMA receive buffer) counts the 24-byte header too */
	assert_int_equal(rps_wplan_push_elems(1 << 20, 4096), (4096 - 24 - 48) / 4);
	assert_int_equal(rps_wplan_push_elems(100, 4096), (100 - 48) / 4);
	assert_int_equal(rps_wplan_pull_elems(64 << 20, 8192), (8192 - 24 - 32) / 4);
	assert_int_equal(rps_wplan_push_elems(1 << 20, 24), 0);
	/* count is a u32 on the wire */
	assert_int_equal(rps_wplan_push_elems(UINT64_MAX, 0), UINT32_MAX);
}

static void test_frames_of_slice(void **state)
{
	uint64_t off, cnt, sum = 0;

	(void)state;
	assert_int_equal(rps_wplan_nframes(0, 10), 1);
	assert_int_equal(rps_wplan_nframes(1, 10), 1);
	assert_int_equal(rps_wplan_nframes(10, 10), 1);
	assert_int_equal(rps_wplan_nframes(11, 10), 2);
	assert_int_equal(rps_wplan_nframes(300000, 262132), 2);
	/* frames tile the slice exactly, the last one short */
	for (uint64_t i = 0; i < rps_wplan_nframes(1003, 100); i++) {
		rps_wplan_frame(1003, 100, i, &off, &cnt);
		assert_int_equal(off, sum);
		assert_true(cnt > 0 && cnt <= 100);
		sum += cnt;
	}
	assert_int_equal(sum, 1003);
	rps_wplan_frame(1003, 100, 10, &off, &cnt);
	assert_int_equal(off, 1000);
	assert_int_equal(cnt, 3);
}

#define CB     256u /* chunk bytes in these tests: 64 elements */
#define EPC    (CB / 4)
#define STRIDE (CB + 128u)

/* one object with gaps, so no two buffers are adjacent by accident (the
 * planner merges sges that are contiguous in memory) */
static struct {
	float dst[EPC * 80];
	char gap1[64];
	char lines[RPS_RPLAN_LINES * 64];
	char gap2[64];
	char junk[CB];
} mem;
#define dst   mem.dst
#define lines mem.lines
#define junk  mem.junk

/* Reconstruct what a plan reads: walk the sges against the remote layout
 * and check every remote byte lands where it must. */
static void check_plan(const struct rps_rplan *p, uint64_t lo, int nch,
		       const struct rps_tr_sge *sge, int nsge, uint64_t raddr)
{
	uint64_t r = raddr - p->raddr0; /* remote offset within the slice's chunks */
	uint64_t epc = p->chunk_bytes / 4;
	int i = 0;
	uint32_t used_in_sge = 0;

	assert_int_equal(r, lo * rps_rplan_stride(p));
	for (int c = 0; c < nch; c++) {
		uint64_t chunk = lo + (uint64_t)c;
		uint64_t e0 = chunk * epc;
		uint64_t used = p->nelems - e0 < epc ? p->nelems - e0 : epc;
		uint32_t len = rps_rplan_chunk_len(p, chunk);
		struct {
			char *where;
			uint32_t len;
		} want[4] = {
		    {lines + rps_rplan_lines_off(p, (uint64_t)c), p->line},
		    {(char *)(dst + e0), (uint32_t)(used * 4)},
		    {junk, (uint32_t)(len - used * 4)},
		    {lines + rps_rplan_lines_off(p, (uint64_t)c) + p->line, p->line},
		};

		for (int k = 0; k < 4; k++) {
			if (!want[k].len)
				continue;
			assert_true(i < nsge);
			/* the piece must continue sge i at its current position */
			assert_ptr_equal((char *)sge[i].addr + used_in_sge, want[k].where);
			assert_true(sge[i].len - used_in_sge >= want[k].len);
			used_in_sge += want[k].len;
			if (used_in_sge == sge[i].len) {
				i++;
				used_in_sge = 0;
			}
		}
	}
	assert_int_equal(i, nsge);
	assert_int_equal(used_in_sge, 0);
}

static uint64_t sge_bytes(const struct rps_tr_sge *sge, int nsge)
{
	uint64_t b = 0;

	for (int i = 0; i < nsge; i++)
		b += sge[i].len;
	return b;
}

/* An older server (DECLARE_ACK aux 0): 64-byte lines, every chunk whole. */
static void test_read_plan_whole_chunks(void **state)
{
	struct rps_rplan p = {.raddr0 = 0x10000, .chunk_bytes = CB, .line = 64, .nelems = EPC * 10};
	struct rps_tr_sge sge[200];
	uint64_t raddr;
	int nsge, n;

	(void)state;
	assert_int_equal(rps_rplan_nchunks(&p), 10);
	assert_int_equal(rps_rplan_span(&p), 10 * STRIDE);
	/* plenty of sges: all 10 chunks in one READ; end line i + begin line
	 * i + 1 share an sge, so 1 + 2 * 10 sges */
	n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 200, &nsge, &raddr);
	assert_int_equal(n, 10);
	assert_int_equal(nsge, 21);
	assert_int_equal(raddr, 0x10000);
	assert_int_equal(sge_bytes(sge, nsge), 10 * STRIDE);
	check_plan(&p, 0, n, sge, nsge, raddr);
	/* 30 sges: (30 - 1) / 2 = 14 chunks would fit; only 10 exist */
	n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 30, &nsge, &raddr);
	assert_int_equal(n, 10);
	/* 7 sges: 3 chunks (1 + 2 * 3) */
	n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 7, &nsge, &raddr);
	assert_int_equal(n, 3);
	assert_int_equal(nsge, 7);
	check_plan(&p, 0, n, sge, nsge, raddr);
	/* from chunk 8, limited by max_chunks */
	n = rps_rplan_build(&p, 8, 1, dst, lines, junk, sge, 200, &nsge, &raddr);
	assert_int_equal(n, 1);
	assert_int_equal(nsge, 3);
	assert_int_equal(raddr, 0x10000 + 8 * STRIDE);
	check_plan(&p, 8, n, sge, nsge, raddr);
	/* 2 sges cannot hold one chunk (3 needed) */
	assert_int_equal(rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 2, &nsge, &raddr),
			 -EINVAL);
	/* past the end */
	assert_int_equal(rps_rplan_build(&p, 10, 64, dst, lines, junk, sge, 200, &nsge, &raddr),
			 -EINVAL);
	/* malformed plans */
	p.line = 32;
	assert_int_equal(rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 200, &nsge, &raddr),
			 -EINVAL);
	p.line = 64;
	p.last_bytes = CB + 64;
	assert_int_equal(rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 200, &nsge, &raddr),
			 -EINVAL);
	p.last_bytes = 0;
	p.chunk_bytes = 0;
	assert_int_equal(rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 200, &nsge, &raddr),
			 -EINVAL);
}

/* A partial last chunk: whole (older server) and short (rounded up to 64). */
static void test_read_plan_partial_last(void **state)
{
	struct rps_rplan p = {
	    .raddr0 = 0x2000, .chunk_bytes = CB, .line = 64, .nelems = EPC * 3 + 5};
	struct rps_tr_sge sge[200];
	uint64_t raddr;
	int nsge, n;

	(void)state;
	assert_int_equal(rps_rplan_nchunks(&p), 4);
	n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 200, &nsge, &raddr);
	assert_int_equal(n, 4);
	/* 1 + 2 * 4 + the junk tail */
	assert_int_equal(nsge, 10);
	check_plan(&p, 0, n, sge, nsge, raddr);
	/* last_bytes 0 (aux 0): the tail of a whole chunk goes to junk */
	assert_ptr_equal(sge[8].addr, junk);
	assert_int_equal(sge[8].len, (EPC - 5) * 4);
	assert_int_equal(sge_bytes(sge, nsge), 4 * STRIDE);

	/* this server's layout: the last chunk holds 20 bytes rounded up to 64 */
	p.last_bytes = rps_store_geom_last(CB, 64, p.nelems);
	assert_int_equal(p.last_bytes, 64);
	assert_int_equal(rps_rplan_span(&p), 3 * STRIDE + 128 + 64);
	n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 200, &nsge, &raddr);
	assert_int_equal(n, 4);
	assert_int_equal(nsge, 10);
	check_plan(&p, 0, n, sge, nsge, raddr);
	assert_ptr_equal(sge[8].addr, junk);
	assert_int_equal(sge[8].len, 64 - 5 * 4); /* only the padding */
	assert_int_equal(sge_bytes(sge, nsge), rps_rplan_span(&p));
	/* with 4 sges only the partial chunk alone fits (begin, data, junk, end) */
	n = rps_rplan_build(&p, 3, 64, dst, lines, junk, sge, 4, &nsge, &raddr);
	assert_int_equal(n, 1);
	assert_int_equal(nsge, 4);
	assert_int_equal(raddr, 0x2000 + 3 * STRIDE);
	assert_int_equal(sge_bytes(sge, nsge), 128 + 64);
	check_plan(&p, 3, n, sge, nsge, raddr);
	/* 9 sges from 0: 3 whole chunks take 7; the partial one needs 3 more */
	n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 9, &nsge, &raddr);
	assert_int_equal(n, 3);
	assert_int_equal(nsge, 7);
	check_plan(&p, 0, n, sge, nsge, raddr);
	/* a last chunk exactly 64-aligned needs no junk */
	p.nelems = EPC * 3 + 16;
	p.last_bytes = rps_store_geom_last(CB, 64, p.nelems);
	n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 200, &nsge, &raddr);
	assert_int_equal(n, 4);
	assert_int_equal(nsge, 9);
	check_plan(&p, 0, n, sge, nsge, raddr);
	assert_int_equal(sge_bytes(sge, nsge), 3 * STRIDE + 128 + 64);
	/* a last chunk shorter than its elements is refused */
	p.nelems = EPC * 3 + 17;
	assert_int_equal(rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 200, &nsge, &raddr),
			 -EINVAL);
}

/* Compact slices: one chunk, 8-byte version words. */
static void test_read_plan_compact(void **state)
{
	struct rps_tr_sge sge[8];
	uint64_t raddr;
	int nsge, n;

	(void)state;
	/* an 8-byte tensor: begin word, 8 data bytes, end word; 24 bytes */
	{
		struct rps_rplan p = {
		    .raddr0 = 0x3008, .chunk_bytes = 8, .line = 8, .last_bytes = 8, .nelems = 2};

		assert_int_equal(rps_rplan_nchunks(&p), 1);
		assert_int_equal(rps_rplan_span(&p), 24);
		n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 8, &nsge, &raddr);
		assert_int_equal(n, 1);
		assert_int_equal(nsge, 3);
		assert_int_equal(raddr, 0x3008);
		assert_ptr_equal(sge[0].addr, lines);
		assert_int_equal(sge[0].len, 8);
		assert_ptr_equal(sge[1].addr, dst);
		assert_int_equal(sge[1].len, 8);
		assert_ptr_equal(sge[2].addr, lines + 8);
		assert_int_equal(sge[2].len, 8);
		check_plan(&p, 0, n, sge, nsge, raddr);
	}
	/* an odd count: 3 floats in 16 bytes, 4 of them padding -> junk */
	{
		struct rps_rplan p = {
		    .raddr0 = 0x4000, .chunk_bytes = 16, .line = 8, .last_bytes = 16, .nelems = 3};

		n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 8, &nsge, &raddr);
		assert_int_equal(n, 1);
		assert_int_equal(nsge, 4);
		assert_int_equal(sge[1].len, 12);
		assert_ptr_equal(sge[2].addr, junk);
		assert_int_equal(sge[2].len, 4);
		assert_int_equal(sge_bytes(sge, nsge), 8 + 16 + 8);
		check_plan(&p, 0, n, sge, nsge, raddr);
		/* it needs RPS_RPLAN_MIN_SGE */
		assert_int_equal(
		    rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 3, &nsge, &raddr), -EINVAL);
		assert_int_equal(RPS_RPLAN_MIN_SGE, 4);
	}
	/* the largest compact chunk */
	{
		struct rps_rplan p = {.raddr0 = 0x5000,
				      .chunk_bytes = CB,
				      .line = 8,
				      .last_bytes = CB,
				      .nelems = EPC};

		n = rps_rplan_build(&p, 0, 64, dst, lines, junk, sge, 8, &nsge, &raddr);
		assert_int_equal(n, 1);
		assert_int_equal(nsge, 3);
		assert_int_equal(sge_bytes(sge, nsge), CB + 16);
		check_plan(&p, 0, n, sge, nsge, raddr);
	}
}

static void test_read_plan_cap(void **state)
{
	struct rps_rplan p = {.raddr0 = 0, .chunk_bytes = CB, .line = 64, .nelems = EPC * 80};
	struct rps_tr_sge sge[300];
	uint64_t raddr;
	int nsge, n;

	(void)state;
	/* never more than RPS_RPLAN_MAX_CHUNKS chunks in one READ (torn mask) */
	n = rps_rplan_build(&p, 0, 1000, dst, lines, junk, sge, 300, &nsge, &raddr);
	assert_int_equal(n, RPS_RPLAN_MAX_CHUNKS);
	check_plan(&p, 0, n, sge, nsge, raddr);
	/* the last 16 chunks from 64 */
	n = rps_rplan_build(&p, 64, 1000, dst, lines, junk, sge, 300, &nsge, &raddr);
	assert_int_equal(n, 16);
	assert_int_equal(raddr, 64ull * STRIDE);
}

/* ---- plans against a real store: what a READ would bring back ---- */

/* Perform a READ locally: copy the remote bytes at raddr (relative to the
 * store base) into the sges in order. Returns the bytes read. */
static uint64_t fake_read(const struct rps_store *s, uint64_t raddr, const struct rps_tr_sge *sge,
			  int nsge)
{
	const char *src = (const char *)s->base + raddr;
	uint64_t b = 0;

	for (int i = 0; i < nsge; i++) {
		memcpy(sge[i].addr, src + b, sge[i].len);
		b += sge[i].len;
	}
	assert_true(raddr + b <= s->size);
	return b;
}

static void write_values(uint64_t c, float *data, uint64_t elem_off, uint64_t n, void *arg)
{
	struct rps_store *s = ((void **)arg)[0];
	const struct rps_store_slice *sl = ((void **)arg)[1];

	rps_store_write_begin(s, sl, c);
	for (uint64_t i = 0; i < n; i++)
		data[i] = 1000.0f * (float)sl->nelems + (float)(elem_off + i);
	rps_store_write_end(s, sl, c);
}

/* Declare nelems in a store of store_cb, plan as a worker does from the
 * DECLARE_ACK (offset, aux), read it all with at most max_sge sges per READ:
 * exactly the slice's bytes, the right values, nothing torn; then a chunk
 * mid-write is found torn. */
static void plan_store(uint32_t store_cb, uint64_t nelems, int max_sge)
{
	struct rps_store s;
	struct rps_store_slice pad, sl;
	struct rps_rplan p;
	struct rps_tr_sge sge[RPS_RPLAN_MAX_CHUNKS * 2 + 2];
	uint64_t ack_off, bytes = 0, lo = 0, raddr, nch;
	uint32_t aux, lo_min = UINT32_MAX;
	void *arg[2] = {&s, &sl};
	int nsge, n;

	assert_true(nelems <= EPC * 80);
	assert_int_equal(rps_store_init(&s, 0, 1 << 20, store_cb), 0);
	assert_int_equal(rps_store_alloc(&s, 3, &pad), 0); /* not at data_off */
	assert_int_equal(rps_store_alloc(&s, nelems, &sl), 0);
	rps_store_for_runs(&s, &sl, 0, nelems, write_values, arg);
	/* what the DECLARE_ACK says, decoded as worker/frame.c does */
	ack_off = sl.off + sl.line;
	aux = rps_store_slice_aux(&sl);
	memset(&p, 0, sizeof(p));
	p.chunk_bytes = aux & RPS_DECLARE_ACK_BYTES;
	p.line = aux & RPS_DECLARE_ACK_COMPACT ? RPS_STORE_WORD : RPS_STORE_LINE;
	p.last_bytes = rps_store_geom_last(p.chunk_bytes, p.line, nelems);
	p.nelems = nelems;
	p.raddr0 = ack_off - p.line; /* relative to the store base here */
	nch = rps_rplan_nchunks(&p);
	assert_true(nch == sl.nchunks);
	assert_true(rps_rplan_span(&p) == rps_store_slice_span(&sl));
	memset(dst, 0xff, sizeof(dst));
	memset(lines, 0xff, sizeof(lines));
	while (lo < nch) {
		n = rps_rplan_build(&p, lo, 64, dst, lines, junk, sge, max_sge, &nsge, &raddr);
		assert_true(n >= 1);
		check_plan(&p, lo, n, sge, nsge, raddr);
		assert_true(raddr == sl.off + bytes); /* READs tile the slice */
		bytes += fake_read(&s, raddr, sge, nsge);
		assert_int_equal(rps_rplan_torn(lines, (uint64_t)n, p.line), 0);
		/* the versions read are the ones written (one write each: 2) */
		for (int i = 0; i < n; i++) {
			uint64_t b, e;

			memcpy(&b, lines + rps_rplan_lines_off(&p, (uint64_t)i), 8);
			memcpy(&e, lines + rps_rplan_lines_off(&p, (uint64_t)i) + p.line, 8);
			assert_true(b == 2 && e == 2);
		}
		lo += (uint64_t)n;
		lo_min = RPS_MIN(lo_min, (uint32_t)n);
	}
	/* exactly the bytes the slice occupies, and the values */
	assert_true(bytes == rps_store_slice_span(&sl));
	for (uint64_t e = 0; e < nelems; e++)
		assert_true(dst[e] == 1000.0f * (float)nelems + (float)e);
	assert_true(((uint32_t *)dst)[nelems] == 0xffffffffu); /* nothing past the slice */

	/* a chunk mid-write: torn */
	rps_store_write_begin(&s, &sl, nch - 1);
	n = rps_rplan_build(&p, nch - 1, 64, dst, lines, junk, sge, max_sge, &nsge, &raddr);
	assert_int_equal(n, 1);
	fake_read(&s, raddr, sge, nsge);
	assert_int_equal(rps_rplan_torn(lines, 1, p.line), 1);
	rps_store_write_end(&s, &sl, nch - 1);
	fake_read(&s, raddr, sge, nsge);
	assert_int_equal(rps_rplan_torn(lines, 1, p.line), 0);
	rps_store_fini(&s);
}

static void test_read_plan_store(void **state)
{
	(void)state;
	/* compact: 1, 2 (8 bytes), 3 (odd), 63, the largest (64) */
	plan_store(CB, 1, 4);
	plan_store(CB, 2, 4);
	plan_store(CB, 3, 4);
	plan_store(CB, 63, 4);
	plan_store(CB, EPC, 4);
	/* chunked: one more element, a short last chunk, whole chunks */
	plan_store(CB, EPC + 1, 4);
	plan_store(CB, 3 * EPC + 5, 200);
	plan_store(CB, 3 * EPC + 5, 7);
	plan_store(CB, 10 * EPC, 200);
	plan_store(CB, 70 * EPC + 33, 200); /* two READs (64-chunk cap) */
	plan_store(CB, 70 * EPC + 33, 9);
}

/* The one-chunk builder reads what rps_rplan_build reads, leaving the lkeys
 * 0 as it does, for every one-chunk geometry; anything else is left to
 * rps_rplan_build (0). */
static void one_chunk(uint32_t chunk_bytes, uint32_t line, uint32_t last_bytes, uint64_t nelems)
{
	struct rps_rplan p = {.raddr0 = 0x20000,
			      .chunk_bytes = chunk_bytes,
			      .line = line,
			      .last_bytes = last_bytes,
			      .nelems = nelems};
	struct rps_tr_sge sge[RPS_RPLAN_MIN_SGE], full[8];
	uint64_t raddr = 0, raddr2 = 0;
	int n, n2 = 0;

	memset(sge, 0xff, sizeof(sge));
	n = rps_rplan_build1(&p, dst, lines, junk, sge, &raddr);
	assert_true(n >= 3 && n <= RPS_RPLAN_MIN_SGE);
	assert_int_equal(raddr, p.raddr0);
	check_plan(&p, 0, 1, sge, n, raddr);
	assert_int_equal(sge_bytes(sge, n), rps_rplan_span(&p));
	assert_int_equal(rps_rplan_build(&p, 0, 1, dst, lines, junk, full, 8, &n2, &raddr2), 1);
	assert_int_equal(raddr2, raddr);
	assert_int_equal(sge_bytes(full, n2), sge_bytes(sge, n));
	for (int i = 0; i < n; i++)
		assert_int_equal(sge[i].handle, 0);
	/* read whole: the same bytes, the data after the begin line, the end
	 * line after the data as laid out */
	assert_int_equal(rps_rplan_whole1(&p), sge_bytes(sge, n));
	assert_int_equal(rps_rplan_len1(&p), last_bytes ? last_bytes : chunk_bytes);
	assert_ptr_equal(sge[1].addr, dst);
	assert_int_equal(sge[0].len, line);
	assert_int_equal(sge[1].len, nelems * sizeof(float));
}

static void test_read_plan_one_chunk(void **state)
{
	struct rps_rplan p = {.raddr0 = 0x20000, .chunk_bytes = CB, .line = 64, .nelems = EPC + 1};
	struct rps_tr_sge sge[RPS_RPLAN_MIN_SGE];
	uint64_t raddr;

	(void)state;
	/* compact slices as the store lays them out (8-byte words) */
	for (uint64_t n = 1; n <= EPC; n++) {
		uint32_t cb, line;

		rps_store_geom(CB, n, &cb, &line);
		one_chunk(cb, line, rps_store_geom_last(cb, line, n), n);
		one_chunk(cb, line, 0, n);
	}
	/* one chunk of 64-byte lines, with and without padding to junk */
	one_chunk(CB, 64, 0, EPC);
	one_chunk(CB, 64, 0, 5);
	one_chunk(CB, 64, 64, 5);
	/* not for the one-chunk builder: two chunks, no data, a bad line or
	 * chunk size, data past the last chunk */
	assert_int_equal(rps_rplan_build1(&p, dst, lines, junk, sge, &raddr), 0);
	p.nelems = 0;
	assert_int_equal(rps_rplan_build1(&p, dst, lines, junk, sge, &raddr), 0);
	p.nelems = 4;
	p.line = 16;
	assert_int_equal(rps_rplan_build1(&p, dst, lines, junk, sge, &raddr), 0);
	p.line = 64;
	p.chunk_bytes = 12;
	assert_int_equal(rps_rplan_build1(&p, dst, lines, junk, sge, &raddr), 0);
	p.chunk_bytes = CB;
	p.last_bytes = 8;
	assert_int_equal(rps_rplan_build1(&p, dst, lines, junk, sge, &raddr), 0);
	p.last_bytes = 16;
	assert_true(rps_rplan_build1(&p, dst, lines, junk, sge, &raddr) > 0);
	/* what build1 refuses, whole1 refuses */
	assert_int_equal(rps_rplan_whole1(&p), 2 * 64 + 16);
	p.last_bytes = 8;
	assert_int_equal(rps_rplan_whole1(&p), 0);
	p.last_bytes = 16;
	p.nelems = 0;
	assert_int_equal(rps_rplan_whole1(&p), 0);
	p.nelems = EPC + 1;
	p.last_bytes = 0;
	assert_int_equal(rps_rplan_whole1(&p), 0);
}

static void set_lines(uint32_t line, int c, uint64_t b, uint64_t e)
{
	memcpy(lines + (uint64_t)c * 2 * line, &b, 8);
	memcpy(lines + (uint64_t)c * 2 * line + line, &e, 8);
}

static void torn(uint32_t line)
{
	memset(lines, 0, sizeof(lines));
	assert_int_equal(rps_rplan_torn(lines, 64, line), 0);
	set_lines(line, 0, 2, 2); /* clean */
	set_lines(line, 1, 3, 3); /* odd: being written */
	set_lines(line, 2, 4, 2); /* versions differ: torn */
	set_lines(line, 3, 5, 4);
	set_lines(line, 63, 7, 8);
	assert_int_equal(rps_rplan_torn(lines, 4, line), 0xeull);
	assert_int_equal(rps_rplan_torn(lines, 64, line), 0xeull | (1ull << 63));
	assert_int_equal(rps_rplan_torn(lines, 1, line), 0);
}

/* A chunk read whole: begin word at 0, end word after line + len bytes. */
static void torn_whole(uint32_t line, uint32_t len)
{
	uint64_t b = 6, e = 6, odd = 9;

	memset(lines, 0, sizeof(lines));
	memcpy(lines, &b, 8);
	memcpy(lines + line + len, &e, 8);
	/* the data's first word, where build1's end line would be, is not looked at */
	memcpy(lines + line, &odd, 8);
	assert_int_equal(rps_rplan_torn_whole1(lines, line, len), 0);
	e = 8; /* written since the begin word was read */
	memcpy(lines + line + len, &e, 8);
	assert_int_equal(rps_rplan_torn_whole1(lines, line, len), 1);
	b = e = 7; /* odd: being written */
	memcpy(lines, &b, 8);
	memcpy(lines + line + len, &e, 8);
	assert_int_equal(rps_rplan_torn_whole1(lines, line, len), 1);
}

static void test_torn(void **state)
{
	(void)state;
	torn(64);
	torn(8);
	torn_whole(8, 16);
	torn_whole(8, 4096);
	torn_whole(64, 1024);
	/* 8-byte words are looked for where line 8 puts them, not at 64 */
	memset(lines, 0, sizeof(lines));
	set_lines(64, 0, 2, 2);
	set_lines(8, 0, 2, 3);
	assert_int_equal(rps_rplan_torn(lines, 1, 8), 1);
	assert_int_equal(rps_rplan_torn(lines, 1, 64), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_frame_elems),
	    cmocka_unit_test(test_frames_of_slice),
	    cmocka_unit_test(test_read_plan_whole_chunks),
	    cmocka_unit_test(test_read_plan_partial_last),
	    cmocka_unit_test(test_read_plan_compact),
	    cmocka_unit_test(test_read_plan_store),
	    cmocka_unit_test(test_read_plan_cap),
	    cmocka_unit_test(test_read_plan_one_chunk),
	    cmocka_unit_test(test_torn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
