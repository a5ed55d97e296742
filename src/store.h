/* A shard's readable store: one contiguous, 64-byte-aligned region, allocated
 * once (huge pages where available) and, over RDMA, registered once with
 * IBV_ACCESS_REMOTE_READ only. Writers are the shard's update thread only.
 *
 * Layout (all offsets from the region base; little-endian u64 words):
 *
 *   0     struct rps_store_hdr       magic, geometry of the largest chunk (64 B)
 *   64    clock line: u64 clock      min applied clock of all workers (64 B)
 *   128   u64 worker_clock[RPS_MAX_WORKERS]  applied clock per worker
 *   data_off (64-aligned): slices, one after the other (byte bump allocator)
 *
 * Every slice (part of a tensor) has its own geometry, set by rps_store_geom()
 * from the store's chunk_bytes (RDMAPS_CHUNK_BYTES, the largest chunk) and
 * the slice's length; workers learn it from the DECLARE_ACK (src/proto.h):
 *
 *   compact: a slice whose data (nelems * 4) fits in one store chunk is ONE
 *            chunk [begin word 8 B][data][end word 8 B] (line 8 =
 *            RPS_STORE_WORD), data = roundup(nelems * 4, 8) bytes (>= 8);
 *            it starts 8-aligned. An 8-byte tensor is 24 bytes.
 *   chunked: a bigger slice is chunks [begin line 64 B][data][end line 64 B]
 *            (line 64 = RPS_STORE_LINE) with chunk_bytes data each, starting
 *            64-aligned, at a stride of chunk_bytes + 128; its LAST chunk holds
 *            only its data rounded up to 64, the end line right after it.
 *
 * The first u64 of each line (word) is the chunk's version. Seqlock over
 * one-sided reads:
 *   writer:  begin = v+1; end = v+1 (both odd); data; end = v+2; begin = v+2
 *            (release order). end must turn odd BEFORE the data changes: a
 *            reader that saw the old begin v and then new data must not find
 *            end == v (see src/store.c).
 *   reader:  reads begin, data, end in address order (one RDMA READ);
 *            clean iff begin == end and even; otherwise re-read the chunk.
 * Element e of a slice lives in its chunk e / epc at index e % epc
 * (epc = the slice's chunk_bytes / 4). The header's chunk_bytes,
 * chunk_stride and data_off describe the largest chunk and where slices
 * begin; slices do not sit on that stride grid.
 */
#ifndef RPS_STORE_H
#define RPS_STORE_H

#include "src/proto.h"
#include <stddef.h>
#include <stdint.h>

#define RPS_STORE_MAGIC 0x45524f5453505244ull /* "RDPSTORE" */
/* Version line of a chunked slice's chunks; version word of a compact
 * (one-chunk) slice. */
#define RPS_STORE_LINE	     64u
#define RPS_STORE_WORD	     8u
#define RPS_STORE_CLOCK_OFF  64u
#define RPS_STORE_WCLOCK_OFF 128u
/* Largest store chunk: a slice's chunk_bytes travels in 31 bits of the
 * DECLARE_ACK's aux (RPS_DECLARE_ACK_BYTES). */
#define RPS_STORE_CHUNK_MAX 0x7fffffc0u

struct rps_store_hdr {
	uint64_t magic;
	uint32_t shard;
	uint32_t chunk_bytes;  /* the largest chunk (chunked slices) */
	uint64_t nchunks;      /* largest chunks the data area holds */
	uint64_t data_off;     /* where slices begin */
	uint64_t chunk_stride; /* chunk_bytes + 2 * RPS_STORE_LINE */
	uint64_t reserved[3];
};
_Static_assert(sizeof(struct rps_store_hdr) == 64, "store header is one line");

struct rps_store {
	void *base;  /* the readable region */
	size_t size; /* bytes of the region */
	int huge;    /* 1 if backed by huge pages (mmap) */
	struct rps_store_hdr *hdr;
	uint32_t chunk_bytes; /* the largest chunk */
	uint32_t epc;	      /* elements per largest chunk */
	uint64_t nchunks;     /* largest chunks the data area holds */
	uint64_t next;	      /* bump allocator: first free byte offset */
};

/* A slice's place in the store. */
struct rps_store_slice {
	uint64_t off;	      /* byte offset (from base) of chunk 0's begin version line */
	uint32_t chunk_bytes; /* data bytes of a full chunk of this slice */
	uint32_t line;	      /* bytes of each version line: RPS_STORE_LINE or RPS_STORE_WORD */
	uint32_t epc;	      /* elements per full chunk: chunk_bytes / 4 */
	uint32_t reserved;
	uint64_t nchunks; /* >= 1 */
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

