/* ctlreq-worker: the job of tests/integration/ctlreq.sh (rdmaps-ctl checkpoint
 * and export, rps_worker_checkpoint).
 *
 *   ctlreq-worker run OUTDIR CLOCKS
 *	BSP, SGD lr 1, zeros: every element of key k after clocks < C is
 *	exactly -(sum over c < C, workers w of grad(w, c, k)). Each clock: pull
 *	(checked), push, clock, sleep ITEST_SLEEP_MS. ITEST_ASP set (an ASP
 *	job): only the final pull, after a barrier, is checked. OUTDIR/started appears
 *	after clock 1. Rank 0, at clock ITEST_CKPT_AT (after its pull, before
 *	its push), calls rps_worker_checkpoint(w, that clock) and writes
 *	"rc RC clock C" to OUTDIR/worker-ckpt. After the last clock rank 0 pulls
 *	everything into OUTDIR/final.f32 (the keys in order, float32) and writes
 *	OUTDIR/trained; then every worker waits for OUTDIR/release before it
 *	leaves (so the servers stay up for rdmaps-ctl). Meanwhile OUTDIR/far-timeout
 *	and OUTDIR/far-death make rank 0 ask for a checkpoint at a clock nobody
 *	reaches (timeouts 1.5 s and 30 s); the result goes to OUTDIR/far-*.rc.
 *   ctlreq-worker idle OUTDIR
 *	join, touch OUTDIR/joined<rank>, wait for OUTDIR/release, leave.
 *   ctlreq-worker verify NSHARDS NWORKERS FILE...
 *	read each checkpoint file (src/ckpt.h, the restore path's reader) and
 *	check every slice against the formula at the file's clock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmaps/rdmaps.h>

#include "src/ckpt.h"

#define NKEYS 4
static const rps_key_t keys[NKEYS] = {1001, 1002, 1003, 1004};
/* the last one is split into slices across servers (RDMAPS_SLICE_BYTES=256K) */
static const size_t lens[NKEYS] = {1, 100, 5000, 300000};

static float grad(int w, int c, uint64_t key)
{
	return (float)((w + 1) + 10 * c + (int)(key - 1000));
}

static float want(uint64_t key, int upto, int nworkers)
{
	double s = 0;

	for (int c = 0; c < upto; c++)
		for (int w = 0; w < nworkers; w++)
			s += grad(w, c, key);
	return (float)-s;
}

static void touch(const char *dir, const char *name, const char *text)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (f) {
		if (text)
			fputs(text, f);
		fclose(f);
	}
}

static int exists(const char *dir, const char *name)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

static int check(const float *v, int upto, int nw, const char *what)
{
	size_t off = 0;

	for (int k = 0; k < NKEYS; k++)
		for (size_t i = 0; i < lens[k]; i++, off++)
			if (v[off] != want(keys[k], upto, nw)) {
				fprintf(stderr,
					"ctlreq-worker: FAIL %s: key %llu [%zu] = %g, want %g\n",
					what, (unsigned long long)keys[k], i, v[off],
					want(keys[k], upto, nw));
				return -1;
			}
	return 0;
}

