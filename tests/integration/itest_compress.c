/* itest-compress: compression chosen by the job per key, against real
 * rdmaps-sched and rdmaps-server processes (tests/integration/compress.sh:
 * 2 servers, 2 workers, BSP summed in worker-rank order, SGD lr 1, zeros,
 * RDMAPS_SLICE_BYTES=256: a key of 144 elements is 3 slices of 64, 64, 16
 * elements over both servers, one PUSH frame each).
 *
 * Both workers declare eight keys and give seven of them a codec: 1 none,
 * 2 fp16, 3 bf16, 4 topk:0.05 and 5 sign (both with error feedback), 6
 * randk:0.1, 7 sign:16 (signb, a scale per 16 elements), 8 topk:0.05 with a
 * sparsity warm-up from 0.5 over 3 pushes and momentum correction 0.5.
 * Every clock each worker pushes all eight keys in ONE push (mixed
 * compressed and float32 frames). After T clocks both pull at clock T:
 *   - keys 1, 2, 3 (gradients that fp16 and bf16 represent exactly, sums
 *     exact in float32): exactly minus the sum of every gradient;
 *   - keys 4, 5, 7 and 8: exactly what the codecs (src/codec.h) run here,
 *     frame by frame with each worker's residual (and velocity, and the
 *     warm-up's ratio of each clock), give when summed in rank order;
 *   - key 6 moved;
 *   - the wire counters (rps_worker_key_wire_stats, rps_worker_stats): the
 *     exact data bytes of each codec, float32 bytes before it, the frames.
 * Refusals: set_compression of an undeclared key (-ENOENT), a ratio of 0
 * (-EINVAL), NULL options (-EINVAL), nothing changed by them.
 *
 * Exit 0 on success; every mismatch is printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/compress.h>
#include <rdmaps/worker.h>

#include "src/codec.h"

#define LEN 144
#define SL  64 /* elements per slice (RDMAPS_SLICE_BYTES=256) */
#define NK  8
#define T   4
#define NW  2

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-compress: FAIL: " __VA_ARGS__);                             \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

/* Worker r's gradient of key k at clock c: multiples of 1/16 in [-0.5, 0.5],
 * exact in fp16 and bf16, with a few large ones for top-k to find. */
static float grad(int r, int k, int c, int i)
{
	int v = (i * 7 + c * 3 + r * 5 + k) % 17 - 8;

	if ((i + c + r) % 23 == 0)
		v *= 5;
	return (float)v / 16.0f;
}

static int wait_req(int rc, struct rps_req **req_p, const char *what)
{
	if (!rc)
		rc = rps_req_wait(*req_p, -1);
	if (rc)
		FAIL("%s: %s", what, rps_strerror(rc));
	return rc;
}

/* Frames of a 144-element key: the slices. */
static const int frame_off[3] = {0, 64, 128}, frame_cnt[3] = {64, 64, 16};

/* What the servers apply for key k after T clocks: the codec run per frame
 * with each worker's residual, summed in rank order each clock, w -= sum. */
static void expected(int k, const struct rps_compress_opts *o, float *w)
{
	static float res[NW][LEN], vel[NW][LEN];
	float g[LEN], dec[LEN], sum[LEN];
	unsigned char buf[LEN * 8 + 64];
	float scratch[LEN];
	uint64_t rng = 1;

	memset(res, 0, sizeof(res));
	memset(vel, 0, sizeof(vel));
	memset(w, 0, LEN * sizeof(float));
	for (int c = 0; c < T; c++) {
		for (int r = 0; r < NW; r++) {
			for (int i = 0; i < LEN; i++)
				g[i] = grad(r, k, c, i);
			for (int f = 0; f < 3; f++) {
				struct rps_codec_enc e = {
				    .kind = o->kind,
				    .ratio = rps_codec_step_ratio(o, (uint64_t)c),
				    .residual = res[r] + frame_off[f],
				    .scratch = scratch,
				    .rng = &rng,
				    .block = o->block,
				    .momentum = o->momentum,
				    .velocity = o->momentum != 0.0f ? vel[r] + frame_off[f] : NULL};
				size_t n = rps_codec_encode(&e, g + frame_off[f], frame_cnt[f], buf);

				rps_codec_decode(o->kind, buf, n, frame_cnt[f], dec + frame_off[f]);
			}
			for (int i = 0; i < LEN; i++)
				sum[i] = r ? sum[i] + dec[i] : dec[i];
		}
		for (int i = 0; i < LEN; i++)
			w[i] -= sum[i];
	}
}

/* The data bytes of pushes from..T-1 (the ratio of each under the warm-up) */
static uint64_t data_bytes(const struct rps_compress_opts *o, int from)
{
	uint64_t b = 0;

	for (int c = from; c < T; c++)
		for (int f = 0; f < 3; f++)
			b += rps_codec_bytes_blk(o->kind, frame_cnt[f],
						 rps_codec_step_ratio(o, (uint64_t)c), o->block);
	return b;
}

