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
#define RPS_WPLAN_HDR ((uint64_t)sizeof(struct rps_frame_hdr))

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
 * A slice owns chunks [first, first + nchunks) of its shard's store; chunk c
 * lies at raddr0 + (c - first) * stride as [begin line][data][end line]
 * (stride = chunk_bytes + 2 * 64). One READ covers consecutive chunks with,
 * per chunk: the begin line -> scratch, the used data -> the caller's
 * buffer, the unused tail of a last partial chunk -> junk, the end line ->
 * scratch. Scratch lines of chunk i (relative to the read's first chunk) are
 * at lines + i * 128 (begin) and + 64 (end), so an end line and the next
 * begin line are adjacent locally as they are remotely and share one sge.
 */
#define RPS_RPLAN_LINES 128u        /* scratch bytes per chunk: begin + end line */
#define RPS_RPLAN_MAX_CHUNKS 64u    /* chunks one READ may cover (torn mask is a u64) */

struct rps_rplan {
	uint64_t raddr0;      /* remote address of the slice's first chunk (begin line) */
	uint32_t chunk_bytes; /* data bytes of a chunk */
	uint64_t nelems;      /* elements of the slice */
};

static inline uint64_t rps_rplan_stride(const struct rps_rplan *p)
{
	return (uint64_t)p->chunk_bytes + 2 * 64;
}
/* Chunks of the slice (>= 1). */
uint64_t rps_rplan_nchunks(const struct rps_rplan *p);

/* Plan one READ starting at slice chunk lo, covering at most max_chunks
 * chunks and at most max_sge sges. dst = where the slice's element 0 goes;
 * lines = scratch for chunk lo (RPS_RPLAN_LINES per chunk); junk = at least
 * chunk_bytes of scratch whose content is ignored.
 * Returns the chunks covered (>= 1), or -EINVAL if lo is past the end or not
 * one chunk fits in max_sge. Fills sge[0..*nsge_p) and *raddr_p. */
int rps_rplan_build(const struct rps_rplan *p, uint64_t lo, uint64_t max_chunks, float *dst,
		    char *lines, char *junk, struct rps_tr_sge *sge, int max_sge, int *nsge_p,
		    uint64_t *raddr_p);

/* Sges the worst chunk needs (a partial last chunk: 4, or 3 when whole).
 * The read path is usable only if max_read_sge >= this. */
#define RPS_RPLAN_MIN_SGE 4

/* Bit i set if chunk i of n (n <= 64) read into lines is torn. */
uint64_t rps_rplan_torn(const char *lines, uint64_t n);

#endif
