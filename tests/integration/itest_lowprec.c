/* itest-lowprec: low-precision pulls (<rdmaps/pullprec.h>) against real
 * rdmaps-sched and rdmaps-server processes (tests/integration/lowprec.sh:
 * 2 servers of 2 shards, 2 workers, BSP summed in worker-rank order, SGD lr
 * 1, zeros, RDMAPS_SLICE_BYTES=256: a key of 144 elements is 3 slices of 64,
 * 64 and 16 elements over both servers).
 *
 * Both workers declare four keys and pull key 1 and 2 in bf16, key 3 in
 * fp16, key 4 in fp32. Every clock each pushes all four; after T clocks:
 *   - key 1 (gradients of multiples of 1/16, sums representable in bf16):
 *     the bf16 pull is exactly minus the sum of every gradient;
 *   - keys 2 and 3 (gradients of thirds, not representable): the pull is
 *     the converter's rounding (src/codec.h) of the float32 master, which
 *     the same worker pulls with the key set back to fp32;
 *   - key 4: float32 as ever, exactly;
 *   - the bytes of a pull answer (TCP): 2 per element in bf16, 4 in fp32
 *     (rps_worker_stats bytes_in);
 * Refusals: an unknown precision name (-EINVAL, and the reason logged:
 * lowprec.sh checks it), a precision out of range, an undeclared key
 * (-ENOENT), another 2-byte precision for a key that has a copy (-EINVAL,
 * the servers' reason logged; the key still pulls its copy).
 *
 * With LOWPREC_ASP=1 (lowprec.sh's second cluster, ASP) instead: worker 1
 * pushes -1 to every element of a bf16 key NP times while worker 0 pulls it
 * again and again; every pull must hold, per run of RDMAPS_CHUNK_BYTES / 4
 * elements (one chunk of the master, written as one), one value, an integer
 * in [0, NP] (no torn chunk of the copy is ever taken), never less than the
 * pull before; after a barrier, NP everywhere.
 *
 * Exit 0 on success; every mismatch is printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/pullprec.h>
#include <rdmaps/worker.h>

#include "src/codec.h"

#define LEN 144
#define NK  4
#define T   3
#define NW  2

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-lowprec: FAIL: " __VA_ARGS__);                              \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

/* Worker r's gradient of key k (1..4) at clock c, element i: multiples of
 * 1/16 in [-0.5, 0.5] for keys 1 and 4; thirds for 2 and 3. */
static float grad(int r, int k, int c, int i)
{
	int v = (i * 7 + c * 3 + r * 5 + k) % 17 - 8;

	if (k == 2 || k == 3)
		return (float)(v + 9 * i) / 3.0f;
	return (float)v / 16.0f;
}

static int pull_n(struct rps_worker *w, rps_key_t key, float *out, size_t len)
{
	struct rps_req *req;
	int rc = rps_worker_pull(w, &key, out, &len, 1, &req);

	if (!rc)
		rc = rps_req_wait(req, -1);
	if (rc)
		FAIL("pull key %llu: %s", (unsigned long long)key, rps_strerror(rc));
	return rc;
}

static int pull(struct rps_worker *w, rps_key_t key, float *out)
{
	return pull_n(w, key, out, LEN);
}

static uint64_t bytes_in(struct rps_worker *w)
{
	struct rps_worker_stats st = {.field_mask = RPS_WORKER_STAT_BYTES_IN};

	if (rps_worker_stats(w, &st))
		FAIL("stats");
	return st.bytes_in;
}

/* The float32 value of the 2-byte element prec makes of x. */
static float rounded(enum rps_pull_precision prec, float x)
{
	uint16_t h = prec == RPS_PULL_BF16 ? rps_codec_bf16_one(x) : rps_codec_f16_one(x);
	float f;

	if (prec == RPS_PULL_FP16)
		return rps_codec_f16_widen(h);
	rps_codec_bf16_to_f32(&h, &f, 1);
	return f;
}

