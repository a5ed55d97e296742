/* fmnist-train's recipe (recipe.h): flags -> the optimizer spec of the job. */
#include "recipe.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/optim.h>

static const char *const kind_names[] = {
	[RPS_OPT_SGD] = "sgd",	       [RPS_OPT_MOMENTUM] = "momentum", [RPS_OPT_NESTEROV] = "nesterov",
	[RPS_OPT_ADAGRAD] = "adagrad", [RPS_OPT_ADAM] = "adam",	       [RPS_OPT_ADAMW] = "adamw",
};
#define NKINDS ((int)(sizeof(kind_names) / sizeof(kind_names[0])))

static const char *const schedule_names[] = {
	[RPS_LR_CONSTANT] = "constant", [RPS_LR_STEP] = "step",	    [RPS_LR_EXP] = "exp",
	[RPS_LR_COSINE] = "cosine",	[RPS_LR_LINEAR] = "linear",
};
#define NSCHEDULES ((int)(sizeof(schedule_names) / sizeof(schedule_names[0])))

enum {
	OPT_OPTIMIZER = RECIPE_OPT_BASE,
	OPT_LR,
	OPT_MOMENTUM,
	OPT_WEIGHT_DECAY,
	OPT_CLIP_NORM,
	OPT_SCHEDULE,
	OPT_LR_MIN,
	OPT_WARMUP,
	OPT_STALENESS_LR,
	OPT_NO_ASYNC_MOMENTUM,
};

