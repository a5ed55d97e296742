/* itest-optim: the job's optimizer spec per key, against real rdmaps-sched and
 * rdmaps-server processes (tests/integration/optim.sh). Public API only.
 *
 *   itest-optim spec   2 workers, BSP. Worker 0 declares one key per optimizer
 *                      kind (sgd, momentum, nesterov, adagrad, adam, adamw),
 *                      each with its own spec (a schedule, a warm-up, some with
 *                      weight decay or clipping), 144 elements in 3 slices over
 *                      both servers, whose environment default is another
 *                      optimizer. Worker 1 then declares key "adam" with
 *                      another spec (-EINVAL), with the same (0), sets another
 *                      with rps_worker_set_optimizer (-EINVAL), declares them
 *                      all without a spec (0), and gives key 8 (declared by
 *                      worker 0 without a spec, not trained) the adamw spec
 *                      (0). Worker 0 pushes known gradients for K clocks
 *                      (worker 1 none); both pull at clock K: every value
 *                      equals, bit for bit, rps_optimizer_step run locally
 *                      with the key's spec. Key 7, trained with the default,
 *                      then refuses a spec (-EINVAL) and does not change.
 *   itest-optim ckpt   1 worker, BSP, checkpoints every K clocks: the same six
 *                      keys for K clocks; then it writes $ITEST_READY and
 *                      waits for $ITEST_GO while the script kills the server
 *                      and restores it from the checkpoint of clock K with
 *                      ANOTHER default optimizer; K more clocks: the values
 *                      equal 2K local steps of each key's spec.
 *
 * Exit 0 on success; every mismatch is printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdmaps/optim.h>
#include <rdmaps/worker.h>

#define NK	    6	/* keys 1..6: one per optimizer kind */
#define LEN	    144 /* 3 slices of 64, 64, 16 with RDMAPS_SLICE_BYTES=256 */
#define K	    4	/* clocks per phase */
#define W0	    0.5f
#define KEY_DEFAULT 7 /* declared without a spec and trained: refuses one later */
#define KEY_LATE    8 /* declared without a spec, given one before any update */

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "itest-optim: FAIL: " __VA_ARGS__);                                \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

#define EXPECT(call, want)                                                                         \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != (want))                                                                 \
			FAIL("%s: %d, expected %d", #call, rc_, (want));                           \
	} while (0)

/* The spec of key k (1..6). */
static void spec(int k, struct rps_optim_opts *o)
{
	rps_optim_opts_init(o);
	switch (k) {
	case 1: /* clipping: the ±1 gradient has norm 12, clipped to 6 */
		o->kind = RPS_OPT_SGD;
		o->lr = 0.1f;
		o->schedule = RPS_LR_STEP;
		o->step_size = 2;
		o->gamma = 0.5f;
		o->warmup_steps = 2;
		o->clip_norm = 6.0f;
		break;
	case 2:
		o->kind = RPS_OPT_MOMENTUM;
		o->lr = 0.05f;
		o->momentum = 0.9f;
		o->schedule = RPS_LR_COSINE;
		o->total_steps = 2 * K;
		o->lr_min = 0.01f;
		o->warmup_steps = 2;
		o->weight_decay = 0.01f;
		break;
	case 3:
		o->kind = RPS_OPT_NESTEROV;
		o->lr = 0.05f;
		o->momentum = 0.8f;
		o->schedule = RPS_LR_LINEAR;
		o->total_steps = 2 * K;
		o->warmup_steps = 1;
		break;
	case 4:
		o->kind = RPS_OPT_ADAGRAD;
		o->lr = 0.1f;
		o->eps = 1e-6f;
		o->schedule = RPS_LR_EXP;
		o->gamma = 0.9f;
		o->warmup_steps = 3;
		break;
	case 5:
		o->kind = RPS_OPT_ADAM;
		o->lr = 0.01f;
		o->schedule = RPS_LR_COSINE;
		o->total_steps = 2 * K;
		o->warmup_steps = 2;
		o->weight_decay = 0.001f;
		break;
	default:
		o->kind = RPS_OPT_ADAMW;
		o->lr = 0.01f;
		o->schedule = RPS_LR_LINEAR;
		o->total_steps = 2 * K;
		o->lr_min = 0.001f;
		o->warmup_steps = 2;
		o->weight_decay = 0.1f;
		break;
	}
}

/* The gradient of key k at clock c (exact in float). */
static float grad(int k, int c, int i)
{
	if (k == 1)
		return (i + c) % 2 ? 1.0f : -1.0f;
	return (float)((i * 7 + c * 3 + k) % 11 - 5) * 0.25f;
}

