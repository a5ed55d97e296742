/* The worker's table of declared keys: key -> {nelems, per slice: server,
 * shard, element offset, store offset and chunk geometry}. Filled by rps_worker_declare once
 * every slice was acknowledged; read by every push and pull.
 *
 * Lookups take no lock: the table is an open-addressing array of entry
 * pointers published with release stores; growing it publishes a new array
 * and keeps the old one until the table is freed (entries are never removed).
 * Inserts serialise on a mutex.
 */
#ifndef RPS_WORKER_KEYTAB_H
#define RPS_WORKER_KEYTAB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmaps/types.h>

#include "src/keymap.h"

struct rps_wslice {
	uint32_t server;
	uint32_t shard;
	uint64_t offset;    /* first element of the slice within the tensor */
	uint64_t nelems;    /* elements of the slice */
	uint64_t store_off; /* DECLARE_ACK: byte offset of the slice's data in the shard store */
	/* DECLARE_ACK hdr.aux: the slice's chunk geometry (RDMA reads; TCP ignores it) */
	uint32_t chunk_bytes; /* data bytes of a full chunk */
	uint32_t line;	      /* version line bytes: 64, or 8 for a compact slice */
	uint32_t last_bytes;  /* data bytes of the last chunk as laid out remotely */
	/* its low-precision copy (worker/lowprec.h), from a DECLARE_ACK with
	 * RPS_DECLARE_FLAG_LOWPREC: precision (0: none), place and geometry of
	 * its ceil(nelems / 2) words. In a slice made by rps_wlp_copy_slice
	 * (the copy as a slice to READ) lp_nelems is the 2-byte elements. */
	uint32_t lp_prec;
	uint32_t lp_chunk_bytes, lp_line, lp_last_bytes;
	uint64_t lp_store_off;
	uint64_t lp_nelems;
};

struct rps_wkey {
	rps_key_t key;
	uint64_t nelems;
	struct rps_init init; /* as declared (kind RPS_INIT_DEFAULT: the server's) */
	/* the job's optimizer spec the servers accepted for it (interned by
	 * rps_keytab_spec); NULL: the servers' default. Sent again on re-declare. */
	_Atomic(const struct rps_optim_opts *) optim;
	/* its codec (worker/compress.h); NULL: float32 pushes */
	_Atomic(struct rps_wcomp *) comp;
	/* what its pushes put on the wire (rps_worker_key_wire_stats) */
	_Atomic uint64_t wire_pushes, wire_raw, wire_data, wire_bytes;
	/* its pull precision (enum rps_pull_precision, worker/lowprec.h): 0
	 * float32; 1 fp16, 2 bf16: pulls read the servers' copy */
	_Atomic uint32_t pull_prec;
	uint32_t nslices;
	struct rps_wslice slices[];
};

struct rps_keytab_arr;
struct rps_wcomp;

struct rps_wspec; /* an interned optimizer spec (keytab.c) */

struct rps_keytab {
	_Atomic(struct rps_keytab_arr *) arr;
	struct rps_keytab_arr *retired; /* older arrays, freed with the table */
	pthread_mutex_t lock;
	size_t count;
	struct rps_wspec *specs; /* under lock; freed with the table */
};

int rps_keytab_init(struct rps_keytab *t);
/* Frees the arrays and every entry. */
void rps_keytab_fini(struct rps_keytab *t);
size_t rps_keytab_count(struct rps_keytab *t);
/* NULL if the key was never inserted. Thread-safe, lock-free. */
const struct rps_wkey *rps_keytab_find(const struct rps_keytab *t, rps_key_t key);
/* Insert k (the table owns it on success). If the key is present already,
 * returns -EEXIST, leaves k to the caller and sets *old_p (if not NULL). */
int rps_keytab_insert(struct rps_keytab *t, struct rps_wkey *k, const struct rps_wkey **old_p);

/* The table's copy of optimizer spec o (one per distinct spec, valid until
 * the table is freed), or NULL on -ENOMEM. Pointers compare equal for equal
 * specs. */
const struct rps_optim_opts *rps_keytab_spec(struct rps_keytab *t, const struct rps_optim_opts *o);

/* Call fn for every entry (any order); entries inserted meanwhile may be
 * missed. Lock-free; entries stay valid until the table is freed. */
void rps_keytab_foreach(const struct rps_keytab *t, void (*fn)(struct rps_wkey *k, void *arg),
			void *arg);

/* A new entry with its slices located by the key map (store_off and the
 * geometry 0 until the DECLARE_ACK).
 * NULL on -ENOMEM. Free with rps_free. */
struct rps_wkey *rps_wkey_new(const struct rps_keymap *m, rps_key_t key, uint64_t nelems);

/* Local validation of a batched push/pull before anything is sent:
 * -EINVAL for NULL arrays (n > 0), a NULL buffer or a length that is not the
 * declared one; -ENOENT for a key not declared through this worker.
 * With n == 0 every pointer may be NULL. On error *bad_p (if not NULL) is the
 * index of the offending key. */
int rps_keytab_check(const struct rps_keytab *t, const rps_key_t *keys, const size_t *lens,
		     size_t n, const void *buf, size_t *bad_p);
/* rps_keytab_check of one key of len elements: 0 with *k_p its entry,
 * -ENOENT or -EINVAL. */
int rps_keytab_check1(const struct rps_keytab *t, rps_key_t key, size_t len,
		      const struct rps_wkey **k_p);

/* The slices of a batch (keys[i] of lens[i] elements, back to back in one
 * buffer), in order: after rps_wslices_next() returned 1, it->k is the key,
 * it->base the element of the buffer where its tensor starts, it->s == 1 on
 * its first slice. Inline: the push and pull paths walk batches with it. */
struct rps_wslices {
	const struct rps_keytab *t;
	const rps_key_t *keys;
	const size_t *lens;
	size_t n, i;
	uint64_t base;
	const struct rps_wkey *k;
	uint32_t s; /* slices of k given so far */
};

static inline void rps_wslices_init(struct rps_wslices *it, const struct rps_keytab *t,
				    const rps_key_t *keys, const size_t *lens, size_t n)
{
	it->t = t;
	it->keys = keys;
	it->lens = lens;
	it->n = n;
	it->i = 0;
	it->base = 0;
	it->k = NULL;
	it->s = 0;
}

/* 1 with *sl_p the next slice, 0 after the last, -ENOENT for a key not in
 * the table (validated by the caller: a table never loses keys). */
static inline int rps_wslices_next(struct rps_wslices *it, const struct rps_wslice **sl_p)
{
	while (!it->k || it->s == it->k->nslices) {
		if (it->k) {
			it->base += it->lens[it->i];
			it->i++;
		}
		if (it->i == it->n)
			return 0;
		it->k = rps_keytab_find(it->t, it->keys[it->i]);
		it->s = 0;
		if (!it->k)
			return -ENOENT;
	}
	*sl_p = &it->k->slices[it->s++];
	return 1;
}

/* Elements of a batch: the sum of lens[0..n). */
static inline size_t rps_wbatch_elems(const size_t *lens, size_t n)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += lens[i];
	return total;
}

#endif