static int run(const char *dir, int clocks)
{
	struct rps_worker_opts o;
	struct rps_worker *w;
	struct rps_init zeros = {.kind = RPS_INIT_ZEROS};
	struct rps_req *req;
	size_t n = 0, off;
	float *v, *g;
	int rc, rank, nw, ckpt_at = getenv("ITEST_CKPT_AT") ? atoi(getenv("ITEST_CKPT_AT")) : -1;
	int sleep_ms = getenv("ITEST_SLEEP_MS") ? atoi(getenv("ITEST_SLEEP_MS")) : 0;
	int asp = getenv("ITEST_ASP") != NULL;

	rps_worker_opts_init(&o);
	rc = rps_worker_create(&o, &w);
	if (rc) {
		fprintf(stderr, "ctlreq-worker: create: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	nw = rps_worker_num_workers(w);
	for (int k = 0; k < NKEYS; k++)
		n += lens[k];
	v = calloc(n, sizeof(float));
	g = calloc(n, sizeof(float));
	rc = rps_worker_declare(w, keys, lens, NKEYS, &zeros);
	if (!rc)
		rc = rps_worker_barrier(w);
	for (int c = 0; !rc && c <= clocks; c++) {
		char what[64];

		/* ASP: only the end is known, once every push of everyone is in */
		if (asp && c < clocks)
			goto step;
		if (asp)
			rc = rps_worker_barrier(w);
		req = NULL;
		if (!rc)
			rc = rps_worker_pull(w, keys, v, lens, NKEYS, &req);
		if (!rc)
			rc = rps_req_wait(req, 60000);
		snprintf(what, sizeof(what), "pull at clock %d", c);
		if (rc || check(v, c, nw, what)) {
			rc = rc ? rc : -EIO;
			break;
		}
		if (c == clocks)
			break; /* the final state */
		if (rank == 0 && c == ckpt_at) {
			char text[64];
			int crc = rps_worker_checkpoint(w, (uint32_t)c, 20000);

			snprintf(text, sizeof(text), "rc %d clock %d\n", crc, c);
			touch(dir, "worker-ckpt", text);
		}
step:
		off = 0;
		for (int k = 0; k < NKEYS; k++)
			for (size_t i = 0; i < lens[k]; i++)
				g[off++] = grad(rank, c, keys[k]);
		req = NULL;
		rc = rps_worker_push(w, keys, g, lens, NKEYS, &req);
		if (!rc)
			rc = rps_req_wait(req, 60000);
		if (!rc)
			rc = rps_worker_clock(w);
		if (rank == 0 && c == 1)
			touch(dir, "started", NULL);
		if (sleep_ms > 0)
			usleep((useconds_t)sleep_ms * 1000);
	}
	if (!rc && rank == 0) {
		char p[4096];
		FILE *f;

		snprintf(p, sizeof(p), "%s/final.f32", dir);
		f = fopen(p, "wb");
		if (!f || fwrite(v, sizeof(float), n, f) != n)
			rc = -EIO;
		if (f)
			fclose(f);
		touch(dir, "trained", NULL);
	}
	/* rank 0, on request of the script: a checkpoint at a clock the job never
	 * reaches (far-timeout: 1.5 s, must time out; far-death: 30 s, the script
	 * kills a server meanwhile) */
	for (int i = 0, t = 0, d = 0; !rc && i < 2400 && !exists(dir, "release"); i++) {
		if (rank == 0 && (!t && exists(dir, "far-timeout"))) {
			char text[32];

			t = 1;
			snprintf(text, sizeof(text), "rc %d\n",
				 rps_worker_checkpoint(w, (uint32_t)clocks + 5, 1500));
			touch(dir, "far-timeout.rc", text);
		}
		if (rank == 0 && (!d && exists(dir, "far-death"))) {
			char text[32];

			d = 1;
			snprintf(text, sizeof(text), "rc %d\n",
				 rps_worker_checkpoint(w, (uint32_t)clocks + 5, 30000));
			touch(dir, "far-death.rc", text);
		}
		usleep(50000);
	}
	if (rc)
		fprintf(stderr, "ctlreq-worker %d: FAIL: %s\n", rank, rps_strerror(rc));
	rps_worker_destroy(w);
	free(v);
	free(g);
	return rc ? 1 : 0;
}

struct vctx {
	int nworkers;
	uint64_t clock;
	int bad;
};

static int verify_slice(const struct rps_ckpt_slice *s, void *arg)
{
	struct vctx *x = arg;
	float wv = want(s->key, (int)x->clock, x->nworkers);

	for (uint64_t i = 0; i < s->nelems; i++)
		if (s->params[i] != wv) {
			fprintf(stderr,
				"ctlreq-worker: FAIL key %llu slice %u [%llu] = %g, want %g\n",
				(unsigned long long)s->key, s->slice, (unsigned long long)i,
				s->params[i], wv);
			x->bad = 1;
			return 0;
		}
	return 0;
}

static int verify(int nshards, int nworkers, char **files, int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++) {
		const char *base = strrchr(files[i], '/') ? strrchr(files[i], '/') + 1 : files[i];
		struct rps_ckpt_info info;
		struct vctx x = {.nworkers = nworkers};
		uint32_t r, sh;
		uint64_t c;
		int rc;

		if (rps_ckpt_parse_name(base, &r, &sh, &c) != 1) {
			fprintf(stderr, "ctlreq-worker: FAIL %s: not a checkpoint name\n",
				files[i]);
			bad = 1;
			continue;
		}
		x.clock = c;
		rc = rps_ckpt_read(files[i], r, sh, (uint32_t)nshards, verify_slice, &x, &info);
		if (rc || x.bad || info.clock != c) {
			fprintf(stderr, "ctlreq-worker: FAIL %s: %s\n", files[i],
				rc ? rps_strerror(rc) : "wrong values");
			bad = 1;
			continue;
		}
		printf("%s: clock %llu, %llu slices, values right\n", files[i],
		       (unsigned long long)info.clock, (unsigned long long)info.nslices);
	}
	return bad;
}

/* Join the job (so that a scheduler of restored servers completes its
 * cluster), say so in OUTDIR/joined<rank>, wait for OUTDIR/release (60 s at
 * most) and leave: no push, no pull (tests/integration/ckpt_async.sh). */
static int idle(const char *dir)
{
	struct rps_worker_opts o;
	struct rps_worker *w;
	char name[32];
	int rc;

	rps_worker_opts_init(&o);
	rc = rps_worker_create(&o, &w);
	if (rc) {
		fprintf(stderr, "ctlreq-worker: create: %s\n", rps_strerror(rc));
		return 1;
	}
	snprintf(name, sizeof(name), "joined%d", rps_worker_rank(w));
	touch(dir, name, NULL);
	for (int i = 0; i < 1200 && !exists(dir, "release"); i++)
		usleep(50000);
	rps_worker_destroy(w);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "idle"))
		return idle(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "run"))
		return run(argv[2], atoi(argv[3]));
	if (argc >= 5 && !strcmp(argv[1], "verify"))
		return verify(atoi(argv[2]), atoi(argv[3]), argv + 4, argc - 4);
	fprintf(stderr,
		"usage: ctlreq-worker run OUTDIR CLOCKS | verify NSHARDS NWORKERS FILE... | "
		"idle OUTDIR\n");
	return 2;
}
