/* text-train's model, fastText style: the mean of an example's embedding
 * rows (EmbeddingBag, mean), a linear layer, softmax cross-entropy.
 *
 *   h = mean_k E[id_k]                 (dim; E: the table's rows)
 *   z = h W + b                        (W: dim x C row-major, b: C; the dense key)
 *   loss = -log softmax(z)[y]
 *
 * A mini-batch works on its unique ids: struct text_batch maps every feature
 * of its examples to the row of its id in a packed [nu x dim] array, which is
 * what the table pulls and pushes. */
#ifndef TEXT_MODEL_H
#define TEXT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"

struct text_batch {
	size_t n;	  /* examples */
	const size_t *ex; /* their indices in the set */
	uint64_t *uids;	  /* unique ids, in order of first appearance */
	size_t nu;
	uint32_t *slot;	  /* per feature of ex[0], ex[1], ...: its row in uids */
	/* workspace */
	size_t slot_cap, uid_cap, hcap;
	uint64_t *hkey;
	uint32_t *hval;
};

/* The unique ids of examples ex[0..n) of s. 0 or -ENOMEM. */
int text_batch_build(struct text_batch *b, const struct text_set *s, const size_t *ex, size_t n);
void text_batch_free(struct text_batch *b);

/* W then b */
static inline size_t text_nparams(int dim, int ncls)
{
	return (size_t)dim * (size_t)ncls + (size_t)ncls;
}

/* Gradient of scale * (sum of the batch's losses) with respect to the rows
 * (grows, nu x dim, overwritten) and the dense parameters (gparams,
 * overwritten). rows: the batch's rows, nu x dim. Returns the sum of the
 * losses (unscaled). hbuf: dim floats, zbuf: ncls floats of scratch. */
double text_grad(const float *params, int dim, int ncls, const struct text_set *s,
		 const struct text_batch *b, const float *rows, float scale, float *grows,
		 float *gparams, float *hbuf, float *zbuf);

/* Correct predictions among the batch's examples (rows as above); *loss_p
 * gets the summed loss. */
size_t text_correct(const float *params, int dim, int ncls, const struct text_set *s,
		    const struct text_batch *b, const float *rows, double *loss_p, float *hbuf,
		    float *zbuf);

#endif
