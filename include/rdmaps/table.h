/* rdmaps — sparse embedding tables.
 *
 * A table holds rows of `dim` floats keyed by arbitrary uint64 ids (feature
 * hashes, not dense indices), spread over the servers and their shards by a
 * hash of (table, id). A row that does not exist yet is created on its first
 * touch (pull or push) with a value that depends only on the table's seed and
 * the id, so every worker sees the same initial row whichever touches it
 * first. Pushes are applied by the servers' update threads with the table's
 * optimizer, lazily: only the rows a push touches (and their optimizer
 * state, e.g. Adam's per-row step count) change.
 *
 * Over tcp, pulls and pushes travel as batched sparse frames; over rdma a
 * blocking pull reads the rows this worker has seen before with one-sided
 * READs of the server's registered row arena (no server CPU), and asks for
 * the others with a frame (SEND). The async forms use frames. See
 * docs/tables.md (guide, semantics) and docs/protocol.md (wire and memory
 * layout).
 */
#ifndef RDMAPS_TABLE_H
#define RDMAPS_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include <rdmaps/types.h>
#include <rdmaps/worker.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t rps_table_t;

enum rps_table_precision { RPS_TABLE_FP32 = 0, RPS_TABLE_FP16 = 1, RPS_TABLE_BF16 = 2 };
enum rps_table_init {
	RPS_TABLE_INIT_ZERO = 0,
	RPS_TABLE_INIT_UNIFORM = 1,
	RPS_TABLE_INIT_NORMAL = 2
};

/* Largest row dimension and largest batch (ids per call). */
#define RPS_TABLE_MAX_DIM   4096u
#define RPS_TABLE_MAX_BATCH (1u << 20)

/* Bits of rps_table_spec.field_mask: bit N says member N (after field_mask)
 * is set; an unset member takes its default (rps_table_spec_init). dim is
 * required. */
#define RPS_TABLE_SPEC_DIM	     (1ull << 0)
#define RPS_TABLE_SPEC_PRECISION     (1ull << 1)
#define RPS_TABLE_SPEC_INIT	     (1ull << 2)
#define RPS_TABLE_SPEC_INIT_SCALE    (1ull << 3)
#define RPS_TABLE_SPEC_SEED	     (1ull << 4)
#define RPS_TABLE_SPEC_OPTIM	     (1ull << 5)
#define RPS_TABLE_SPEC_CAPACITY_HINT (1ull << 6)
#define RPS_TABLE_SPEC_ALL	     ((1ull << 7) - 1)

struct rps_table_spec {
	uint64_t field_mask; /* RPS_TABLE_SPEC_* bits, as other option structs here */
	uint32_t dim;	     /* floats per row, 1..4096 */
	uint32_t precision;  /* enum rps_table_precision: how servers store rows (fp32
			      * default; fp16/bf16: 2 bytes, fp32 math, docs/tables.md) */
	uint32_t init;	     /* enum rps_table_init */
	float init_scale;    /* uniform in [-s, s] or normal(0, s) */
	uint64_t seed;	     /* row value at creation = f(seed, id) only */
	struct rps_optim_opts
	    optim; /* the job's optimizer (SGD, AdaGrad, Adam at least), lazy per row */
	uint64_t capacity_hint; /* rows expected (0 = grow from small) */
};

/* Defaults, field_mask 0: dim 0 (must be set), fp32, uniform init with
 * scale 0.01, seed 0, rps_optim_opts_init() (sgd, lr 0.01), capacity 0. */
RPS_API void rps_table_spec_init(struct rps_table_spec *spec);

/* Declare a table on every server (idempotent; every worker may call it with
 * the same spec). 0; -EINVAL (NULL, dim unset / 0 / > 4096, unknown
 * precision or init, bad optimizer spec, negative or non-finite scale) with
 * the reason logged; -EEXIST if the table exists with another spec (the
 * servers' reason logged); a transport error. */
RPS_API int rps_worker_declare_table(struct rps_worker *w, rps_table_t table,
				     const struct rps_table_spec *spec);

/* Blocking; out/grads are n * dim floats, row i for ids[i]; duplicates allowed
 * (pull fills each, push sums). 0; -ENOENT table not declared through this
 * worker; -EINVAL NULL ids/out/grads, n == 0, n > RPS_TABLE_MAX_BATCH; a
 * transport or server error. On an error nothing was sent (argument errors)
 * and nothing changed. */
RPS_API int rps_worker_pull_rows(struct rps_worker *w, rps_table_t table, const uint64_t *ids,
				 size_t n, float *out);
RPS_API int rps_worker_push_rows(struct rps_worker *w, rps_table_t table, const uint64_t *ids,
				 size_t n, const float *grads);

/* Async forms, same contract as rps_worker_push_cb: cb runs once when done
 * (from the worker's progress thread); ids, out and grads must stay valid
 * (out untouched) until then. Argument errors return at once and cb is not
 * called. */
RPS_API int rps_worker_pull_rows_cb(struct rps_worker *w, rps_table_t table, const uint64_t *ids,
				    size_t n, float *out, rps_done_cb cb, void *arg);
RPS_API int rps_worker_push_rows_cb(struct rps_worker *w, rps_table_t table, const uint64_t *ids,
				    size_t n, const float *grads, rps_done_cb cb, void *arg);

/* Rows the servers hold of a table (every shard asked; rows are created on
 * first touch, so this counts the distinct ids ever pulled or pushed, as
 * far as the servers applied them, minus rows evicted: docs/tables.md). 0, -EINVAL, -ENOENT (not declared
 * through this worker), a transport error. */
RPS_API int rps_worker_table_rows(struct rps_worker *w, rps_table_t table, uint64_t *rows_p);

/* A table's dim as declared through this worker, or 0 if not declared. */
RPS_API uint32_t rps_worker_table_dim(const struct rps_worker *w, rps_table_t table);

/* The value a server gives row id of a table with this spec when the row is
 * first touched (spec->init, init_scale, seed and dim; docs/tables.md has
 * the formula), written to row[0 .. spec->dim). Pure: no worker needed, the
 * same on every machine. For a single-process reference run that must start
 * where the servers start. For spec->precision fp16 / bf16 the row is rounded
 * to it (what the servers store). 0, or -EINVAL for a NULL pointer, dim 0 or an
 * unknown init. */
RPS_API int rps_table_initial_row(const struct rps_table_spec *spec, uint64_t id, float *row);

/* A table of a model export (rdmaps-ctl export FILE, rps_ctl_export): the
 * .npz holds per table T "tableT.ids" (uint64, n) and "tableT.rows"
 * (float32, n x dim), rows sorted by id, only rows that exist on the servers
 * (docs/tables.md, Export). numpy.load(FILE) reads the same arrays. */
struct rps_table_export {
	rps_table_t table;
	uint32_t dim;
	size_t nrows;
	uint64_t *ids;	/* nrows, ascending */
	float *rows;	/* nrows * dim; row i is ids[i]'s */
};
/* Read table `table` of the export at path into *x (free with
 * rps_table_export_free). 0; -ENOENT no such file or no table `table` in it;
 * -EINVAL not an .npz, or the table's arrays do not match (ids not uint64 of
 * one dimension, rows not nrows x dim float32, ids not strictly ascending):
 * the reason is logged; -ENOMEM. */
RPS_API int rps_table_export_read(const char *path, rps_table_t table,
				  struct rps_table_export *x);
RPS_API void rps_table_export_free(struct rps_table_export *x);

#ifdef __cplusplus
}
#endif
#endif
