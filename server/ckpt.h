/* Checkpoints of shards (ckpt.c): written by the update thread, loaded into
 * fresh shards by --restore. File format: src/ckpt.h. */
#ifndef RPS_SERVER_CKPT_H
#define RPS_SERVER_CKPT_H

#include "server/shard.h"

/* Update thread: write this shard's checkpoint now (at the shard's clock).
 * 0 or -errno (logged, counted in ckpts_failed). */
int rps_shard_ckpt_write(struct rps_shard *sh);
struct rps_ckpt_info;
/* The same, with the file's description in *info_p (on success). */
int rps_shard_ckpt_write_info(struct rps_shard *sh, struct rps_ckpt_info *info_p);
/* Update thread, after the clock moved: write one if every / secs say so. */
void rps_shard_ckpt_maybe(struct rps_shard *sh);
/* Update thread: load r->path into this (empty) shard: slices, parameters,
 * optimizer state, and the clock for every worker. Sets r->rc, r->done. */
void rps_shard_restore_run(struct rps_shard *sh, struct rps_shard_restore *r);

/* The server's restore. The one server rank with checkpoint files in dir
 * (UINT32_MAX: none or several; *nranks_p is 0, 1 or 2 (several), -1 if dir
 * cannot be read). */
uint32_t rps_srv_restore_rank_of_dir(const char *dir, int *nranks_p);
/* The files of every shard of rank, at one common clock if the files allow it:
 * 0 with r[0..nshards) ready to queue (RPS_ENT_RESTORE), or -errno (logged). */
int rps_srv_restore_find(const char *dir, uint32_t rank, uint32_t nshards,
			 struct rps_shard_restore *r);
/* Wait until the update threads loaded them: 0, or the first failure (logged). */
int rps_srv_restore_wait(const char *dir, uint32_t nshards, struct rps_shard_restore *r);

#endif
