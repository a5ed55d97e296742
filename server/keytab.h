/* The server's key table: (key, slice) -> slice meta (keytab.c). */
#ifndef RPS_SERVER_KEYTAB_H
#define RPS_SERVER_KEYTAB_H

#include <stdatomic.h>
#include <stdint.h>

#include "src/optim.h"
#include "src/proto.h"
#include "src/store.h"

/* An optimizer spec a job gave slices (DECLARE with RPS_DECLARE_FLAG_OPTIM),
 * interned per shard (shard.c): slices with the same spec share one. */
struct rps_shard_spec {
	struct rps_optim_opts opts;   /* as given; clip_norm is applied per tensor (update.c) */
	struct rps_optim_opts noclip; /* opts without clip_norm: what rps_optim_apply runs */
	struct rps_shard_spec *next;
};

/* (key, slice) -> slice meta. Insert-only open addressing, one writer (the
 * update thread), lock-free readers: a meta is fully built before its pointer
 * is published with release; readers load with acquire. */
struct rps_ckpt_cow_slice;
struct rps_lp_copy;
struct rps_slice_meta {
	uint64_t key;
	uint32_t slice;
	uint32_t shard;
	uint64_t nelems;
	struct rps_store_slice sl;
	uint64_t data_off; /* byte offset of element 0 in the store */
	/* update thread only */
	const struct rps_shard_spec *spec; /* the job's optimizer; NULL: the shard's default */
	struct rps_optim_state opt;
	uint64_t elems_applied; /* ASP/SSP: elements stepped, step = this / nelems */
	float *acc;		/* BSP: this clock's pushes, nlanes lanes of nelems (bsp_sum.h) */
	uint32_t nlanes;	/* BSP: 1 (one sum) or one lane per worker rank */
	int dirty;		/* BSP: acc holds something for this clock */
	uint64_t lanes_used[RPS_MAX_WORKERS / 64]; /* BSP: bit per lane written this clock */
	struct rps_slice_meta *dirty_next;
	int pending_init; /* RPS_INIT_PUSH: not yet fully assigned */
	uint64_t assigned;
	uint8_t *assigned_map; /* bit per element assigned */
	/* a snapshot being copied (server/ckpt_async.h); NULL: none */
	struct rps_ckpt_cow_slice *ckpt_cow;
	/* its low-precision copy (server/lowprec.h); NULL: none. Written by
	 * the update thread, read by the network thread (TCP pulls) */
	_Atomic(struct rps_lp_copy *) lp;
};

struct rps_srv_keytab {
	_Atomic(struct rps_slice_meta *) *slots;
	uint64_t mask;
	uint64_t count;
	uint64_t max; /* inserts allowed (load <= 1/2) */
};

/* Room for max_entries slices. -ENOMEM. */
int rps_srv_keytab_init(struct rps_srv_keytab *t, uint64_t max_entries);
/* Frees the table; each meta is handed to free_fn (may be NULL). */
void rps_srv_keytab_fini(struct rps_srv_keytab *t, void (*free_fn)(struct rps_slice_meta *m));
/* Any thread. NULL if absent. */
struct rps_slice_meta *rps_srv_keytab_lookup(const struct rps_srv_keytab *t, uint64_t key,
					     uint32_t slice);
/* The one writer. -EEXIST (same key and slice present), -ENOSPC. */
int rps_srv_keytab_insert(struct rps_srv_keytab *t, struct rps_slice_meta *m);
uint64_t rps_srv_keytab_count(const struct rps_srv_keytab *t);

#endif
