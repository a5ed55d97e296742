/* One-sided table reads, the worker's side (table_read.c: slots cached,
 * table_index.c: lookups in the servers' row index). Private to those. */
#ifndef RPS_WORKER_TABLE_READ_H
#define RPS_WORKER_TABLE_READ_H

#include <pthread.h>
#include <stdint.h>

#include "worker/table.h"

#define TORN_MAX 100000u /* re-reads of one slot before giving up */

/* What the worker knows of one (table, server, shard). */
struct rps_wtshard {
	rps_table_t table;
	uint32_t server, shard;
	/* under core.lock */
	uint32_t chunk_shift, slot_bytes;
	uint32_t nchunks;
	uint64_t *caddr;
	uint32_t *ckey;
	uint64_t *ids; /* open addressing: ids[i] with slots[i] = slot + 1 (0: empty) */
	uint32_t *slots;
	uint64_t cap, n;
	/* the shard's row index (the tail of TABLE_MAP_RESP) */
	int ix_known;	 /* a TABLE_MAP answer was seen */
	int ix_tried;	 /* a TABLE_MAP was asked for (by a lookup) */
	int ix_ok;	 /* the index below can be read */
	uint64_t ix_addr; /* bucket 0 */
	uint32_t ix_key;
	uint64_t ix_nb; /* buckets (a power of 2) */
	uint32_t ix_gen;
};

struct rps_wtread {
	pthread_mutex_t lock; /* the list below; one READ call at a time (scratch) */
	struct rps_wtshard **sh;
	uint32_t n, cap;
	char *scratch;
	size_t scratch_len;
	struct rps_tr_mr mr;
	int has_mr;
	struct rps_wtread *lk; /* lookups' scratch (only its scratch members) */
};

/* Under core.lock: cache id -> slot. 0 or -ENOMEM. */
int rps_wtshard_cache_put(struct rps_wtshard *c, uint64_t id, uint32_t slot);
/* TABLE_MAP of c from its known chunks on (blocking): chunks and index. */
int rps_wtshard_map_fetch(struct rps_worker *w, struct rps_wtshard *c);
/* Registered scratch of at least bytes (rd->lock held). */
int rps_wtread_scratch(struct rps_worker *w, struct rps_wtread *rd, size_t bytes);
/* Post the READ of piece p (inside rps_wsubmit_enter or the progress thread). */
void rps_wtable_post_read(struct rps_worker *w, struct rps_piece *p);

#define RPS_WT_OP_RAW 0xf1 /* piece op of a lookup READ (table_index.c) */
/* Rows of b not cached (slot[u] < 0) on shards whose index is known: look
 * them up with READs of the index buckets then of the candidate slots (all
 * of a batch posted at once, each step); a row found whole is copied to out
 * and cached, done[u] = 1. The rest (missing rows, rows beyond the two
 * buckets read, an index moved twice) are left to the frames. rd->lock held;
 * the pull's consistency condition already holds. 0 or -errno (a READ
 * failed). */
int rps_wtable_index_lookup(struct rps_worker *w, struct rps_wtread *rd, rps_table_t table,
			    uint32_t dim, uint32_t prec, const struct rps_wtrows *b, float *out,
			    struct rps_wtshard **cs, const int64_t *slot, uint8_t *done);

#endif
