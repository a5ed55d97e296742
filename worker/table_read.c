/* Sparse tables read one-sided (docs/tables.md, Over RDMA).
 *
 * Per (table, server, shard) the worker keeps what it learnt: the registered
 * arena chunks of the shard's table (TABLE_MAP) and the slot of every row it
 * pulled before (ROWS_PULL answers with RPS_ROWS_FLAG_SLOTS). Rows never
 * move, so a cached slot stays right while the server lives. A blocking
 * pull then:
 *   1. waits for the pull's consistency condition on every shard it will
 *      read, one-sided too (the read strategy's clock wait: a READ of the
 *      shard's clock words), unless the clocks seen already satisfy it;
 *   2. posts, all at once, one READ of slot_bytes per cached row into
 *      registered scratch, and ROWS_PULL frames (asking for slots) for the
 *      rows not cached;
 *   3. takes a READ's slot iff begin version == end version, even, and the id
 *      is the one asked for; a torn slot is read again; a slot holding
 *      another id (a server restarted under us) ends the call in a retry by
 *      frames with the shard's cache dropped.
 * Chunks a cached slot needs and the worker does not know yet are asked for
 * first (TABLE_MAP, one frame per shard). The async forms use frames only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/rowprec.h"
#include "src/util.h"
#include "worker/table.h"
#include "worker/table_read.h"
#include "worker/worker_int.h"



int rps_wtable_reads_on(struct rps_worker *w)
{
	return w->read && w->pull == &rps_wpull_read && rps_tr_has(w->tr, RPS_TR_CAP_READ);
}

static struct rps_wtread *rd_of(struct rps_worker *w)
{
	struct rps_wtables *ts = w->tables;
	struct rps_wtread *rd;

	if (!ts)
		return NULL;
	pthread_mutex_lock(&ts->lock);
	rd = ts->rd;
	if (!rd) {
		rd = rps_calloc(1, sizeof(*rd));
		if (rd) {
			pthread_mutex_init(&rd->lock, NULL);
			ts->rd = rd;
		}
	}
	pthread_mutex_unlock(&ts->lock);
	return rd;
}

struct rps_wtshard *rps_wtshard_get(struct rps_worker *w, rps_table_t table, uint32_t server,
				    uint32_t shard)
{
	struct rps_wtread *rd = rd_of(w);
	struct rps_wtshard *c = NULL;

	if (!rd)
		return NULL;
	/* called under core.lock (frames) or not: rd->sh only grows, under
	 * its own pointer swap guarded by ts->lock */
	pthread_mutex_lock(&w->tables->lock);
	for (uint32_t i = 0; i < rd->n; i++)
		if (rd->sh[i]->table == table && rd->sh[i]->server == server &&
		    rd->sh[i]->shard == shard) {
			c = rd->sh[i];
			break;
		}
	if (!c) {
		if (rd->n == rd->cap) {
			uint32_t cap = rd->cap ? rd->cap * 2 : 16;
			struct rps_wtshard **a = rps_realloc(rd->sh, cap * sizeof(*a));

			if (a) {
				rd->sh = a;
				rd->cap = cap;
			}
		}
		if (rd->n < rd->cap) {
			c = rps_calloc(1, sizeof(*c));
			if (c) {
				c->table = table;
				c->server = server;
				c->shard = shard;
				rd->sh[rd->n++] = c;
			}
		}
	}
	pthread_mutex_unlock(&w->tables->lock);
	return c;
}

static void cache_clear(struct rps_wtshard *c)
{
	rps_free(c->ids);
	rps_free(c->slots);
	rps_free(c->caddr);
	rps_free(c->ckey);
	c->ids = NULL;
	c->slots = NULL;
	c->caddr = NULL;
	c->ckey = NULL;
	c->cap = c->n = 0;
	c->nchunks = 0;
	c->ix_known = c->ix_ok = c->ix_tried = 0;
}

