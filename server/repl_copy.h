/* Replicated shards: a shard's whole state in one buffer (repl_copy.c), for
 * a replacement server that joins as a backup while the job runs
 * (docs/replication.md "A replacement server joins as a backup"): its
 * slices in store order (values, optimizer state, the assigned map of
 * slices initialised by a push, this BSP clock's partial sums per worker
 * lane), every worker's clock and pushes counted per clock, and the
 * sequence numbers of pushes seen. Deferred pushes (BSP, a later clock)
 * are not in it: the primary forwards them after it. Update thread only,
 * at an entry boundary: the entries after it are forwarded. */
#ifndef RPS_SERVER_REPL_COPY_H
#define RPS_SERVER_REPL_COPY_H

#include <stddef.h>

#include "server/shard.h"

/* The state into a new buffer (*buf_p, rps_free). 0, or -ENOTSUP (sparse
 * tables), -ENOMEM, with why[wl] set. */
int rps_repl_copy_save(struct rps_shard *sh, void **buf_p, size_t *len_p, char *why, size_t wl);
/* Load it into this shard, which has no slice yet. 0 or -errno, why[wl]. */
int rps_repl_copy_load(struct rps_shard *sh, const void *buf, size_t len, char *why, size_t wl);

#endif
