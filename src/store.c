/* A shard's readable store; layout, geometry and seqlock protocol in src/store.h.
 *
 * Writer (the shard's update thread only), for chunk c at version v (even):
 *   begin = v+1; end = v+1; [release fence]; data; end = v+2 (release); begin = v+2 (release)
 * Reader (local or one RDMA READ, in address order): begin, data, end;
 *   clean iff begin == end and even.
 * The end line is made odd BEFORE the data is touched: a reader that saw the
 * old, even begin and then any new data reads end after that data, so it sees
 * an odd end (or a newer one) and knows the image is torn. Marking only begin
 * would let such a reader see begin == end == v and take mixed data as clean.
 * The begin line is written last, so a reader that saw begin == v+2 sees the
 * data of that version.
 * "Line" is the slice's version line: 64 bytes for chunked slices, one 8-byte
 * word for compact ones; the version is its first u64 either way.
 */
#include "src/store.h"

#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#define STORE_HUGE_PAGE (2u << 20)

static inline _Atomic uint64_t *word_at(const struct rps_store *s, uint64_t off)
{
	return (_Atomic uint64_t *)((char *)s->base + off);
}

static inline _Atomic uint64_t *begin_word(const struct rps_store *s,
					   const struct rps_store_slice *sl, uint64_t c)
{
	return word_at(s, rps_store_chunk_off(sl, c));
}

static inline _Atomic uint64_t *end_word(const struct rps_store *s,
					 const struct rps_store_slice *sl, uint64_t c)
{
	return word_at(s, rps_store_chunk_off(sl, c) + sl->line + rps_store_chunk_len(sl, c));
}

int rps_store_init(struct rps_store *s, uint32_t shard, size_t capacity, uint32_t chunk_bytes)
{
	uint64_t data_off =
	    RPS_ALIGN_UP(RPS_STORE_WCLOCK_OFF + 8ull * RPS_MAX_WORKERS, RPS_STORE_LINE);
	uint64_t stride = (uint64_t)chunk_bytes + 2 * RPS_STORE_LINE;
	uint64_t nchunks;
	size_t size, map_len;
	void *base;
	int huge = 0;

	if (chunk_bytes < RPS_STORE_LINE || chunk_bytes % RPS_STORE_LINE ||
	    chunk_bytes > RPS_STORE_CHUNK_MAX) {
		RPS_ERR("shard %u store: chunk size %u is not a multiple of 64 in 64..%u", shard,
			chunk_bytes, RPS_STORE_CHUNK_MAX);
		return -EINVAL;
	}
	if (capacity < data_off + stride) {
		RPS_ERR("shard %u store: capacity %zu bytes holds no %u-byte chunk", shard,
			capacity, chunk_bytes);
		return -EINVAL;
	}
	nchunks = (capacity - data_off) / stride;
	size = (size_t)(data_off + nchunks * stride);

	/* Huge pages where the system has them reserved; else THP on a 2 MiB
	 * aligned allocation. Either way zeroed: every version starts at 0. */
	map_len = RPS_ALIGN_UP(size, (size_t)STORE_HUGE_PAGE);
	base = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (base != MAP_FAILED) {
		huge = 1;
	} else {
		size_t align = size >= STORE_HUGE_PAGE ? STORE_HUGE_PAGE : RPS_CACHELINE;

		base = rps_aligned_alloc(align, size);
		if (!base) {
			RPS_ERR("shard %u store: cannot allocate %zu bytes", shard, size);
			return -ENOMEM;
		}
#ifdef MADV_HUGEPAGE
		if (align == STORE_HUGE_PAGE)
			madvise(base, RPS_ALIGN_UP(size, (size_t)STORE_HUGE_PAGE), MADV_HUGEPAGE);
#endif
		memset(base, 0, size);
	}

	memset(s, 0, sizeof(*s));
	s->base = base;
	s->size = size;
	s->huge = huge;
	s->hdr = base;
	s->chunk_bytes = chunk_bytes;
	s->epc = chunk_bytes / sizeof(float);
	s->nchunks = nchunks;
	s->next = data_off;
	s->hdr->shard = shard;
	s->hdr->chunk_bytes = chunk_bytes;
	s->hdr->nchunks = nchunks;
	s->hdr->data_off = data_off;
	s->hdr->chunk_stride = stride;
	atomic_store_explicit((_Atomic uint64_t *)&s->hdr->magic, RPS_STORE_MAGIC,
			      memory_order_release);
	RPS_DEBUG("shard %u store: %zu bytes, chunks of up to %u bytes%s", shard, size, chunk_bytes,
		  huge ? ", huge pages" : "");
	return 0;
}

void rps_store_fini(struct rps_store *s)
{
	if (!s->base)
		return;
	if (s->huge)
		munmap(s->base, RPS_ALIGN_UP(s->size, (size_t)STORE_HUGE_PAGE));
	else
		rps_free(s->base);
	memset(s, 0, sizeof(*s));
}

/* Where a slice of nelems would go now and how many bytes it takes; 0, or
 * -ENOSPC if it does not fit. */
static int place(const struct rps_store *s, uint64_t nelems, struct rps_store_slice *sl_p,
		 uint64_t *need_p)
{
	struct rps_store_slice sl = {.nelems = nelems};
	uint64_t off, span;

	*need_p = UINT64_MAX;
	/* bounds the arithmetic below: no slice holds more floats than bytes exist */
	if (nelems > s->size / sizeof(float))
		return -ENOSPC;
	rps_store_geom(s->chunk_bytes, nelems, &sl.chunk_bytes, &sl.line);
	sl.epc = sl.chunk_bytes / (uint32_t)sizeof(float);
	sl.nchunks = rps_store_geom_nchunks(sl.chunk_bytes, nelems);
	off = RPS_ALIGN_UP(s->next, (uint64_t)sl.line);
	span = rps_store_slice_span(&sl);
	*need_p = off - s->next + span;
	if (off > s->size || span > s->size - off)
		return -ENOSPC;
	sl.off = off;
	*sl_p = sl;
	return 0;
}

