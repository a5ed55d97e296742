/* Low-precision pulls on the worker (<rdmaps/pullprec.h>,
 * docs/compression.md "Low-precision pulls"): a key whose pull precision is
 * fp16 or bf16 is pulled from the servers' 2-byte copy of each slice
 * (server/lowprec.h) and widened (exactly) into the caller's float32 buffer.
 *   TCP (frames): PULL_LP, answered by PULL_LP_RESP with 2 bytes an element,
 *   widened out of the received frame (worker/frame.c).
 *   READ: the copy is a slice of ceil(nelems / 2) words with chunks and
 *   versions of its own (the DECLARE_ACK's struct rps_declare_lp); it is READ
 *   through bounce blocks like any slice, with the same clock wait and torn
 *   chunk re-reads, and each clean block is widened into the caller's buffer
 *   (worker/read_post.c, rps_wread_bounce_out).
 */
#ifndef RPS_WORKER_LOWPREC_H
#define RPS_WORKER_LOWPREC_H

#include "worker/worker_int.h"

/* The copy of sl as a slice to READ: ceil(nelems / 2) words, the copy's
 * place and geometry, lp_nelems = sl's elements. 0, or -EPROTO if sl has no
 * copy known. */
int rps_wlp_copy_slice(const struct rps_wslice *sl, struct rps_wslice *out);
/* A DECLARE_ACK's struct rps_declare_lp (data, len bytes) checked and kept
 * in sl. 0 or -EPROTO with a logged reason. */
int rps_wlp_ack(const struct rps_wconn *wc, const struct rps_declare_ack *a, const void *data,
		size_t len, uint32_t want_prec, struct rps_wslice *sl);
/* Widen n 2-byte elements of precision prec at in (any alignment) into out. */
void rps_wlp_widen(uint32_t prec, const void *in, float *out, uint64_t n);

#endif
