#include "worker/plan.h"

#include <errno.h>
#include <string.h>

#include "src/store.h"
#include "src/util.h"

uint64_t rps_wplan_frame_elems(uint64_t fixed, uint64_t max_msg, uint64_t max_frame)
{
	uint64_t room = max_msg;

	if (max_frame) {
		if (max_frame <= RPS_WPLAN_HDR)
			return 0;
		if (max_frame - RPS_WPLAN_HDR < room)
			room = max_frame - RPS_WPLAN_HDR;
	}
	if (room <= fixed)
		return 0;
	room = (room - fixed) / sizeof(float);
	/* count fields are u32 */
	return room > UINT32_MAX ? UINT32_MAX : room;
}

uint64_t rps_rplan_nchunks(const struct rps_rplan *p)
{
	return rps_store_geom_nchunks(p->chunk_bytes, p->nelems);
}

uint32_t rps_rplan_chunk_len(const struct rps_rplan *p, uint64_t c)
{
	if (c + 1 < rps_rplan_nchunks(p) || !p->last_bytes)
		return p->chunk_bytes;
	return p->last_bytes;
}

uint64_t rps_rplan_span(const struct rps_rplan *p)
{
	uint64_t nch = rps_rplan_nchunks(p);

	return (nch - 1) * rps_rplan_stride(p) + 2ull * p->line + rps_rplan_chunk_len(p, nch - 1);
}

/* Append an sge, merging with the previous one when both are contiguous
 * locally (remotely everything is contiguous by construction). */
static int sge_add(struct rps_tr_sge *sge, int n, int max, void *addr, uint32_t len)
{
	if (!len)
		return n;
	if (n > 0 && (char *)sge[n - 1].addr + sge[n - 1].len == (char *)addr &&
	    (uint64_t)sge[n - 1].len + len <= UINT32_MAX) {
		sge[n - 1].len += len;
		return n;
	}
	if (n >= max)
		return -1;
	sge[n].addr = addr;
	sge[n].len = len;
	sge[n].handle = 0;
	return n + 1;
}

int rps_rplan_build(const struct rps_rplan *p, uint64_t lo, uint64_t max_chunks, float *dst,
		    char *lines, char *junk, struct rps_tr_sge *sge, int max_sge, int *nsge_p,
		    uint64_t *raddr_p)
{
	uint64_t epc = p->chunk_bytes / sizeof(float);
	uint64_t nch = rps_rplan_nchunks(p);
	uint64_t done = 0;
	int n = 0;

	if (!epc || (p->line != RPS_STORE_WORD && p->line != RPS_STORE_LINE) ||
	    p->chunk_bytes % RPS_STORE_WORD || p->last_bytes > p->chunk_bytes || lo >= nch ||
	    !max_chunks || max_sge < 1)
		return -EINVAL;
	/* the last chunk must hold the slice's last elements */
	if (p->nelems &&
	    (p->nelems - (nch - 1) * epc) * sizeof(float) > rps_rplan_chunk_len(p, nch - 1))
		return -EINVAL;
	if (max_chunks > RPS_RPLAN_MAX_CHUNKS)
		max_chunks = RPS_RPLAN_MAX_CHUNKS;
	while (lo + done < nch && done < max_chunks) {
		uint64_t c = lo + done;
		uint64_t e0 = c * epc;
		uint64_t used = p->nelems > e0 ? RPS_MIN(p->nelems - e0, epc) : 0;
		uint64_t len = rps_rplan_chunk_len(p, c);
		char *ln = lines + rps_rplan_lines_off(p, done);
		/* adding a chunk only appends sges or grows sge[n - 1]: save both */
		uint32_t last_len = n ? sge[n - 1].len : 0;
		int m;

		m = sge_add(sge, n, max_sge, ln, p->line);
		if (m >= 0)
			m = sge_add(sge, m, max_sge, dst + e0, (uint32_t)(used * sizeof(float)));
		if (m >= 0 && used * sizeof(float) < len)
			m = sge_add(sge, m, max_sge, junk, (uint32_t)(len - used * sizeof(float)));
		if (m >= 0)
			m = sge_add(sge, m, max_sge, ln + p->line, p->line);
		if (m < 0) {
			if (n)
				sge[n - 1].len = last_len;
			break;
		}
		n = m;
		done++;
	}
	if (!done)
		return -EINVAL;
	*nsge_p = n;
	*raddr_p = p->raddr0 + lo * rps_rplan_stride(p);
	return (int)done;
}

int rps_rplan_torn_whole1(const char *buf, uint32_t line, uint32_t len)
{
	uint64_t b, e;

	memcpy(&b, buf, sizeof(b));
	memcpy(&e, buf + line + len, sizeof(e));
	return !rps_store_image_clean(b, e);
}

uint64_t rps_rplan_torn(const char *lines, uint64_t n, uint32_t line)
{
	uint64_t mask = 0;

	for (uint64_t i = 0; i < n && i < 64; i++) {
		uint64_t b, e;

		memcpy(&b, lines + i * 2ull * line, sizeof(b));
		memcpy(&e, lines + i * 2ull * line + line, sizeof(e));
		if (!rps_store_image_clean(b, e))
			mask |= 1ull << i;
	}
	return mask;
}