void rps_wtread_free(struct rps_worker *w)
{
	struct rps_wtread *rd = w->tables ? w->tables->rd : NULL;

	if (!rd)
		return;
	for (uint32_t i = 0; i < rd->n; i++) {
		cache_clear(rd->sh[i]);
		rps_free(rd->sh[i]);
	}
	rps_free(rd->sh);
	if (rd->has_mr)
		rps_tr_dereg_mem(w->tr, &rd->mr);
	rps_free(rd->scratch);
	if (rd->lk && rd->lk->has_mr)
		rps_tr_dereg_mem(w->tr, &rd->lk->mr);
	if (rd->lk)
		rps_free(rd->lk->scratch);
	rps_free(rd->lk);
	pthread_mutex_destroy(&rd->lock);
	rps_free(rd);
	w->tables->rd = NULL;
}

void rps_wtable_forget(struct rps_worker *w, uint32_t server)
{
	struct rps_wtread *rd = w->tables ? w->tables->rd : NULL;

	if (!rd)
		return;
	pthread_mutex_lock(&w->core.lock);
	for (uint32_t i = 0; i < rd->n; i++)
		if (rd->sh[i]->server == server)
			cache_clear(rd->sh[i]);
	pthread_mutex_unlock(&w->core.lock);
}

static inline uint64_t hpos(uint64_t id, uint64_t cap)
{
	return (id * 0x9e3779b97f4a7c15ull) >> 7 & (cap - 1);
}

int rps_wtshard_cache_put(struct rps_wtshard *c, uint64_t id, uint32_t slot)
{
	uint64_t i;

	if ((c->n + 1) * 2 > c->cap) {
		uint64_t cap = c->cap ? c->cap * 2 : 1024;
		uint64_t *ids = rps_calloc(cap, sizeof(*ids));
		uint32_t *sl = rps_calloc(cap, sizeof(*sl));

		if (!ids || !sl) {
			rps_free(ids);
			rps_free(sl);
			return -ENOMEM;
		}
		for (uint64_t k = 0; k < c->cap; k++)
			if (c->slots[k]) {
				for (i = hpos(c->ids[k], cap); sl[i]; i = (i + 1) & (cap - 1))
					;
				ids[i] = c->ids[k];
				sl[i] = c->slots[k];
			}
		rps_free(c->ids);
		rps_free(c->slots);
		c->ids = ids;
		c->slots = sl;
		c->cap = cap;
	}
	for (i = hpos(id, c->cap); c->slots[i]; i = (i + 1) & (c->cap - 1))
		if (c->ids[i] == id) {
			c->slots[i] = slot + 1;
			return 0;
		}
	c->ids[i] = id;
	c->slots[i] = slot + 1;
	c->n++;
	return 0;
}

/* The cached slot of id, or -1. */
static int64_t cache_get(const struct rps_wtshard *c, uint64_t id)
{
	if (!c->cap)
		return -1;
	for (uint64_t i = hpos(id, c->cap); c->slots[i]; i = (i + 1) & (c->cap - 1))
		if (c->ids[i] == id)
			return (int64_t)c->slots[i] - 1;
	return -1;
}

void rps_wtshard_learn(struct rps_wtshard *c, const uint64_t *ids, const void *slots, uint32_t n)
{
	for (uint32_t j = 0; j < n; j++) {
		uint32_t s;

		memcpy(&s, (const char *)slots + (size_t)j * 4, 4);
		if (rps_wtshard_cache_put(c, ids[j], s))
			return; /* out of memory: those rows go by frames */
	}
}

/* ---- TABLE_MAP (blocking, frames) ---- */

struct map_wait {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int done, status;
};

/* Ask server/shard for the chunks of c from c->nchunks on; they land in c
 * through rps_wtable_map_recv_locked. */
int rps_wtshard_map_fetch(struct rps_worker *w, struct rps_wtshard *c)
{
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);
	struct rps_piece *p;
	int rc;

	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	pthread_mutex_lock(&w->core.lock);
	p = rps_piece_alloc_locked(&w->core, req, RPS_PK_ROWS, RPS_PW_RESP);
	if (!p) {
		rps_wreq_fail_locked(req, -ENOMEM);
		pthread_mutex_unlock(&w->core.lock);
	} else {
		p->conn = w->servers[c->server].shards[c->shard].conn;
		p->server = c->server;
		p->shard = c->shard;
		memset(&p->u.rows, 0, sizeof(p->u.rows));
		p->u.rows.op = RPS_OP_TABLE_MAP;
		p->u.rows.r.table = c->table;
		p->u.rows.r.shard = c->shard;
		p->u.rows.r.count = c->nchunks; /* first chunk wanted */
		p->u.rows.cache = c;
		pthread_mutex_unlock(&w->core.lock);
		rps_wtable_post(w, p);
	}
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	rc = rps_req_wait(req, -1);
	return rc;
}

