/* Low-precision copies of slices (server/lowprec.h). */
#include "server/lowprec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/rowprec.h"
#include "src/util.h"

static void refresh(struct rps_shard *sh, const struct rps_slice_meta *m,
		    const struct rps_lp_copy *lp, uint64_t off, uint64_t n);

int rps_lp_declare(struct rps_shard *sh, struct rps_slice_meta *m, uint32_t prec, char *why,
		   size_t len)
{
	const struct rps_lp_copy *old = rps_lp_of(m);
	struct rps_lp_copy *lp;
	int rc;

	if (prec != 1 && prec != 2) {
		snprintf(why, len, "key %llu slice %u: pull precision %u unknown (1 fp16, 2 bf16)",
			 (unsigned long long)m->key, m->slice, prec);
		return -EINVAL;
	}
	if (old) {
		if (old->prec == prec)
			return 0; /* idempotent */
		snprintf(why, len,
			 "key %llu slice %u: pull precision %s refused, the key has a %s copy "
			 "(given earlier, by this or another worker)",
			 (unsigned long long)m->key, m->slice, rps_row_prec_name(prec),
			 rps_row_prec_name(old->prec));
		return -EINVAL;
	}
	lp = rps_calloc(1, sizeof(*lp));
	if (!lp) {
		snprintf(why, len, "key %llu slice %u: no memory for its %s copy",
			 (unsigned long long)m->key, m->slice, rps_row_prec_name(prec));
		return -ENOMEM;
	}
	rc = rps_store_alloc(&sh->store, (m->nelems + 1) / 2, &lp->sl);
	if (rc) {
		snprintf(why, len,
			 "key %llu slice %u: no room in shard %u's store for its %s copy of %llu "
			 "bytes (RDMAPS_SHARD_BYTES)",
			 (unsigned long long)m->key, m->slice, sh->p.idx, rps_row_prec_name(prec),
			 (unsigned long long)m->nelems * 2);
		rps_free(lp);
		return rc;
	}
	lp->prec = prec;
	lp->data_off = lp->sl.off + lp->sl.line;
	refresh(sh, m, lp, 0, m->nelems); /* filled before anyone can find it */
	atomic_store_explicit(&m->lp, lp, memory_order_release);
	RPS_DEBUG("shard %u: key %llu slice %u: %s copy at %llu", sh->p.idx,
		  (unsigned long long)m->key, m->slice, rps_row_prec_name(prec),
		  (unsigned long long)lp->data_off);
	return 0;
}

void rps_lp_refresh(struct rps_shard *sh, struct rps_slice_meta *m, uint64_t off, uint64_t n)
{
	struct rps_lp_copy *lp = atomic_load_explicit(&m->lp, memory_order_relaxed);

	if (lp)
		refresh(sh, m, lp, off, n);
}

/* Round elements [off, off + n) of m's master into its copy lp, chunk of the
 * copy by chunk, each under its versions. */
static void refresh(struct rps_shard *sh, const struct rps_slice_meta *m,
		    const struct rps_lp_copy *lp, uint64_t off, uint64_t n)
{
	uint64_t e = off, end = off + n;

	while (e < end) {
		/* one chunk of the copy: chunk_bytes / 2 elements */
		uint64_t hpc = lp->sl.chunk_bytes / 2;
		uint64_t c = e / hpc;
		uint64_t cend = RPS_MIN(end, (c + 1) * hpc);
		char *dst = (char *)rps_store_chunk_data(&sh->store, &lp->sl, c);

		rps_store_write_begin(&sh->store, &lp->sl, c);
		while (e < cend) { /* runs of the master's chunks */
			uint64_t mc = e / m->sl.epc, mi = e % m->sl.epc;
			uint64_t run = RPS_MIN((uint64_t)m->sl.epc - mi, cend - e);
			const float *src = rps_store_chunk_data(&sh->store, &m->sl, mc) + mi;

			rps_row_narrow(lp->prec, src, dst + (e % hpc) * 2, run);
			e += run;
		}
		rps_store_write_end(&sh->store, &lp->sl, c);
	}
}

void rps_lp_read(const struct rps_shard *sh, const struct rps_slice_meta *m, uint64_t off,
		 uint64_t n, void *dst)
{
	const struct rps_lp_copy *lp = rps_lp_of(m);
	uint64_t w0 = off / 2, w1 = (off + n + 1) / 2;

	if (!n)
		return;
	rps_store_read(&sh->store, &lp->sl, w0, w1 - w0, dst);
	if (off & 1) /* the first word's low element is not asked for */
		memmove(dst, (char *)dst + 2, n * 2);
}

void rps_lp_free(struct rps_slice_meta *m)
{
	rps_free(atomic_load_explicit(&m->lp, memory_order_relaxed));
	atomic_store_explicit(&m->lp, NULL, memory_order_relaxed);
}
