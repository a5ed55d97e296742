/* text-train --local: the embedding table in this process, as the servers
 * keep it (include/rdmaps/table.h): a row is created on its first touch with
 * the table's initial value for its id (rps_table_initial_row), and a push updates only
 * the rows it names, each with the table's optimizer and per-row state (lazy
 * sgd, adagrad, adam). Ids are < nids (the buckets); rows are packed in the
 * order they were created, so memory is that of the rows touched. */
#ifndef TEXT_LOCAL_TABLE_H
#define TEXT_LOCAL_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include <rdmaps/table.h>

struct local_table {
	struct rps_table_spec spec;
	uint64_t nids;
	uint32_t *slot;	  /* per id: row index + 1, 0 = not created */
	float *rows, *m, *v; /* v: adam's second moment */
	uint64_t *steps;  /* adam: per-row step count */
	size_t n, cap;
	int nstate;
};

/* -EINVAL (an optimizer the local table does not run: see local_table.c),
 * -ENOMEM. */
int local_table_init(struct local_table *t, const struct rps_table_spec *spec, uint64_t nids);
/* out: n x dim, row i for ids[i] (created if new). -ENOMEM. */
int local_table_pull(struct local_table *t, const uint64_t *ids, size_t n, float *out);
/* ids unique (text_batch's); grads n x dim (scratch). -ENOMEM. */
int local_table_push(struct local_table *t, const uint64_t *ids, size_t n, float *grads);
void local_table_free(struct local_table *t);

#endif
