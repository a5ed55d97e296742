/* text-train: a fastText-style classifier trained through rdmaps: predict a
 * Debian package's Section from its name and short description (extract.py
 * makes the data from this machine's package lists).
 *
 * Model (model.h): hashed word unigrams, bigrams and character 3..5-grams
 * (features.h) index the rows of an embedding table of 2^22 rows x 64; an
 * example's vector is the mean of its rows, then a linear layer (64 x C plus
 * C biases) and softmax cross-entropy.
 *
 * Distributed (default; rdmaps-launch sets the environment): the rows live in
 * an rdmaps sparse table (<rdmaps/table.h>), created by the servers on first
 * touch; the linear layer is one dense key. Every step pulls the rows of the
 * unique ids of this worker's examples (rps_worker_pull_rows), computes the
 * gradient and pushes the rows' gradients (rps_worker_push_rows) and the
 * linear layer's; the servers apply the job's optimizer, lazily per row.
 *
 * --batch is the GLOBAL batch, taken in the same shuffled order on every
 * worker: worker r of W takes examples [r B / W, (r + 1) B / W) of each
 * global batch and scales its gradient by 1 / B, so under BSP the servers
 * apply exactly --local's step (up to the order of float sums).
 *
 * --local: the same model, data order, row initialisation (rps_table_initial_row) and
 * optimizers (local_table.h for the rows, rps_optimizer for the dense key)
 * in one process: the reference. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <rdmaps/rdmaps.h>
#include <rdmaps/table.h>

#include "data.h"
#include "local_table.h"
#include "model.h"

#define TABLE_ID 1      /* the embedding table */
#define DENSE_KEY 0     /* W then b */
#define PULL_CHUNK 8192 /* ids per pull_rows or push_rows call */

struct args {
	int epochs, dim, bits, eval_every;
	size_t batch, train_limit;
	const char *data, *summary;
	int local;
	uint64_t seed;
	int optimizer; /* enum rps_optim_kind */
	double lr;
	float init_scale;
};

struct job {
	struct args a;
	struct text_classes cls;
	struct text_set train, test;
	size_t ntrain, *order, *test_all; /* test_all: 0 .. test.n - 1 */
	int rank, nworkers, nservers, eval_said;
	const char *transport, *consistency;
	struct rps_table_spec tspec;
	struct rps_optim_opts dspec;
	size_t nparams;
	float *params, *gparams, *rows, *grows, *hbuf, *zbuf;
	size_t rows_cap, step_rows; /* step_rows: unique ids of this epoch's steps */
	struct text_batch batch, evb;
	/* --local */
	struct local_table lt;
	struct rps_optimizer *opt;
	/* distributed */
	struct rps_worker *w;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: text-train [options]\n"
		"  --epochs N            epochs (default 3)\n"
		"  --batch B             global mini-batch (default 256)\n"
		"  --lr LR               learning rate of the rows and the linear layer (default 0.2)\n"
		"  --optimizer NAME      sgd, adagrad or adam (default adagrad)\n"
		"  --data DIR            train.tsv, test.tsv, classes.tsv (default " TEXT_DIR_DEFAULT ")\n"
		"                        made by " TEXT_EXTRACT_SCRIPT " DIR\n"
		"  --local               train in this process, no server (reference)\n"
		"  --seed S              data order and the table's seed (default 1)\n"
		"  --dim D               embedding dimension (default 64, at most 512)\n"
		"  --bucket-bits K       2^K hashed ids (default 22)\n"
		"  --train-limit N       train on N examples (a fixed random subset)\n"
		"  --eval-every N        evaluate every N epochs and after the last (default 1)\n"
		"  --summary-json FILE   write a JSON summary at the end (worker 0)\n"
		"The consistency model is the servers' (rdmaps-launch --consistency); BSP\n"
		"reproduces --local.\n");
}