/* req_p: read after the call that fills it (argument order is unspecified) */
static int wait_req(int rc, struct rps_req **req_p, const char *what)
{
	if (!rc)
		rc = rps_req_wait(*req_p, -1);
	if (rc)
		FAIL("%s: %s", what, rps_strerror(rc));
	return rc;
}

/* Keys 1..6 and KEY_LATE: their spec's kind for KEY_LATE is adamw (key 6's) */
static int spec_of_key(rps_key_t key)
{
	return key == KEY_LATE ? 6 : (int)key;
}

/* One BSP clock c: this worker pushes the gradients of keys[0..n) (none if
 * n == 0), then ends the clock. */
static int one_clock(struct rps_worker *w, const rps_key_t *keys, size_t n, int c)
{
	static float g[8 * LEN];
	size_t lens[8];
	struct rps_req *req = NULL;

	for (size_t j = 0; j < n; j++) {
		lens[j] = LEN;
		for (int i = 0; i < LEN; i++)
			g[j * LEN + i] = grad(spec_of_key(keys[j]), c, i);
	}
	if (n && wait_req(rps_worker_push(w, keys, g, lens, n, &req), &req, "push"))
		return -1;
	if (rps_worker_clock(w)) {
		FAIL("clock %d", c);
		return -1;
	}
	return 0;
}

/* Pull keys and compare each with `steps` local steps of its spec. */
static void check(struct rps_worker *w, const rps_key_t *keys, size_t n, int steps,
		  const char *what)
{
	static float got[8 * LEN];
	size_t lens[8];
	struct rps_req *req = NULL;

	for (size_t j = 0; j < n; j++)
		lens[j] = LEN;
	if (wait_req(rps_worker_pull(w, keys, got, lens, n, &req), &req, "pull"))
		return;
	for (size_t j = 0; j < n; j++) {
		struct rps_optim_opts o;
		struct rps_optimizer *opt;
		float want[LEN], g[LEN];
		int bad = 0;

		spec(spec_of_key(keys[j]), &o);
		if (rps_optimizer_create(&o, LEN, &opt)) {
			FAIL("local optimizer of key %llu", (unsigned long long)keys[j]);
			continue;
		}
		for (int i = 0; i < LEN; i++)
			want[i] = W0;
		for (int c = 0; c < steps; c++) {
			for (int i = 0; i < LEN; i++)
				g[i] = grad(spec_of_key(keys[j]), c, i);
			rps_optimizer_step(opt, want, g);
		}
		rps_optimizer_destroy(opt);
		for (int i = 0; i < LEN; i++) {
			if (memcmp(&got[j * LEN + i], &want[i], sizeof(float))) {
				if (bad++ < 3)
					FAIL("%s: key %llu element %d after %d steps: %.9g, local "
					     "%.9g",
					     what, (unsigned long long)keys[j], i, steps,
					     got[j * LEN + i], want[i]);
			}
		}
		if (!bad && want[0] == W0 && want[1] == W0)
			FAIL("%s: key %llu did not move", what, (unsigned long long)keys[j]);
	}
}

static int declare_specs(struct rps_worker *w)
{
	const struct rps_init init = {.kind = RPS_INIT_CONST, .a = W0};
	size_t len = LEN;

	for (int k = 1; k <= NK; k++) {
		rps_key_t key = (rps_key_t)k;
		struct rps_optim_opts o;

		spec(k, &o);
		if (rps_worker_declare_opt(w, &key, &len, 1, &init, &o)) {
			FAIL("declare key %d with its spec", k);
			return -1;
		}
	}
	return 0;
}

