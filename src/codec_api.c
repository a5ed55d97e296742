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
	o->error_feedback = kind == RPS_CODEC_TOPK || kind == RPS_CODEC_RANDK ||
			    kind == RPS_CODEC_SIGN || kind == RPS_CODEC_SIGNB;
	o->seed = 1;
	o->block = 256;
	o->warmup_steps = 0;
	o->warmup_ratio = 0.25f;
	o->momentum = 0.0f;
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
	if (o->kind == RPS_CODEC_SIGNB && (o->block < 8 || o->block > (1u << 24))) {
		RPS_ERR("compression options: signb block %u is not in [8, 16777216] (elements "
			"per scale, e.g. 256)",
			o->block);
		return -EINVAL;
	}
	if ((o->kind == RPS_CODEC_TOPK || o->kind == RPS_CODEC_RANDK) && o->warmup_steps &&
	    !(o->warmup_ratio > o->ratio && o->warmup_ratio <= 1.0f)) {
		RPS_ERR("compression options: %s warm-up ratio %g is not in (ratio %g, 1] (the "
			"fraction sent by the first push, e.g. 0.25)",
			rps_codec_name(o->kind), (double)o->warmup_ratio, (double)o->ratio);
		return -EINVAL;
	}
	if (o->momentum != 0.0f &&
	    (!(o->momentum > 0.0f && o->momentum < 1.0f) ||
	     (o->kind != RPS_CODEC_TOPK && o->kind != RPS_CODEC_RANDK &&
	      o->kind != RPS_CODEC_SIGN && o->kind != RPS_CODEC_SIGNB) ||
	     o->error_feedback != 1)) {
		RPS_ERR("compression options: momentum correction %g needs topk, randk, sign or "
			"signb with error feedback and a momentum in [0, 1) (e.g. 0.9; %s, "
			"error_feedback %d)",
			(double)o->momentum, rps_codec_name(o->kind), o->error_feedback);
		return -EINVAL;
	}
	if (o->error_feedback != 0 && o->error_feedback != 1) {
		RPS_ERR("compression options: error_feedback %d is neither 0 nor 1",
			o->error_feedback);
		return -EINVAL;
	}
	return 0;
}

/* "warmup=234", "from=0.25", "momentum=0.9" (opt[0..len)) into o; the
 * warm-up only for a sparse codec */
static int parse_opt(const char *text, const char *opt, size_t len, int sparse,
		     struct rps_compress_opts *o)
{
	static const char *const names[] = {"momentum=", "warmup=", "from="};
	char buf[64], *end;
	double v;

	for (unsigned n = 0; n < (sparse ? 3u : 1u); n++) {
		size_t nl = strlen(names[n]);

		if (len <= nl || strncmp(opt, names[n], nl) || len - nl >= sizeof(buf))
			continue;
		memcpy(buf, opt + nl, len - nl);
		buf[len - nl] = 0;
		errno = 0;
		v = strtod(buf, &end);
		if (errno || end == buf || *end)
			break;
		if (n == 0 && v >= 0 && v < 1) {
			o->momentum = (float)v;
			return 0;
		}
		if (n == 1 && v >= 0 && v <= 4294967295.0 && v == floor(v)) {
			o->warmup_steps = (uint32_t)v;
			return 0;
		}
		if (n == 2 && v > 0 && v <= 1) {
			o->warmup_ratio = (float)v;
			return 0;
		}
		break;
	}
	if (sparse)
		RPS_ERR("compression '%s': option '%.*s' is not one of warmup=STEPS (an "
			"integer), from=RATIO (in (0, 1]), momentum=M (in [0, 1))",
			text, (int)len, opt);
	else
		RPS_ERR("compression '%s': option '%.*s' is not momentum=M (in [0, 1); the only "
			"option of sign)",
			text, (int)len, opt);
	return -EINVAL;
}

/* The ratio of a sparse codec, or the block of sign (then signb), in
 * arg[0..len) into o */
static int parse_arg(const char *text, const char *arg, size_t len, unsigned id,
		     struct rps_compress_opts *o)
{
	const char *name = rps_codec_name(id);
	char buf[64], *end;

