/* text-train's features: a package's name and short description as hashed
 * ids, fastText style.
 *
 * Words: the name and the description, lowercased, cut at every byte that is
 * not an ASCII letter or digit (bytes >= 0x80, UTF-8, stay inside words):
 * "python3-numpy" gives "python3", "numpy". Each word w gives
 *   - its unigram:                      hash("w" w)
 *   - the bigram with the next word v:  hash("b" w " " v)
 *   - the character n-grams, n = 3..5, of "<" w ">":  hash("c" gram)
 * and each hash (FNV-1a 64) becomes a row id: hash & (nbuckets - 1), the
 * buckets of the embedding table (2^22 by default). */
#ifndef TEXT_FEATURES_H
#define TEXT_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#define TEXT_MIN_N 3
#define TEXT_MAX_N 5
#define TEXT_MAX_WORD 64 /* longer words are cut */

/* Append the ids of name + desc to out (room for cap); returns how many
 * there are (may be > cap: then only cap were written). */
size_t text_features(const char *name, const char *desc, uint64_t mask, uint64_t *out,
		     size_t cap);

#endif
