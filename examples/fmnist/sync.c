#include "sync.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int sync_parse(const char *arg, enum sync_mode *mode_p)
{
	if (!strcmp(arg, "ps")) {
		*mode_p = SYNC_PS;
		return 0;
	}
	if (!strcmp(arg, "ring")) {
		*mode_p = SYNC_RING;
		return 0;
	}
	fprintf(stderr, "fmnist-train: --sync %s: expected ps or ring\n", arg);
	return -EINVAL;
}

const char *sync_name(enum sync_mode m)
{
	return m == SYNC_RING ? "ring" : "ps";
}

int sync_ring_step(struct rps_worker *w, struct rps_optimizer *opt, const rps_key_t *keys,
		   const size_t *lens, int n, float *params, float *grad)
{
	int rc = rps_worker_allreduce(w, keys, grad, lens, (size_t)n);

	if (rc) {
		fprintf(stderr, "fmnist-train: allreduce of the gradients: %s\n", rps_strerror(rc));
		return rc;
	}
	rps_optimizer_step(opt, params, grad);
	return 0;
}