static int parse_optimizer(const char *s)
{
	if (!strcmp(s, "sgd"))
		return RPS_OPT_SGD;
	if (!strcmp(s, "adagrad"))
		return RPS_OPT_ADAGRAD;
	if (!strcmp(s, "adam"))
		return RPS_OPT_ADAM;
	return -1;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "epochs", required_argument, NULL, 'e' },
		{ "batch", required_argument, NULL, 'b' },
		{ "lr", required_argument, NULL, 'r' },
		{ "optimizer", required_argument, NULL, 'o' },
		{ "data", required_argument, NULL, 'd' },
		{ "local", no_argument, NULL, 'l' },
		{ "seed", required_argument, NULL, 's' },
		{ "dim", required_argument, NULL, 'D' },
		{ "bucket-bits", required_argument, NULL, 'K' },
		{ "train-limit", required_argument, NULL, 'n' },
		{ "eval-every", required_argument, NULL, 'E' },
		{ "summary-json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*a = (struct args){ .epochs = 3, .batch = 256, .lr = 0.2, .optimizer = RPS_OPT_ADAGRAD,
			    .data = TEXT_DIR_DEFAULT, .seed = 1, .dim = 64, .bits = 22,
			    .eval_every = 1 };
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'e': a->epochs = atoi(optarg); break;
		case 'b': a->batch = strtoul(optarg, NULL, 10); break;
		case 'r': a->lr = strtod(optarg, NULL); break;
		case 'o':
			if ((a->optimizer = parse_optimizer(optarg)) < 0) {
				fprintf(stderr, "text-train: --optimizer %s: want sgd, adagrad or adam\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'd': a->data = optarg; break;
		case 'l': a->local = 1; break;
		case 's': a->seed = strtoull(optarg, NULL, 10); break;
		case 'D': a->dim = atoi(optarg); break;
		case 'K': a->bits = atoi(optarg); break;
		case 'n': a->train_limit = strtoul(optarg, NULL, 10); break;
		case 'E': a->eval_every = atoi(optarg); break;
		case 'j': a->summary = optarg; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "text-train: unexpected argument %s (--help lists the options)\n",
			argv[optind]);
		return -EINVAL;
	}
	if (a->epochs < 0 || a->batch < 1 || a->eval_every < 1 || !(a->lr > 0) ||
	    a->dim < 1 || a->dim > 512 || a->bits < 8 || a->bits > 31) {
		fprintf(stderr, "text-train: want --epochs >= 0, --batch >= 1, --eval-every >= 1, "
				"--lr > 0, --dim 1..512, --bucket-bits 8..31\n");
		return -EINVAL;
	}
	a->init_scale = 1.0f / (float)a->dim; /* fastText's uniform(-1/dim, 1/dim) */
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

static int rows_room(struct job *j, size_t nu)
{
	size_t need = nu * (size_t)j->a.dim;
	float *r, *g;

	if (need <= j->rows_cap)
		return 0;
	r = realloc(j->rows, need * sizeof(float));
	if (r)
		j->rows = r;
	g = realloc(j->grows, need * sizeof(float));
	if (g)
		j->grows = g;
	if (!r || !g)
		return -ENOMEM;
	j->rows_cap = need;
	return 0;
}

/* The rows of b's unique ids into j->rows. */
static int pull_rows(struct job *j, const struct text_batch *b)
{
	int rc = rows_room(j, b->nu);

	if (rc)
		return rc;
	if (j->a.local)
		return local_table_pull(&j->lt, b->uids, b->nu, j->rows);
	for (size_t i = 0; i < b->nu; i += PULL_CHUNK) {
		size_t n = b->nu - i < PULL_CHUNK ? b->nu - i : PULL_CHUNK;

		rc = rps_worker_pull_rows(j->w, TABLE_ID, b->uids + i, n,
					  j->rows + i * (size_t)j->a.dim);
		if (rc) {
			fprintf(stderr, "text-train: pull_rows of %zu rows: %s\n", n,
				rps_strerror(rc));
			return rc;
		}
	}
	return 0;
}

static int setup_specs(struct job *j)
{
	struct rps_optim_opts o;

	rps_optim_opts_init(&o);
	o.kind = j->a.optimizer;
	o.lr = (float)j->a.lr;
	if (rps_optim_opts_validate(&o))
		return -EINVAL;
	j->dspec = o;
	rps_table_spec_init(&j->tspec);
	j->tspec.dim = (uint32_t)j->a.dim;
	j->tspec.init = RPS_TABLE_INIT_UNIFORM;
	j->tspec.init_scale = j->a.init_scale;
	j->tspec.seed = j->a.seed;
	j->tspec.optim = o;
	j->tspec.capacity_hint = 1u << 21;
	j->tspec.field_mask = RPS_TABLE_SPEC_DIM | RPS_TABLE_SPEC_INIT | RPS_TABLE_SPEC_INIT_SCALE |
			      RPS_TABLE_SPEC_SEED | RPS_TABLE_SPEC_OPTIM |
			      RPS_TABLE_SPEC_CAPACITY_HINT;
	return 0;
}

