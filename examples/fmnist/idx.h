/* Reading the Fashion-MNIST IDX files (gzip-compressed, as Debian's
 * dataset-fashion-mnist package installs them). */
#ifndef FMNIST_IDX_H
#define FMNIST_IDX_H

#include <stddef.h>
#include <stdint.h>

#define FMNIST_DIR_DEFAULT "/usr/share/datasets/fashion-mnist"
#define FMNIST_PIXELS 784
#define FMNIST_CLASSES 10

struct fmnist_set {
	size_t n;
	float *x;      /* n x 784, standardised pixels */
	uint8_t *y;    /* n labels 0..9 */
};

/* Load "<dir>/<prefix>-images-idx3-ubyte.gz" and the labels file;
 * prefix "train" or "t10k". Returns 0 or -errno with a message on stderr. */
int fmnist_load(const char *dir, const char *prefix, struct fmnist_set *set_p);
void fmnist_free(struct fmnist_set *set);

#endif
