/* Shard checkpoints: round trip, atomic naming, retention, and refusal of
 * corrupt / mismatched files with fallback to the next older valid one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdmaps/types.h>

#include "src/alloc.h"
#include "src/ckpt.h"
#include "src/log.h"

static char tdir[256];

static int setup(void **state)
{
	const char *base = getenv("TMPDIR");

	snprintf(tdir, sizeof(tdir), "%s/rps-ckpt-XXXXXX", base && *base ? base : "/tmp");
	assert_non_null(mkdtemp(tdir));
	return 0;
}

static int teardown(void **state)
{
	DIR *d = opendir(tdir);
	struct dirent *de;
	char p[512];

	assert_non_null(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", tdir, de->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(tdir);
	return 0;
}

static int file_count(void)
{
	DIR *d = opendir(tdir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static int exists(uint32_t rank, uint32_t shard, uint64_t clock, int tmp)
{
	char p[RPS_CKPT_PATH_MAX];
	struct stat st;

	assert_int_equal(rps_ckpt_path(tdir, rank, shard, clock, p, sizeof(p)), 0);
	if (tmp)
		strcat(p, ".tmp");
	return stat(p, &st) == 0;
}

/* The value of float i of array a (0 params, 1/2 state) of the slice with key k
 * in a checkpoint written at clock c. */
static float val(uint64_t k, int a, uint64_t i, uint64_t c)
{
	return (float)(k * 1000 + (uint64_t)a * 100000 + i) + (float)c * 0.5f;
}

/* Three slices: sgd (no state), momentum (1 array, written piecewise), adam (2). */
#define N_A 5
#define N_B 3000 /* several appends */
#define N_C 7

static void write_ckpt(uint32_t rank, uint32_t shard, uint32_t nshards, uint64_t c, int keep,
		       struct rps_ckpt_info *info)
{
	struct rps_ckpt_writer *w = NULL;
	float a[N_A], b[2 * N_B], cc[3 * N_C];
	struct rps_ckpt_slice s;

	for (uint64_t i = 0; i < N_A; i++)
		a[i] = val(10, 0, i, c);
	for (int k = 0; k < 2; k++)
		for (uint64_t i = 0; i < N_B; i++)
			b[k * N_B + i] = val(42, k, i, c);
	for (int k = 0; k < 3; k++)
		for (uint64_t i = 0; i < N_C; i++)
			cc[k * N_C + i] = val(7, k, i, c);

	assert_int_equal(rps_ckpt_writer_open(tdir, rank, shard, nshards, c, &w), 0);
	assert_true(exists(rank, shard, c, 1));

	memset(&s, 0, sizeof(s));
	s.key = 10;
	s.kind = RPS_OPT_SGD;
	s.nelems = N_A;
	s.step = 3;
	s.params = a;
	assert_int_equal(rps_ckpt_writer_add(w, &s), 0);

	memset(&s, 0, sizeof(s));
	s.key = 42;
	s.slice = 1;
	s.kind = RPS_OPT_MOMENTUM;
	s.nelems = N_B;
	s.step = 4;
	s.nstate = 1;
	assert_int_equal(rps_ckpt_writer_begin_slice(w, &s), 0);
	for (uint64_t off = 0; off < 2 * N_B; off += 977)
		assert_int_equal(
		    rps_ckpt_writer_append(w, b + off, off + 977 <= 2 * N_B ? 977 : 2 * N_B - off),
		    0);
	assert_int_equal(rps_ckpt_writer_end_slice(w), 0);

	memset(&s, 0, sizeof(s));
	s.key = 7;
	s.kind = RPS_OPT_ADAM;
	s.nelems = N_C;
	s.step = 5;
	s.nstate = 2;
	s.params = cc;
	s.state[0] = cc + N_C;
	s.state[1] = cc + 2 * N_C;
	assert_int_equal(rps_ckpt_writer_add(w, &s), 0);

	assert_int_equal(rps_ckpt_writer_commit(w, keep, info), 0);
	assert_false(exists(rank, shard, c, 1));
	assert_true(exists(rank, shard, c, 0));
}

struct seen {
	uint64_t clock;
	int n;
	int bad;
	int stop_after; /* return -ECANCELED after this many; 0 = never */
};