void rps_wtable_map_recv_locked(struct rps_worker *w, struct rps_piece *p,
				const struct rps_tr_event *ev)
{
	const struct rps_table_map *m = ev->fixed;
	struct rps_wtshard *c = p->u.rows.cache;
	const struct rps_table_chunk *e = ev->data;
	uint32_t total;

	(void)w;
	if (!m || !c || m->first != c->nchunks || m->table != c->table)
		return;
	if (ev->data && ev->data_len == (size_t)m->count * sizeof(struct rps_table_chunk) +
					       sizeof(struct rps_table_index)) {
		struct rps_table_index ix;

		memcpy(&ix, (const char *)ev->data + (size_t)m->count * sizeof(struct rps_table_chunk),
		       sizeof(ix));
		c->ix_known = 1;
		c->ix_ok = (ix.flags & RPS_TABLE_INDEX_READABLE) && ix.nbuckets &&
			   !(ix.nbuckets & (ix.nbuckets - 1)) &&
			   ix.bucket_bytes == RPS_TABLE_BUCKET_ENTRIES * 4;
		c->ix_addr = ix.addr;
		c->ix_key = ix.remote_key;
		c->ix_nb = ix.nbuckets;
		c->ix_gen = ix.generation;
	}
	total = m->first + m->count;
	if (total > c->nchunks) {
		uint64_t *a = rps_realloc(c->caddr, total * sizeof(*a));
		uint32_t *k = a ? rps_realloc(c->ckey, total * sizeof(*k)) : NULL;

		if (a)
			c->caddr = a;
		if (!k)
			return;
		c->ckey = k;
		for (uint32_t i = 0; i < m->count; i++) {
			struct rps_table_chunk ch;

			memcpy(&ch, (const char *)e + (size_t)i * sizeof(ch), sizeof(ch));
			c->caddr[m->first + i] = ch.addr;
			c->ckey[m->first + i] = ch.remote_key;
		}
		c->nchunks = total;
	}
	c->chunk_shift = m->chunk_shift;
	c->slot_bytes = m->slot_bytes;
}

/* ---- the READs ---- */

void rps_wtable_post_read(struct rps_worker *w, struct rps_piece *p)
{
	struct rps_tr_sge sge = {p->u.rows.local, p->u.rows.slot_bytes, p->u.rows.lhandle};
	uint64_t ctx = rps_piece_ctx(p, 0);
	int rc = rps_wconn_dead(p->conn);

	if (!rc)
		rc = rps_tr_read_remote(p->conn->c, &sge, 1, p->u.rows.raddr, p->u.rows.rkey, ctx);
	if (rc) {
		pthread_mutex_lock(&w->core.lock);
		if (rps_piece_by_ctx(&w->core, ctx) == p && p->kind == RPS_PK_ROWS)
			rps_piece_clear_locked(&w->core, p, RPS_PW_ALL, rc);
		rps_wcore_unlock(&w->core);
	}
}

