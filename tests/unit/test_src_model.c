/* The public model files (include/rdmaps/model.h, src/model_api.c): keys to
 * and from .npz, checked whole before the caller's buffer changes, with
 * NumPy (Debian's /usr/bin/python3) writing the files a user would. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdmaps/model.h>

#include "src/log.h"

#define PY "/usr/bin/python3"

static char dir[] = "/tmp/rps-model-XXXXXX";

static const rps_key_t keys[3] = {7, 9, 12345678901ull};
static const size_t lens[3] = {12, 1, 5};
#define TOTAL 18

static int setup(void **st)
{
	(void)st;
	assert_non_null(mkdtemp(dir));
	rps_log_set_level(RPS_LOG_ERROR);
	return 0;
}

static int teardown(void **st)
{
	char cmd[128];

	(void)st;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void path_of(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", dir, name);
}

static void values(float *v)
{
	for (int i = 0; i < TOTAL; i++)
		v[i] = (float)i * 0.5f - 3.0f;
}

/* stderr into a file around one call, to read what it logged */
static int saved_fd = -1;

static void capture_begin(void)
{
	char p[256];
	int fd;

	path_of(p, sizeof(p), "stderr.txt");
	fflush(stderr);
	saved_fd = dup(2);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved_fd >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
}

static void capture_end(char *buf, size_t cap)
{
	char p[256];
	FILE *f;
	size_t n;

	fflush(stderr);
	dup2(saved_fd, 2);
	close(saved_fd);
	path_of(p, sizeof(p), "stderr.txt");
	f = fopen(p, "r");
	assert_non_null(f);
	n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void run_py(const char *code)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), PY " -c \"import numpy as np\nd = '%s'\n%s\"", dir, code);
	assert_int_equal(system(cmd), 0);
}

/* Saved: NumPy reads 1-D float32 arrays named by the keys, exact. Loaded back:
 * the same bits. */
static void test_round_trip(void **st)
{
	float v[TOTAL], back[TOTAL];
	char p[256];

	(void)st;
	values(v);
	path_of(p, sizeof(p), "rt.npz");
	assert_int_equal(rps_model_save(p, keys, lens, 3, v), 0);
	run_py("m = np.load(d + '/rt.npz')\n"
	       "assert sorted(m.files) == ['12345678901', '7', '9'], m.files\n"
	       "v = np.arange(18, dtype=np.float32) * np.float32(0.5) - np.float32(3)\n"
	       "assert m['7'].dtype == np.float32 and m['7'].shape == (12,)\n"
	       "assert (m['7'] == v[:12]).all() and (m['9'] == v[12:13]).all()\n"
	       "assert (m['12345678901'] == v[13:]).all()\n");
	memset(back, 0, sizeof(back));
	assert_int_equal(rps_model_load(p, keys, lens, 3, back), 0);
	assert_memory_equal(back, v, sizeof(v));
}

/* What NumPy writes: any shape of the right size, compressed or not, a 0-d
 * array for a one-element key; the keys in any order. */
static void test_numpy_shapes(void **st)
{
	static const rps_key_t rk[3] = {12345678901ull, 9, 7};
	static const size_t rl[3] = {5, 1, 12};
	float v[TOTAL];
	char p[256];

	(void)st;
	run_py("v = np.arange(18, dtype=np.float32)\n"
	       "np.savez_compressed(d + '/np.npz', **{'7': v[:12].reshape(3, 2, 2),"
	       " '9': np.float32(12), '12345678901': v[13:].reshape(1, 5)})\n");
	path_of(p, sizeof(p), "np.npz");
	assert_int_equal(rps_model_load(p, rk, rl, 3, v), 0);
	for (int i = 0; i < 5; i++)
		assert_true(v[i] == (float)(13 + i));
	assert_true(v[5] == 12.0f);
	for (int i = 0; i < 12; i++)
		assert_true(v[6 + i] == (float)i);
}

struct bad_case {
	const char *file;
	const char *py; /* NULL: written by the test itself */
	int rc;
	const char *msg; /* in what is logged, after "<dir>/<file>: " */
};

/* Every refused file: the error, the message naming file, key and problem,
 * and the caller's buffer untouched. */
