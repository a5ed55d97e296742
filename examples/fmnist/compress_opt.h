/* fmnist-train --compress: every key pushed with one codec
 * (<rdmaps/compress.h>), and the wire bytes in the summary. */
#ifndef FMNIST_COMPRESS_OPT_H
#define FMNIST_COMPRESS_OPT_H

#include <stddef.h>

#include <jansson.h>
#include <rdmaps/rdmaps.h>

#define COMPRESS_USAGE                                                                     \
	"  --compress C          push every gradient compressed: none (default), fp16,\n"  \
	"                        bf16, topk:RATIO, randk:RATIO (e.g. topk:0.01; with\n"    \
	"                        error feedback), sign (1 bit + scale, error feedback),\n"  \
	"                        sign:BLOCK (a scale per BLOCK elements, e.g. sign:256);\n" \
	"                        topk/randk options: ,warmup=STEPS,from=RATIO (sparsity\n"  \
	"                        warm-up) ,momentum=M (momentum correction: use it with\n"  \
	"                        --optimizer sgd); docs/compression.md\n"

/* Give keys[0..n) the codec of text (NULL or "none": nothing). 0, or the
 * error, said on stderr. */
int compress_apply(struct rps_worker *w, const rps_key_t *keys, size_t n, const char *text);
/* The check of --compress before anything starts: 0 or -EINVAL (said). */
int compress_check(const char *text, int local);
/* A note on stderr when text asks for momentum correction and the servers'
 * optimizer (enum rps_optim_kind) is not plain SGD. */
void compress_momentum_note(const char *text, int optim_kind);
/* Print the push bytes per step (worker 0's) and add them to the summary
 * (doc may be NULL). steps: clocks this worker ended. */
void compress_report(struct rps_worker *w, const char *text, size_t steps, json_t *doc);

#endif
