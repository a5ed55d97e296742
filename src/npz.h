/* Models in and out: NumPy .npz archives of float32 tensors.
 *
 * An .npz is a zip archive (read and written with libzip) holding one .npy
 * file per tensor: "NAME.npy" = the .npy magic, version 1.0, a header that is
 * a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (..)},
 * then the values, little-endian float32, C order. numpy.load() reads what
 * rps_npz_write() writes; rps_npz_read() reads what numpy.savez() and
 * numpy.savez_compressed() write for float32 arrays (float64 arrays are
 * refused with -EINVAL and a message naming the array: convert with
 * .astype(np.float32) first, so that no precision change happens silently).
 * One other type is read and written: uint64 ('<u8'), in e->u64 instead of
 * e->data (the ids of an exported table, docs/tables.md).
 */
#ifndef RPS_NPZ_H
#define RPS_NPZ_H

#include <stddef.h>
#include <stdint.h>

#define RPS_NPZ_NAME_MAX 128 /* name without ".npy", including the NUL */
#define RPS_NPZ_NDIM_MAX 8
#define RPS_NPZ_ENTRIES_MAX 65536

struct rps_npz_entry {
	char name[RPS_NPZ_NAME_MAX];
	uint32_t ndim;                     /* 0 = a scalar (one element) */
	uint64_t shape[RPS_NPZ_NDIM_MAX];
	size_t nelems;                     /* product of shape */
	float *data;                       /* nelems values (NULL when u64 is set) */
	uint64_t *u64;                     /* non-NULL: a uint64 array ('<u8') instead */
};

/* Write n entries to path atomically (a temporary file in the same folder,
 * then rename). Names must be unique, non-empty, printable, without '/'.
 * Returns 0 or -errno (-EINVAL bad entry, -EIO write failure), logged. */
int rps_npz_write(const char *path, const struct rps_npz_entry *e, size_t n);

/* Read every array of path. *e_p is allocated (free with rps_npz_free), and
 * so is each entry's data. -ENOENT no such file, -EINVAL not an .npz of
 * float32 C-order arrays (logged with the reason), -ENOMEM. */
int rps_npz_read(const char *path, struct rps_npz_entry **e_p, size_t *n_p);

void rps_npz_free(struct rps_npz_entry *e, size_t n);

/* The entry named name, or NULL. */
const struct rps_npz_entry *rps_npz_find(const struct rps_npz_entry *e, size_t n,
					 const char *name);

/* Parse one .npy image (buf, len) into e (name left alone; e->data
 * allocated). Exposed for the fuzz and unit tests. */
int rps_npy_parse(const void *buf, size_t len, struct rps_npz_entry *e);

#endif