	if (nelems <= epc || !epc) /* also spares small slices a division */
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

/* capacity: bytes for the whole region (rounded down to whole largest chunks);
 * chunk_bytes: multiple of 64, 64..RPS_STORE_CHUNK_MAX. -EINVAL, -ENOMEM. */
int rps_store_init(struct rps_store *s, uint32_t shard, size_t capacity, uint32_t chunk_bytes);
void rps_store_fini(struct rps_store *s);

/* Is there room for a slice of nelems now? 0, or -ENOSPC (logged). */
int rps_store_room(const struct rps_store *s, uint64_t nelems);
/* Reserve a slice of nelems (geometry by rps_store_geom). -ENOSPC when full. */
int rps_store_alloc(struct rps_store *s, uint64_t nelems, struct rps_store_slice *sl_p);

/* The slice's geometry as a DECLARE_ACK hdr.aux (src/proto.h). */
static inline uint32_t rps_store_slice_aux(const struct rps_store_slice *sl)
{
	return rps_proto_declare_ack_aux(sl->chunk_bytes, sl->line == RPS_STORE_WORD);
}

/* Bytes from one chunk's begin line to the next one's. */
static inline uint64_t rps_store_stride(const struct rps_store_slice *sl)
{
	return (uint64_t)sl->chunk_bytes + 2ull * sl->line;
}
/* Data bytes of chunk c of a slice (the last one may be short). */
static inline uint32_t rps_store_chunk_len(const struct rps_store_slice *sl, uint64_t c)
{
	return c + 1 < sl->nchunks ? sl->chunk_bytes
				   : rps_store_geom_last(sl->chunk_bytes, sl->line, sl->nelems);
}
/* Bytes the slice occupies: chunk 0's begin line to the last end line. */
static inline uint64_t rps_store_slice_span(const struct rps_store_slice *sl)
{
	return (sl->nchunks - 1) * rps_store_stride(sl) + 2ull * sl->line +
	       rps_store_chunk_len(sl, sl->nchunks - 1);
}
/* Byte offset (from base) of chunk c's begin line; its data; c is the chunk
 * index within the slice. */
static inline uint64_t rps_store_chunk_off(const struct rps_store_slice *sl, uint64_t c)
{
	return sl->off + c * rps_store_stride(sl);
}
static inline float *rps_store_chunk_data(const struct rps_store *s,
					  const struct rps_store_slice *sl, uint64_t c)
{
	return (float *)((char *)s->base + rps_store_chunk_off(sl, c) + sl->line);
}

/* Seqlock for the single writer of chunk c of a slice. */
void rps_store_write_begin(struct rps_store *s, const struct rps_store_slice *sl, uint64_t c);
void rps_store_write_end(struct rps_store *s, const struct rps_store_slice *sl, uint64_t c);

/* Copy elements [off, off + n) of a slice into dst, consistently per chunk
 * (retrying torn chunks locally). Returns the number of retries. */
uint64_t rps_store_read(const struct rps_store *s, const struct rps_store_slice *sl, uint64_t off,
			uint64_t n, float *dst);

/* Call fn(chunk, data, elem_off, n, arg) for each chunk-contiguous run of
 * elements [off, off + n) of a slice, in order; chunk is the index within
 * the slice, passed along so the caller can bracket the run with
 * write_begin/end. elem_off is the run's first element within the slice
 * (off for the first run). */
typedef void (*rps_store_run_fn)(uint64_t chunk, float *data, uint64_t elem_off, uint64_t n,
				 void *arg);
void rps_store_for_runs(const struct rps_store *s, const struct rps_store_slice *sl, uint64_t off,
			uint64_t n, rps_store_run_fn fn, void *arg);

/* Clocks, published with release semantics, read with acquire. */
void rps_store_set_clock(struct rps_store *s, uint64_t clock);
uint64_t rps_store_clock(const struct rps_store *s);
void rps_store_set_worker_clock(struct rps_store *s, uint32_t worker, uint64_t clock);
uint64_t rps_store_worker_clock(const struct rps_store *s, uint32_t worker);

/* Remote readers: is a chunk image (begin version, data, end version as read) clean? */
static inline int rps_store_image_clean(uint64_t begin, uint64_t end)
{
	return begin == end && (begin & 1) == 0;
}

#endif
