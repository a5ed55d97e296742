/* fmnist-train: Fashion-MNIST MLP (784-256-128-10) trained through rdmaps.
 *
 * Distributed (default): run as a worker of an rdmaps cluster (rdmaps-launch
 * sets the environment). The tensors live on the servers; each step pulls
 * the parameters, computes the gradient of a mini-batch with OpenBLAS and
 * pushes it; the servers apply the optimizer the job gave the keys when it
 * declared them (recipe.h: the flags, the number of epochs and the servers'
 * consistency model, bsp, ssp or asp, decide it). The summary reports the
 * recipe, the consistency and the largest staleness a pull of worker 0 saw.
 *
 * --local: the same model, data order and optimizer code in one process with
 * no server: the reference the distributed runs are compared against.
 *
 * A distributed step overlaps communication with computation: the backward
 * pass pushes each tensor's gradient as soon as it is final, and after the
 * clock the pulls are issued in the order the next forward pass needs them,
 * which waits for each tensor only when it reaches it (struct mlp_hooks).
 * A communication thread posts them (comm.h), so the sends' copies run on
 * another core while this one computes.
 *
 * Models in and out (.npz, <rdmaps/model.h>): --init-model is checked by
 * every worker and assigned by worker 0 before the first barrier;
 * --save-model writes what worker 0 evaluated last, --local its own
 * parameters, with the same keys and layout (--help lists them).
 *
 * --batch is the GLOBAL batch: with W workers each computes B / W samples and
 * pushes its gradient scaled by 1 / W, so a BSP step (sum of the pushes) is the
 * mean over the global batch, as in --local.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include <jansson.h>
#include <rdmaps/rdmaps.h>

#include "comm.h"
#include "compress_opt.h"
#include "curves.h"
#include "idx.h"
#include "mlp.h"
#include "recipe.h"
#include "sync.h"

extern void openblas_set_num_threads(int);

struct args {
	int epochs;
	size_t batch;
	const char *data;
	int local;
	const char *summary;
	uint64_t seed;
	int progress; /* -1 auto, 0 off, 1 on */
	size_t train_limit;
	struct recipe recipe;
	int eval_every, ckpt_after_eval; /* --eval-every, --checkpoint-after-eval */
	const char *save_model, *init_model; /* .npz files (model.h) */
	const char *curves;		     /* --curves FILE.svg / FILE.png */
	const char *compress;		     /* --compress (compress_opt.h) */
	enum sync_mode sync;		     /* --sync ps|ring (sync.h) */
	int local_agg; /* --local-agg on: synchronous steps summed on the host first */
};

/* Every REPORT_S seconds each worker reports its figures to the scheduler
 * (rps_worker_report: the dashboard's curves) and notes them for --curves. */
#define REPORT_S 0.25

struct job {
	struct args a;
	struct fmnist_set train, test;
	struct mlp_ws ws;
	float *params, *grad, *xb;
	float *grads[2];   /* distributed: double-buffered gradients (comm.h) */
	uint64_t nstep;
	uint8_t *yb;
	size_t *order, nlocal, first;
	int rank, nworkers, nservers;
	const char *transport, *consistency;
	int staleness; /* SSP bound */
	struct rps_optim_opts spec; /* the keys' optimizer (recipe.h) */
	size_t per_step, steps; /* samples per worker and step, steps (clocks) per epoch */
	/* RDMAPS_MAX_WORKERS set: workers may join (docs/scheduler.md "Growth"): the
	 * steps per epoch do not depend on the count, the data is split again */
	int growable, grow_gen;
	/* --local */
	struct rps_optimizer *opt; /* the servers' optimizer, run here */
	/* distributed */
	struct rps_worker *w;
	long ckpt_clock; /* --checkpoint-after-eval: the last one (-1: none) */
	double ckpt_acc;
	rps_key_t keys[MLP_NTENSORS];
	size_t off[MLP_NTENSORS];
	struct comm *comm;
	/* figures since the last report */
	double t_start, rep_t, rep_loss;
	size_t rep_steps;
	int report_warned;
	struct curves cv; /* --curves */
};

