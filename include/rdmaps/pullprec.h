/* rdmaps — low-precision pulls, chosen by the job per key
 * (docs/compression.md "Low-precision pulls", docs/api.md).
 *
 * A key given a pull precision of fp16 or bf16 is kept by the servers twice:
 * the float32 master (what the optimizer updates, exactly as before) and a
 * 2-byte copy, rounded to nearest even from the master by the shard's update
 * thread after every write and before the clock that covers it is published.
 * Pulls of the key read the copy (one-sided RDMA READ of half the bytes, or a
 * TCP answer of half the bytes) and widen it into the caller's float32
 * buffer: a pull returns round(master), exactly, as of the clock the pull
 * waits for. Pushes are unchanged (see <rdmaps/compress.h> for those).
 */
#ifndef RDMAPS_PULLPREC_H
#define RDMAPS_PULLPREC_H

#include <stddef.h>

#include <rdmaps/types.h>

struct rps_worker;

#ifdef __cplusplus
extern "C" {
#endif

/* The values travel in DECLARE frames (docs/protocol.md): never renumber.
 * They are those of enum rps_table_precision. */
enum rps_pull_precision {
	RPS_PULL_FP32 = 0, /* the default: pulls read the float32 master */
	RPS_PULL_FP16 = 1, /* IEEE binary16: 11 significant bits, |x| <= 65504 */
	RPS_PULL_BF16 = 2, /* bfloat16: float32's range, 8 significant bits */
};

/* "fp32", "fp16" or "bf16" -> *prec_p: 0, or -EINVAL with the reason logged
 * (naming the string and the accepted names); *prec_p unchanged then. */
RPS_API int rps_pull_precision_parse(const char *name, enum rps_pull_precision *prec_p);
/* "fp32", "fp16", "bf16", or "?" */
RPS_API const char *rps_pull_precision_name(enum rps_pull_precision prec);

/* Pull keys this worker declared (rps_worker_declare*) in prec from now on.
 * fp16/bf16: every slice's servers make the key's copy (a DECLARE with the
 * precision; idempotent) before this returns, and later pulls read it;
 * fp32: later pulls read the master again (nothing is sent; a copy the
 * servers keep stays until they restart). A key has one copy: another
 * 2-byte precision for a key that has a copy is -EINVAL, the servers'
 * reason logged. Returns 0, -EINVAL (NULL, a precision out of range, or
 * refused), -ENOENT (a key not declared through this worker: nothing sent),
 * -ENOSPC (no room in a shard store for the copy), or what a declare
 * returns. Call it between pulls of these keys (usually right after the
 * declare). */
RPS_API int rps_worker_set_pull_precision(struct rps_worker *worker, const rps_key_t *keys,
					  size_t n, enum rps_pull_precision prec);
/* The key's pull precision as set on this worker (RPS_PULL_FP32 for an
 * unknown key). */
RPS_API enum rps_pull_precision rps_worker_pull_precision(const struct rps_worker *worker,
							  rps_key_t key);

#ifdef __cplusplus
}
#endif

#endif