static void test_refused(void **st)
{
	static const struct bad_case cases[] = {
	    {"f64.npz",
	     "np.savez(d + '/f64.npz', **{'7': np.zeros(12), '9': np.zeros(1, np.float32),"
	     " '12345678901': np.zeros(5, np.float32)})",
	     -EINVAL, "array '7': not float32"},
	    {"miss.npz",
	     "np.savez(d + '/miss.npz', **{'7': np.zeros(12, np.float32),"
	     " '12345678901': np.zeros(5, np.float32)})",
	     -EINVAL, "key 9 missing"},
	    {"size.npz",
	     "np.savez(d + '/size.npz', **{'7': np.zeros((4, 4), np.float32),"
	     " '9': np.zeros(1, np.float32), '12345678901': np.zeros(5, np.float32)})",
	     -EINVAL, "key 7 has 4x4 = 16 floats, the job declared 12"},
	    {"extra.npz",
	     "np.savez(d + '/extra.npz', **{'7': np.zeros(12, np.float32),"
	     " '9': np.zeros(1, np.float32), '12345678901': np.zeros(5, np.float32),"
	     " '07': np.zeros(1, np.float32)})",
	     -EINVAL, "array '07' is not a key"},
	    {"fortran.npz",
	     "np.savez(d + '/fortran.npz', **{'7': np.asfortranarray(np.zeros((3, 4),"
	     " np.float32)), '9': np.zeros(1, np.float32),"
	     " '12345678901': np.zeros(5, np.float32)})",
	     -EINVAL, "array '7': Fortran order"},
	    {"text.npz", NULL, -EINVAL, "not an .npz (zip) archive"},
	    {"none.npz", NULL, -ENOENT, "No such file"},
	};
	float v[TOTAL], sentinel[TOTAL];
	char p[256], log[4096], want[512];

	(void)st;
	for (int i = 0; i < TOTAL; i++)
		sentinel[i] = -42.0f - (float)i;
	path_of(p, sizeof(p), "text.npz");
	{
		FILE *f = fopen(p, "w");

		assert_non_null(f);
		fputs("not a zip\n", f);
		fclose(f);
	}
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int rc;

		if (cases[c].py)
			run_py(cases[c].py);
		path_of(p, sizeof(p), cases[c].file);
		memcpy(v, sentinel, sizeof(v));
		capture_begin();
		rc = rps_model_load(p, keys, lens, 3, v);
		capture_end(log, sizeof(log));
		assert_int_equal(rc, cases[c].rc);
		assert_memory_equal(v, sentinel, sizeof(v));
		snprintf(want, sizeof(want), "%s: %s", p, cases[c].msg);
		if (!strstr(log, want))
			fail_msg("%s: logged '%s', wanted '%s'", cases[c].file, log, want);
	}
}

/* Half of a good file: refused, buffer untouched. */
static void test_truncated(void **st)
{
	float v[TOTAL], sentinel[TOTAL];
	char p[256], q[256], log[16384];
	uint32_t csize;
	FILE *f;
	long sz;
	char *buf;

	(void)st;
	values(v);
	path_of(p, sizeof(p), "whole.npz");
	path_of(q, sizeof(q), "half.npz");
	assert_int_equal(rps_model_save(p, keys, lens, 3, v), 0);
	f = fopen(p, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	rewind(f);
	buf = malloc((size_t)sz);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)sz, f), (size_t)sz);
	fclose(f);
	for (long cut = 1; cut < sz; cut += sz / 7 + 1) {
		f = fopen(q, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(buf, 1, (size_t)cut, f), (size_t)cut);
		fclose(f);
		for (int i = 0; i < TOTAL; i++)
			sentinel[i] = v[i] = 99.0f;
		assert_int_equal(rps_model_load(q, keys, lens, 3, v), -EINVAL);
		assert_memory_equal(v, sentinel, sizeof(v));
	}
	/* whole, but one bit of key 7's deflated .npy flipped (it starts the
	 * file after a 30-byte zip header and its name "7.npy"; the header says
	 * how long it is), at every offset: refused, or (a bit deflate ignores)
	 * exactly the values. The member's CRC-32 is checked, not only its
	 * length: without that, flips near the end pass with other values. */
	memcpy(&csize, buf + 18, sizeof(csize));
	assert_true(csize > 0 && 35 + (long)csize < sz);
	capture_begin(); /* a message per offset */
	for (long o = 35; o < 35 + (long)csize; o++) {
		int rc;

		buf[o] ^= 0x40;
		f = fopen(q, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(buf, 1, (size_t)sz, f), (size_t)sz);
		fclose(f);
		buf[o] ^= 0x40;
		memcpy(v, sentinel, sizeof(v));
		rc = rps_model_load(q, keys, lens, 3, v);
		if (rc) {
			assert_int_equal(rc, -EINVAL);
			assert_memory_equal(v, sentinel, sizeof(v));
		} else {
			float want[TOTAL];

			values(want);
			assert_memory_equal(v, want, sizeof(v));
		}
	}
	capture_end(log, sizeof(log));
	free(buf);
}

/* The call's own arguments. */
static void test_arguments(void **st)
{
	static const rps_key_t twice[3] = {7, 9, 7};
	float v[TOTAL];
	char p[256];

	(void)st;
	values(v);
	path_of(p, sizeof(p), "args.npz");
	assert_int_equal(rps_model_save(p, keys, lens, 0, v), -EINVAL);
	assert_int_equal(rps_model_save(NULL, keys, lens, 3, v), -EINVAL);
	assert_int_equal(rps_model_save(p, NULL, lens, 3, v), -EINVAL);
	assert_int_equal(rps_model_save(p, keys, lens, 3, NULL), -EINVAL);
	assert_int_equal(rps_model_save(p, twice, lens, 3, v), -EINVAL);
	assert_int_equal(access(p, F_OK), -1); /* nothing written */
	assert_int_equal(rps_model_save(p, keys, lens, 3, v), 0);
	assert_int_equal(rps_model_load(p, twice, lens, 3, v), -EINVAL);
	assert_int_equal(rps_model_load(p, keys, lens, 0, v), -EINVAL);
	assert_int_equal(rps_model_load(p, keys, NULL, 3, v), -EINVAL);
	/* a subset of the file's keys: the others are extra arrays */
	assert_int_equal(rps_model_load(p, keys, lens, 2, v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip), cmocka_unit_test(test_numpy_shapes),
	    cmocka_unit_test(test_refused),    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_arguments),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