/* next clock's parameters, in the order the forward pass uses them */
static const int pull_order[MLP_NTENSORS] = {
	MLP_T_B1, 0, 1, 2, 3, MLP_T_W2, MLP_T_B2, MLP_T_W3, MLP_T_B3,
};
_Static_assert(MLP_W1_BLOCKS == 4, "pull_order[] lists the W1 blocks");

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: fmnist-train [options]\n"
		"  --epochs N            epochs (default 10)\n"
		"  --batch B             global mini-batch (default 256)\n"
		"  --data DIR            IDX files (default " FMNIST_DIR_DEFAULT ")\n"
		"  --local               train in this process, no server (reference)\n"
		"  --summary-json FILE   write a JSON summary at the end (worker 0)\n"
		"  --seed S              data shuffling and --local init (default 1)\n"
		"  --train-limit N       use only the first N training images\n"
		"  --progress            progress bar even when not a terminal\n"
		"  --no-progress         plain log lines\n"
		"  --eval-every N        worker 0 evaluates every N epochs and after the\n"
		"                        last (default 1)\n"
		"  --checkpoint-after-eval  after each evaluation, every shard writes a\n"
		"                        checkpoint of the clock just evaluated (servers need\n"
		"                        RDMAPS_CHECKPOINT_DIR)\n"
		"  --init-model FILE     start from the model in FILE (.npz; every worker\n"
		"                        checks it, worker 0 loads it into the servers)\n"
		"  --curves FILE         write the curves (loss, test accuracy, samples/s)\n"
		"                        at the end: FILE.svg, or FILE.png through gnuplot\n"
		"                        (worker 0)\n"
		"  --save-model FILE     write the trained model to FILE (.npz, worker 0,\n"
		"                        the parameters of the final evaluation)\n"
		"  --epochs 0            no training: evaluate (and save) the initial model\n"
		"  --sync ps|ring        ps: the servers apply the optimizer (default); ring:\n"
		"                        the workers all-reduce the gradients and each applies\n"
		"                        it locally (same init from --seed or --init-model)\n"
		"  --local-agg on|off    on: each step is one rps_worker_local_pushpull: the\n"
		"                        workers of one host sum their gradients in shared\n"
		"                        memory and one pushes and pulls for them (RDMAPS_LOCAL_AGG\n"
		"                        =off keeps the step but not the sum); off (default):\n"
		"                        pushes and pulls overlap the computation\n"
		"Model files: one float32 array per key, named by the key; weights are\n"
		"row-major [in x out], h = relu(x @ W + b), x = (pixel / 255 - 0.2860) / 0.3530:\n"
		"  \"0\" \"1\" \"2\" \"3\"  W1 rows 0-195, 196-391, 392-587, 588-783 (196 x 256 each;\n"
		"                   concatenated: W1 784 x 256)\n"
		"  \"4\" b1 256   \"5\" W2 256 x 128   \"6\" b2 128   \"7\" W3 128 x 10   \"8\" b3 10\n"
		"Written arrays are 1-D; any shape with the right element count is read.\n");
	fputs(COMPRESS_USAGE, out);
	recipe_usage(out);
	fprintf(out, "The consistency model is the servers' (rdmaps-launch --consistency, "
		     "RDMAPS_CONSISTENCY).\n");
}

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option base[] = {
		{ "epochs", required_argument, NULL, 'e' },
		{ "batch", required_argument, NULL, 'b' },
		{ "data", required_argument, NULL, 'd' },
		{ "local", no_argument, NULL, 'l' },
		{ "summary-json", required_argument, NULL, 'j' },
		{ "seed", required_argument, NULL, 's' },
		{ "train-limit", required_argument, NULL, 'n' },
		{ "progress", no_argument, NULL, 'p' },
		{ "no-progress", no_argument, NULL, 'P' },
		{ "eval-every", required_argument, NULL, 'E' },
		{ "checkpoint-after-eval", no_argument, NULL, 'C' },
		{ "save-model", required_argument, NULL, 'S' },
		{ "init-model", required_argument, NULL, 'I' },
		{ "curves", required_argument, NULL, 'v' },
		{ "compress", required_argument, NULL, 'Z' },
		{ "sync", required_argument, NULL, 'Y' },
		{ "local-agg", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
	};
	enum { NBASE = sizeof(base) / sizeof(base[0]) };
	static struct option opts[NBASE + 16];
	int c;

	_Static_assert(sizeof(opts) / sizeof(opts[0]) > NBASE + 10, "room for the recipe's flags");
	memcpy(opts, base, sizeof(base));
	memcpy(opts + NBASE, recipe_options, (size_t)recipe_noptions * sizeof(opts[0]));
	memset(&opts[NBASE + recipe_noptions], 0, sizeof(opts[0]));

	*a = (struct args){ .epochs = 10, .batch = 256, .data = FMNIST_DIR_DEFAULT, .seed = 1,
			    .progress = -1, .eval_every = 1 };
	recipe_defaults(&a->recipe);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'e': a->epochs = atoi(optarg); break;
		case 'b': a->batch = strtoul(optarg, NULL, 10); break;
		case 'd': a->data = optarg; break;
		case 'l': a->local = 1; break;
		case 'j': a->summary = optarg; break;
		case 's': a->seed = strtoull(optarg, NULL, 10); break;
		case 'n': a->train_limit = strtoul(optarg, NULL, 10); break;
		case 'p': a->progress = 1; break;
		case 'P': a->progress = 0; break;
		case 'E': a->eval_every = atoi(optarg); break;
		case 'C': a->ckpt_after_eval = 1; break;
		case 'S': a->save_model = optarg; break;
		case 'I': a->init_model = optarg; break;
		case 'v': a->curves = optarg; break;
		case 'Z': a->compress = optarg; break;
		case 'Y':
			if (sync_parse(optarg, &a->sync))
				return -EINVAL;
			break;
		case 'A':
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, "fmnist-train: --local-agg %s: expected on or off\n",
					optarg);
				return -EINVAL;
			}
			a->local_agg = !strcmp(optarg, "on");
			break;
		case 'h': usage(stdout); exit(0);
		default:
			if (c >= RECIPE_OPT_BASE) {
				if (recipe_option(&a->recipe, c, optarg))
					return -EINVAL;
				break;
			}
			usage(stderr);
			return -EINVAL;
		}
	}
	if (a->epochs < 0 || a->batch < 1 || a->eval_every < 1) {
		fprintf(stderr, "fmnist-train: --epochs must be >= 0, --batch and --eval-every >= 1\n");
		return -EINVAL;
	}
	if (compress_check(a->compress, a->local))
		return -EINVAL;
	compress_momentum_note(a->compress, a->recipe.kind);
	if (a->local_agg && a->local) {
		fprintf(stderr, "fmnist-train: --local-agg on needs servers (not --local)\n");
		return -EINVAL;
	}
	if (a->ckpt_after_eval && a->local) {
		fprintf(stderr, "fmnist-train: --checkpoint-after-eval needs servers (not --local)\n");
		return -EINVAL;
	}
	return 0;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void shuffle(size_t *v, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;

	for (size_t i = n; i > 1; i--) {
		size_t j = rng_next(&s) % i;
		size_t t = v[i - 1];
		v[i - 1] = v[j];
		v[j] = t;
	}
}

