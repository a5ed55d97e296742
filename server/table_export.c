/* A shard's tables in an EXPORT (rdmaps-ctl export): the update thread
 * copies every row of every table (snap.c calls it beside the dense
 * snapshot), the network thread sends the copy in RPS_CTLREQ_ROWS pieces
 * (ctlreq.c). Snapshot layout, one record per table:
 *   struct rps_export_rows (first 0, count = total) | u64 ids[total] |
 *   float rows[total][dim]   (fp16 / bf16 rows widened: exact)
 * Rows are copied in slot order; the requester sorts them by id.
 */
#include "server/table.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/proto.h"

int rps_shard_tables_snapshot(struct rps_shard *sh, struct rps_shard_creq_res *r)
{
	const struct rps_shard_tables *ts = sh->tables;
	size_t len = 0, at = 0;
	char *buf;

	r->rows_snap = NULL;
	r->rows_len = 0;
	r->nrows = 0;
	if (!ts || !ts->n)
		return 0;
	for (uint32_t i = 0; i < ts->n; i++) {
		const struct rps_rowtab *rt = &ts->t[i]->rt;

		len += sizeof(struct rps_export_rows) +
		       (size_t)rt->nrows * (8 + (size_t)rt->dim * sizeof(float));
	}
	buf = rps_malloc(len);
	if (!buf) {
		snprintf(r->text, sizeof(r->text),
			 "out of memory for a snapshot of the tables' rows (%zu bytes)", len);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < ts->n; i++) {
		const struct rps_rowtab *rt = &ts->t[i]->rt;
		struct rps_export_rows h;
		uint64_t n = 0;
		char *ids, *rows;

		memset(&h, 0, sizeof(h));
		h.table = rt->table;
		h.shard = sh->p.idx;
		h.server = atomic_load(&sh->server_rank);
		h.dim = rt->dim;
		h.clock = sh->clock;
		h.precision = rt->prec;
		ids = buf + at + sizeof(h);
		rows = ids + (size_t)rt->nrows * 8;
		for (uint64_t s = 0; s < rt->nrows; s++) {
			uint64_t id = rps_rowtab_slot_id(rt, s);

			if (!rps_rowtab_live(rt, s))
				continue;
			memcpy(ids + n * 8, &id, 8);
			rps_rowtab_load(rt, s, (float *)(void *)(rows + n * rt->dim * sizeof(float)));
			n++;
		}
		if (n < rt->nrows) /* freed slots skipped: close the gap */
			memmove(ids + n * 8, rows, (size_t)n * rt->dim * sizeof(float));
		h.total = n;
		h.count = 0; /* the sender cuts pieces; total is what counts */
		memcpy(buf + at, &h, sizeof(h));
		at += sizeof(h) + (size_t)n * (8 + (size_t)rt->dim * sizeof(float));
		r->nrows += n;
	}
	r->rows_snap = buf;
	r->rows_len = at;
	return 0;
}