	if (len >= sizeof(buf)) {
		RPS_ERR("compression '%.100s': the %s argument is %zu characters long (a ratio or "
			"a block: a number)",
			text, name, len);
		return -EINVAL;
	}
	memcpy(buf, arg, len);
	buf[len] = 0;
	errno = 0;
	if (id == RPS_CODEC_TOPK || id == RPS_CODEC_RANDK) {
		double r = strtod(buf, &end);

		if (errno || end == buf || *end || !(r > 0.0 && r <= 1.0)) {
			RPS_ERR("compression '%s': ratio '%s' is not a number in (0, 1] (the "
				"fraction of elements sent, e.g. %s:0.01)",
				text, buf, name);
			return -EINVAL;
		}
		o->ratio = (float)r;
		return 0;
	}
	if (id == RPS_CODEC_SIGN || id == RPS_CODEC_SIGNB) {
		unsigned long long bl = strtoull(buf, &end, 10);

		if (errno || end == buf || *end || buf[0] == '-' || bl < 8 || bl > (1u << 24)) {
			RPS_ERR("compression '%s': block '%s' is not an integer in [8, 16777216] "
				"(elements per scale, e.g. sign:256)",
				text, buf);
			return -EINVAL;
		}
		rps_compress_opts_kind(o, RPS_CODEC_SIGNB);
		o->block = (uint32_t)bl;
		return 0;
	}
	RPS_ERR("compression '%s': %s takes no ratio or options", text, name);
	return -EINVAL;
}

int rps_compress_parse(const char *text, struct rps_compress_opts *o)
{
	size_t nl;

	if (!text || !o) {
		RPS_ERR("compression: NULL text or options");
		return -EINVAL;
	}
	nl = strcspn(text, ":,");
	for (unsigned id = 0; id < RPS_CODEC_COUNT; id++) {
		const char *name = rps_codec_name(id), *p = text + nl;
		int sparse = id == RPS_CODEC_TOPK || id == RPS_CODEC_RANDK;
		int sign = id == RPS_CODEC_SIGN || id == RPS_CODEC_SIGNB;

		if (strlen(name) != nl || strncmp(text, name, nl))
			continue;
		rps_compress_opts_kind(o, (enum rps_codec)id);
		if (*p == ':') {
			size_t len = strcspn(p + 1, ",");

			if (parse_arg(text, p + 1, len, id, o))
				return -EINVAL;
			p += 1 + len;
		} else if (sparse) {
			RPS_ERR("compression '%s': %s needs a ratio, e.g. %s:0.01", text, name,
				name);
			return -EINVAL;
		}
		if (*p && !sparse && !sign) {
			RPS_ERR("compression '%s': %s takes no options", text, name);
			return -EINVAL;
		}
		while (*p == ',') {
			size_t len = strcspn(p + 1, ",");

			if (parse_opt(text, p + 1, len, sparse, o))
				return -EINVAL;
			p += 1 + len;
		}
		return rps_compress_opts_validate(o);
	}
	RPS_ERR("compression '%s': unknown (none, fp16, bf16, sign, sign:BLOCK, topk:RATIO, "
		"randk:RATIO)",
		text);
	return -EINVAL;
}

size_t rps_compress_bytes(const struct rps_compress_opts *o, size_t n)
{
	return o ? rps_codec_bytes_blk(o->kind, n, o->ratio, o->block) : 0;
}

int rps_compress_encode(const struct rps_compress_opts *o, const float *g, size_t n,
			float *residual, void *out, size_t *len_p)
{
	struct rps_codec_enc e;
	uint64_t rng;
	int rc = rps_compress_opts_validate(o);

	if (rc)
		return rc;
	if (o->momentum != 0.0f) {
		RPS_ERR("compress_encode: momentum correction keeps a velocity per key: use it "
			"through rps_worker_set_compression");
		return -EINVAL;
	}
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
	e.block = o->block;
	e.momentum = 0.0f;
	e.velocity = NULL;
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