/* This worker's share of each batch and of the training set, the steps per
 * epoch (the same on every worker: BSP needs it) and the keys' optimizer. */
static int plan(struct job *j, enum rps_consistency c)
{
	j->per_step = j->a.batch / (size_t)j->nworkers;
	if (j->per_step == 0) {
		fprintf(stderr, "fmnist-train: batch %zu < %d workers\n", j->a.batch, j->nworkers);
		return -EINVAL;
	}
	j->nlocal = j->train.n / (size_t)j->nworkers;
	j->first = (size_t)j->rank * j->nlocal;
	j->steps = j->nlocal / j->per_step;
	if (j->growable) /* the same for any count: a joiner's epochs are the others' */
		j->steps = j->train.n / j->a.batch;
	if (j->steps == 0) {
		fprintf(stderr, "fmnist-train: %zu training images make no step of %zu per worker\n",
			j->nlocal, j->per_step);
		return -EINVAL;
	}
	/* --epochs 0 (evaluate only) still gives the keys a valid spec */
	return recipe_spec(&j->a.recipe, (uint64_t)(j->a.epochs > 0 ? j->a.epochs : 1) * j->steps,
			   j->steps, c, j->nworkers, &j->spec);
}

/* At an epoch's start: workers joined the job (rps_worker_num_workers_gen
 * changed): this worker's share is split again by the new count, the steps
 * per epoch stay (plan: growable). */
static void regrow(struct job *j)
{
	int gen = j->w ? rps_worker_num_workers_gen(j->w) : 0, n;

	if (!j->growable || gen <= j->grow_gen)
		return;
	j->grow_gen = gen;
	n = rps_worker_num_workers(j->w);
	if (n <= j->nworkers || j->a.batch / (size_t)n == 0)
		return;
	j->nworkers = n;
	j->per_step = j->a.batch / (size_t)n;
	j->nlocal = j->train.n / (size_t)n;
	j->first = (size_t)j->rank * j->nlocal;
	for (size_t i = 0; i < j->nlocal; i++)
		j->order[i] = j->first + i;
	printf("fmnist-train: worker %d: the job has %d workers now: images %zu..%zu, %zu per "
	       "step\n",
	       j->rank, n, j->first, j->first + j->nlocal - 1, j->per_step);
}

