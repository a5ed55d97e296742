/* Control requests in a shard: a checkpoint or an EXPORT snapshot, on the
 * update thread (the only writer of the shard, so what it reads between two
 * ring entries is consistent).
 *
 * Target clock (BSP): a request with one runs when the shard's clock reaches
 * it (rps_shard_creq_at_clock, called by shard_advance each time the clock
 * moves by one), i.e. with exactly the parameters after clocks < target;
 * a shard already at or past it runs at once. ASP/SSP: at once, whatever the
 * target (pushes of several clocks may be in: there is no boundary to wait
 * for). The result goes to sh->creq_res; storing the request's generation in
 * sh->creq_done publishes it to the network thread (ctlreq.c).
 */
#include "server/snap.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/ckpt.h"
#include "server/ckpt_async.h"
#include "server/table.h"
#include "src/alloc.h"
#include "src/ckpt.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

/* Every slice of the shard, copied: records of rps_export_part + floats. */
static int snapshot(struct rps_shard *sh, struct rps_shard_creq_res *r)
{
	size_t len = 0, at = 0;
	char *buf;

	for (uint64_t i = 0; i <= sh->tab.mask; i++) {
		struct rps_slice_meta *m =
		    atomic_load_explicit(&sh->tab.slots[i], memory_order_relaxed);

		if (m && m->nelems)
			len += sizeof(struct rps_export_part) + m->nelems * sizeof(float);
	}
	buf = rps_malloc(len ? len : 1);
	if (!buf) {
		snprintf(r->text, sizeof(r->text), "out of memory for a snapshot of %zu bytes",
			 len);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i <= sh->tab.mask; i++) {
		struct rps_slice_meta *m =
		    atomic_load_explicit(&sh->tab.slots[i], memory_order_relaxed);
		struct rps_export_part part;

		if (!m || !m->nelems)
			continue;
		memset(&part, 0, sizeof(part));
		part.key = m->key;
		part.slice = m->slice;
		part.shard = sh->p.idx;
		part.slice_elems = m->nelems;
		part.server = atomic_load(&sh->server_rank);
		part.clock = sh->clock;
		memcpy(buf + at, &part, sizeof(part));
		at += sizeof(part);
		rps_shard_read(sh, m, 0, m->nelems, (float *)(void *)(buf + at));
		at += m->nelems * sizeof(float);
		r->nslices++;
		r->nelems += m->nelems;
	}
	r->snap = buf;
	r->snap_len = len;
	return 0;
}

void rps_shard_creq_run(struct rps_shard *sh)
{
	struct rps_shard_creq_res *r = &sh->creq_res;
	uint32_t gen = sh->creq_gen;

	sh->creq_wait = 0;
	sh->creq_gen = 0;
	memset(r, 0, sizeof(*r));
	r->clock = sh->clock;
	if (sh->creq_op == RPS_OP_CHECKPOINT) {
		struct rps_ckpt_info info;

		if (!sh->p.ckpt_dir || !sh->p.ckpt_dir[0]) {
			r->rc = -ENOTSUP;
			snprintf(r->text, sizeof(r->text), "no checkpoint directory");
		} else if (rps_shard_ckpt_async_submit(sh, gen, RPS_CKPT_BUSY_WAIT) > 0) {
			return; /* the writer thread publishes the result (ckpt_async.c) */
		} else {
			r->rc = rps_shard_ckpt_write_info(sh, &info);
			if (r->rc) {
				snprintf(r->text, sizeof(r->text), "checkpoint in %s failed: %s",
					 sh->p.ckpt_dir, rps_strerror(r->rc));
			} else {
				/* the path as far as the answer holds it (the
				 * checkpoint directory's name is short in practice) */
				snprintf(r->text, sizeof(r->text), "%.*s",
					 (int)sizeof(r->text) - 1, info.path);
				r->nslices = info.nslices;
			}
		}
	} else {
		r->rc = snapshot(sh, r);
		if (!r->rc)
			r->rc = rps_shard_tables_snapshot(sh, r);
	}
	RPS_DEBUG("shard %u: %s at clock %llu: %s", sh->p.idx, rps_proto_op_name(sh->creq_op),
		  (unsigned long long)r->clock, r->rc ? r->text : "done");
	atomic_store_explicit(&sh->creq_done, gen, memory_order_release);
}

void rps_shard_creq_take(struct rps_shard *sh, const struct rps_ring_entry *e)
{
	/* the writer thread may still owe an abandoned request its result */
	if (rps_shard_ckpt_async_creq_pending(sh))
		rps_shard_ckpt_async_wait(sh);
	/* a result nobody collected (an abandoned request): ours to free */
	rps_free(sh->creq_res.snap);
	sh->creq_res.snap = NULL;
	rps_free(sh->creq_res.rows_snap);
	sh->creq_res.rows_snap = NULL;
	sh->creq_gen = e->info.worker;
	sh->creq_op = (uint32_t)e->info.key;
	sh->creq_target = e->u64;
	sh->creq_wait = sh->p.consistency == RPS_BSP && e->info.nelems && sh->clock < e->u64;
	if (sh->creq_wait)
		RPS_DEBUG("shard %u: %s waits for clock %llu (at %llu)", sh->p.idx,
			  rps_proto_op_name(sh->creq_op), (unsigned long long)sh->creq_target,
			  (unsigned long long)sh->clock);
	else
		rps_shard_creq_run(sh);
}
