/* src/npz.c: .npz archives of float32 tensors, written and read with libzip,
 * checked against NumPy itself (Debian's /usr/bin/python3 with python3-numpy). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/alloc.h"
#include "src/npz.h"

#define PY "/usr/bin/python3"

static char dir[] = "/tmp/rps-npz-XXXXXX";

static int setup(void **st)
{
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **st)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void path_of(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", dir, name);
}

/* Two arrays whose values are exact in float32: a 3x4 matrix and a vector. */
static void make_model(struct rps_npz_entry e[2], float *w, float *b)
{
	memset(e, 0, 2 * sizeof(*e));
	for (int i = 0; i < 12; i++)
		w[i] = (float)i * 0.25f - 1.0f;
	for (int i = 0; i < 4; i++)
		b[i] = (float)(i * i) + 0.5f;
	strcpy(e[0].name, "fc1.weight");
	e[0].ndim = 2;
	e[0].shape[0] = 3;
	e[0].shape[1] = 4;
	e[0].nelems = 12;
	e[0].data = w;
	strcpy(e[1].name, "fc1.bias");
	e[1].ndim = 1;
	e[1].shape[0] = 4;
	e[1].nelems = 4;
	e[1].data = b;
}

static void test_round_trip(void **st)
{
	struct rps_npz_entry in[2], *out = NULL;
	float w[12], b[4];
	char p[256];
	size_t n = 0;

	make_model(in, w, b);
	path_of(p, sizeof(p), "rt.npz");
	assert_int_equal(rps_npz_write(p, in, 2), 0);
	assert_int_equal(rps_npz_read(p, &out, &n), 0);
	assert_int_equal(n, 2);
	for (int k = 0; k < 2; k++) {
		const struct rps_npz_entry *o = rps_npz_find(out, n, in[k].name);

		assert_non_null(o);
		assert_int_equal(o->ndim, in[k].ndim);
		assert_int_equal(o->nelems, in[k].nelems);
		assert_memory_equal(o->shape, in[k].shape, in[k].ndim * sizeof(uint64_t));
		assert_memory_equal(o->data, in[k].data, in[k].nelems * sizeof(float));
	}
	assert_null(rps_npz_find(out, n, "fc2.weight"));
	rps_npz_free(out, n);
}

/* NumPy reads what we write, bit for bit; we read what NumPy writes
 * (np.savez_compressed: deflated members). */
static void test_numpy_both_ways(void **st)
{
	struct rps_npz_entry in[2], *out = NULL;
	float w[12], b[4];
	char p[256], q[256], cmd[1024];
	size_t n = 0;

	make_model(in, w, b);
	path_of(p, sizeof(p), "ours.npz");
	path_of(q, sizeof(q), "theirs.npz");
	assert_int_equal(rps_npz_write(p, in, 2), 0);
	snprintf(cmd, sizeof(cmd),
		 PY " -c \"import numpy as np, sys\n"
		 "z = np.load('%s')\n"
		 "w = z['fc1.weight']; b = z['fc1.bias']\n"
		 "assert w.dtype == np.float32 and w.shape == (3, 4), (w.dtype, w.shape)\n"
		 "assert (w.ravel() == np.arange(12, dtype=np.float32) * 0.25 - 1).all()\n"
		 "assert b.shape == (4,) and (b == np.arange(4, dtype=np.float32) ** 2 + 0.5).all()\n"
		 "np.savez_compressed('%s', emb=(np.arange(6, dtype=np.float32) / 8).reshape(2, 3),"
		 " s=np.float32(7))\n\"",
		 p, q);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(rps_npz_read(q, &out, &n), 0);
	assert_int_equal(n, 2);
	{
		const struct rps_npz_entry *e = rps_npz_find(out, n, "emb");
		const struct rps_npz_entry *s = rps_npz_find(out, n, "s");

		assert_non_null(e);
		assert_non_null(s);
		assert_int_equal(e->ndim, 2);
		assert_int_equal(e->shape[0], 2);
		assert_int_equal(e->shape[1], 3);
		for (int i = 0; i < 6; i++)
			assert_true(e->data[i] == (float)i / 8);
		assert_int_equal(s->ndim, 0);
		assert_int_equal(s->nelems, 1);
		assert_true(s->data[0] == 7.0f);
	}
	rps_npz_free(out, n);
}

