/* The public side of the codecs (include/rdmaps/compress.h): options,
 * their check and their text form. */
#include <rdmaps/compress.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/alloc.h"
#include "src/codec.h"
#include "src/log.h"

void rps_compress_opts_kind(struct rps_compress_opts *o, enum rps_codec kind)
{
	if (!o)
		return;
	o->kind = kind;
	o->ratio = 0.01f;
	o->error_feedback =
	    kind == RPS_CODEC_TOPK || kind == RPS_CODEC_RANDK || kind == RPS_CODEC_SIGN;
	o->seed = 1;
}

void rps_compress_opts_init(struct rps_compress_opts *o)
{
	rps_compress_opts_kind(o, RPS_CODEC_NONE);
	if (o)
		o->error_feedback = 1;
}

const char *rps_compress_name(enum rps_codec kind)
{
	return rps_codec_name((unsigned)kind);
}

int rps_compress_opts_validate(const struct rps_compress_opts *o)
{
	if (!o) {
		RPS_ERR("compression options: NULL");
		return -EINVAL;
	}
	if ((unsigned)o->kind >= RPS_CODEC_COUNT) {
		RPS_ERR("compression options: unknown kind %d (none, fp16, bf16, topk, randk, "
			"sign)",
			(int)o->kind);
		return -EINVAL;
	}
	if ((o->kind == RPS_CODEC_TOPK || o->kind == RPS_CODEC_RANDK) &&
	    !(o->ratio > 0.0f && o->ratio <= 1.0f)) {
		RPS_ERR("compression options: %s ratio %g is not in (0, 1] (the fraction of "
			"elements sent, e.g. 0.01)",
			rps_codec_name(o->kind), (double)o->ratio);
		return -EINVAL;
	}
	if (o->error_feedback != 0 && o->error_feedback != 1) {
		RPS_ERR("compression options: error_feedback %d is neither 0 nor 1",
			o->error_feedback);
		return -EINVAL;
	}
	return 0;
}

int rps_compress_parse(const char *text, struct rps_compress_opts *o)
{
	const char *colon;
	size_t nl;

	if (!text || !o) {
		RPS_ERR("compression: NULL text or options");
		return -EINVAL;
	}
	colon = strchr(text, ':');
	nl = colon ? (size_t)(colon - text) : strlen(text);
	for (unsigned id = 0; id < RPS_CODEC_COUNT; id++) {
		const char *name = rps_codec_name(id);
		int sparse = id == RPS_CODEC_TOPK || id == RPS_CODEC_RANDK;
		char *end;
		double r;

		if (strlen(name) != nl || strncmp(text, name, nl))
			continue;
		rps_compress_opts_kind(o, (enum rps_codec)id);
		if (!sparse) {
			if (colon) {
				RPS_ERR("compression '%s': %s takes no ratio", text, name);
				return -EINVAL;
			}
			return 0;
		}
		if (!colon) {
			RPS_ERR("compression '%s': %s needs a ratio, e.g. %s:0.01", text, name,
				name);
			return -EINVAL;
		}
		errno = 0;
		r = strtod(colon + 1, &end);
		if (errno || end == colon + 1 || *end || !(r > 0.0 && r <= 1.0)) {
			RPS_ERR("compression '%s': ratio '%s' is not a number in (0, 1] (the "
				"fraction of elements sent, e.g. %s:0.01)",
				text, colon + 1, name);
			return -EINVAL;
		}
		o->ratio = (float)r;
		return 0;
	}
	RPS_ERR("compression '%s': unknown (none, fp16, bf16, sign, topk:RATIO, randk:RATIO)",
		text);
	return -EINVAL;
}

size_t rps_compress_bytes(const struct rps_compress_opts *o, size_t n)
{
	return o ? rps_codec_bytes(o->kind, n, o->ratio) : 0;
}

int rps_compress_encode(const struct rps_compress_opts *o, const float *g, size_t n,
			float *residual, void *out, size_t *len_p)
{
	struct rps_codec_enc e;
	uint64_t rng;
	int rc = rps_compress_opts_validate(o);

	if (rc)
		return rc;
	if ((n && (!g || !out)) || !len_p) {
		RPS_ERR("compress_encode: NULL %s", !len_p ? "len_p" : !g ? "gradient" : "out");
		return -EINVAL;
	}
	rng = o->seed ? o->seed : 1;
	e.kind = o->kind;
	e.ratio = o->ratio;
	e.residual = o->error_feedback ? residual : NULL;
	e.rng = &rng;
	e.scratch = NULL;
	if (o->kind == RPS_CODEC_TOPK) {
		e.scratch = rps_malloc((n ? n : 1) * sizeof(float));
		if (!e.scratch)
			return -ENOMEM;
	}
	*len_p = rps_codec_encode(&e, g, n, out);
	rps_free(e.scratch);
	return 0;
}

int rps_compress_decode(enum rps_codec kind, const void *in, size_t len, size_t n, float *out)
{
	char why[200];
	int rc;

	if ((n || len) && (!in || !out)) {
		RPS_ERR("compress_decode: NULL %s", !in ? "input" : "out");
		return -EINVAL;
	}
	rc = rps_codec_check((unsigned)kind, in, len, n, why, sizeof(why));
	if (rc) {
		RPS_ERR("compress_decode: %s", why);
		return rc;
	}
	rps_codec_decode((unsigned)kind, in, len, n, out);
	return 0;
}
