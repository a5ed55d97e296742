/* fmnist-train --pull-precision: every key pulled from the servers'
 * fp16 / bf16 copy (<rdmaps/pullprec.h>), and the pull bytes in the summary. */
#ifndef FMNIST_PULLPREC_OPT_H
#define FMNIST_PULLPREC_OPT_H

#include <stddef.h>

#include <jansson.h>
#include <rdmaps/rdmaps.h>

#define PULLPREC_USAGE                                                                    \
	"  --pull-precision P    pull the parameters as fp32 (default), fp16 or bf16:\n"  \
	"                        the servers keep a rounded 2-byte copy beside the\n"     \
	"                        float32 master, pulls read it (half the bytes);\n"       \
	"                        docs/compression.md \"Low-precision pulls\"\n"

/* The check of --pull-precision before anything starts: 0 or -EINVAL (said). */
int pullprec_check(const char *text, int local);
/* Give keys[0..n) the pull precision of text (NULL: nothing). 0, or the
 * error, said on stderr. */
int pullprec_apply(struct rps_worker *w, const rps_key_t *keys, size_t n, const char *text);
/* Print the pull bytes per step (this worker's pull answers over TCP) and
 * add them to the summary (doc may be NULL). */
void pullprec_report(struct rps_worker *w, const char *text, size_t steps, json_t *doc);

#endif