/* What a user may hand us by mistake: refused with -EINVAL, nothing returned. */
static void test_refused(void **st)
{
	static const char *const bad[] = {
		"np.zeros(3)",                                               /* float64 */
		"np.asfortranarray(np.zeros((2, 3), dtype=np.float32))",   /* Fortran order */
		"np.zeros(3, dtype=np.int32)",                               /* int32 */
		"np.zeros(3, dtype='>f4')",                                  /* big-endian */
	};
	struct rps_npz_entry *out = (void *)0x1;
	char p[256], cmd[1024];
	size_t n = 77;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		path_of(p, sizeof(p), "bad.npz");
		snprintf(cmd, sizeof(cmd), PY " -c \"import numpy as np; np.savez('%s', a=%s)\"", p,
			 bad[i]);
		assert_int_equal(system(cmd), 0);
		assert_int_equal(rps_npz_read(p, &out, &n), -EINVAL);
		assert_ptr_equal(out, (void *)0x1);
		assert_int_equal(n, 77);
	}
	/* not a zip at all, and a missing file */
	path_of(p, sizeof(p), "garbage.npz");
	{
		FILE *f = fopen(p, "w");

		assert_non_null(f);
		fputs("this is not a zip archive\n", f);
		fclose(f);
	}
	assert_int_equal(rps_npz_read(p, &out, &n), -EINVAL);
	path_of(p, sizeof(p), "missing.npz");
	assert_int_equal(rps_npz_read(p, &out, &n), -ENOENT);
	assert_ptr_equal(out, (void *)0x1);
}

/* A truncated or lying .npy image: every prefix of a good one is refused. */
static void test_npy_truncated(void **st)
{
	static const char hdr[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
	uint8_t img[128];
	size_t hl = sizeof(hdr) - 1, len;
	float v[2] = {1.5f, -2.0f};
	struct rps_npz_entry e;

	memcpy(img, "\x93NUMPY\x01\x00", 8);
	img[8] = (uint8_t)(hl + 1);
	img[9] = 0;
	memcpy(img + 10, hdr, hl);
	img[10 + hl] = '\n';
	memcpy(img + 11 + hl, v, sizeof(v));
	len = 11 + hl + sizeof(v);
	memset(&e, 0, sizeof(e));
	assert_int_equal(rps_npy_parse(img, len, &e), 0);
	assert_int_equal(e.nelems, 2);
	assert_true(e.data[0] == 1.5f && e.data[1] == -2.0f);
	rps_free(e.data);
	for (size_t cut = 0; cut < len; cut++) {
		struct rps_npz_entry t;

		memset(&t, 0, sizeof(t));
		assert_int_equal(rps_npy_parse(img, cut, &t), -EINVAL);
		assert_null(t.data);
	}
	/* a shape that claims more data than there is */
	img[10 + (strchr(hdr, '(') - hdr) + 1] = '9'; /* (9,) */
	{
		struct rps_npz_entry t;

		memset(&t, 0, sizeof(t));
		assert_int_equal(rps_npy_parse(img, len, &t), -EINVAL);
	}
}

static void test_write_refuses(void **st)
{
	struct rps_npz_entry in[2];
	float w[12], b[4];
	char p[256];

	make_model(in, w, b);
	path_of(p, sizeof(p), "dup.npz");
	strcpy(in[1].name, in[0].name);
	assert_int_equal(rps_npz_write(p, in, 2), -EINVAL);
	assert_int_equal(access(p, F_OK), -1); /* nothing left behind */
	make_model(in, w, b);
	in[0].nelems = 11; /* disagrees with its shape */
	assert_int_equal(rps_npz_write(p, in, 2), -EINVAL);
	make_model(in, w, b);
	strcpy(in[0].name, "a/b");
	assert_int_equal(rps_npz_write(p, in, 2), -EINVAL);
	assert_int_equal(access(p, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_numpy_both_ways),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_npy_truncated),
		cmocka_unit_test(test_write_refuses),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
