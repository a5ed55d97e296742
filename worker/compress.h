/* Compressed pushes on the worker (include/rdmaps/compress.h): each key's
 * codec and residual, and the buffer one push of one key is encoded into. */
#ifndef RPS_WORKER_COMPRESS_H
#define RPS_WORKER_COMPRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmaps/compress.h>

struct rps_worker;
struct rps_wkey;

/* A key's codec state. Lives until the worker is destroyed (replaced ones
 * too: a push still encoding with it keeps a valid pointer). */
struct rps_wcomp {
	struct rps_compress_opts o;
	pthread_mutex_t lock; /* one encoder of the key at a time (the residual) */
	uint64_t rng;	      /* randk */
	float *residual;      /* [nelems] with error feedback, else NULL */
	float *velocity;      /* [nelems] with momentum correction, else NULL */
	uint64_t pushes;      /* encoded so far: the step of the sparsity warm-up */
};

/* One push of one key, encoded: its frames back to back, each starting at
 * an 8-byte boundary, in the order the push builds them (slice by slice,
 * frame by frame). Freed when the last piece using it finishes. */
struct rps_cblob {
	_Atomic int refs;
	unsigned codec;
	float ratio;	/* this push's (after the warm-up's schedule) */
	uint32_t block; /* signb */
	size_t size, cur;
	_Alignas(8) unsigned char data[];
};

/* Encode g (the key's whole gradient, k->nelems floats) for a push: *blob_p
 * gets a blob with one reference (the caller's), or NULL when the key is
 * pushed as float32. 0, or -ENOMEM. */
int rps_wcomp_encode(struct rps_worker *w, const struct rps_wkey *k, const float *g,
		     struct rps_cblob **blob_p);
/* The next frame of cnt elements: its data and bytes. A reference is taken
 * for the piece. 0, or -EIO if the blob has no such frame. */
int rps_cblob_next(struct rps_cblob *b, uint64_t cnt, const void **data_p, uint32_t *len_p);
/* Drop a reference. NULL is allowed. */
void rps_cblob_put(struct rps_cblob *b);

#endif