static int setup_local(struct job *j)
{
	int rc;

	j->rank = 0;
	j->nworkers = 1;
	j->transport = j->consistency = "local";
	if ((rc = local_table_init(&j->lt, &j->tspec, 1ull << j->a.bits)))
		return rc;
	memset(j->params, 0, j->nparams * sizeof(float));
	rc = rps_optimizer_create(&j->dspec, j->nparams, &j->opt);
	if (rc)
		fprintf(stderr, "text-train: optimizer: %s\n", rps_strerror(rc));
	return rc;
}

static int setup_distributed(struct job *j)
{
	struct rps_init zeros = { .kind = RPS_INIT_ZEROS };
	rps_key_t key = DENSE_KEY;
	int rc = rps_worker_create(NULL, &j->w);

	if (rc) {
		fprintf(stderr, "text-train: cannot join the cluster: %s (run it under "
				"rdmaps-launch, or use --local)\n",
			rps_strerror(rc));
		return rc;
	}
	j->rank = rps_worker_rank(j->w);
	j->nworkers = rps_worker_num_workers(j->w);
	j->nservers = rps_worker_num_servers(j->w);
	j->transport = rps_worker_transport(j->w);
	switch (rps_worker_consistency(j->w)) {
	case RPS_BSP: j->consistency = "bsp"; break;
	case RPS_SSP: j->consistency = "ssp"; break;
	default: j->consistency = "asp"; break;
	}
	if ((size_t)j->nworkers > j->a.batch) {
		fprintf(stderr, "text-train: --batch %zu < %d workers\n", j->a.batch, j->nworkers);
		return -EINVAL;
	}
	if ((rc = rps_worker_declare_table(j->w, TABLE_ID, &j->tspec))) {
		fprintf(stderr, "text-train: declare table: %s\n", rps_strerror(rc));
		return rc;
	}
	if ((rc = rps_worker_declare_opt(j->w, &key, &j->nparams, 1, &zeros, &j->dspec))) {
		fprintf(stderr, "text-train: declare the linear layer: %s\n", rps_strerror(rc));
		return rc;
	}
	if ((rc = rps_worker_barrier(j->w))) {
		fprintf(stderr, "text-train: barrier: %s\n", rps_strerror(rc));
		return rc;
	}
	struct rps_req *req;
	rc = rps_worker_pull(j->w, &key, j->params, &j->nparams, 1, &req);
	if (!rc)
		rc = rps_req_wait(req, -1);
	if (rc)
		fprintf(stderr, "text-train: first pull: %s\n", rps_strerror(rc));
	return rc;
}

/* One step on the examples ex[0..n) of the global batch (this worker's share). */
static int step(struct job *j, const size_t *ex, size_t n, double *loss_p)
{
	rps_key_t key = DENSE_KEY;
	struct rps_req *req;
	int rc;

	if ((rc = text_batch_build(&j->batch, &j->train, ex, n)) || (rc = pull_rows(j, &j->batch)))
		return rc;
	j->step_rows += j->batch.nu;
	*loss_p = text_grad(j->params, j->a.dim, j->cls.n, &j->train, &j->batch, j->rows,
			    1.0f / (float)j->a.batch, j->grows, j->gparams, j->hbuf, j->zbuf);
	if (j->a.local) {
		if ((rc = local_table_push(&j->lt, j->batch.uids, j->batch.nu, j->grows)))
			return rc;
		rps_optimizer_step(j->opt, j->params, j->gparams);
		return 0;
	}
	for (size_t i = 0; i < j->batch.nu; i += PULL_CHUNK) {
		size_t m = j->batch.nu - i < PULL_CHUNK ? j->batch.nu - i : PULL_CHUNK;

		rc = rps_worker_push_rows(j->w, TABLE_ID, j->batch.uids + i, m,
					  j->grows + i * (size_t)j->a.dim);
		if (rc) {
			fprintf(stderr, "text-train: push_rows: %s\n", rps_strerror(rc));
			return rc;
		}
	}
	rc = rps_worker_push(j->w, &key, j->gparams, &j->nparams, 1, &req);
	if (!rc)
		rc = rps_req_wait(req, -1);
	if (!rc)
		rc = rps_worker_clock(j->w);
	if (!rc)
		rc = rps_worker_pull(j->w, &key, j->params, &j->nparams, 1, &req);
	if (!rc)
		rc = rps_req_wait(req, -1);
	if (rc)
		fprintf(stderr, "text-train: push, clock, pull of the linear layer: %s\n",
			rps_strerror(rc));
	return rc;
}

