/* Sparse tables: how a row is stored (enum rps_table_precision).
 *
 * A table's rows are stored on the servers as fp32 (4 bytes an element), or
 * as IEEE binary16 / bfloat16 (2 bytes): half the memory and half the bytes
 * of a one-sided READ or of a pull answer. Values are always handled as fp32
 * elsewhere: the optimizer widens a stored row, steps in fp32 and rounds the
 * result back to nearest even (src/codec_half.c); a worker widens what it
 * reads. Widening is exact, so a pull returns exactly the stored (rounded)
 * value (docs/tables.md, Storage precision).
 */
#ifndef RPS_ROWPREC_H
#define RPS_ROWPREC_H

#include <stddef.h>
#include <stdint.h>

/* 1 if prec is RPS_TABLE_FP32, _FP16 or _BF16. */
int rps_row_prec_valid(uint32_t prec);
/* Bytes of one stored element: 4 (fp32) or 2 (fp16, bf16). */
static inline uint32_t rps_row_elem_bytes(uint32_t prec)
{
	return prec ? 2u : 4u;
}
/* "fp32", "fp16", "bf16", or "?". */
const char *rps_row_prec_name(uint32_t prec);
/* n floats -> n stored elements at out (any alignment), rounded to nearest
 * even; fp32: copied. */
void rps_row_narrow(uint32_t prec, const float *in, void *out, size_t n);
/* n stored elements at in (any alignment) -> n floats (exact). */
void rps_row_widen(uint32_t prec, const void *in, float *out, size_t n);
/* Round n floats in place to what prec stores (widen(narrow(x))). */
void rps_row_round(uint32_t prec, float *v, size_t n);

#endif