int main(void)
{
	static const struct {
		const char *spec;
	} codec[NK] = {{"none"},      {"fp16"},	     {"bf16"},	  {"topk:0.05"},
		       {"sign"},      {"randk:0.1"}, {"sign:16"},
		       {"topk:0.05,warmup=3,from=0.5,momentum=0.5"}};
	const struct rps_init init = {.kind = RPS_INIT_ZEROS};
	rps_key_t keys[NK] = {1, 2, 3, 4, 5, 6, 7, 8};
	struct rps_compress_opts o[NK], bad;
	static float g[NK * LEN], got[NK * LEN];
	struct rps_worker_stats st = {.field_mask = RPS_WORKER_STAT_ALL};
	size_t lens[NK];
	struct rps_req *req = NULL;
	struct rps_worker *w;
	uint64_t raw_total = 0, data_total = 0, last_step = 0;
	rps_key_t nokey = 99;
	int rc, rank;

	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-compress: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	for (int j = 0; j < NK; j++) {
		lens[j] = LEN;
		if (rps_compress_parse(codec[j].spec, &o[j]))
			FAIL("parse %s", codec[j].spec);
	}
	EXPECT(rps_worker_declare(w, keys, lens, NK, &init), 0);
	/* refusals first: nothing changes */
	EXPECT(rps_worker_set_compression(w, &nokey, 1, &o[1]), -ENOENT);
	bad = o[3];
	bad.ratio = 0;
	EXPECT(rps_worker_set_compression(w, &keys[3], 1, &bad), -EINVAL);
	EXPECT(rps_worker_set_compression(w, &keys[3], 1, NULL), -EINVAL);
	for (int j = 1; j < NK; j++)
		EXPECT(rps_worker_set_compression(w, &keys[j], 1, &o[j]), 0);
	EXPECT(rps_worker_barrier(w), 0);

	for (int c = 0; c < T; c++) {
		for (int j = 0; j < NK; j++)
			for (int i = 0; i < LEN; i++)
				g[j * LEN + i] = grad(rank, (int)keys[j], c, i);
		if (wait_req(rps_worker_push(w, keys, g, lens, NK, &req), &req, "push"))
			goto out;
		if (rps_worker_clock(w)) {
			FAIL("clock %d", c);
			goto out;
		}
	}
	if (wait_req(rps_worker_pull(w, keys, got, lens, NK, &req), &req, "pull"))
		goto out;

	/* keys 1..3: exact */
	for (int j = 0; j < 3; j++) {
		int bad_n = 0;

		for (int i = 0; i < LEN; i++) {
			float want = 0;

			for (int c = 0; c < T; c++) {
				float s = 0;

				for (int r = 0; r < NW; r++)
					s += grad(r, (int)keys[j], c, i);
				want -= s;
			}
			if (got[j * LEN + i] != want && bad_n++ < 3)
				FAIL("%s key %d element %d: %.9g, exactly %.9g", codec[j].spec,
				     (int)keys[j], i, got[j * LEN + i], want);
		}
	}
	/* keys 4, 5, 7, 8: the codecs' own result with error feedback */
	for (int j = 3; j < NK; j++) {
		float want[LEN];
		int bad_n = 0;

		if (j == 5)
			continue; /* randk: below */
		expected((int)keys[j], &o[j], want);
		for (int i = 0; i < LEN; i++)
			if (got[j * LEN + i] != want[i] && bad_n++ < 3)
				FAIL("%s key %d element %d: %.9g, the codec gives %.9g",
				     codec[j].spec, (int)keys[j], i, got[j * LEN + i], want[i]);
	}
	{
		int moved = 0;

		for (int i = 0; i < LEN; i++)
			moved += got[5 * LEN + i] != 0.0f;
		if (moved < 10)
			FAIL("randk key 6: only %d elements moved", moved);
	}

	/* the wire counters */
	for (int j = 0; j < NK; j++) {
		struct rps_key_wire_stats ks;
		uint64_t want_data = data_bytes(&o[j], 0);

		EXPECT(rps_worker_key_wire_stats(w, keys[j], &ks), 0);
		if (ks.pushes != 3 * T || ks.raw_bytes != (uint64_t)T * LEN * 4 ||
		    ks.data_bytes != want_data || ks.wire_bytes != want_data + 3 * T * (24 + 48))
			FAIL("%s key %d: wire stats pushes %llu raw %llu data %llu wire %llu; want "
			     "%d, %d, %llu, %llu",
			     codec[j].spec, (int)keys[j], (unsigned long long)ks.pushes,
			     (unsigned long long)ks.raw_bytes, (unsigned long long)ks.data_bytes,
			     (unsigned long long)ks.wire_bytes, 3 * T, T * LEN * 4,
			     (unsigned long long)want_data,
			     (unsigned long long)(want_data + 3 * T * (24 + 48)));
		else
			printf("itest-compress: %-9s %llu data bytes for %llu float32 bytes (%.1fx)\n",
			       codec[j].spec, (unsigned long long)ks.data_bytes,
			       (unsigned long long)ks.raw_bytes,
			       (double)ks.raw_bytes / (double)ks.data_bytes);
		raw_total += ks.raw_bytes;
		data_total += ks.data_bytes;
		last_step += data_bytes(&o[j], T - 1) + 3 * (24 + 48);
	}
	EXPECT(rps_worker_key_wire_stats(w, nokey, &(struct rps_key_wire_stats){0}), -ENOENT);
	EXPECT(rps_worker_stats(w, &st), 0);
	if (st.push_raw_bytes != raw_total || st.bytes_out != data_total ||
	    st.push_wire_bytes != data_total + (uint64_t)NK * 3 * T * (24 + 48) ||
	    st.last_step_push_bytes != last_step)
		FAIL("worker stats: raw %llu data %llu wire %llu last step %llu; want %llu, %llu, "
		     "%llu, %llu",
		     (unsigned long long)st.push_raw_bytes, (unsigned long long)st.bytes_out,
		     (unsigned long long)st.push_wire_bytes,
		     (unsigned long long)st.last_step_push_bytes, (unsigned long long)raw_total,
		     (unsigned long long)data_total,
		     (unsigned long long)(data_total + (uint64_t)NK * 3 * T * (24 + 48)),
		     (unsigned long long)last_step);
	EXPECT(rps_worker_barrier(w), 0);
out:
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-compress, worker %d: %d failures\n", rank, failures);
		return 1;
	}
	printf("itest-compress, worker %d: ok\n", rank);
	return 0;
}
