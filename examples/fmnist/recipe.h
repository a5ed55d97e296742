/* fmnist-train's training recipe: the optimizer and learning-rate schedule
 * the job gives its keys (rps_worker_declare_opt), derived from the flags,
 * the number of epochs and the servers' consistency model.
 *
 * The flags describe the recipe as if the job ran BSP (or --local): one
 * optimizer step per clock. recipe_spec() turns it into the servers' units:
 *   - schedule length and warm-up in optimizer steps of a tensor slice: one
 *     per clock under BSP, one per push (W per clock) under ASP and SSP;
 *   - momentum under ASP/SSP with W > 1 workers: a push's gradient is on
 *     average (W - 1) / 2 pushes stale, and staleness acts like momentum of
 *     its own (Mitliagkas et al., "Asynchrony begets momentum", 2016). The
 *     job keeps the total about the same by shortening explicit momentum's
 *     horizon 1 / (1 - mu) by the factor 1 + (W - 1) / 2:
 *         mu_async = 1 - (1 - mu) * (W + 1) / 2     (floored at 0)
 *     e.g. mu 0.9, 4 workers: 0.75 (docs/training.md has the measurements).
 *     --no-async-momentum keeps mu as given.
 */
#ifndef FMNIST_RECIPE_H
#define FMNIST_RECIPE_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include <rdmaps/types.h>

struct recipe {
	int kind;	  /* enum rps_optim_kind */
	int schedule;	  /* enum rps_lr_schedule */
	double lr, momentum, weight_decay, clip_norm, lr_min;
	double warmup_epochs; /* < 0: a tenth of the run */
	int staleness_lr; /* lr / (1 + staleness of the push) */
	int async_momentum; /* apply the ASP/SSP momentum correction */
};

/* The defaults: docs/training.md's recipe. */
void recipe_defaults(struct recipe *r);

/* getopt_long entries of the recipe's flags, their ids start at RECIPE_OPT_BASE. */
#define RECIPE_OPT_BASE 0x200
extern const struct option recipe_options[];
extern const int recipe_noptions;
/* Handle one recipe flag (id from getopt_long). 0, or -EINVAL with a message on stderr. */
int recipe_option(struct recipe *r, int id, const char *arg);
/* Usage lines of the flags, with the defaults. */
void recipe_usage(FILE *out);

/* The spec for a job of `clocks` clocks, `steps_per_epoch` clocks each, W
 * workers under consistency c (--local: RPS_BSP, W 1). 0 or -EINVAL
 * (reported: e.g. a warm-up as long as the run). */
int recipe_spec(const struct recipe *r, uint64_t clocks, uint64_t steps_per_epoch,
		enum rps_consistency c, int workers, struct rps_optim_opts *o);

/* "momentum 0.9 lr 0.1 cosine over 2340 steps (warm-up 0)" */
void recipe_describe(const struct rps_optim_opts *o, char *buf, size_t len);
const char *recipe_kind_name(int kind);
const char *recipe_schedule_name(int schedule);

#endif