/* --init-model into params, checked whole against the keys (the library
 * says what is wrong); params untouched on error. */
static int read_init_model(struct job *j)
{
	int rc = rps_model_load(j->a.init_model, j->keys, mlp_lens, MLP_NTENSORS, j->params);

	if (rc) /* the library said what is wrong */
		fprintf(stderr, "fmnist-train: --init-model %s: not loaded, nothing trained\n",
			j->a.init_model);
	return rc;
}

/* --sync ring: the same start on every worker (as --local), the optimizer
 * here; the servers are not used (sync.h). */
static int setup_ring(struct job *j)
{
	int rc;

	j->consistency = "ring";
	if ((rc = plan(j, RPS_BSP)))
		return rc;
	mlp_init_params(j->params, j->a.seed);
	if (j->a.init_model && read_init_model(j))
		return -EINVAL;
	rc = rps_optimizer_create(&j->spec, mlp_nparams(), &j->opt);
	if (rc)
		fprintf(stderr, "fmnist-train: optimizer: %s\n", rps_strerror(rc));
	return rc;
}

static int setup_distributed(struct job *j)
{
	int rc = rps_worker_create(NULL, &j->w);

	if (rc) {
		fprintf(stderr, "fmnist-train: cannot join the cluster: %s\n", rps_strerror(rc));
		return rc;
	}
	j->rank = rps_worker_rank(j->w);
	j->nworkers = rps_worker_num_workers(j->w);
	j->nservers = rps_worker_num_servers(j->w);
	j->growable = getenv("RDMAPS_MAX_WORKERS") && atoi(getenv("RDMAPS_MAX_WORKERS")) > 0;
	j->grow_gen = rps_worker_num_workers_gen(j->w);
	j->transport = rps_worker_transport(j->w);
	j->staleness = (int)rps_worker_staleness_bound(j->w);
	switch (rps_worker_consistency(j->w)) {
	case RPS_BSP: j->consistency = "bsp"; break;
	case RPS_SSP: j->consistency = "ssp"; break;
	default: j->consistency = "asp"; break;
	}
	if (j->a.sync == SYNC_RING)
		return setup_ring(j);
	if ((rc = plan(j, rps_worker_consistency(j->w))))
		return rc;
	/* every worker checks the file: a bad one stops them all before training */
	if (j->a.init_model && (rc = read_init_model(j)))
		return rc;
	for (int t = 0; t < MLP_NTENSORS; t++) {
		struct rps_init init = { .kind = RPS_INIT_ZEROS };

		if (mlp_fan_in[t]) {
			init.kind = RPS_INIT_NORMAL;
			init.a = 0.0f;
			init.b = (float)sqrt(2.0 / (double)mlp_fan_in[t]);
			init.seed = 42 + (uint64_t)t;
		}
		rc = rps_worker_declare_opt(j->w, &j->keys[t], &mlp_lens[t], 1, &init, &j->spec);
		if (rc) {
			fprintf(stderr, "fmnist-train: declare tensor %d: %s\n", t, rps_strerror(rc));
			return rc;
		}
	}
	if ((rc = compress_apply(j->w, j->keys, MLP_NTENSORS, j->a.compress)))
		return rc;
	/* worker 0 assigns the file's values; the barrier orders every first pull
	 * after it */
	if (j->a.init_model && j->rank == 0 &&
	    (rc = rps_worker_load_model(j->w, j->keys, mlp_lens, MLP_NTENSORS, j->a.init_model))) {
		fprintf(stderr, "fmnist-train: --init-model %s: %s\n", j->a.init_model,
			rps_strerror(rc));
		return rc;
	}
	rc = rps_worker_barrier(j->w);
	if (rc) {
		fprintf(stderr, "fmnist-train: barrier: %s\n", rps_strerror(rc));
		return rc;
	}
	struct rps_req *req;
	rc = rps_worker_pull(j->w, j->keys, j->params, mlp_lens, MLP_NTENSORS, &req);
	if (!rc)
		rc = rps_req_wait(req, -1);
	if (rc) {
		fprintf(stderr, "fmnist-train: first pull: %s\n", rps_strerror(rc));
		return rc;
	}
	j->grads[0] = j->grad;
	j->grads[1] = malloc(mlp_nparams() * sizeof(float));
	if (!j->grads[1])
		return -ENOMEM;
	rc = comm_start(j->w, MLP_NTENSORS, j->keys, mlp_lens, j->off, j->params, j->grads,
			pull_order, &j->comm);
	if (rc)
		fprintf(stderr, "fmnist-train: communication thread: %s\n", rps_strerror(rc));
	return rc;
}

