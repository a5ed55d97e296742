/* Low-precision pulls (docs/compression.md "Low-precision pulls"): a slice
 * declared with a pull precision (RPS_DECLARE_FLAG_LOWPREC) keeps, beside
 * its float32 master, a copy in IEEE binary16 or bfloat16 (2 bytes an
 * element), in the same shard store (so registered for one-sided READ like
 * the master). The copy is a store slice of ceil(nelems / 2) 4-byte words,
 * element e at byte 2e of its data, with its own chunks and seqlock versions.
 *
 * Only the update thread writes it: after every write of the master
 * (optimizer step, first assignment, ASSIGN, restore, a backup's load) the
 * written range is rounded to nearest even from the master into the copy,
 * before the shard publishes the clock that covers the write. So a reader
 * that waits for a clock and reads the copy's chunks under their versions
 * gets exactly round(master) as of that clock, as a float32 reader gets the
 * master. The optimizer never sees the copy.
 */
#ifndef RPS_SERVER_LOWPREC_H
#define RPS_SERVER_LOWPREC_H

#include <stddef.h>
#include <stdint.h>

#include "server/shard.h"

struct rps_lp_copy {
	uint32_t prec;		   /* 1 fp16, 2 bf16 (src/rowprec.h) */
	struct rps_store_slice sl; /* ceil(nelems / 2) words */
	uint64_t data_off;	   /* byte offset of its chunk 0's data */
};

/* The slice's copy, or NULL (any thread: acquire). */
static inline const struct rps_lp_copy *rps_lp_of(const struct rps_slice_meta *m)
{
	return atomic_load_explicit(&m->lp, memory_order_acquire);
}

/* Give slice m a copy of precision prec (update thread): 0 (made and filled
 * now, or it had one of that precision already), -EINVAL (prec not fp16 or
 * bf16, or the slice has a copy of the other precision), -ENOSPC (no room
 * in the store), -ENOMEM; why[len] says why, naming the key. */
int rps_lp_declare(struct rps_shard *sh, struct rps_slice_meta *m, uint32_t prec, char *why,
		   size_t len);
/* Round elements [off, off + n) of the master into the copy (update thread;
 * nothing if the slice has none). */
void rps_lp_refresh(struct rps_shard *sh, struct rps_slice_meta *m, uint64_t off, uint64_t n);
/* Copy elements [off, off + n) of the copy (2n bytes) into dst, consistently
 * per chunk (any thread). dst: room for 2n + 4 bytes, 4-byte aligned. The
 * slice must have a copy. */
void rps_lp_read(const struct rps_shard *sh, const struct rps_slice_meta *m, uint64_t off,
		 uint64_t n, void *dst);
/* Frees m's copy (the store space stays with the store). */
void rps_lp_free(struct rps_slice_meta *m);

#endif
