/* Pure planning helpers of the worker: how a slice is cut into frames, and
 * which scatter lists the RDMA read path posts for a slice's chunks.
 * Nothing here touches the network, so unit tests call it directly.
 */
#ifndef RPS_WORKER_PLAN_H
#define RPS_WORKER_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "src/proto.h"
#include "transport/transport.h"

/* Fixed parts of the frames the worker sends or receives. */
#define RPS_WPLAN_PUSH_FIXED ((uint64_t)sizeof(struct rps_push))
#define RPS_WPLAN_PULL_FIXED ((uint64_t)sizeof(struct rps_pull))
#define RPS_WPLAN_HDR	     ((uint64_t)sizeof(struct rps_frame_hdr))

/* Most float32 elements one frame may carry when the frame payload
 * (fixed + 4 * n) must not exceed max_msg and, if max_frame != 0, the whole
 * frame (24-byte header + payload) must not exceed max_frame.
 * 0 if not even one element fits. */
uint64_t rps_wplan_frame_elems(uint64_t fixed, uint64_t max_msg, uint64_t max_frame);
static inline uint64_t rps_wplan_push_elems(uint64_t max_msg, uint64_t max_frame)
{
	return rps_wplan_frame_elems(RPS_WPLAN_PUSH_FIXED, max_msg, max_frame);
}
static inline uint64_t rps_wplan_pull_elems(uint64_t max_msg, uint64_t max_frame)
{
	return rps_wplan_frame_elems(RPS_WPLAN_PULL_FIXED, max_msg, max_frame);
}

/* Frames needed for nelems elements at per elements each (>= 1 for nelems 0). */
static inline uint64_t rps_wplan_nframes(uint64_t nelems, uint64_t per)
{
	if (!nelems || !per)
		return 1;
	return (nelems + per - 1) / per;
}

/* The i-th frame of a slice of nelems at per elements a frame: [*off_p, +*count_p). */
static inline void rps_wplan_frame(uint64_t nelems, uint64_t per, uint64_t i, uint64_t *off_p,
				   uint64_t *count_p)
{
	uint64_t off = i * per;

	*off_p = off;
	*count_p = nelems - off < per ? nelems - off : per;
}

/* ---- RDMA read plan ----
 * A slice's chunks lie in its shard's store as the server laid them out
 * (src/store.h): chunk c at raddr0 + c * stride as [begin line][data][end
 * line], stride = chunk_bytes + 2 * line, line 64 (chunked) or 8 (compact,
 * one chunk); every chunk holds chunk_bytes of data except the last, which
 * holds last_bytes (its data rounded up to the line), its end line right
 * after. One READ covers consecutive chunks with, per chunk: the begin line
 * -> scratch, the used data -> the caller's buffer, padding after the last
 * element -> junk, the end line -> scratch. Scratch lines of chunk i
 * (relative to the read's first chunk) are at lines + i * 2 * line (begin)
 * and + line (end), so an end line and the next begin line are adjacent
 * locally as they are remotely and share one sge. A READ reads exactly the
 * bytes the slice occupies.
 */
#define RPS_RPLAN_LINES	     128u /* scratch bytes per chunk: begin + end line (64 each at most) */
#define RPS_RPLAN_MAX_CHUNKS 64u  /* chunks one READ may cover (torn mask is a u64) */

struct rps_rplan {
	uint64_t raddr0;      /* remote address of the slice's chunk 0 (its begin line) */
	uint32_t chunk_bytes; /* data bytes of a full chunk */
	uint32_t line;	      /* bytes of a version line: 64 or 8 */
	uint32_t last_bytes;  /* data bytes of the last chunk (0: chunk_bytes) */
	uint64_t nelems;      /* elements of the slice */
};

static inline uint64_t rps_rplan_stride(const struct rps_rplan *p)
{
	return (uint64_t)p->chunk_bytes + 2ull * p->line;
}
/* Offset of chunk i's scratch lines from the lines of the read's first chunk. */
static inline uint64_t rps_rplan_lines_off(const struct rps_rplan *p, uint64_t i)
{
	return i * 2ull * p->line;
}
/* Chunks of the slice (>= 1). */
uint64_t rps_rplan_nchunks(const struct rps_rplan *p);
/* Data bytes of chunk c as laid out remotely. */
uint32_t rps_rplan_chunk_len(const struct rps_rplan *p, uint64_t c);
/* Bytes the slice occupies remotely: chunk 0's begin line to the last end line. */
uint64_t rps_rplan_span(const struct rps_rplan *p);