int rps_wtable_read_done(struct rps_worker *w, const struct rps_tr_event *ev)
{
	struct rps_piece *p;
	uint32_t b, e;
	uint64_t id;
	const char *s;
	int again = 0;

	pthread_mutex_lock(&w->core.lock);
	p = rps_piece_by_ctx(&w->core, ev->ctx);
	if (!p || p->kind != RPS_PK_ROWS) {
		pthread_mutex_unlock(&w->core.lock);
		return 0;
	}
	if (p->u.rows.op == RPS_WT_OP_RAW && (p->waits & RPS_PW_READ)) {
		/* a lookup READ: table_index.c checks what it read */
		rps_piece_clear_locked(&w->core, p, RPS_PW_ALL, ev->status);
		rps_wcore_unlock(&w->core);
		return 1;
	}
	if (p->u.rows.op != RPS_WT_OP_READ || !(p->waits & RPS_PW_READ)) {
		pthread_mutex_unlock(&w->core.lock);
		return 1;
	}
	if (ev->status) {
		rps_piece_clear_locked(&w->core, p, RPS_PW_ALL, ev->status);
		rps_wcore_unlock(&w->core);
		return 1;
	}
	s = p->u.rows.local;
	memcpy(&id, s, 8); /* the slot layout: server/rowtab.h, docs/protocol.md */
	memcpy(&b, s + 8, 4);
	memcpy(&e, s + p->u.rows.slot_bytes - 4, 4);
	if (b != e || (b & 1)) {
		atomic_fetch_add_explicit(&w->stat_torn, 1, memory_order_relaxed);
		if (++p->u.rows.tries > TORN_MAX)
			rps_piece_clear_locked(&w->core, p, RPS_PW_ALL, -EAGAIN);
		else
			again = 1;
	} else if (id != p->u.rows.ids[0]) {
		rps_piece_clear_locked(&w->core, p, RPS_PW_ALL, -ESTALE);
	} else {
		uint32_t dim = p->u.rows.r.dim, prec = RPS_ROWS_PREC_OF(p->u.rows.r.flags);

		/* stored precision -> fp32 (exact) */
		for (uint32_t k = p->u.rows.ustart[0]; k < p->u.rows.uend[0]; k++)
			rps_row_widen(prec, s + 12, p->u.rows.out + (size_t)p->u.rows.pos[k] * dim,
				      dim);
		atomic_fetch_add_explicit(&w->stat_bytes_in,
					  (uint64_t)dim * rps_row_elem_bytes(prec),
					  memory_order_relaxed);
		rps_piece_clear_locked(&w->core, p, RPS_PW_READ, 0);
	}
	rps_wcore_unlock(&w->core);
	if (again) /* the progress thread posts as the read strategy does */
		rps_wtable_post_read(w, p);
	return 1;
}

/* Is the pull's condition known to hold on shard sh for min_clock c? */
static int clock_known(struct rps_worker *w, struct rps_wshard *sh, uint32_t c)
{
	switch (w->consistency) {
	case RPS_BSP:
		return atomic_load(&sh->clock_seen) >= c;
	case RPS_SSP:
		return atomic_load(&sh->clock_seen) + w->staleness >= c;
	default:
		return atomic_load(&sh->wclock_seen) >= c;
	}
}

int rps_wtread_scratch(struct rps_worker *w, struct rps_wtread *rd, size_t bytes)
{
	size_t len = rd->scratch_len ? rd->scratch_len : 1u << 20;
	char *b;
	int rc;

	if (bytes <= rd->scratch_len)
		return 0;
	while (len < bytes)
		len *= 2;
	if (rd->has_mr) {
		rps_tr_dereg_mem(w->tr, &rd->mr);
		rd->has_mr = 0;
	}
	rps_free(rd->scratch);
	rd->scratch_len = 0;
	b = rps_aligned_alloc(64, len);
	if (!b)
		return -ENOMEM;
	rc = rps_tr_reg_mem(w->tr, b, len, RPS_TR_ACCESS_LOCAL, &rd->mr);
	if (rc) {
		rps_free(b);
		rd->scratch = NULL;
		return rc;
	}
	rd->has_mr = 1;
	rd->scratch = b;
	rd->scratch_len = len;
	return 0;
}

