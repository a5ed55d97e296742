/* Sparse tables, the public calls (include/rdmaps/table.h): placeholder until
 * the table path lands; every call answers -ENOSYS. */
#include <errno.h>
#include <string.h>

#include <rdmaps/optim.h>
#include <rdmaps/table.h>

void rps_table_spec_init(struct rps_table_spec *spec)
{
	if (!spec)
		return;
	memset(spec, 0, sizeof(*spec));
	spec->precision = RPS_TABLE_FP32;
	spec->init = RPS_TABLE_INIT_UNIFORM;
	spec->init_scale = 0.01f;
	rps_optim_opts_init(&spec->optim);
}

int rps_worker_declare_table(struct rps_worker *w, rps_table_t table,
			     const struct rps_table_spec *spec)
{
	(void)w, (void)table, (void)spec;
	return -ENOSYS;
}

int rps_worker_pull_rows(struct rps_worker *w, rps_table_t table, const uint64_t *ids, size_t n,
			 float *out)
{
	(void)w, (void)table, (void)ids, (void)n, (void)out;
	return -ENOSYS;
}

int rps_worker_push_rows(struct rps_worker *w, rps_table_t table, const uint64_t *ids, size_t n,
			 const float *grads)
{
	(void)w, (void)table, (void)ids, (void)n, (void)grads;
	return -ENOSYS;
}

int rps_worker_pull_rows_cb(struct rps_worker *w, rps_table_t table, const uint64_t *ids,
			    size_t n, float *out, rps_done_cb cb, void *arg)
{
	(void)w, (void)table, (void)ids, (void)n, (void)out, (void)cb, (void)arg;
	return -ENOSYS;
}

int rps_worker_push_rows_cb(struct rps_worker *w, rps_table_t table, const uint64_t *ids,
			    size_t n, const float *grads, rps_done_cb cb, void *arg)
{
	(void)w, (void)table, (void)ids, (void)n, (void)grads, (void)cb, (void)arg;
	return -ENOSYS;
}

uint32_t rps_worker_table_dim(const struct rps_worker *w, rps_table_t table)
{
	(void)w, (void)table;
	return 0;
}