static int setup_local(struct job *j)
{
	int rc;

	j->rank = 0;
	j->nworkers = 1;
	j->nservers = 0;
	j->transport = "local";
	j->consistency = "local";
	if ((rc = plan(j, RPS_BSP)))
		return rc;
	mlp_init_params(j->params, j->a.seed);
	if (j->a.init_model && read_init_model(j))
		return -EINVAL;
	rc = rps_optimizer_create(&j->spec, mlp_nparams(), &j->opt);
	if (rc)
		fprintf(stderr, "fmnist-train: optimizer: %s\n", rps_strerror(rc));
	return rc;
}

/* Hooks of the distributed step (see the comment at the top). */
static int wait_param(void *arg, int t)
{
	struct job *j = arg;

	return comm_wait_param(j->comm, t);
}

static int grad_ready(void *arg, int t)
{
	struct job *j = arg;

	return comm_push(j->comm, t, (int)(j->nstep & 1));
}

/* --checkpoint-after-eval: the parameters just evaluated are those after
 * clocks < our clock (the last pull's), and under BSP no shard passes it
 * before we push it: every shard writes exactly them. */
static int checkpoint_evaluated(struct job *j, double acc)
{
	uint32_t c = rps_worker_clock_value(j->w);
	int rc = rps_worker_checkpoint(j->w, c, 0);

	if (rc) {
		fprintf(stderr, "fmnist-train: checkpoint at clock %u: %s\n", c, rps_strerror(rc));
		return rc;
	}
	printf("checkpoint at clock %u: test accuracy %.4f\n", c, acc);
	j->ckpt_clock = c;
	j->ckpt_acc = acc;
	return 0;
}

/* Wait for every pull still in flight (before evaluating). */
static int drain_pulls(struct job *j)
{
	int rc = 0;

	for (int t = 0; t < MLP_NTENSORS; t++) {
		int r = wait_param(j, t);
		rc = rc ? rc : r;
	}
	return rc;
}

/* One step: gradient of this worker's share of the batch, then the update. */
static int step(struct job *j, const size_t *idx, size_t n, float *loss_p)
{
	const struct mlp_hooks hooks = { .wait_param = wait_param, .grad_ready = grad_ready,
					 .arg = j };
	int rc;

	for (size_t i = 0; i < n; i++) {
		memcpy(j->xb + i * MLP_IN, j->train.x + idx[i] * MLP_IN, MLP_IN * sizeof(float));
		j->yb[i] = j->train.y[idx[i]];
	}
	if (j->a.local) {
		rc = mlp_grad(j->params, j->xb, j->yb, n, 1.0f, j->grad, &j->ws, NULL, loss_p);
		rps_optimizer_step(j->opt, j->params, j->grad);
		return rc;
	}
	if (j->a.sync == SYNC_RING) {
		rc = mlp_grad(j->params, j->xb, j->yb, n, 1.0f / (float)j->nworkers, j->grad,
			      &j->ws, NULL, loss_p);
		return rc ? rc
			  : sync_ring_step(j->w, j->opt, j->keys, mlp_lens, MLP_NTENSORS,
					   j->params, j->grad);
	}
	if (j->a.local_agg) { /* one synchronous step, summed on the host first */
		rc = mlp_grad(j->params, j->xb, j->yb, n, 1.0f / (float)j->nworkers, j->grad,
			      &j->ws, NULL, loss_p);
		if (!rc)
			rc = rps_worker_local_pushpull(j->w, j->keys, j->grad, j->params, mlp_lens,
						       MLP_NTENSORS);
		j->nstep++;
		return rc;
	}
	/* this step's gradient buffer was pushed two steps ago: wait for that */
	int buf = (int)(j->nstep & 1);
	if ((rc = comm_wait_pushes(j->comm, buf)))
		return rc;
	rc = mlp_grad(j->params, j->xb, j->yb, n, 1.0f / (float)j->nworkers, j->grads[buf],
		      &j->ws, &hooks, loss_p);
	if (!rc)
		rc = comm_end_step(j->comm);
	j->nstep++;
	return rc;
}

static void progress(const struct job *j, int epoch, size_t done, size_t total, double loss,
		     double sps, double acc)
{
	int width = 30, fill = total ? (int)(width * done / total) : width;
	char bar[64];

	for (int i = 0; i < width; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[width] = '\0';
	printf("\repoch %d/%d [%s] %3d%% loss %.4f | %.0f samples/s | test acc ", epoch,
	       j->a.epochs, bar, total ? (int)(100 * done / total) : 100, loss, sps);
	if (acc >= 0)
		printf("%.4f ", acc);
	else
		printf("-      ");
	fflush(stdout);
}

/* v rounded to `places` decimals, as "%.*f" prints it */
static double dec(double v, int places)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%.*f", places, v);
	return strtod(buf, NULL);
}

