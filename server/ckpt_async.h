/* Checkpoints off the hot path (ckpt_async.c): the update thread takes a
 * snapshot of its shard at a clock boundary (copy-on-write by chunk: it only
 * marks every chunk "not written yet"), and the shard's writer thread streams
 * the chunks into the file, so pushes keep being applied meanwhile; the
 * update thread saves a chunk's old values only before it writes into one the
 * writer has not written yet (rps_ckpt_cow_chunk). At most one snapshot per
 * shard at a time.
 *
 * Without a writer thread (a shard whose update thread was never started,
 * as in the unit tests that call rps_shard_handle directly) or when the
 * snapshot cannot be allocated, the update thread writes the file itself as
 * before (server/ckpt.c, rps_shard_ckpt_write_info).
 */
#ifndef RPS_SERVER_CKPT_ASYNC_H
#define RPS_SERVER_CKPT_ASYNC_H

#include <stdatomic.h>
#include <stdint.h>

#include "server/shard.h"

/* A slice of the snapshot in flight (ckpt_async.c); the slice's meta points
 * to it (ckpt_cow) until the update thread sees the snapshot written. */
struct rps_ckpt_cow_slice;
void rps_ckpt_cow_copy(struct rps_slice_meta *m, uint64_t c);

/* Update thread, before it writes into chunk c of slice m (parameters or
 * optimizer state of that chunk's elements): the old values of a chunk a
 * snapshot in flight has not written yet are saved first (also one the writer
 * is copying: the update thread never waits for the writer). One pointer test
 * when no snapshot is in flight. */
static inline void rps_ckpt_cow_chunk(struct rps_slice_meta *m, uint64_t c)
{
	if (m->ckpt_cow)
		rps_ckpt_cow_copy(m, c);
}
/* Update thread: copy every chunk of m not copied yet and wait until the
 * writer no longer reads m (before m's optimizer state is freed). */
void rps_ckpt_cow_slice_all(struct rps_slice_meta *m);

/* What to do when the previous snapshot is still being written. */
enum rps_ckpt_busy {
	RPS_CKPT_BUSY_WAIT, /* wait for it (the update thread blocks meanwhile) */
	RPS_CKPT_BUSY_SKIP, /* skip this one (warned, counted; retried at the next clock) */
};

/* Start the shard's writer thread (rps_shard_start calls it when the shard
 * has a checkpoint directory). 0 or -errno (then checkpoints stay synchronous). */
int rps_shard_ckpt_async_start(struct rps_shard *sh);
/* Wait for the write in flight (logged if there is one), stop and join the
 * writer, free it. Idempotent; rps_shard_stop calls it after the update thread
 * ended. */
void rps_shard_ckpt_async_stop(struct rps_shard *sh);
/* 1 if the shard has a writer thread. */
int rps_shard_ckpt_async_on(const struct rps_shard *sh);

/* Update thread: snapshot the shard now (at sh->clock) and hand it to the
 * writer. creq_gen != 0: a control request's (snap.c): the writer fills
 * sh->creq_res and publishes creq_gen in sh->creq_done when the file is
 * committed (or failed). Returns 1 handed over, 0 skipped (busy and
 * RPS_CKPT_BUSY_SKIP), or -errno with nothing handed over (no writer, no
 * memory for the snapshot, the sparse tables' files failed): the caller
 * writes synchronously or reports. */
int rps_shard_ckpt_async_submit(struct rps_shard *sh, uint32_t creq_gen, enum rps_ckpt_busy busy);
/* Update thread: wait until no write is in flight (and none is owed to a
 * control request). */
void rps_shard_ckpt_async_wait(struct rps_shard *sh);
/* 1 if a control request's checkpoint is being written (its result not yet
 * published). */
int rps_shard_ckpt_async_creq_pending(struct rps_shard *sh);

/* Tests: hold the writer before it writes a snapshot it took (1), release it (0). */
void rps_shard_ckpt_async_hold(struct rps_shard *sh, int hold);
/* Tests: 1 = the writer stops inside the next chunk it copies (claimed, copied,
 * not yet marked written); releases rps_shard_ckpt_async_hold and returns once
 * the writer is there (it must have a snapshot to write). 0 releases it. */
void rps_shard_ckpt_async_hold_chunk(struct rps_shard *sh, int hold);

/* Counters (any thread). */
struct rps_ckpt_async_stats {
	uint64_t written;	/* snapshots written by the writer (committed) */
	uint64_t failed;	/* snapshots whose write failed */
	uint64_t skipped;	/* periodic ones skipped: the previous one was in flight */
	uint64_t waited;	/* the update thread waited for the previous one */
	uint64_t take_ns_max;	/* longest snapshot set-up on the update thread */
	uint64_t write_ns_max;	/* longest write (file, fsync, rename) by the writer */
	uint64_t cow_chunks;	/* chunk arrays (values or one state array) the update
				 * thread saved before writing into them */
};
void rps_shard_ckpt_async_stats(struct rps_shard *sh, struct rps_ckpt_async_stats *st);

#endif