/* Key k pulled in prec == the rounding of its master (pulled as fp32). */
static void check_rounded(struct rps_worker *w, rps_key_t k, enum rps_pull_precision prec)
{
	float master[LEN], copy[LEN];
	int inexact = 0;

	EXPECT(rps_worker_set_pull_precision(w, &k, 1, RPS_PULL_FP32), 0);
	if (pull(w, k, master))
		return;
	EXPECT(rps_worker_set_pull_precision(w, &k, 1, prec), 0);
	if (pull(w, k, copy))
		return;
	for (int i = 0; i < LEN; i++) {
		if (memcmp(&copy[i], &(float){rounded(prec, master[i])}, sizeof(float)))
			FAIL("key %llu (%s) element %d: pulled %.9g, master %.9g rounds to %.9g",
			     (unsigned long long)k, rps_pull_precision_name(prec), i, copy[i],
			     master[i], rounded(prec, master[i]));
		inexact += copy[i] != master[i];
	}
	if (inexact < LEN / 2) /* thirds: the rounding must show */
		FAIL("key %llu: only %d of %d elements differ from the master", (unsigned long long)k,
		     inexact, LEN);
}

#define ALEN 4096
#define NP   80

static int asp_phase(struct rps_worker *w, int rank)
{
	static const rps_key_t key = 10;
	static const size_t len = ALEN;
	const char *cb = getenv("RDMAPS_CHUNK_BYTES");
	size_t run = (cb ? (size_t)atoi(cb) : 16384) / sizeof(float);
	static float g[ALEN], v[ALEN], last[ALEN];
	struct rps_worker_stats st = {.field_mask = RPS_WORKER_STAT_TORN_RETRIES};
	struct rps_req *req;
	int pulls = 0, rc;

	EXPECT(rps_worker_declare(w, &key, &len, 1, NULL), 0);
	EXPECT(rps_worker_set_pull_precision(w, &key, 1, RPS_PULL_BF16), 0);
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 1) {
		for (int i = 0; i < ALEN; i++)
			g[i] = -1.0f;
		for (int s = 0; s < NP; s++) {
			rc = rps_worker_push(w, &key, g, &len, 1, &req);
			if (!rc)
				rc = rps_req_wait(req, -1);
			if (rc)
				FAIL("push %d: %s", s, rps_strerror(rc));
			EXPECT(rps_worker_clock(w), 0);
		}
	} else {
		do {
			if (pull_n(w, key, v, ALEN))
				break;
			pulls++;
			for (int i = 0; i < ALEN; i++) {
				if (v[i] != v[i - i % run] || v[i] < last[i] || v[i] > NP ||
				    v[i] != (float)(int)v[i]) {
					FAIL("pull %d element %d: %g (its chunk's first: %g, the pull "
					     "before: %g)",
					     pulls, i, v[i], v[i - i % run], last[i]);
					break;
				}
			}
			memcpy(last, v, sizeof(v));
		} while (v[ALEN - 1] < NP && v[0] < NP && pulls < 100000 && !failures);
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (!pull_n(w, key, v, ALEN))
		for (int i = 0; i < ALEN; i++)
			if (v[i] != NP) {
				FAIL("after the barrier: element %d is %g, not %d", i, v[i], NP);
				break;
			}
	rps_worker_stats(w, &st);
	printf("itest-lowprec: worker %d: asp: %d pulls during the pushes, %llu torn chunks "
	       "read again\n",
	       rank, pulls, (unsigned long long)st.torn_retries);
	return failures;
}

