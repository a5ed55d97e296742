/* A shard's sparse tables (table.c): declarations, row pushes (applied at
 * once under ASP/SSP, summed per clock under BSP), row pulls (answered by
 * the update thread, parked until their clock), checkpoint hooks
 * (table_ckpt.c). Update thread only, except where said. */
#ifndef RPS_SERVER_TABLE_H
#define RPS_SERVER_TABLE_H

#include <stdint.h>

#include "server/rowtab.h"
#include "server/shard.h"

/* A BSP row gradient waiting for its clock's end. */
struct rps_row_pend {
	uint64_t id;
	uint32_t worker;
	uint32_t seq; /* index of its dim floats in the table's pend_grads */
};

struct rps_shard_table {
	struct rps_table_decl decl; /* as declared (shard: this one) */
	struct rps_optim_opts optim;
	struct rps_rowtab rt;
	/* BSP: the gradients of the current clock */
	struct rps_row_pend *pend;
	size_t npend, pend_cap;
	float *pend_grads;
	size_t grads_cap; /* rows of dim floats */
	uint64_t pushes, pulls, rows_created;
	/* one-sided reads: the arena chunks registered so far */
	struct rps_tr_mr *mrs;
	uint32_t nreg, mrs_cap;
	int reg_failed;
	/* one-sided lookups (table_index.c): the index arrays registered, the
	 * current one last; older ones stay registered (and allocated) */
	struct rps_tr_mr *ixmrs;
	uint32_t nixreg;
	const uint32_t *ixcur; /* the array registered last */
	uint64_t ixgen;	       /* rt.rehashes when the last one was registered */
	int ixreg_failed;
	/* eviction (table_evict.c): rows updated in epochs <= saved_epoch are
	 * in a committed checkpoint; pend_epoch: of the checkpoint in flight */
	uint32_t saved_epoch, pend_epoch;
};

struct rps_shard_tables {
	struct rps_shard_table **t;
	uint32_t n;
	struct rps_srv_req *deferred, *deferred_tail; /* BSP: row pushes for a later clock */
	struct rps_srv_req *parked, *parked_tail;     /* row pulls waiting for a clock */
	int redo;
	float *scratch; /* one row */
	char *sendbuf;
	size_t send_cap;
	/* eviction (table_evict.c) */
	int ck_pending;		  /* a checkpoint's tables written, its commit awaited */
	uint64_t ck_ok0, ck_fail0; /* the shard's checkpoint counters then */
	int ev_active;		  /* a pass is under way */
	uint64_t ev_clock;	  /* the clock of the last pass */
	uint32_t ev_table;	  /* the table the pass is at */
	/* time-based eviction (p.evict_secs): ms on now_ms() (tests may set
	 * it; NULL: the monotonic clock) since t0; when the last pass began */
	uint64_t (*now_ms)(void);
	uint64_t t0_ms, ev_ms;
};

/* The table `table` of the shard, or NULL. */
struct rps_shard_table *rps_shard_table_find(const struct rps_shard *sh, uint32_t table);
/* Create (or check against the existing) table on the shard: 0, -EEXIST
 * (another spec), -EINVAL, -ENOTSUP (precision), -ENOMEM; why[len] says why. */
int rps_shard_table_declare(struct rps_shard *sh, const struct rps_table_decl *d,
			    const struct rps_optim_opts *optim, char *why, size_t len);
/* An RPS_ENT_TABLE entry. */
void rps_shard_table_handle(struct rps_shard *sh, struct rps_srv_req *req);
/* The key req's connection reads mr under (server/grant.c): a memory window
 * of its own where the transport has them, else mr's key (also without a
 * connection, in tests). */
int rps_srv_req_grant(struct rps_srv_req *req, const struct rps_tr_mr *mr, uint32_t *rkey_p);
/* BSP: the shard finishes clock c: apply the summed row gradients. */
void rps_shard_tables_apply_clock(struct rps_shard *sh, uint64_t c);
/* After every entry: deferred pushes whose clock came, parked pulls whose
 * condition holds. */
void rps_shard_tables_after(struct rps_shard *sh);
/* The update thread stopped: cancel what waits (deferred, parked). */
void rps_shard_tables_stop(struct rps_shard *sh);
/* Free everything (after stop). */
void rps_shard_tables_fini(struct rps_shard *sh);

/* One-sided lookups (table_index.c), update thread: register the table's
 * current index array for remote READ if it is not yet; describe it (the
 * tail of a TABLE_MAP_RESP); deregister every one (stop); free. */
void rps_shard_table_reg_index(struct rps_shard *sh, struct rps_shard_table *t);
void rps_shard_table_index_desc(const struct rps_shard_table *t, struct rps_table_index *d);
void rps_shard_table_index_stop(struct rps_shard *sh, struct rps_shard_table *t);

/* Checkpoints (table_ckpt.c), update thread: write every table's file of
 * (rank, clock) into dir before the shard's file commits; remove table files
 * whose checkpoint is gone; load the table files of (rank, clock). 0 or
 * -errno (logged). */
int rps_shard_tables_ckpt_write(struct rps_shard *sh, const char *dir, uint32_t rank,
				uint64_t clock);
void rps_shard_tables_ckpt_prune(struct rps_shard *sh, const char *dir, uint32_t rank);
int rps_shard_tables_ckpt_restore(struct rps_shard *sh, const char *dir, uint32_t rank,
				  uint64_t clock);

/* EXPORT (table_export.c), update thread: every row of every table copied
 * into r->rows_snap (records of rps_export_rows with count 0 and total rows,
 * u64 ids[total], float rows[total][dim]); r->nrows. 0 or -ENOMEM (r->text). */
int rps_shard_tables_snapshot(struct rps_shard *sh, struct rps_shard_creq_res *r);

/* Eviction (table_evict.c), update thread: after every entry, a slice of the
 * clock's pass over the tables (no-op unless p.evict_clocks); after a
 * checkpoint's table files are written (table_ckpt.c). */
void rps_shard_tables_evict_tick(struct rps_shard *sh);
void rps_shard_tables_ckpt_written(struct rps_shard *sh);
/* What a row touch records now: the shard's clock, or with p.evict_secs the
 * milliseconds since the tables began. */
uint32_t rps_shard_tables_now(struct rps_shard *sh);
/* The update thread found its ring empty for a while: with p.evict_secs, a
 * whole pass if one is due (rows go idle with no entry coming). */
void rps_shard_tables_idle(struct rps_shard *sh);

/* Update thread (update.c): count a push frame for (worker, clock) and let
 * the worker's clock advance. */
void rps_shard_count_push(struct rps_shard *sh, uint32_t worker, uint32_t clock, int status);
/* The ack of a counted push is sent between counting and progress. */
void rps_shard_push_progress(struct rps_shard *sh, uint32_t worker);

#endif