static int on_slice(const struct rps_ckpt_slice *s, void *arg)
{
	struct seen *sn = arg;
	static const uint64_t keys[] = {10, 42, 7};
	static const uint64_t ns[] = {N_A, N_B, N_C};
	static const uint32_t nst[] = {0, 1, 2};
	static const uint32_t kinds[] = {RPS_OPT_SGD, RPS_OPT_MOMENTUM, RPS_OPT_ADAM};
	int i = sn->n++;

	if (i > 2 || s->key != keys[i] || s->nelems != ns[i] || s->nstate != nst[i] ||
	    s->kind != kinds[i] || s->step != (uint64_t)(3 + i) || s->slice != (i == 1)) {
		sn->bad++;
		return 0;
	}
	for (uint64_t e = 0; e < s->nelems; e++) {
		if (s->params[e] != val(s->key, 0, e, sn->clock))
			sn->bad++;
		for (uint32_t k = 0; k < s->nstate; k++)
			if (s->state[k][e] != val(s->key, (int)k + 1, e, sn->clock))
				sn->bad++;
	}
	if (sn->stop_after && sn->n == sn->stop_after)
		return -ECANCELED;
	return 0;
}

static void test_crc32c(void **state)
{
	static const char v[] = "123456789";
	uint8_t big[1000];

	assert_int_equal(rps_crc32c(0, v, 9), 0xe3069283u);
	assert_int_equal(rps_crc32c(rps_crc32c(0, v, 4), v + 4, 5), 0xe3069283u);
	for (int i = 0; i < 1000; i++)
		big[i] = (uint8_t)(i * 31 + 7);
	/* unaligned starts and split points agree with one call */
	for (size_t cut = 0; cut < 40; cut += 3)
		assert_int_equal(rps_crc32c(rps_crc32c(0, big + 1, cut), big + 1 + cut, 999 - cut),
				 rps_crc32c(0, big + 1, 999));
	assert_int_equal(rps_crc32c(0, NULL, 0), 0);
}

static void test_round_trip(void **state)
{
	struct rps_ckpt_info wi, fi, ri;
	struct seen sn = {.clock = 9};
	uint64_t before = (uint64_t)time(NULL);

	write_ckpt(1, 2, 4, 9, 0, &wi);
	assert_int_equal(file_count(), 1);
	assert_int_equal(wi.nslices, 3);
	assert_int_equal(wi.key_min, 7);
	assert_int_equal(wi.key_max, 42);
	assert_int_equal(wi.clock, 9);
	assert_int_equal(wi.version, RPS_CKPT_VERSION);
	assert_true(wi.created_ns / 1000000000ull + 1 >= before);
	assert_int_equal(wi.payload_bytes, 3 * 40 + 4 * (N_A + 2 * N_B + 3 * N_C));

	assert_int_equal(rps_ckpt_find(tdir, 1, 2, 4, &fi), 0);
	assert_string_equal(fi.path, wi.path);
	assert_int_equal(fi.payload_crc, wi.payload_crc);
	assert_int_equal(fi.created_ns, wi.created_ns);

	assert_int_equal(rps_ckpt_restore(tdir, 1, 2, 4, on_slice, &sn, &ri), 0);
	assert_int_equal(sn.n, 3);
	assert_int_equal(sn.bad, 0);
	assert_int_equal(ri.clock, 9);
	assert_int_equal(ri.shard, 2);
	assert_int_equal(ri.server_rank, 1);
	assert_int_equal(ri.num_shards, 4);

	/* num_shards 0: any */
	assert_int_equal(rps_ckpt_verify(wi.path, 1, 2, 0, NULL), 0);

	/* a callback's error is returned as is */
	sn = (struct seen){.clock = 9, .stop_after = 2};
	assert_int_equal(rps_ckpt_read(wi.path, 1, 2, 4, on_slice, &sn, NULL), -ECANCELED);
	assert_int_equal(sn.n, 2);
}

static void test_empty_and_abort(void **state)
{
	struct rps_ckpt_writer *w;
	struct rps_ckpt_info info;

	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 1, 3, &w), 0);
	rps_ckpt_writer_abort(w);
	assert_int_equal(file_count(), 0);

	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 1, 4, &w), 0);
	assert_int_equal(rps_ckpt_writer_commit(w, 0, NULL), 0);
	assert_int_equal(rps_ckpt_find(tdir, 0, 0, 1, &info), 0);
	assert_int_equal(info.nslices, 0);
	assert_int_equal(info.payload_bytes, 0);
	assert_int_equal(info.clock, 4);
}