/* v rounded to `digits` significant digits, as "%.*g" prints it */
static double sig(double v, int digits)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%.*g", digits, v);
	return strtod(buf, NULL);
}

/* A number; not finite (a diverged loss): null */
static json_t *jreal(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* The summary, written with jansson. Numbers keep the rounding they always had
 * (accuracy and loss to 4 decimals, samples/s to 1, lr and friends to 9
 * significant digits) and print with 15 significant digits, so a rounded value
 * reads as written (0.8958, not 0.89580000000000004); train_loss_exact, the
 * loss for bit-for-bit comparisons, is a string of its 17 significant digits
 * (jansson has one precision per file). */
static void write_summary(const struct job *j, double acc, double loss, double sps)
{
	/* bit-for-bit comparisons of runs: the loss in full, FNV-1a of the final parameters */
	const unsigned char *pb = (const unsigned char *)j->params;
	unsigned long long h = 14695981039346656037ull;
	char fnv[17], exact[32];
	json_t *doc;
	FILE *f;
	int rc;

	for (size_t i = 0; i < mlp_nparams() * sizeof(float); i++)
		h = (h ^ pb[i]) * 1099511628211ull;
	snprintf(fnv, sizeof(fnv), "%016llx", h);
	snprintf(exact, sizeof(exact), "%.17g", loss);
	doc = json_pack(
	    "{s:o, s:o, s:i, s:o, s:i, s:i, s:s, s:s, s:i, s:i, s:I, s:I, s:s, s:o, "
	    "s:o, s:o, s:s, s:I, s:I, s:I, s:s, s:s}",
	    "test_accuracy", jreal(dec(acc, 4)), "train_loss", jreal(dec(loss, 4)), "epochs",
	    j->a.epochs, "samples_per_sec", jreal(dec(sps, 1)), "workers", j->nworkers, "servers",
	    j->nservers, "transport", j->transport, "consistency", j->consistency, "staleness",
	    j->staleness, "staleness_lr", j->spec.staleness_lr, "max_staleness",
	    (json_int_t)(j->w ? rps_worker_max_staleness(j->w) : 0), "batch",
	    (json_int_t)j->a.batch, "optimizer", recipe_kind_name(j->spec.kind), "lr",
	    jreal(sig(j->spec.lr, 9)), "momentum", jreal(sig(j->spec.momentum, 9)), "weight_decay",
	    jreal(sig(j->spec.weight_decay, 9)), "lr_schedule",
	    recipe_schedule_name(j->spec.schedule), "total_steps", (json_int_t)j->spec.total_steps,
	    "warmup_steps", (json_int_t)j->spec.warmup_steps, "steps_per_epoch",
	    (json_int_t)j->steps, "train_loss_exact", exact, "params_fnv1a", fnv);
	if (doc && j->w) {
		json_object_set_new(doc, "local_agg", json_string(j->a.local_agg ? "on" : "off"));
		json_object_set_new(doc, "local_agg_group", json_integer(rps_worker_local_size(j->w)));
	}
	if (doc && j->ckpt_clock >= 0) {
		json_object_set_new(doc, "checkpoint_clock", json_integer(j->ckpt_clock));
		json_object_set_new(doc, "checkpoint_accuracy", jreal(dec(j->ckpt_acc, 4)));
	}
	if (doc && j->w)
		compress_report(j->w, j->a.compress, j->steps * (size_t)j->a.epochs, doc);
	if (!doc) {
		fprintf(stderr, "fmnist-train: %s not written: out of memory\n", j->a.summary);
		return;
	}
	f = fopen(j->a.summary, "w");
	if (!f) {
		fprintf(stderr, "fmnist-train: cannot write %s: %s\n", j->a.summary,
			strerror(errno));
		json_decref(doc);
		return;
	}
	rc = json_dumpf(doc, f, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	json_decref(doc);
	if (!rc && fputc('\n', f) == EOF)
		rc = -1;
	if (fclose(f) || rc)
		fprintf(stderr, "fmnist-train: writing %s failed\n", j->a.summary);
}

/* One figure to the scheduler (distributed runs); a refusal is said once. */
static void report(struct job *j, const char *name, double v)
{
	int rc;

	if (!j->w)
		return;
	rc = rps_worker_report(j->w, name, v);
	if (rc && rc != -EAGAIN && !j->report_warned) {
		fprintf(stderr, "fmnist-train: reporting %s to the scheduler: %s (training goes on)\n",
			name, rps_strerror(rc));
		j->report_warned = 1;
	}
}

/* After each step: every REPORT_S the mean loss of the steps since the last
 * report, this worker's samples/s and the staleness its pulls saw. */
static void after_step(struct job *j, float loss, int force)
{
	double now = now_s(), dt = now - j->rep_t;

	j->rep_loss += loss;
	j->rep_steps++;
	if (!force && dt < REPORT_S)
		return;
	double l = j->rep_loss / (double)j->rep_steps;
	double sps = dt > 0 ? (double)(j->rep_steps * j->per_step) / dt : 0;

	report(j, "loss", l);
	report(j, "samples_s", sps);
	if (j->w)
		report(j, "staleness", (double)rps_worker_max_staleness(j->w));
	curves_add(&j->cv, CURVE_LOSS, now - j->t_start, l);
	curves_add(&j->cv, CURVE_SPS, now - j->t_start, sps * (double)j->nworkers);
	j->rep_t = now;
	j->rep_loss = 0;
	j->rep_steps = 0;
}

int main(int argc, char **argv)
{
	/* static: an error exit returns with the job's buffers (and the
	 * communication thread) still in use, and the system takes them back;
	 * a successful run frees everything below */
	static struct job j;
	int rc;

	memset(&j, 0, sizeof(j));
	j.ckpt_clock = -1;
	if (parse_args(argc, argv, &j.a))
		return 2;
	openblas_set_num_threads(1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (fmnist_load(j.a.data, "train", &j.train) || fmnist_load(j.a.data, "t10k", &j.test))
		return 1;
	if (j.a.train_limit && j.a.train_limit < j.train.n)
		j.train.n = j.a.train_limit;

	j.params = malloc(mlp_nparams() * sizeof(float));
	j.grad = malloc(mlp_nparams() * sizeof(float));
	if (!j.params || !j.grad)
		return 1;
	for (int t = 0; t < MLP_NTENSORS; t++) {
		j.keys[t] = (rps_key_t)t; /* the tensors' keys, in every mode */
		j.off[t] = mlp_offset(t);
	}
	rc = j.a.local ? setup_local(&j) : setup_distributed(&j);
	if (rc) {
		if (j.w)
			rps_worker_destroy(j.w); /* leave the cluster: nobody waits for us */
		return 1;
	}

	size_t per_step = j.per_step, steps = j.steps;
	j.order = malloc(j.nlocal * sizeof(size_t));
	j.xb = malloc(per_step * MLP_IN * sizeof(float));
	j.yb = malloc(per_step);
	if (!j.order || !j.xb || !j.yb || mlp_ws_init(&j.ws, per_step > 500 ? per_step : 500))
		return 1;
	for (size_t i = 0; i < j.nlocal; i++)
		j.order[i] = j.first + i;

	int bar = j.rank == 0 && (j.a.progress == 1 || (j.a.progress < 0 && isatty(STDOUT_FILENO)));
	if (j.rank == 0)
		printf("fmnist-train: %d worker(s), %d server(s), transport %s, consistency %s, "
		       "batch %zu (%zu per worker), %zu steps/epoch, %zu training images\n",
		       j.nworkers, j.nservers, j.transport, j.consistency, j.a.batch, per_step, steps,
		       j.train.n);
	if (j.rank == 0) {
		char desc[256];

		recipe_describe(&j.spec, desc, sizeof(desc));
		printf("fmnist-train: optimizer %s\n", desc);
	}

	/* a worker that joined a running job (it replaced a dead one: same rank,
	 * same share of the data) goes on where the job is: its clock is the
	 * number of steps the job made (every worker makes `steps` per epoch) */
	uint32_t c0 = j.w ? rps_worker_clock_value(j.w) : 0;
	int e0 = 1;
	size_t s0 = 0;
	if (c0) {
		e0 = (int)(c0 / steps) + 1;
		s0 = c0 % steps;
		printf("fmnist-train: worker %d joins the running job at clock %u: epoch %d, "
		       "step %zu of %zu\n",
		       j.rank, c0, e0, s0 + 1, steps);
	}
	double acc = -1, loss_epoch = 0, train_time = 0, sps = 0;
	curves_init(&j.cv);
	j.t_start = j.rep_t = now_s();
	for (int e = e0; e <= j.a.epochs; e++) {
		double t0 = now_s(), loss_sum = 0, last_draw = 0;
		size_t first_step = e == e0 ? s0 : 0;

		regrow(&j); /* workers joined: split the data again */
		per_step = j.per_step;
		shuffle(j.order, j.nlocal, j.a.seed * 1000003ull + (uint64_t)e * 7919 + (uint64_t)j.rank);
		for (size_t s = first_step; s < steps; s++) {
			float loss;

			if (step(&j, j.order + s * per_step, per_step, &loss))
				return 1;
			loss_sum += loss;
			after_step(&j, loss, s + 1 == steps);
			double now = now_s();
			if (bar && (now - last_draw > 0.2 || s + 1 == steps)) {
				double el = now - t0;
				progress(&j, e, s + 1, steps, loss_sum / (double)(s + 1 - first_step),
					 el > 0 ? (double)((s + 1) * per_step * (size_t)j.nworkers) / el : 0,
					 acc);
				last_draw = now;
			}
		}
		double el = now_s() - t0;
		train_time += el;
		loss_epoch = loss_sum / (double)(steps - first_step);
		sps = (double)((steps - first_step) * per_step * (size_t)j.nworkers) / el;
		if (!j.a.local && j.comm && drain_pulls(&j))
			return 1;
		if (j.rank == 0 && (e % j.a.eval_every == 0 || e == j.a.epochs)) {
			acc = mlp_accuracy(j.params, j.test.x, j.test.y, j.test.n, &j.ws);
			report(&j, "test_accuracy", acc);
			curves_add(&j.cv, CURVE_ACCURACY, now_s() - j.t_start, acc);
			if (bar) {
				progress(&j, e, steps, steps, loss_epoch, sps, acc);
				printf("\n");
			} else {
				printf("epoch %d/%d loss %.4f samples/s %.0f test_accuracy %.4f\n", e,
				       j.a.epochs, loss_epoch, sps, acc);
			}
			if (j.a.ckpt_after_eval && checkpoint_evaluated(&j, acc))
				return 1;
		}
	}
	size_t steps_run = (size_t)j.a.epochs * steps > c0 ? (size_t)j.a.epochs * steps - c0 : 0;
	double sps_all = train_time > 0 ? (double)(steps_run * per_step * (size_t)j.nworkers) /
						  train_time
					: 0;
	if (j.rank == 0 && j.a.epochs == 0)
		acc = mlp_accuracy(j.params, j.test.x, j.test.y, j.test.n, &j.ws);
	if (j.rank == 0) {
		printf("fmnist-train: done: test accuracy %.4f, train loss %.4f, %.0f samples/s\n",
		       acc, loss_epoch, sps_all);
		if (j.w)
			compress_report(j.w, j.a.compress, steps * (size_t)j.a.epochs, NULL);
		if (j.a.summary)
			write_summary(&j, acc, loss_epoch, sps_all);
	}
	if (j.rank == 0 && j.a.curves) {
		char title[160];

		snprintf(title, sizeof(title),
			 "fmnist-train: %d worker(s), %d server(s), %s, test accuracy %.4f",
			 j.nworkers, j.nservers, j.a.local ? "local" : j.consistency, acc);
		if (curves_write(&j.cv, j.a.curves, title))
			return 1;
		printf("fmnist-train: curves written to %s\n", j.a.curves);
	}
	/* the very parameters evaluated last: worker 0's pull after the final
	 * clock (under BSP exactly the servers' values of that clock) */
	int failed = 0;
	if (j.rank == 0 && j.a.save_model &&
	    (rc = rps_model_save(j.a.save_model, j.keys, mlp_lens, MLP_NTENSORS, j.params))) {
		/* the library said why (rps_strerror's text is about rdmaps' use) */
		fprintf(stderr, "fmnist-train: --save-model %s: not written\n", j.a.save_model);
		failed = 1;
	}
	if (j.w) {
		if (j.comm && (rc = comm_stop(j.comm)))
			return 1;
		if (j.opt) /* --sync ring */
			rps_optimizer_destroy(j.opt);
		rc = rps_worker_barrier(j.w);
		if (rc)
			fprintf(stderr, "fmnist-train: final barrier: %s\n", rps_strerror(rc));
		rps_worker_destroy(j.w);
	} else {
		rps_optimizer_destroy(j.opt);
	}
	mlp_ws_free(&j.ws);
	fmnist_free(&j.train);
	fmnist_free(&j.test);
	free(j.params);
	free(j.grad);
	free(j.grads[1]);
	free(j.order);
	free(j.xb);
	free(j.yb);
	return failed;
}