static void run_spec(struct rps_worker *w, int rank)
{
	const struct rps_init init = {.kind = RPS_INIT_CONST, .a = W0};
	rps_key_t all[NK + 1] = {1, 2, 3, 4, 5, 6, KEY_LATE};
	rps_key_t plain[2] = {KEY_DEFAULT, KEY_LATE};
	size_t lens[NK + 2];
	struct rps_optim_opts o, other;
	float before[LEN], after[LEN];
	struct rps_req *req = NULL;
	rps_key_t key;

	for (int i = 0; i < NK + 2; i++)
		lens[i] = LEN;
	if (rank == 0) {
		if (declare_specs(w))
			return;
		EXPECT(rps_worker_declare(w, plain, lens, 2, &init), 0);
	}
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 1) {
		key = 5;
		spec(5, &o);
		other = o;
		other.lr = 0.02f;
		EXPECT(rps_worker_declare_opt(w, &key, lens, 1, &init, &other), -EINVAL);
		EXPECT(rps_worker_declare_opt(w, &key, lens, 1, &init, &o), 0);
		other.kind = RPS_OPT_SGD;
		EXPECT(rps_worker_set_optimizer(w, &key, 1, &other), -EINVAL);
		EXPECT(rps_worker_set_optimizer(w, &key, 1, &o), 0);
		EXPECT(rps_worker_declare(w, all, lens, NK, NULL), 0);
		EXPECT(rps_worker_declare(w, plain, lens, 2, NULL), 0);
		key = KEY_LATE; /* no update yet: takes the adamw spec */
		spec(6, &o);
		EXPECT(rps_worker_set_optimizer(w, &key, 1, &o), 0);
		/* malformed: refused before anything is sent */
		o.lr = -1;
		EXPECT(rps_worker_set_optimizer(w, &key, 1, &o), -EINVAL);
	}
	EXPECT(rps_worker_barrier(w), 0);
	{
		rps_key_t pushed[NK + 2] = {1, 2, 3, 4, 5, 6, KEY_LATE, KEY_DEFAULT};

		for (int c = 0; c < K; c++) {
			/* KEY_DEFAULT gets key 7's gradient formula, whatever it is */
			if (one_clock(w, pushed, rank == 0 ? NK + 2 : 0, c))
				return;
		}
	}
	check(w, all, NK + 1, K, "spec");
	EXPECT(rps_worker_barrier(w), 0);
	if (rank == 1) {
		/* trained with the servers' default: a spec is refused, nothing moves */
		key = KEY_DEFAULT;
		if (wait_req(rps_worker_pull(w, &key, before, lens, 1, &req), &req, "pull"))
			return;
		spec(5, &o);
		EXPECT(rps_worker_set_optimizer(w, &key, 1, &o), -EINVAL);
		EXPECT(rps_worker_declare_opt(w, &key, lens, 1, NULL, &o), -EINVAL);
		if (wait_req(rps_worker_pull(w, &key, after, lens, 1, &req), &req, "pull"))
			return;
		if (memcmp(before, after, sizeof(before)) || before[0] == W0)
			FAIL("key %d changed by a refused spec (or never trained)", KEY_DEFAULT);
	}
	EXPECT(rps_worker_barrier(w), 0);
}

static void wait_file(const char *path)
{
	struct timespec ts = {0, 20 * 1000 * 1000};

	for (int i = 0; i < 3000 && access(path, F_OK); i++)
		nanosleep(&ts, NULL);
	if (access(path, F_OK))
		FAIL("%s never appeared", path);
}

static void run_ckpt(struct rps_worker *w)
{
	rps_key_t keys[NK] = {1, 2, 3, 4, 5, 6};
	const char *ready = getenv("ITEST_READY"), *go = getenv("ITEST_GO");
	FILE *f;

	if (!ready || !go) {
		FAIL("ITEST_READY and ITEST_GO must be set");
		return;
	}
	if (declare_specs(w))
		return;
	for (int c = 0; c < K; c++)
		if (one_clock(w, keys, NK, c))
			return;
	check(w, keys, NK, K, "before the restart");
	f = fopen(ready, "w");
	if (f)
		fclose(f);
	wait_file(go);
	for (int c = K; c < 2 * K; c++)
		if (one_clock(w, keys, NK, c))
			return;
	check(w, keys, NK, 2 * K, "after the restore");
}

int main(int argc, char **argv)
{
	struct rps_worker *w;
	int rc, rank;

	if (argc != 2 || (strcmp(argv[1], "spec") && strcmp(argv[1], "ckpt"))) {
		fprintf(stderr, "usage: itest-optim spec|ckpt\n");
		return 2;
	}
	rc = rps_worker_create(NULL, &w);
	if (rc) {
		fprintf(stderr, "itest-optim: worker: %s\n", rps_strerror(rc));
		return 1;
	}
	rank = rps_worker_rank(w);
	if (!strcmp(argv[1], "spec"))
		run_spec(w, rank);
	else
		run_ckpt(w);
	rps_worker_destroy(w);
	if (failures) {
		fprintf(stderr, "itest-optim %s, worker %d: %d failures\n", argv[1], rank,
			failures);
		return 1;
	}
	printf("itest-optim %s, worker %d: ok\n", argv[1], rank);
	return 0;
}
