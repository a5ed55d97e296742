/* text-train's data: the files examples/text/extract.py writes (its header
 * says the format), read into hashed feature ids (features.h). */
#ifndef TEXT_DATA_H
#define TEXT_DATA_H

#include <stddef.h>
#include <stdint.h>

/* One part (train or test): example i has label y[i] and the feature ids
 * ids[off[i] .. off[i + 1]). */
struct text_set {
	size_t n;
	uint8_t *y;
	size_t *off;
	uint64_t *ids;
};

struct text_classes {
	int n;
	char (*name)[32];
};

/* DIR/classes.tsv. 0, or -errno with a message on stderr that says how to
 * make the data. */
int text_load_classes(const char *dir, struct text_classes *c);
/* DIR/<part>.tsv with ids & mask; labels checked against nclasses. */
int text_load(const char *dir, const char *part, uint64_t mask, int nclasses,
	      struct text_set *s);
void text_free(struct text_set *s);
void text_free_classes(struct text_classes *c);

#endif