/* Test accuracy and mean loss with the current rows and parameters. */
static int evaluate(struct job *j, double *acc_p, double *loss_p)
{
	size_t *all = j->test_all;
	double loss;
	size_t right;
	int rc;

	if (!all) {
		if (!(all = j->test_all = malloc(j->test.n * sizeof(size_t))))
			return -ENOMEM;
		for (size_t i = 0; i < j->test.n; i++)
			all[i] = i;
	}
	if ((rc = text_batch_build(&j->evb, &j->test, all, j->test.n)) || (rc = pull_rows(j, &j->evb)))
		return rc;
	if (!j->eval_said) {
		printf("text-train: the test set has %zu unique ids (rows)\n", j->evb.nu);
		j->eval_said = 1;
	}
	right = text_correct(j->params, j->a.dim, j->cls.n, &j->test, &j->evb, j->rows, &loss,
			     j->hbuf, j->zbuf);
	*acc_p = (double)right / (double)j->test.n;
	*loss_p = loss / (double)j->test.n;
	return 0;
}

/* The most frequent class of the training set, and its share of the test set. */
static double majority(const struct job *j, int *cls_p)
{
	size_t cnt[256] = { 0 }, hit = 0;
	int best = 0;

	for (size_t i = 0; i < j->ntrain; i++)
		cnt[j->train.y[j->order[i]]]++;
	for (int c = 1; c < j->cls.n; c++)
		best = cnt[c] > cnt[best] ? c : best;
	for (size_t i = 0; i < j->test.n; i++)
		hit += j->test.y[i] == best;
	*cls_p = best;
	return (double)hit / (double)j->test.n;
}

static void write_summary(const struct job *j, double acc, double base, double loss,
			  double test_loss, double sps, size_t steps)
{
	json_t *doc = json_pack(
	    "{s:f, s:f, s:f, s:f, s:i, s:i, s:i, s:s, s:s, s:I, s:I, s:s, s:f, s:i, s:i, s:I, "
	    "s:I, s:i, s:f}",
	    "test_accuracy", acc, "majority_baseline", base, "train_loss", loss, "test_loss",
	    test_loss, "epochs", j->a.epochs, "workers", j->nworkers, "servers", j->nservers,
	    "transport", j->transport, "consistency", j->consistency, "batch",
	    (json_int_t)j->a.batch, "steps_per_epoch", (json_int_t)steps, "optimizer",
	    j->a.optimizer == RPS_OPT_SGD ? "sgd" : j->a.optimizer == RPS_OPT_ADAM ? "adam" : "adagrad",
	    "lr", j->a.lr, "dim", j->a.dim, "bucket_bits", j->a.bits, "train_examples",
	    (json_int_t)j->ntrain, "test_examples", (json_int_t)j->test.n, "classes", j->cls.n,
	    "samples_per_sec", sps);

	if (!doc || json_dump_file(doc, j->a.summary, JSON_INDENT(2) | JSON_REAL_PRECISION(10)))
		fprintf(stderr, "text-train: writing %s failed\n", j->a.summary);
	json_decref(doc);
}