static void test_writer_misuse(void **state)
{
	struct rps_ckpt_writer *w;
	struct rps_ckpt_slice s;
	float f[4] = {1, 2, 3, 4};

	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 2, 2, 1, &w), -EINVAL);
	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 0, 1, &w), -EINVAL);
	assert_int_equal(rps_ckpt_writer_open("/nonexistent-rps-dir", 0, 0, 1, 1, &w), -ENOENT);

	/* too many floats: the writer is poisoned, commit fails, no file stays */
	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 1, 1, &w), 0);
	memset(&s, 0, sizeof(s));
	s.key = 1;
	s.nelems = 2;
	assert_int_equal(rps_ckpt_writer_begin_slice(w, &s), 0);
	assert_int_equal(rps_ckpt_writer_append(w, f, 3), -EINVAL);
	assert_int_equal(rps_ckpt_writer_append(w, f, 1), -EINVAL);
	assert_int_equal(rps_ckpt_writer_commit(w, 0, NULL), -EINVAL);
	assert_int_equal(file_count(), 0);

	/* too few */
	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 1, 1, &w), 0);
	s.nstate = 1;
	assert_int_equal(rps_ckpt_writer_begin_slice(w, &s), 0);
	assert_int_equal(rps_ckpt_writer_append(w, f, 3), 0);
	assert_int_equal(rps_ckpt_writer_end_slice(w), -EINVAL);
	rps_ckpt_writer_abort(w);

	/* not ended */
	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 1, 1, &w), 0);
	assert_int_equal(rps_ckpt_writer_begin_slice(w, &s), 0);
	assert_int_equal(rps_ckpt_writer_commit(w, 0, NULL), -EINVAL);

	/* bad slices */
	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 1, 1, &w), 0);
	s.nstate = 3;
	assert_int_equal(rps_ckpt_writer_begin_slice(w, &s), -EINVAL);
	rps_ckpt_writer_abort(w);
	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 1, 1, &w), 0);
	s.nstate = 1;
	s.params = f;
	s.state[0] = NULL;
	assert_int_equal(rps_ckpt_writer_add(w, &s), -EINVAL);
	rps_ckpt_writer_abort(w);
	assert_int_equal(file_count(), 0);
}

static void test_retention(void **state)
{
	struct rps_ckpt_info info;
	struct rps_ckpt_writer *w;

	/* another shard's and another rank's files are not touched */
	write_ckpt(0, 1, 2, 1, 0, NULL);
	write_ckpt(1, 0, 2, 1, 0, NULL);
	/* a leftover temp file of the shard (crashed writer) */
	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 2, 99, &w), 0);
	for (uint64_t c = 1; c <= 5; c++)
		write_ckpt(0, 0, 2, c * 10, 0, NULL);
	assert_false(exists(0, 0, 99, 1));
	assert_true(exists(0, 0, 50, 0));
	assert_true(exists(0, 0, 40, 0));
	assert_false(exists(0, 0, 30, 0));
	assert_false(exists(0, 0, 10, 0));
	assert_true(exists(0, 1, 1, 0));
	assert_true(exists(1, 0, 1, 0));
	assert_int_equal(file_count(), 4);
	rps_ckpt_writer_abort(w); /* its temp file is already gone: no error */

	/* keep 3: older ones beyond that go */
	write_ckpt(0, 0, 2, 60, 3, NULL);
	write_ckpt(0, 0, 2, 70, 3, NULL);
	assert_true(exists(0, 0, 50, 0));
	assert_false(exists(0, 0, 40, 0));
	assert_int_equal(rps_ckpt_prune(tdir, 0, 0, 1), 2);
	assert_true(exists(0, 0, 70, 0));
	assert_false(exists(0, 0, 60, 0));

	/* newest by clock, not by name order (100 < 70 as text) */
	write_ckpt(0, 0, 2, 100, 0, NULL);
	assert_int_equal(rps_ckpt_find(tdir, 0, 0, 2, &info), 0);
	assert_int_equal(info.clock, 100);
	assert_true(exists(0, 0, 70, 0));

	/* newest at or before a clock */
	assert_int_equal(rps_ckpt_find_max(tdir, 0, 0, 2, 99, &info), 0);
	assert_int_equal(info.clock, 70);
	assert_int_equal(rps_ckpt_find_max(tdir, 0, 0, 2, 100, &info), 0);
	assert_int_equal(info.clock, 100);
	assert_int_equal(rps_ckpt_find_max(tdir, 0, 0, 2, 69, &info), -ENOENT);

	/* rewriting the same clock replaces it */
	write_ckpt(0, 0, 2, 100, 0, NULL);
	assert_true(exists(0, 0, 70, 0));
	assert_int_equal(file_count(), 4);
}

