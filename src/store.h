/* A shard's readable store: one contiguous, 64-byte-aligned region, allocated
 * once (huge pages where available) and, over RDMA, registered once with
 * IBV_ACCESS_REMOTE_READ only. Writers are the shard's update thread only.
 *
 * Layout (all offsets from the region base; little-endian u64 words):
 *
 *   0     struct rps_store_hdr       magic, geometry                (64 B)
 *   64    clock line: u64 clock      min applied clock of all workers (64 B)
 *   128   u64 worker_clock[RPS_MAX_WORKERS]  applied clock per worker
 *   data_off (64-aligned): chunk 0, chunk 1, ...
 *
 * A chunk is  [begin line 64 B][data chunk_bytes][end line 64 B]; the first
 * u64 of each line is the chunk's version. Seqlock over one-sided reads:
 *   writer:  begin = v+1; end = v+1 (both odd); data; end = v+2; begin = v+2
 *            (release order). end must turn odd BEFORE the data changes: a
 *            reader that saw the old begin v and then new data must not find
 *            end == v (see src/store.c).
 *   reader:  reads begin, data, end in address order (one RDMA READ);
 *            clean iff begin == end and even; otherwise re-read the chunk.
 * A slice (part of a tensor) owns consecutive chunks; element e of a slice
 * lives in chunk first + e / epc at index e % epc (epc = chunk_bytes / 4).
 */
#ifndef RPS_STORE_H
#define RPS_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "src/proto.h"

#define RPS_STORE_MAGIC 0x45524f5453505244ull /* "RDPSTORE" */
#define RPS_STORE_LINE 64u /* version line of a chunk */
#define RPS_STORE_WORD 8u  /* version word of a compact (one-chunk) slice */
#define RPS_STORE_CLOCK_OFF 64u
#define RPS_STORE_WCLOCK_OFF 128u

struct rps_store_hdr {
	uint64_t magic;
	uint32_t shard;
	uint32_t chunk_bytes;
	uint64_t nchunks;
	uint64_t data_off;
	uint64_t chunk_stride; /* chunk_bytes + 2 * RPS_STORE_LINE */
	uint64_t reserved[3];
};
_Static_assert(sizeof(struct rps_store_hdr) == 64, "store header is one line");

struct rps_store {
	void *base;          /* the readable region */
	size_t size;         /* bytes of the region */
	int huge;            /* 1 if backed by huge pages (mmap) */
	struct rps_store_hdr *hdr;
	uint32_t chunk_bytes;
	uint32_t epc;        /* elements per chunk */
	uint64_t nchunks;
	uint64_t next_chunk; /* bump allocator */
};

/* A slice's place in the store. */
struct rps_store_slice {
	uint64_t first_chunk;
	uint64_t nchunks;
	uint64_t nelems;
};

/* ---- geometry: the one rule, for the server and its remote readers ---- */

/* A slice of nelems in a store of store_chunk_bytes (the largest chunk):
 * - nelems * 4 <= store_chunk_bytes: ONE compact chunk, line RPS_STORE_WORD,
 *   *chunk_bytes_p = roundup(nelems * 4, 8), at least 8;
 * - bigger: line RPS_STORE_LINE, *chunk_bytes_p = store_chunk_bytes. */
static inline void rps_store_geom(uint32_t store_chunk_bytes, uint64_t nelems,
				  uint32_t *chunk_bytes_p, uint32_t *line_p)
{
	if (nelems <= store_chunk_bytes / 4) {
		uint32_t b = (uint32_t)nelems * 4;

		*chunk_bytes_p =
		    b ? (b + RPS_STORE_WORD - 1) / RPS_STORE_WORD * RPS_STORE_WORD : RPS_STORE_WORD;
		*line_p = RPS_STORE_WORD;
	} else {
		*chunk_bytes_p = store_chunk_bytes;
		*line_p = RPS_STORE_LINE;
	}
}

/* Chunks of a slice of nelems at chunk_bytes a chunk (>= 1). */
static inline uint64_t rps_store_geom_nchunks(uint32_t chunk_bytes, uint64_t nelems)
{
	uint64_t epc = chunk_bytes / 4;

	if (!nelems || !epc)
		return 1;
	return nelems / epc + (nelems % epc != 0);
}

/* Data bytes of a slice's last chunk: what is left of nelems * 4 after the
 * full chunks, rounded up to line (8 or 64), never more than chunk_bytes. */
static inline uint32_t rps_store_geom_last(uint32_t chunk_bytes, uint32_t line, uint64_t nelems)
{
	uint64_t epc = chunk_bytes / 4;
	uint64_t rest;

	if (!nelems || !epc || !line)
		return chunk_bytes;
	rest = (nelems - (rps_store_geom_nchunks(chunk_bytes, nelems) - 1) * epc) * 4;
	rest = (rest + line - 1) / line * line;
	return rest < chunk_bytes ? (uint32_t)rest : chunk_bytes;
}

/* capacity: bytes for the whole region (rounded down to whole chunks);
 * chunk_bytes: multiple of 64, >= 64. -EINVAL, -ENOMEM. */
int rps_store_init(struct rps_store *s, uint32_t shard, size_t capacity, uint32_t chunk_bytes);
void rps_store_fini(struct rps_store *s);

/* Reserve chunks for a slice of nelems (>= 1 chunk). -ENOSPC when full. */
int rps_store_alloc(struct rps_store *s, uint64_t nelems, struct rps_store_slice *sl_p);

/* Byte offset (from base) of chunk c's begin line; of its data. */
static inline uint64_t rps_store_chunk_off(const struct rps_store *s, uint64_t c)
{
	return s->hdr->data_off + c * s->hdr->chunk_stride;
}
static inline float *rps_store_chunk_data(const struct rps_store *s, uint64_t c)
{
	return (float *)((char *)s->base + rps_store_chunk_off(s, c) + RPS_STORE_LINE);
}

/* Seqlock for the single writer of chunk c. */
void rps_store_write_begin(struct rps_store *s, uint64_t c);
void rps_store_write_end(struct rps_store *s, uint64_t c);

/* Copy elements [off, off + n) of a slice into dst, consistently per chunk
 * (retrying torn chunks locally). Returns the number of retries. */
uint64_t rps_store_read(const struct rps_store *s, const struct rps_store_slice *sl,
			uint64_t off, uint64_t n, float *dst);

/* Call fn(data, n, arg) for each chunk-contiguous run of elements
 * [off, off + n) of a slice, in order; the chunk index is passed along so the
 * caller can bracket the run with write_begin/end. elem_off is the run's first
 * element within the slice (off for the first run). */
typedef void (*rps_store_run_fn)(uint64_t chunk, float *data, uint64_t elem_off, uint64_t n,
				 void *arg);
void rps_store_for_runs(const struct rps_store *s, const struct rps_store_slice *sl,
			uint64_t off, uint64_t n, rps_store_run_fn fn, void *arg);

/* Clocks, published with release semantics, read with acquire. */
void rps_store_set_clock(struct rps_store *s, uint64_t clock);
uint64_t rps_store_clock(const struct rps_store *s);
void rps_store_set_worker_clock(struct rps_store *s, uint32_t worker, uint64_t clock);
uint64_t rps_store_worker_clock(const struct rps_store *s, uint32_t worker);

/* Remote readers: is a chunk image (begin line, data, end line as read) clean? */
static inline int rps_store_image_clean(uint64_t begin, uint64_t end)
{
	return begin == end && (begin & 1) == 0;
}

#endif
