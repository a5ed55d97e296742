/* rdmaps — shared public types: keys, initialisers, optimizer, policies. */
#ifndef RDMAPS_TYPES_H
#define RDMAPS_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <rdmaps/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor is a key with a length in float32 elements. */
typedef uint64_t rps_key_t;

/* How a key's values start out. */
enum rps_init_kind {
	RPS_INIT_DEFAULT = 0, /* the server's configured initialiser (RDMAPS_INIT) */
	RPS_INIT_ZEROS,
	RPS_INIT_CONST,   /* every element = a */
	RPS_INIT_UNIFORM, /* uniform in [a, b) */
	RPS_INIT_NORMAL,  /* mean a, standard deviation b */
	RPS_INIT_PUSH,    /* the first push of any worker sets the values */
};

struct rps_init {
	enum rps_init_kind kind;
	float a;
	float b;
	uint64_t seed; /* same seed, same key -> same values on any server */
};

enum rps_optim_kind {
	RPS_OPT_SGD = 0,
	RPS_OPT_MOMENTUM,
	RPS_OPT_NESTEROV,
	RPS_OPT_ADAGRAD,
	RPS_OPT_ADAM,
	RPS_OPT_ADAMW, /* adam with decoupled weight decay: w -= lr_t * wd * w */
};

enum rps_lr_schedule {
	RPS_LR_CONSTANT = 0,
	RPS_LR_STEP,   /* lr * gamma^(floor(t / step_size)) */
	RPS_LR_EXP,    /* lr * gamma^t */
	RPS_LR_COSINE, /* lr_min + (lr - lr_min) * (1 + cos(pi * min(t, T) / T)) / 2 */
	RPS_LR_LINEAR, /* lr - (lr - lr_min) * min(t, T) / T */
};

struct rps_optim_opts {
	enum rps_optim_kind kind;
	float lr;
	float momentum;     /* momentum, nesterov */
	float beta1, beta2; /* adam */
	float eps;          /* adagrad, adam */
	float weight_decay; /* L2: g += wd * w before the update (adamw: w -= lr_t * wd * w) */
	float clip_norm;    /* > 0: scale g so that ||g||_2 <= clip_norm */
	enum rps_lr_schedule schedule;
	uint64_t step_size; /* step schedule: steps between decays */
	float gamma;        /* step / exp schedules */
	uint64_t total_steps; /* cosine, linear: T, the whole run (warm-up included) */
	float lr_min;       /* cosine, linear: floor */
	int staleness_lr;   /* divide lr by 1 + staleness of the push */
	/* Linear warm-up of any schedule: for t < W, lr_t = lr * (t + 1) / W;
	 * afterwards the schedule at t - W, of length total_steps - W. */
	uint64_t warmup_steps;
};

enum rps_priority_policy {
	RPS_PRIO_FIFO = 0,
	RPS_PRIO_FRESHEST,  /* newest timestamp first */
	RPS_PRIO_STALENESS, /* smallest staleness first (stale pushes later) */
	RPS_PRIO_MAGNITUDE, /* largest gradient L2 norm first */
	RPS_PRIO_CALLBACK,  /* user function, larger value first */
};

/* What a priority callback sees of a push. */
struct rps_push_info {
	rps_key_t key;
	uint32_t worker;    /* worker rank */
	uint32_t clock;     /* worker's clock when it pushed */
	uint32_t staleness; /* shard clock - push clock, 0 if not behind */
	uint64_t timestamp_ns; /* worker's CLOCK_REALTIME at push */
	float norm;         /* L2 norm of this gradient piece */
	size_t nelems;
};
typedef double (*rps_priority_fn)(const struct rps_push_info *push, void *arg);

enum rps_consistency {
	RPS_ASP = 0, /* asynchronous: pushes applied as they come */
	RPS_BSP,     /* bulk synchronous: a clock's pushes summed, applied once */
	RPS_SSP,     /* stale synchronous, bound RDMAPS_STALENESS */
};

#ifdef __cplusplus
}
#endif
#endif
