/* The public local optimizer (include/rdmaps/optim.h): the servers' own
 * rps_optim_apply on the caller's arrays. */
#include <rdmaps/optim.h>

#include <errno.h>

#include "src/alloc.h"
#include "src/optim.h"

void rps_optim_opts_init(struct rps_optim_opts *o)
{
	if (o)
		rps_optim_opts_default(o);
}

int rps_optim_opts_validate(const struct rps_optim_opts *o)
{
	return rps_optim_opts_check(o);
}

struct rps_optimizer {
	struct rps_optim_opts opts;
	struct rps_optim_state st;
	size_t n;
};

int rps_optimizer_create(const struct rps_optim_opts *opts, size_t n, struct rps_optimizer **opt_p)
{
	struct rps_optimizer *opt;
	int rc;

	*opt_p = NULL;
	rc = rps_optim_opts_check(opts);
	if (rc)
		return rc;
	opt = rps_calloc(1, sizeof(*opt));
	if (!opt)
		return -ENOMEM;
	opt->opts = *opts;
	opt->n = n;
	rc = rps_optim_state_init(&opt->st, &opt->opts, n);
	if (rc) {
		rps_free(opt);
		return rc;
	}
	*opt_p = opt;
	return 0;
}

void rps_optimizer_step(struct rps_optimizer *opt, float *w, float *g)
{
	rps_optim_apply(&opt->opts, w, g, opt->st.m, opt->st.v, opt->n, opt->st.step++, 0);
}

void rps_optimizer_destroy(struct rps_optimizer *opt)
{
	if (!opt)
		return;
	rps_optim_state_free(&opt->st);
	rps_free(opt);
}
