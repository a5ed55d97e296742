/* rdmaps — gradient compression, chosen by the job per key
 * (docs/compression.md).
 *
 * A key given a codec with rps_worker_set_compression is pushed compressed:
 * the PUSH frames carry the codec's bytes (over TCP and RDMA SEND alike), the
 * servers widen them to float32 before the BSP sum or the optimizer. Pulls are
 * unchanged (float32). Keys without a codec, or with RPS_CODEC_NONE, are pushed
 * as before; one push may mix both.
 *
 * Error feedback (on by default for topk, randk, sign and signb): the worker keeps,
 * per key, what it did not send (the residual) and adds it to the key's next
 * gradient, so nothing is lost, only delayed. A key's residual is the worker's
 * alone; setting the key's compression again starts it afresh (zeros).
 */
#ifndef RDMAPS_COMPRESS_H
#define RDMAPS_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include <rdmaps/types.h>

struct rps_worker;

#ifdef __cplusplus
extern "C" {
#endif

/* The codec ids travel in PUSH hdr.flags (docs/protocol.md): never renumber. */
enum rps_codec {
	RPS_CODEC_NONE = 0,  /* float32 as before */
	RPS_CODEC_FP16 = 1,  /* IEEE binary16, round to nearest even: 2 bytes/element */
	RPS_CODEC_BF16 = 2,  /* bfloat16, round to nearest even: 2 bytes/element */
	RPS_CODEC_TOPK = 3,  /* the ratio * n largest |g|: index + value pairs */
	RPS_CODEC_RANDK = 4, /* ratio * n elements drawn at random: index + value pairs */
	RPS_CODEC_SIGN = 5,  /* 1 bit per element and one scale (mean |g|): EF-SignSGD */
	RPS_CODEC_SIGNB = 6, /* 1 bit per element, one scale (mean |g|) per block of elements */
	RPS_CODEC_COUNT
};

struct rps_compress_opts {
	enum rps_codec kind;
	float ratio;	    /* topk, randk: fraction of elements sent, (0, 1]; others: ignored */
	int error_feedback; /* 1: keep and re-add the residual; 0: drop what was not sent */
	uint64_t seed;	    /* randk: seed of the draw (mixed with the worker rank and key) */
	/* signb: elements per scale, [8, 2^24] (default 256) */
	uint32_t block;
	/* topk, randk: sparsity warm-up (Deep Gradient Compression): the key's
	 * first warmup_steps pushes send a larger fraction, falling geometrically
	 * from warmup_ratio (push 0) to ratio (push warmup_steps on). 0: none. */
	uint32_t warmup_steps;
	float warmup_ratio; /* (ratio, 1] (default 0.25) */
	/* topk, randk, sign, signb with error feedback: momentum correction
	 * (Deep Gradient Compression): the worker keeps a velocity u = momentum
	 * * u + g per element and accumulates u (not g) into the residual; topk
	 * and randk clear a sent element's velocity (factor masking). Give such
	 * keys an optimizer without momentum (sgd) on the servers. 0: off
	 * (default), else [0, 1). */
	float momentum;
};

/* Defaults: none, ratio 0.01, error feedback on, seed 1, block 256, no
 * warm-up (warmup_ratio 0.25), no momentum correction. */
RPS_API void rps_compress_opts_init(struct rps_compress_opts *opts);
/* The defaults for kind (error feedback on for topk, randk and sign, off for
 * the others). */
RPS_API void rps_compress_opts_kind(struct rps_compress_opts *opts, enum rps_codec kind);
/* 0, or -EINVAL with the reason logged (unknown kind, a ratio outside (0, 1]
 * for topk / randk, error_feedback not 0 or 1, a signb block outside
 * [8, 2^24], a warm-up ratio not in (ratio, 1], momentum not in [0, 1) or
 * without error feedback). */
RPS_API int rps_compress_opts_validate(const struct rps_compress_opts *opts);
/* "none", "fp16", "bf16", "sign", "sign:BLOCK" (signb, e.g. sign:256),
 * "topk:RATIO", "randk:RATIO" (RATIO a fraction in (0, 1], e.g. topk:0.01),
 * the sparse ones optionally followed by ",warmup=STEPS", ",from=RATIO0"
 * (the warm-up's first ratio) and ",momentum=M" (e.g.
 * topk:0.01,warmup=234,momentum=0.9; sign and sign:BLOCK take ",momentum=M"),
 * into *opts_p with the kind's defaults.
 * 0, or -EINVAL with the reason logged. */
RPS_API int rps_compress_parse(const char *text, struct rps_compress_opts *opts_p);
/* "fp16"; "?" for an unknown kind. */
RPS_API const char *rps_compress_name(enum rps_codec kind);

/* The codecs on the caller's arrays, as a worker runs them on one PUSH
 * frame (the wire formats: docs/protocol.md): for benchmarks, tests, and
 * jobs that move gradients themselves.
 * rps_compress_bytes: the exact bytes of n elements encoded (a sparse
 * codec's k = ceil(ratio * n), at least 1 when n > 0).
 * rps_compress_encode: g[0..n) into out (rps_compress_bytes bytes, 4-byte
 * aligned); residual: NULL, or n floats of error feedback, added to g first
 * and left holding what was not sent. randk draws from opts->seed (the same
 * draw for the same seed). *len_p gets the bytes. 0, -EINVAL (bad opts,
 * NULL), -ENOMEM.
 * rps_compress_decode: len bytes of codec kind holding n elements into
 * out[0..n) as float32, after the receiver's exact check: 0, or -EPROTO
 * (wrong size, an index out of range or not increasing; logged), -EINVAL. */
RPS_API size_t rps_compress_bytes(const struct rps_compress_opts *opts, size_t n);
RPS_API int rps_compress_encode(const struct rps_compress_opts *opts, const float *g, size_t n,
				float *residual, void *out, size_t *len_p);
RPS_API int rps_compress_decode(enum rps_codec kind, const void *in, size_t len, size_t n,
				float *out);

/* Push keys (declared through this worker) compressed as opts says from
 * the next push on. Local: nothing is sent. 0, -EINVAL (NULL, n 0, bad opts:
 * nothing changed), -ENOENT (a key not declared through this worker: nothing
 * changed), -ENOMEM. Call it between pushes of those keys, not during one. */
RPS_API int rps_worker_set_compression(struct rps_worker *worker, const rps_key_t *keys, size_t n,
				       const struct rps_compress_opts *opts);

/* What one key's pushes put on the wire since it was declared. */
struct rps_key_wire_stats {
	uint64_t pushes;     /* PUSH frames */
	uint64_t raw_bytes;  /* their elements as float32 */
	uint64_t data_bytes; /* their data as sent (compressed) */
	uint64_t wire_bytes; /* whole frames: header, fixed part and data */
};
/* 0, -EINVAL (NULL), -ENOENT (not declared through this worker). */
RPS_API int rps_worker_key_wire_stats(const struct rps_worker *worker, rps_key_t key,
				      struct rps_key_wire_stats *stats_p);

#ifdef __cplusplus
}
#endif
#endif
