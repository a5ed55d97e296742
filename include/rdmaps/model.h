/* rdmaps — models in and out: NumPy .npz files of float32 tensors.
 *
 * A model file holds one array per key, named by the key in decimal ("7"),
 * float32 little-endian in C order. What numpy.savez() / savez_compressed()
 * write is read; numpy.load() reads what is written. Written arrays are 1-D
 * (the key's length); an array read may have any shape whose element count is
 * the key's length (a 784x128 array for a key of 100352 elements).
 *
 *   import numpy as np
 *   m = np.load("model.npz")
 *   w = m["7"]                      # key 7, 1-D float32
 *   np.savez("init.npz", **{"7": w.astype(np.float32)})
 *
 * These functions work on the caller's buffer (keys back to back, as a batched
 * pull: keys = {7, 9}, lens = {3, 2}, vals = {k7[0..2], k9[0..1]}); the
 * worker's rps_worker_save_model / rps_worker_load_model (worker.h) move a
 * model between a file and the servers.
 */
#ifndef RDMAPS_MODEL_H
#define RDMAPS_MODEL_H

#include <stddef.h>

#include <rdmaps/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Write n keys (n >= 1, each key once) of vals to path as .npz: a temporary
 * file in the same folder, then renamed over path, so that path is either
 * the old file or the whole new one. 0, -EINVAL (NULL argument, n 0, a key
 * twice), -ENOMEM, or the file system's error (-EACCES, -ENOSPC, -EIO ...),
 * logged naming the file. */
RPS_API int rps_model_save(const char *path, const rps_key_t *keys, const size_t *lens, size_t n,
			   const float *vals);

/* Read path and check it against the n keys before writing anything into
 * vals: every key present, float32 little-endian C order, element count ==
 * lens[i], no other array in the file. On any error vals is untouched and the
 * reason is logged naming the file, the key and what is wrong, e.g.
 *   "model.npz: key 3 has 784x128 = 100352 floats, the job declared 200704".
 * 0, -ENOENT (no such file), -EINVAL (not a zip archive, truncated, not
 * float32, a key missing, an array that is no key, a wrong size, NULL
 * argument, n 0, a key twice), -ENOMEM, -EACCES ... */
RPS_API int rps_model_load(const char *path, const rps_key_t *keys, const size_t *lens, size_t n,
			   float *vals);

#ifdef __cplusplus
}
#endif
#endif