int main(void)
{
	static const rps_key_t keys[NK] = {1, 2, 3, 4};
	static const size_t lens[NK] = {LEN, LEN, LEN, LEN};
	enum rps_pull_precision p = RPS_PULL_FP32;
	struct rps_worker *w;
	static float g[NK * LEN], v[LEN];
	struct rps_req *req;
	int rank, rc, tcp;

	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-lowprec: create: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = (int)rps_worker_rank(w);
	tcp = !strcmp(rps_worker_transport(w), "tcp");
	if (getenv("LOWPREC_ASP")) {
		asp_phase(w, rank);
		rps_worker_destroy(w);
		if (failures) {
			fprintf(stderr, "itest-lowprec: worker %d: %d failures\n", rank, failures);
			return 1;
		}
		printf("itest-lowprec: worker %d: asp ok (%s)\n", rank, tcp ? "tcp" : "rdma");
		return 0;
	}
	EXPECT(rps_worker_declare(w, keys, lens, NK, NULL), 0);

	/* refusals first: nothing changes */
	EXPECT(rps_pull_precision_parse("bf17", &p), -EINVAL); /* its reason: lowprec.sh */
	EXPECT((int)p, RPS_PULL_FP32);
	EXPECT(rps_pull_precision_parse("bf16", &p), 0);
	EXPECT((int)p, RPS_PULL_BF16);
	EXPECT(rps_worker_set_pull_precision(w, keys, 1, (enum rps_pull_precision)7), -EINVAL);
	EXPECT(rps_worker_set_pull_precision(w, &(rps_key_t){99}, 1, RPS_PULL_BF16), -ENOENT);
	EXPECT((int)rps_worker_pull_precision(w, 1), RPS_PULL_FP32);

	EXPECT(rps_worker_set_pull_precision(w, keys, 2, RPS_PULL_BF16), 0);
	EXPECT(rps_worker_set_pull_precision(w, &keys[2], 1, RPS_PULL_FP16), 0);
	EXPECT((int)rps_worker_pull_precision(w, 2), RPS_PULL_BF16);
	EXPECT((int)rps_worker_pull_precision(w, 3), RPS_PULL_FP16);
	/* key 2 has a bf16 copy: fp16 is refused by its servers */
	EXPECT(rps_worker_set_pull_precision(w, &keys[1], 1, RPS_PULL_FP16), -EINVAL);
	EXPECT((int)rps_worker_pull_precision(w, 2), RPS_PULL_BF16);
	EXPECT(rps_worker_barrier(w), 0);

	for (int c = 0; c < T; c++) {
		for (int k = 0; k < NK; k++)
			for (int i = 0; i < LEN; i++)
				g[k * LEN + i] = grad(rank, k + 1, c, i);
		rc = rps_worker_push(w, keys, g, lens, NK, &req);
		if (!rc)
			rc = rps_req_wait(req, -1);
		if (rc)
			FAIL("push clock %d: %s", c, rps_strerror(rc));
		EXPECT(rps_worker_clock(w), 0);
	}

	/* key 1 (bf16) and key 4 (fp32): exactly minus the sum */
	for (int kk = 0; kk < NK; kk += 3) {
		uint64_t b0 = bytes_in(w), b1;

		if (pull(w, keys[kk], v))
			continue;
		b1 = bytes_in(w);
		for (int i = 0; i < LEN; i++) {
			float want = 0;

			for (int c = 0; c < T; c++)
				for (int r = 0; r < NW; r++)
					want -= grad(r, kk + 1, c, i);
			if (v[i] != want)
				FAIL("key %llu element %d: %.9g, expected %.9g",
				     (unsigned long long)keys[kk], i, v[i], want);
		}
		/* the pull answers' data: 2 bytes an element in bf16, 4 in fp32 */
		if (tcp && b1 - b0 != (kk == 0 ? 2u : 4u) * LEN)
			FAIL("key %llu: %llu bytes received, expected %u", (unsigned long long)keys[kk],
			     (unsigned long long)(b1 - b0), (kk == 0 ? 2u : 4u) * LEN);
	}
	check_rounded(w, 2, RPS_PULL_BF16);
	check_rounded(w, 3, RPS_PULL_FP16);
	if (tcp) { /* key 2 in bf16 against fp32: half the bytes */
		uint64_t b0 = bytes_in(w), b1, b2;

		pull(w, 2, v);
		b1 = bytes_in(w);
		EXPECT(rps_worker_set_pull_precision(w, &keys[1], 1, RPS_PULL_FP32), 0);
		pull(w, 2, v);
		b2 = bytes_in(w);
		if ((b2 - b1) != 2 * (b1 - b0) || b1 - b0 != 2u * LEN)
			FAIL("pull bytes: bf16 %llu, fp32 %llu (expected %u and %u)",
			     (unsigned long long)(b1 - b0), (unsigned long long)(b2 - b1), 2 * LEN,
			     4 * LEN);
		else
			printf("itest-lowprec: worker %d: pull of %d elements: %llu bytes in bf16, "
			       "%llu in fp32\n",
			       rank, LEN, (unsigned long long)(b1 - b0),
			       (unsigned long long)(b2 - b1));
	}
	EXPECT(rps_worker_barrier(w), 0);
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-lowprec: worker %d: %d failures\n", rank, failures);
		return 1;
	}
	printf("itest-lowprec: worker %d: ok (%s)\n", rank, tcp ? "tcp" : "rdma");
	return 0;
}
