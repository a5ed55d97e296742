/* Row storage precision (rowprec.h): the fp16 / bf16 codecs of src/codec_half.c
 * applied to table rows. */
#include "src/rowprec.h"

#include <string.h>

#include <rdmaps/table.h>

#include "src/codec.h"

#define BLOCK 256 /* elements converted through an aligned buffer at a time */

int rps_row_prec_valid(uint32_t prec)
{
	return prec == RPS_TABLE_FP32 || prec == RPS_TABLE_FP16 || prec == RPS_TABLE_BF16;
}

const char *rps_row_prec_name(uint32_t prec)
{
	switch (prec) {
	case RPS_TABLE_FP32:
		return "fp32";
	case RPS_TABLE_FP16:
		return "fp16";
	case RPS_TABLE_BF16:
		return "bf16";
	default:
		return "?";
	}
}

void rps_row_narrow(uint32_t prec, const float *in, void *out, size_t n)
{
	uint16_t buf[BLOCK];
	char *o = out;

	if (prec == RPS_TABLE_FP32) {
		memcpy(out, in, n * 4);
		return;
	}
	if (((uintptr_t)out & 1u) == 0) {
		if (prec == RPS_TABLE_FP16)
			rps_codec_f32_to_f16(in, (uint16_t *)out, n);
		else
			rps_codec_f32_to_bf16(in, (uint16_t *)out, n);
		return;
	}
	for (size_t i = 0; i < n; i += BLOCK) {
		size_t k = n - i < BLOCK ? n - i : BLOCK;

		if (prec == RPS_TABLE_FP16)
			rps_codec_f32_to_f16(in + i, buf, k);
		else
			rps_codec_f32_to_bf16(in + i, buf, k);
		memcpy(o + i * 2, buf, k * 2);
	}
}

void rps_row_widen(uint32_t prec, const void *in, float *out, size_t n)
{
	uint16_t buf[BLOCK];
	const char *p = in;

	if (prec == RPS_TABLE_FP32) {
		memcpy(out, in, n * 4);
		return;
	}
	if (((uintptr_t)in & 1u) == 0) {
		if (prec == RPS_TABLE_FP16)
			rps_codec_f16_to_f32((const uint16_t *)in, out, n);
		else
			rps_codec_bf16_to_f32((const uint16_t *)in, out, n);
		return;
	}
	for (size_t i = 0; i < n; i += BLOCK) {
		size_t k = n - i < BLOCK ? n - i : BLOCK;

		memcpy(buf, p + i * 2, k * 2);
		if (prec == RPS_TABLE_FP16)
			rps_codec_f16_to_f32(buf, out + i, k);
		else
			rps_codec_bf16_to_f32(buf, out + i, k);
	}
}

void rps_row_round(uint32_t prec, float *v, size_t n)
{
	uint16_t buf[BLOCK];

	if (prec == RPS_TABLE_FP32)
		return;
	for (size_t i = 0; i < n; i += BLOCK) {
		size_t k = n - i < BLOCK ? n - i : BLOCK;

		rps_row_narrow(prec, v + i, buf, k);
		rps_row_widen(prec, buf, v + i, k);
	}
}
