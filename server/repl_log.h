/* Replicated shards, RDMAPS_REPLICAS=3: the head's log of what it forwarded
 * (server/repl.h). The head of a chain primary -> backup 1 -> backup 2 keeps
 * a copy of every entry it forwarded until the last backup acknowledged a
 * push at or after it; when backup 1 dies, backup 2 links to the head, says
 * how many entries of each shard it holds, and the head sends it the rest
 * from here: the chain closes over the dead middle, nothing lost. */
#ifndef RPS_SERVER_REPL_LOG_H
#define RPS_SERVER_REPL_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "src/proto.h"

struct rps_repl_log;

/* A log for nshards shards, or NULL (no memory). */
struct rps_repl_log *rps_repl_log_new(int nshards);
void rps_repl_log_free(struct rps_repl_log *l);

void rps_repl_log_lock(struct rps_repl_log *l, int shard);
void rps_repl_log_unlock(struct rps_repl_log *l, int shard);
/* Under the shard's lock: keep a copy of the frame h + iov[n]; its number
 * in the shard's stream (1, 2, ...), or 0 without memory (then the log is
 * off: rps_repl_log_broken says so). */
uint64_t rps_repl_log_add(struct rps_repl_log *l, int shard, const struct rps_frame_hdr *h,
			  const struct iovec *iov, int n);
int rps_repl_log_broken(const struct rps_repl_log *l);
/* Under the shard's lock: the number of the shard's last entry (0: none). */
uint64_t rps_repl_log_last(const struct rps_repl_log *l, int shard);
/* Forget the shard's entries up to number upto (the last backup holds them). */
void rps_repl_log_trim(struct rps_repl_log *l, int shard, uint64_t upto);
/* Under the shard's lock: fn for every kept entry, oldest first; stops at
 * fn's first non-zero return, which it returns. */
int rps_repl_log_each(struct rps_repl_log *l, int shard,
		      int (*fn)(void *arg, uint64_t seq, const struct rps_frame_hdr *h,
				const void *payload),
		      void *arg);

#endif