int main(int argc, char **argv)
{
	static struct job j;
	int rc, base_cls;

	if (parse_args(argc, argv, &j.a))
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	uint64_t mask = (1ull << j.a.bits) - 1;
	if (text_load_classes(j.a.data, &j.cls) ||
	    text_load(j.a.data, "train", mask, j.cls.n, &j.train) ||
	    text_load(j.a.data, "test", mask, j.cls.n, &j.test))
		return 1;
	/* the training examples: all, or a fixed random subset (--train-limit) */
	j.order = malloc(j.train.n * sizeof(size_t));
	if (!j.order)
		return 1;
	for (size_t i = 0; i < j.train.n; i++)
		j.order[i] = i;
	j.ntrain = j.train.n;
	if (j.a.train_limit && j.a.train_limit < j.train.n) {
		shuffle(j.order, j.train.n, 0x7e47);
		j.ntrain = j.a.train_limit;
	}
	j.nparams = text_nparams(j.a.dim, j.cls.n);
	j.params = calloc(j.nparams, sizeof(float));
	j.gparams = calloc(j.nparams, sizeof(float));
	j.hbuf = malloc((size_t)j.a.dim * sizeof(float));
	j.zbuf = malloc((size_t)j.cls.n * sizeof(float));
	if (!j.params || !j.gparams || !j.hbuf || !j.zbuf || setup_specs(&j))
		return 1;
	rc = j.a.local ? setup_local(&j) : setup_distributed(&j);
	if (rc) {
		if (j.w)
			rps_worker_destroy(j.w);
		return 1;
	}
	size_t B = j.a.batch, steps = j.ntrain / B;
	if (steps == 0) {
		fprintf(stderr, "text-train: %zu training examples make no batch of %zu\n", j.ntrain, B);
		return 1;
	}
	size_t lo = (size_t)j.rank * B / (size_t)j.nworkers;
	size_t hi = (size_t)(j.rank + 1) * B / (size_t)j.nworkers;
	double base = majority(&j, &base_cls);
	if (j.rank == 0) {
		printf("text-train: %d worker(s), %d server(s), transport %s, consistency %s\n",
		       j.nworkers, j.nservers, j.transport, j.consistency);
		printf("text-train: %zu training / %zu test examples, %d classes, 2^%d buckets x %d, "
		       "batch %zu, %zu steps/epoch, %s lr %g\n",
		       j.ntrain, j.test.n, j.cls.n, j.a.bits, j.a.dim, B, steps,
		       j.a.optimizer == RPS_OPT_SGD    ? "sgd"
		       : j.a.optimizer == RPS_OPT_ADAM ? "adam"
						       : "adagrad",
		       j.a.lr);
		printf("text-train: majority baseline %.4f (class %s); %.1f ids per training "
		       "example\n",
		       base, j.cls.name[base_cls], (double)j.train.off[j.train.n] / (double)j.train.n);
	}
	double acc = -1, loss_epoch = 0, test_loss = 0, train_time = 0;
	for (int e = 1; e <= j.a.epochs; e++) {
		double t0 = now_s(), loss_sum = 0;

		j.step_rows = 0;

		/* the same global order on every worker */
		shuffle(j.order, j.ntrain, j.a.seed * 1000003ull + (uint64_t)e * 7919);
		for (size_t s = 0; s < steps; s++) {
			double l;

			if (step(&j, j.order + s * B + lo, hi - lo, &l))
				return 1;
			loss_sum += l;
		}
		double el = now_s() - t0;
		train_time += el;
		loss_epoch = loss_sum / (double)(steps * (hi - lo));
		if (j.rank == 0 && (e % j.a.eval_every == 0 || e == j.a.epochs)) {
			if (evaluate(&j, &acc, &test_loss))
				return 1;
			printf("epoch %d/%d train_loss %.4f samples/s %.0f rows/step %.0f test_loss "
			       "%.4f test_accuracy %.4f\n",
			       e, j.a.epochs, loss_epoch, (double)(steps * B) / el,
			       (double)j.step_rows / (double)steps, test_loss, acc);
		}
	}
	if (j.rank == 0 && j.a.epochs == 0 && evaluate(&j, &acc, &test_loss))
		return 1;
	double sps = train_time > 0 ? (double)(steps * B) * j.a.epochs / train_time : 0;
	if (j.rank == 0) {
		printf("text-train: done: test accuracy %.4f, majority baseline %.4f, train loss "
		       "%.4f, %.0f samples/s\n",
		       acc, base, loss_epoch, sps);
		if (j.a.summary)
			write_summary(&j, acc, base, loss_epoch, test_loss, sps, steps);
	}
	if (j.w) {
		rc = rps_worker_barrier(j.w);
		if (rc)
			fprintf(stderr, "text-train: final barrier: %s\n", rps_strerror(rc));
		rps_worker_destroy(j.w);
	} else {
		rps_optimizer_destroy(j.opt);
		local_table_free(&j.lt);
	}
	text_batch_free(&j.batch);
	text_batch_free(&j.evb);
	text_free(&j.train);
	text_free(&j.test);
	text_free_classes(&j.cls);
	free(j.order);
	free(j.test_all);
	free(j.params);
	free(j.gparams);
	free(j.rows);
	free(j.grows);
	free(j.hbuf);
	free(j.zbuf);
	return 0;
}