static void warn_full(const struct rps_store *s, uint64_t nelems, uint64_t need)
{
	RPS_WARN("shard %u store full: %llu elements need %llu bytes, %llu of %llu free "
		 "(raise RDMAPS_SHARD_BYTES)",
		 s->hdr->shard, (unsigned long long)nelems, (unsigned long long)need,
		 (unsigned long long)(s->size - s->next),
		 (unsigned long long)(s->size - s->hdr->data_off));
}

int rps_store_room(const struct rps_store *s, uint64_t nelems)
{
	struct rps_store_slice sl;
	uint64_t need;

	if (place(s, nelems, &sl, &need)) {
		warn_full(s, nelems, need);
		return -ENOSPC;
	}
	return 0;
}

int rps_store_alloc(struct rps_store *s, uint64_t nelems, struct rps_store_slice *sl_p)
{
	struct rps_store_slice sl;
	uint64_t need;

	if (place(s, nelems, &sl, &need)) {
		warn_full(s, nelems, need);
		return -ENOSPC;
	}
	s->next = sl.off + rps_store_slice_span(&sl);
	*sl_p = sl;
	return 0;
}

void rps_store_write_begin(struct rps_store *s, const struct rps_store_slice *sl, uint64_t c)
{
	_Atomic uint64_t *b = begin_word(s, sl, c);
	uint64_t v = atomic_load_explicit(b, memory_order_relaxed); /* single writer */

	assert(c < sl->nchunks && (v & 1) == 0);
	atomic_store_explicit(b, v + 1, memory_order_relaxed);
	atomic_store_explicit(end_word(s, sl, c), v + 1, memory_order_relaxed);
	/* the odd marks are visible before any data store */
	atomic_thread_fence(memory_order_release);
}

void rps_store_write_end(struct rps_store *s, const struct rps_store_slice *sl, uint64_t c)
{
	_Atomic uint64_t *b = begin_word(s, sl, c);
	uint64_t v = atomic_load_explicit(b, memory_order_relaxed) + 1;

	assert(c < sl->nchunks && (v & 1) == 0);
	atomic_store_explicit(end_word(s, sl, c), v, memory_order_release);
	atomic_store_explicit(b, v, memory_order_release);
}

uint64_t rps_store_read(const struct rps_store *s, const struct rps_store_slice *sl, uint64_t off,
			uint64_t n, float *dst)
{
	uint64_t retries = 0, e = off, end = off + n;

	assert(end >= off && end <= sl->nelems);
	while (e < end) {
		uint64_t c = e / sl->epc;
		uint64_t idx = e % sl->epc;
		uint64_t run = RPS_MIN((uint64_t)sl->epc - idx, end - e);
		const float *src = rps_store_chunk_data(s, sl, c) + idx;
		_Atomic uint64_t *bw = begin_word(s, sl, c), *ew = end_word(s, sl, c);
		unsigned spins = 0;

		for (;;) {
			uint64_t b = atomic_load_explicit(bw, memory_order_acquire);

			if (!(b & 1)) {
				memcpy(dst, src, run * sizeof(float));
				atomic_thread_fence(memory_order_acquire);
				if (rps_store_image_clean(
					b, atomic_load_explicit(ew, memory_order_relaxed)))
					break;
			}
			retries++;
			if (++spins % 1024 == 0)
				sched_yield(); /* writer preempted mid-chunk */
			else
				rps_cpu_relax();
		}
		dst += run;
		e += run;
	}
	return retries;
}

void rps_store_for_runs(const struct rps_store *s, const struct rps_store_slice *sl, uint64_t off,
			uint64_t n, rps_store_run_fn fn, void *arg)
{
	uint64_t e = off, end = off + n;

	assert(end >= off && end <= sl->nelems);
	while (e < end) {
		uint64_t c = e / sl->epc;
		uint64_t idx = e % sl->epc;
		uint64_t run = RPS_MIN((uint64_t)sl->epc - idx, end - e);

		/* c: the chunk within the slice; elem_off: the run's first element */
		fn(c, rps_store_chunk_data(s, sl, c) + idx, e, run, arg);
		e += run;
	}
}

void rps_store_set_clock(struct rps_store *s, uint64_t clock)
{
	atomic_store_explicit(word_at(s, RPS_STORE_CLOCK_OFF), clock, memory_order_release);
}

uint64_t rps_store_clock(const struct rps_store *s)
{
	return atomic_load_explicit(word_at(s, RPS_STORE_CLOCK_OFF), memory_order_acquire);
}

void rps_store_set_worker_clock(struct rps_store *s, uint32_t worker, uint64_t clock)
{
	if (worker >= RPS_MAX_WORKERS)
		return; /* no slot: rank beyond RPS_MAX_WORKERS is refused at hello */
	atomic_store_explicit(word_at(s, RPS_STORE_WCLOCK_OFF + 8ull * worker), clock,
			      memory_order_release);
}

uint64_t rps_store_worker_clock(const struct rps_store *s, uint32_t worker)
{
	if (worker >= RPS_MAX_WORKERS)
		return 0;
	return atomic_load_explicit(word_at(s, RPS_STORE_WCLOCK_OFF + 8ull * worker),
				    memory_order_acquire);
}
