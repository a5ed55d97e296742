/* One-sided lookups of a shard's table rows (docs/protocol.md, Tables): the
 * row index (server/rowtab.h: 64-byte buckets of 16 u32 entries) is
 * registered for remote READ, read-only, and described in every
 * TABLE_MAP_RESP. A rehash builds a new array (registered here when the
 * update thread next looks: after the row that grew it, or at the next
 * TABLE_MAP) and fills the old one with RPS_ROWTAB_MOVED; the old array
 * stays allocated and registered until the table is freed, so a reader
 * holding its address reads "moved" and asks for the map again. */
#include <errno.h>
#include <string.h>

#include "server/table.h"
#include "src/alloc.h"
#include "src/log.h"

void rps_shard_table_reg_index(struct rps_shard *sh, struct rps_shard_table *t)
{
	uint32_t *ix = atomic_load_explicit(&t->rt.index, memory_order_relaxed);
	size_t bytes = (size_t)t->rt.nbuckets * RPS_ROWTAB_BUCKET * sizeof(uint32_t);
	struct rps_tr_mr *m;
	int rc;

	if (!sh->read_tr || t->ixreg_failed)
		return;
	if (t->nixreg && t->ixgen == t->rt.rehashes && t->ixcur == ix)
		return;
	m = rps_realloc(t->ixmrs, (t->nixreg + 1) * sizeof(*m));
	if (!m) {
		t->ixreg_failed = 1;
		return;
	}
	t->ixmrs = m;
	rc = rps_tr_reg_mem(sh->read_tr, ix, bytes, RPS_TR_ACCESS_REMOTE_READ, &m[t->nixreg]);
	if (rc) {
		RPS_ERR("shard %u table %u: register the row index (%zu bytes): %s; rows are "
			"looked up by frames only",
			sh->p.idx, t->decl.table, bytes, strerror(-rc));
		t->ixreg_failed = 1;
		return;
	}
	t->nixreg++;
	t->ixcur = ix;
	t->ixgen = t->rt.rehashes;
}

void rps_shard_table_index_desc(const struct rps_shard_table *t, struct rps_table_index *d)
{
	memset(d, 0, sizeof(*d));
	d->bucket_bytes = RPS_ROWTAB_BUCKET * sizeof(uint32_t);
	d->generation = (uint32_t)t->rt.rehashes;
	if (t->ixreg_failed || !t->nixreg || t->ixgen != t->rt.rehashes)
		return;
	d->addr = t->ixmrs[t->nixreg - 1].remote_addr;
	d->remote_key = t->ixmrs[t->nixreg - 1].remote_key;
	d->nbuckets = t->rt.nbuckets;
	d->flags = RPS_TABLE_INDEX_READABLE;
}

void rps_shard_table_index_stop(struct rps_shard *sh, struct rps_shard_table *t)
{
	for (uint32_t i = 0; sh->read_tr && i < t->nixreg; i++)
		rps_tr_dereg_mem(sh->read_tr, &t->ixmrs[i]);
	t->nixreg = 0;
	t->ixcur = NULL;
	rps_free(t->ixmrs);
	t->ixmrs = NULL;
}