static int read_pull_once(struct rps_worker *w, struct rps_wtread *rd, rps_table_t table,
			  uint32_t dim, uint32_t prec, const struct rps_wtrows *b, float *out,
			  uint32_t clock)
{
	struct rps_wtshard **cs = rps_calloc(b->nu ? b->nu : 1, sizeof(*cs));
	int64_t *slot = rps_malloc((b->nu ? b->nu : 1) * sizeof(*slot));
	uint64_t *sid = rps_malloc((b->nu ? b->nu : 1) * sizeof(*sid));
	uint32_t *sst = rps_malloc((b->nu ? b->nu : 1) * sizeof(*sst));
	uint32_t *sen = rps_malloc((b->nu ? b->nu : 1) * sizeof(*sen));
	uint8_t *done = rps_calloc(b->nu ? b->nu : 1, 1);
	uint8_t waited[RPS_MAX_SHARDS * 64] = {0};
	size_t nread = 0, nsend = 0, off = 0, nix = 0;
	size_t slot_bytes = /* the slot layout */
	    RPS_ALIGN_UP(16 + (size_t)dim * rps_row_elem_bytes(prec), 8);
	struct rps_wtrows sv;
	struct rps_req *req;
	int rc = 0;

	if (!cs || !slot || !sid || !sst || !sen || !done) {
		rc = -ENOMEM;
		goto out;
	}
	/* 1. which rows are cached, chunks we must learn first */
	for (int pass = 0; pass < 2 && !rc; pass++) {
		int need_map = 0;

		nread = nix = 0;
		for (size_t u = 0; u < b->nu; u++) {
			uint32_t g = rps_wtable_group(w, table, b->uid[u]);

			if (!u || g != rps_wtable_group(w, table, b->uid[u - 1]))
				cs[u] = rps_wtshard_get(w, table, g / RPS_MAX_SHARDS,
							g % RPS_MAX_SHARDS);
			else
				cs[u] = cs[u - 1];
			slot[u] = -1;
			if (!cs[u])
				continue;
			pthread_mutex_lock(&w->core.lock);
			slot[u] = cache_get(cs[u], b->uid[u]);
			if (slot[u] >= 0 &&
			    (uint64_t)slot[u] >> cs[u]->chunk_shift >= cs[u]->nchunks) {
				if (pass == 0)
					need_map = 1;
				slot[u] = -1;
			} else if (slot[u] < 0 && !cs[u]->ix_known && !cs[u]->ix_tried) {
				/* not cached: look it up in the shard's row index */
				if (pass == 0)
					need_map = 1;
			}
			nix += slot[u] < 0 && cs[u]->ix_ok;
			pthread_mutex_unlock(&w->core.lock);
			nread += slot[u] >= 0;
		}
		if (!need_map)
			break;
		for (size_t u = 0; u < b->nu && !rc; u++)
			if ((!u || cs[u] != cs[u - 1]) && cs[u] && (cs[u]->ix_tried = 1) &&
			    rps_wtshard_map_fetch(w, cs[u]))
				RPS_DEBUG(
				    "table %u: no chunk map from server %u shard %u: its rows "
				    "go by frames",
				    table, cs[u]->server, cs[u]->shard);
	}
	if (rc)
		goto out;
	/* 2. the consistency condition, one-sided, on every shard we read */
	if (nread || nix) {
		struct rps_req *cw = rps_wreq_new(&w->core, NULL, NULL);
		int any = 0;

		if (!cw) {
			rc = -ENOMEM;
			goto out;
		}
		rps_wsubmit_enter(w);
		for (size_t u = 0; u < b->nu && !rc; u++) {
			struct rps_wshard *sh;
			uint32_t gi;

			if (!cs[u] || (slot[u] < 0 && !cs[u]->ix_ok))
				continue;
			gi = cs[u]->server * RPS_MAX_SHARDS + cs[u]->shard;
			sh = rps_wshard_get(w, cs[u]->server, cs[u]->shard);
			if (gi < sizeof(waited) && waited[gi])
				continue;
			if (gi < sizeof(waited))
				waited[gi] = 1;
			if (clock_known(w, sh, clock))
				continue;
			rc = w->pull->clock_wait(w, cw, 0, 0, cs[u]->server, cs[u]->shard, clock);
			any = 1;
		}
		rps_wsubmit_leave(w);
		rps_wreq_seal(cw);
		rc = rps_req_wait(cw, -1);
		(void)any;
		if (rc)
			goto out;
		if (nread)
			rc = rps_wtread_scratch(w, rd, nread * (slot_bytes + 64));
		if (rc)
			goto out;
	}
	/* 3. READs of the cached rows, all posted at once; while they fly, the
	 * rows not cached are looked up in the shards' row indexes
	 * (table_index.c, its own scratch); frames for what is left */
	req = rps_wreq_new(&w->core, NULL, NULL);
	if (!req) {
		rc = -ENOMEM;
		goto out;
	}
	rps_wsubmit_enter(w);
	for (size_t u = 0; u < b->nu; u++) {
		struct rps_piece *p;
		struct rps_wtshard *c = cs[u];

		if (slot[u] < 0)
			continue;
		pthread_mutex_lock(&w->core.lock);
		p = rps_piece_alloc_locked(&w->core, req, RPS_PK_ROWS, RPS_PW_READ);
		if (!p) {
			rps_wreq_fail_locked(req, -ENOMEM);
			pthread_mutex_unlock(&w->core.lock);
			break;
		}
		p->conn = w->servers[c->server].shards[c->shard].conn;
		p->server = c->server;
		p->shard = c->shard;
		memset(&p->u.rows, 0, sizeof(p->u.rows));
		p->u.rows.op = RPS_WT_OP_READ;
		p->u.rows.r.table = table;
		p->u.rows.r.dim = dim;
		p->u.rows.r.flags = RPS_ROWS_FLAG_PREC(prec); /* read_done widens */
		p->u.rows.ids = &b->uid[u];
		p->u.rows.ustart = &b->ustart[u];
		p->u.rows.uend = &b->uend[u];
		p->u.rows.pos = b->pos;
		p->u.rows.out = out;
		p->u.rows.cache = c;
		p->u.rows.slot_bytes = c->slot_bytes;
		p->u.rows.raddr =
		    c->caddr[(uint64_t)slot[u] >> c->chunk_shift] +
		    ((uint64_t)slot[u] & ((1ull << c->chunk_shift) - 1)) * c->slot_bytes;
		p->u.rows.rkey = c->ckey[(uint64_t)slot[u] >> c->chunk_shift];
		p->u.rows.local = rd->scratch + off;
		p->u.rows.lhandle = rd->mr.handle;
		off += RPS_ALIGN_UP(c->slot_bytes, 64);
		pthread_mutex_unlock(&w->core.lock);
		atomic_fetch_add_explicit(&w->stat_pulls, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&w->stat_row_slot_reads, 1, memory_order_relaxed);
		rps_wtable_post_read(w, p);
	}
	rps_wsubmit_leave(w);
	if (nix) {
		rc = rps_wtable_index_lookup(w, rd, table, dim, prec, b, out, cs, slot, done);
		if (rc) {
			rps_wreq_seal(req);
			(void)rps_req_wait(req, -1); /* READs land in our scratch */
			goto out;
		}
	}
	for (size_t u = 0; u < b->nu; u++)
		if (slot[u] < 0 && !done[u]) {
			sid[nsend] = b->uid[u];
			sst[nsend] = b->ustart[u];
			sen[nsend] = b->uend[u];
			nsend++;
		}
	rps_wsubmit_enter(w);
	sv.uid = sid;
	sv.ustart = sst;
	sv.uend = sen;
	sv.pos = b->pos;
	sv.ugrads = NULL;
	sv.nu = nsend;
	if (nsend)
		rps_wtable_post_frames(w, req, table, dim, &sv, out, 0, clock,
				       RPS_ROWS_FLAG_SLOTS | RPS_ROWS_FLAG_PREC(prec));
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	rc = rps_req_wait(req, -1);
out:
	rps_free(cs);
	rps_free(slot);
	rps_free(sid);
	rps_free(sst);
	rps_free(sen);
	rps_free(done);
	return rc;
}

int rps_wtable_read_pull(struct rps_worker *w, rps_table_t table, uint32_t dim, uint32_t prec,
			 const struct rps_wtrows *b, float *out, uint32_t clock)
{
	struct rps_wtread *rd = rd_of(w);
	int rc;

	if (!rd)
		return -ENOMEM;
	pthread_mutex_lock(&rd->lock);
	rc = read_pull_once(w, rd, table, dim, prec, b, out, clock);
	if (rc == -ESTALE) {
		/* a slot held another row: the server restarted, or evicted the
		 * row and gave its slot to another (docs/tables.md, Eviction) */
		RPS_LOG_RATELIMITED(RPS_LOG_INFO,
				    "table %u: a cached row slot holds another row (server "
				    "restarted, or rows evicted): slots forgotten, pulling by frames",
				    table);
		for (uint32_t s = 0; s < w->num_servers; s++)
			rps_wtable_forget(w, s);
		rc = read_pull_once(w, rd, table, dim, prec, b, out, clock);
	}
	pthread_mutex_unlock(&rd->lock);
	return rc;
}
