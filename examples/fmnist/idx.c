#include "idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Fashion-MNIST training-set pixel statistics (of x / 255). */
#define PIXEL_MEAN 0.2860f
#define PIXEL_STD 0.3530f

static int read_all(gzFile f, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		unsigned chunk = (len - done) > (1u << 30) ? (1u << 30) : (unsigned)(len - done);
		int n = gzread(f, (char *)buf + done, chunk);
		if (n <= 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Opens an IDX file and checks its magic and dimensions; returns the item count. */
static gzFile open_idx(const char *path, uint32_t magic, int ndims, uint32_t *dims)
{
	unsigned char hdr[16];
	gzFile f = gzopen(path, "rb");

	if (!f) {
		fprintf(stderr, "fmnist: cannot open %s: %s (install dataset-fashion-mnist)\n", path,
			strerror(errno ? errno : ENOENT));
		return NULL;
	}
	if (read_all(f, hdr, 4 + 4 * (size_t)ndims) != 0 || be32(hdr) != magic) {
		fprintf(stderr, "fmnist: %s: not an IDX file of the expected kind\n", path);
		gzclose(f);
		return NULL;
	}
	for (int i = 0; i < ndims; i++)
		dims[i] = be32(hdr + 4 + 4 * i);
	return f;
}

int fmnist_load(const char *dir, const char *prefix, struct fmnist_set *set_p)
{
	char path[4096];
	uint32_t idims[3], ldims[1];
	unsigned char *raw = NULL;
	struct fmnist_set set = { 0 };
	gzFile f;
	int rc = -EIO;

	snprintf(path, sizeof(path), "%s/%s-images-idx3-ubyte.gz", dir, prefix);
	f = open_idx(path, 0x00000803, 3, idims);
	if (!f)
		return -ENOENT;
	if (idims[1] * idims[2] != FMNIST_PIXELS || idims[0] == 0 || idims[0] > 1000000) {
		fprintf(stderr, "fmnist: %s: unexpected shape %ux%ux%u\n", path, idims[0], idims[1],
			idims[2]);
		gzclose(f);
		return -EINVAL;
	}
	set.n = idims[0];
	raw = malloc(set.n * FMNIST_PIXELS);
	set.x = malloc(set.n * FMNIST_PIXELS * sizeof(float));
	set.y = malloc(set.n);
	if (!raw || !set.x || !set.y) {
		rc = -ENOMEM;
		goto err;
	}
	if (read_all(f, raw, set.n * FMNIST_PIXELS) != 0) {
		fprintf(stderr, "fmnist: %s: truncated\n", path);
		goto err;
	}
	gzclose(f);
	f = NULL;
	for (size_t i = 0; i < set.n * FMNIST_PIXELS; i++)
		set.x[i] = (raw[i] / 255.0f - PIXEL_MEAN) / PIXEL_STD;

	snprintf(path, sizeof(path), "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
	f = open_idx(path, 0x00000801, 1, ldims);
	if (!f) {
		rc = -ENOENT;
		goto err;
	}
	if (ldims[0] != set.n || read_all(f, set.y, set.n) != 0) {
		fprintf(stderr, "fmnist: %s: %u labels for %zu images, or truncated\n", path, ldims[0],
			set.n);
		goto err;
	}
	for (size_t i = 0; i < set.n; i++) {
		if (set.y[i] >= FMNIST_CLASSES) {
			fprintf(stderr, "fmnist: %s: label %u out of range\n", path, set.y[i]);
			goto err;
		}
	}
	gzclose(f);
	free(raw);
	*set_p = set;
	return 0;
err:
	if (f)
		gzclose(f);
	free(raw);
	fmnist_free(&set);
	return rc;
}

void fmnist_free(struct fmnist_set *set)
{
	free(set->x);
	free(set->y);
	set->x = NULL;
	set->y = NULL;
	set->n = 0;
}