/* Plan one READ starting at slice chunk lo, covering at most max_chunks
 * chunks and at most max_sge sges. dst = where the slice's element 0 goes;
 * lines = scratch for chunk lo (RPS_RPLAN_LINES per chunk); junk = at least
 * as many bytes of scratch as a chunk's padding (< chunk_bytes), content
 * ignored.
 * Returns the chunks covered (>= 1), or -EINVAL if the plan is malformed
 * (line not 8 or 64, chunk_bytes not a multiple of 8, last_bytes past
 * chunk_bytes), lo is past the end or not one chunk fits in max_sge.
 * Fills sge[0..*nsge_p) and *raddr_p. */
int rps_rplan_build(const struct rps_rplan *p, uint64_t lo, uint64_t max_chunks, float *dst,
		    char *lines, char *junk, struct rps_tr_sge *sge, int max_sge, int *nsge_p,
		    uint64_t *raddr_p);

/* Data bytes of a slice of one chunk as laid out remotely (its last_bytes,
 * or chunk_bytes), or 0 when the plan is not one valid chunk with data. */
static inline uint32_t rps_rplan_len1(const struct rps_rplan *p)
{
	uint64_t used = p->nelems * sizeof(float);
	uint32_t len = p->last_bytes ? p->last_bytes : p->chunk_bytes;

	if ((p->line != 8 && p->line != 64) || p->chunk_bytes % 8 || !used ||
	    used > p->chunk_bytes || p->last_bytes > p->chunk_bytes || used > len)
		return 0;
	return len;
}

/* rps_rplan_build for a slice of one chunk (lo 0, the whole chunk), straight
 * from the geometry: the common small pull, with no loop and no merging of
 * sges (the scatter list differs from rps_rplan_build's only where that
 * merges two locally adjacent sges; the READ lands the same bytes). handles 0,
 * as rps_rplan_build leaves them. Returns the sges written (3 or 4, never
 * more than RPS_RPLAN_MIN_SGE), or 0 when the plan is not one valid chunk
 * with data: then rps_rplan_build has to do it. */
static inline int rps_rplan_build1(const struct rps_rplan *p, float *dst, char *lines, char *junk,
				   struct rps_tr_sge *sge, uint64_t *raddr_p)
{
	uint64_t used = p->nelems * sizeof(float);
	uint32_t len = rps_rplan_len1(p);
	int n = 0;

	if (!len)
		return 0;
	sge[n++] = (struct rps_tr_sge){.addr = lines, .len = p->line};
	sge[n++] = (struct rps_tr_sge){.addr = dst, .len = (uint32_t)used};
	if (used < len)
		sge[n++] = (struct rps_tr_sge){.addr = junk, .len = len - (uint32_t)used};
	sge[n++] = (struct rps_tr_sge){.addr = lines + p->line, .len = p->line};
	*raddr_p = p->raddr0;
	return n;
}

/* A slice of one chunk read whole into one buffer: its begin line at buf,
 * its data at buf + line, its end line at buf + line + rps_rplan_len1(p).
 * Returns the bytes to read from p->raddr0 (as many as rps_rplan_build1's
 * scatter list takes), or 0 as rps_rplan_len1. */
static inline uint32_t rps_rplan_whole1(const struct rps_rplan *p)
{
	uint32_t len = rps_rplan_len1(p);

	return len ? 2u * p->line + len : 0;
}

/* Is a chunk read whole (rps_rplan_whole1, data len bytes) into buf torn? */
int rps_rplan_torn_whole1(const char *buf, uint32_t line, uint32_t len);

/* Sges the worst chunk needs (one with padding: 4, or 3 without).
 * The read path is usable only if max_read_sge >= this. */
#define RPS_RPLAN_MIN_SGE 4

/* Bit i set if chunk i of n (n <= 64) read into lines (line bytes each,
 * laid out as rps_rplan_build does) is torn. */
uint64_t rps_rplan_torn(const char *lines, uint64_t n, uint32_t line);

#endif