static void patch(const char *path, off_t off, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, data, len, off), (ssize_t)len);
	close(fd);
}

static void flip(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, off), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* Write clocks 1, 2, 3 (keep 3); damage clock 3 with fn; restore must refuse it
 * with `rc` and use clock 2. */
static void damage_case(void (*fn)(const char *path), int rc)
{
	struct rps_ckpt_info info;
	struct seen sn = {.clock = 2};
	char p[RPS_CKPT_PATH_MAX];

	for (uint64_t c = 1; c <= 3; c++)
		write_ckpt(0, 1, 2, c, 3, NULL);
	assert_int_equal(rps_ckpt_path(tdir, 0, 1, 3, p, sizeof(p)), 0);
	fn(p);
	assert_int_equal(rps_ckpt_verify(p, 0, 1, 2, NULL), rc);
	assert_int_equal(rps_ckpt_restore(tdir, 0, 1, 2, on_slice, &sn, &info), 0);
	assert_int_equal(info.clock, 2);
	assert_int_equal(sn.n, 3);
	assert_int_equal(sn.bad, 0);
	teardown(NULL);
	setup(NULL);
}

static void dmg_payload(const char *p)
{
	flip(p, 128 + 40 + 8); /* a float of the first slice */
}
static void dmg_magic(const char *p)
{
	patch(p, 0, "XXXX", 4);
}
static void dmg_header(const char *p)
{
	flip(p, offsetof(struct rps_ckpt_hdr, clock));
}
static void dmg_version(const char *p)
{
	uint32_t v = RPS_CKPT_VERSION + 1;

	patch(p, offsetof(struct rps_ckpt_hdr, version), &v, 4);
}
static void dmg_truncate(const char *p)
{
	struct stat st;

	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(truncate(p, st.st_size - 1), 0);
}
static void dmg_short(const char *p)
{
	assert_int_equal(truncate(p, 100), 0);
}
static void dmg_trailing(const char *p)
{
	int fd = open(p, O_WRONLY | O_APPEND);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "z", 1), 1);
	close(fd);
}
static void dmg_record(const char *p)
{
	uint32_t nstate = 3; /* nstate of the first slice record */

	patch(p, 128 + offsetof(struct rps_ckpt_slice_rec, nstate), &nstate, 4);
}
/* a valid file of another shard under this shard's name */
static void dmg_other_shard(const char *p)
{
	char src[RPS_CKPT_PATH_MAX];

	write_ckpt(0, 0, 2, 3, 3, NULL);
	assert_int_equal(rps_ckpt_path(tdir, 0, 0, 3, src, sizeof(src)), 0);
	assert_int_equal(rename(src, p), 0);
}

static void test_refuse_and_fall_back(void **state)
{
	damage_case(dmg_payload, -EBADMSG);
	damage_case(dmg_magic, -EBADMSG);
	damage_case(dmg_header, -EBADMSG);
	damage_case(dmg_version, -EPROTONOSUPPORT);
	damage_case(dmg_truncate, -EBADMSG);
	damage_case(dmg_short, -EBADMSG);
	damage_case(dmg_trailing, -EBADMSG);
	damage_case(dmg_record, -EBADMSG);
	damage_case(dmg_other_shard, -EINVAL);
}