const struct option recipe_options[] = {
	{ "optimizer", required_argument, NULL, OPT_OPTIMIZER },
	{ "lr", required_argument, NULL, OPT_LR },
	{ "momentum", required_argument, NULL, OPT_MOMENTUM },
	{ "weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY },
	{ "clip-norm", required_argument, NULL, OPT_CLIP_NORM },
	{ "lr-schedule", required_argument, NULL, OPT_SCHEDULE },
	{ "lr-min", required_argument, NULL, OPT_LR_MIN },
	{ "warmup-epochs", required_argument, NULL, OPT_WARMUP },
	{ "staleness-lr", no_argument, NULL, OPT_STALENESS_LR },
	{ "no-async-momentum", no_argument, NULL, OPT_NO_ASYNC_MOMENTUM },
};
const int recipe_noptions = (int)(sizeof(recipe_options) / sizeof(recipe_options[0]));

void recipe_defaults(struct recipe *r)
{
	*r = (struct recipe){
		.kind = RPS_OPT_MOMENTUM,
		.schedule = RPS_LR_COSINE,
		.lr = 0.1,
		.momentum = 0.9,
		.weight_decay = 0.0,
		.clip_norm = 0.0,
		.lr_min = 0.0,
		.warmup_epochs = -1.0, /* a tenth of the run */
		.staleness_lr = 0,
		.async_momentum = 1,
	};
}

const char *recipe_kind_name(int kind)
{
	return kind >= 0 && kind < NKINDS ? kind_names[kind] : "?";
}

const char *recipe_schedule_name(int schedule)
{
	return schedule >= 0 && schedule < NSCHEDULES ? schedule_names[schedule] : "?";
}

static int name_index(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (names[i] && !strcmp(names[i], s))
			return i;
	return -1;
}

/* a number in [lo, hi] (hi_open: < hi) */
static int number(const char *flag, const char *arg, double lo, double hi, int hi_open, double *v)
{
	char *end;
	double x = strtod(arg, &end);

	if (end == arg || *end || !isfinite(x) || x < lo || x > hi || (hi_open && x >= hi)) {
		fprintf(stderr, "fmnist-train: --%s %s: expected a number in [%g, %g%c\n", flag, arg,
			lo, hi, hi_open ? ')' : ']');
		return -EINVAL;
	}
	*v = x;
	return 0;
}

int recipe_option(struct recipe *r, int id, const char *arg)
{
	int i;

	switch (id) {
	case OPT_OPTIMIZER:
		if ((i = name_index(kind_names, NKINDS, arg)) < 0) {
			fprintf(stderr, "fmnist-train: --optimizer %s: expected sgd, momentum, "
					"nesterov, adagrad, adam or adamw\n",
				arg);
			return -EINVAL;
		}
		r->kind = i;
		return 0;
	case OPT_SCHEDULE:
		if ((i = name_index(schedule_names, NSCHEDULES, arg)) < 0 || i == RPS_LR_STEP ||
		    i == RPS_LR_EXP) {
			fprintf(stderr, "fmnist-train: --lr-schedule %s: expected constant, cosine "
					"or linear\n",
				arg);
			return -EINVAL;
		}
		r->schedule = i;
		return 0;
	case OPT_LR:
		if (number("lr", arg, 0, 1e3, 0, &r->lr))
			return -EINVAL;
		if (r->lr <= 0) {
			fprintf(stderr, "fmnist-train: --lr must be > 0\n");
			return -EINVAL;
		}
		return 0;
	case OPT_MOMENTUM:
		return number("momentum", arg, 0, 1, 1, &r->momentum);
	case OPT_WEIGHT_DECAY:
		return number("weight-decay", arg, 0, 1, 0, &r->weight_decay);
	case OPT_CLIP_NORM:
		return number("clip-norm", arg, 0, 1e9, 0, &r->clip_norm);
	case OPT_LR_MIN:
		return number("lr-min", arg, 0, 1e3, 0, &r->lr_min);
	case OPT_WARMUP:
		return number("warmup-epochs", arg, 0, 1e6, 0, &r->warmup_epochs);
	case OPT_STALENESS_LR:
		r->staleness_lr = 1;
		return 0;
	case OPT_NO_ASYNC_MOMENTUM:
		r->async_momentum = 0;
		return 0;
	}
	return -EINVAL;
}

void recipe_usage(FILE *out)
{
	struct recipe d;

	recipe_defaults(&d);
	fprintf(out,
		"Training recipe (given to the servers with the keys; docs/training.md):\n"
		"  --optimizer NAME      sgd|momentum|nesterov|adagrad|adam|adamw (default %s)\n"
		"  --lr X                peak learning rate (default %g)\n"
		"  --momentum X          momentum (momentum, nesterov) as under BSP (default %g);\n"
		"                        ASP/SSP with W workers use 1 - (1 - X)(W + 1)/2\n"
		"  --no-async-momentum   ASP/SSP: use --momentum as given\n"
		"  --weight-decay X      L2 (adamw: decoupled) weight decay (default %g)\n"
		"  --clip-norm X         clip each tensor's gradient to L2 norm X (default off)\n"
		"  --lr-schedule NAME    constant|cosine|linear over the whole run (default %s)\n"
		"  --lr-min X            floor of cosine/linear (default %g)\n"
		"  --warmup-epochs X     linear warm-up from 0 over X epochs (default: a tenth of\n"
		"                        --epochs; 0: none)\n"
		"  --staleness-lr        divide a stale push's lr by 1 + its staleness\n",
		kind_names[d.kind], d.lr, d.momentum, d.weight_decay, schedule_names[d.schedule],
		d.lr_min);
}

int recipe_spec(const struct recipe *r, uint64_t clocks, uint64_t steps_per_epoch,
		enum rps_consistency c, int workers, struct rps_optim_opts *o)
{
	/* optimizer steps of a slice per clock: BSP applies the clock's sum once,
	 * ASP and SSP every push */
	uint64_t per_clock = c == RPS_BSP ? 1 : (uint64_t)(workers > 0 ? workers : 1);
	double mu = r->momentum;
	double warmup = r->warmup_epochs >= 0 ? r->warmup_epochs
					      : 0.1 * (double)clocks / (double)steps_per_epoch;

	if (c != RPS_BSP && workers > 1 && r->async_momentum)
		mu = fmax(0.0, 1.0 - (1.0 - mu) * (double)(workers + 1) / 2.0);
	rps_optim_opts_init(o);
	o->kind = (enum rps_optim_kind)r->kind;
	o->lr = (float)r->lr;
	o->momentum = (float)mu;
	o->weight_decay = (float)r->weight_decay;
	o->clip_norm = (float)r->clip_norm;
	o->schedule = (enum rps_lr_schedule)r->schedule;
	o->total_steps = clocks * per_clock;
	o->lr_min = (float)fmin(r->lr_min, r->lr);
	o->warmup_steps = (uint64_t)llround(warmup * (double)steps_per_epoch) * per_clock;
	o->staleness_lr = r->staleness_lr;
	if (o->warmup_steps && o->warmup_steps >= o->total_steps) {
		fprintf(stderr,
			"fmnist-train: --warmup-epochs %g is %llu optimizer steps, not shorter than "
			"the run's %llu: give fewer warm-up epochs or more --epochs\n",
			warmup, (unsigned long long)o->warmup_steps,
			(unsigned long long)o->total_steps);
		return -EINVAL;
	}
	if (rps_optim_opts_validate(o)) {
		fprintf(stderr, "fmnist-train: the recipe is not a valid optimizer (see the log)\n");
		return -EINVAL;
	}
	return 0;
}

void recipe_describe(const struct rps_optim_opts *o, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s lr %g", recipe_kind_name(o->kind), o->lr);

	if (n > 0 && (size_t)n < len && (o->kind == RPS_OPT_MOMENTUM || o->kind == RPS_OPT_NESTEROV))
		n += snprintf(buf + n, len - (size_t)n, " momentum %.4g", o->momentum);
	if (n > 0 && (size_t)n < len && o->weight_decay > 0)
		n += snprintf(buf + n, len - (size_t)n, " weight decay %g", o->weight_decay);
	if (n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ", %s over %llu steps",
			      recipe_schedule_name(o->schedule),
			      (unsigned long long)o->total_steps);
	if (n > 0 && (size_t)n < len && o->warmup_steps)
		n += snprintf(buf + n, len - (size_t)n, " after %llu warm-up steps",
			      (unsigned long long)o->warmup_steps);
	if (n > 0 && (size_t)n < len && o->staleness_lr)
		snprintf(buf + n, len - (size_t)n, ", lr / (1 + staleness)");
}