static void test_none_valid(void **state)
{
	struct rps_ckpt_info info;
	struct seen sn = {.clock = 1};
	char p[RPS_CKPT_PATH_MAX];
	int fd;

	/* missing dir, empty dir */
	assert_int_equal(rps_ckpt_find("/nonexistent-rps-dir", 0, 0, 1, &info), -ENOENT);
	assert_int_equal(rps_ckpt_find(tdir, 0, 0, 1, &info), -ENOENT);

	/* num_shards mismatch (the job was restarted with another shard count) */
	write_ckpt(0, 0, 2, 1, 0, NULL);
	assert_int_equal(rps_ckpt_find(tdir, 0, 0, 4, &info), -ENOENT);
	assert_int_equal(rps_ckpt_restore(tdir, 0, 0, 4, on_slice, &sn, &info), -ENOENT);
	assert_int_equal(sn.n, 0);
	assert_int_equal(rps_ckpt_path(tdir, 0, 0, 1, p, sizeof(p)), 0);
	assert_int_equal(rps_ckpt_verify(p, 0, 0, 4, NULL), -EINVAL);
	assert_int_equal(rps_ckpt_verify(p, 1, 0, 2, NULL), -EINVAL);
	assert_int_equal(rps_ckpt_verify(p, 0, 0, 2, NULL), 0);

	/* names that are not checkpoints are ignored */
	snprintf(p, sizeof(p), "%s/server0-shard0-clock07.ckpt", tdir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/server0-shard0-clock8.ckpt.bak", tdir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rps_ckpt_find(tdir, 0, 0, 2, &info), 0);
	assert_int_equal(info.clock, 1);
	assert_int_equal(rps_ckpt_prune(tdir, 0, 0, 1), 0);
	assert_int_equal(file_count(), 3);
}

/* A checkpoint of a clock from the future (a forged clock, issue 20) never
 * pushes the real newest ones out: commit counts only clocks up to its own. */
static void test_future_clock_kept_apart(void **state)
{
	(void)state;
	write_ckpt(0, 0, 2, 10, 2, NULL);
	write_ckpt(0, 0, 2, 20, 2, NULL);
	write_ckpt(0, 0, 2, 2000000000ull, 2, NULL); /* the future one */
	write_ckpt(0, 0, 2, 30, 2, NULL);
	write_ckpt(0, 0, 2, 40, 2, NULL);
	/* the two newest real ones stay, the future one is left alone */
	assert_true(exists(0, 0, 40, 0));
	assert_true(exists(0, 0, 30, 0));
	assert_false(exists(0, 0, 20, 0));
	assert_false(exists(0, 0, 10, 0));
	assert_true(exists(0, 0, 2000000000ull, 0));
	assert_int_equal(rps_ckpt_prune_upto(tdir, 0, 0, 1, 40), 1);
	assert_true(exists(0, 0, 40, 0));
	assert_false(exists(0, 0, 30, 0));
}

static void test_large(void **state)
{
	/* more than the 1 MiB I/O buffer, in one slice */
	const uint64_t n = 700 * 1000;
	float *p = rps_malloc(n * 2 * sizeof(float));
	struct rps_ckpt_writer *w;
	struct rps_ckpt_slice s;
	struct rps_ckpt_info info;

	assert_non_null(p);
	for (uint64_t i = 0; i < 2 * n; i++)
		p[i] = (float)i;
	memset(&s, 0, sizeof(s));
	s.key = 5;
	s.kind = RPS_OPT_ADAGRAD;
	s.nelems = n;
	s.nstate = 1;
	s.params = p;
	s.state[0] = p + n;
	assert_int_equal(rps_ckpt_writer_open(tdir, 0, 0, 1, 1, &w), 0);
	assert_int_equal(rps_ckpt_writer_add(w, &s), 0);
	assert_int_equal(rps_ckpt_writer_commit(w, 0, &info), 0);
	assert_int_equal(info.payload_crc, rps_crc32c(rps_crc32c(0,
								 &(struct rps_ckpt_slice_rec){
								     .key = 5,
								     .kind = RPS_OPT_ADAGRAD,
								     .nelems = n,
								     .nstate = 1,
								 },
								 40),
						      p, n * 2 * sizeof(float)));
	assert_int_equal(rps_ckpt_verify(info.path, 0, 0, 1, NULL), 0);
	flip(info.path, 128 + 40 + 4 * (int64_t)n + 1000);
	assert_int_equal(rps_ckpt_verify(info.path, 0, 0, 1, NULL), -EBADMSG);
	rps_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crc32c),
	    cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_and_abort, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_writer_misuse, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refuse_and_fall_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_none_valid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_large, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_future_clock_kept_apart, setup, teardown),
	};

	const char *lvl = getenv("RDMAPS_LOG_LEVEL");

	rps_log_set_level(lvl ? rps_log_level_parse(lvl) : RPS_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
