/* One-sided lookups of rows a worker has not cached (docs/tables.md, Over
 * RDMA; layout: docs/protocol.md, Tables). For every such row of a batch:
 *   1. one READ of its first two index buckets (128 bytes; 64 at the last
 *      bucket), every row's READ posted at once: the entries whose tag
 *      matches are its candidate slots (the server's probing: a bucket with
 *      an empty entry ends the search);
 *   2. one READ per candidate slot, all posted at once: the slot whose id is
 *      the row's and whose begin and end versions are equal and even is the
 *      row (copied out, its slot cached: later pulls take one READ); a torn
 *      slot is read again.
 * An entry RPS_TABLE_ENTRY_MOVED means the array was replaced by a rehash:
 * the worker asks the shard for its map again (TABLE_MAP) and looks those
 * rows up once more. What is not found (a row that does not exist, one
 * beyond the two buckets read, a candidate in a chunk the map does not give)
 * goes by frames: the server creates or finds it. */
#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/rowinit.h"
#include "src/rowprec.h"
#include "src/util.h"
#include "worker/table.h"
#include "worker/table_read.h"
#include "worker/worker_int.h"

#define BUCKET_BYTES (RPS_TABLE_BUCKET_ENTRIES * 4u)

struct rd_op {
	struct rps_wtshard *c;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t len;
	size_t off;  /* in rd->scratch */
	uint64_t nb; /* bucket READs: the array's buckets */
};

/* Post the n READs at once, wait for every one. */
static int read_all(struct rps_worker *w, struct rps_wtread *rd, const struct rd_op *ops,
		    size_t n, _Atomic uint64_t *counter)
{
	struct rps_req *req = rps_wreq_new(&w->core, NULL, NULL);

	if (!req)
		return -ENOMEM;
	rps_wsubmit_enter(w);
	for (size_t i = 0; i < n; i++) {
		struct rps_wtshard *c = ops[i].c;
		struct rps_piece *p;

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
		p->u.rows.op = RPS_WT_OP_RAW;
		p->u.rows.r.table = c->table;
		p->u.rows.cache = c;
		p->u.rows.raddr = ops[i].raddr;
		p->u.rows.rkey = ops[i].rkey;
		p->u.rows.slot_bytes = ops[i].len;
		p->u.rows.local = rd->scratch + ops[i].off;
		p->u.rows.lhandle = rd->mr.handle;
		pthread_mutex_unlock(&w->core.lock);
		atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
		rps_wtable_post_read(w, p);
	}
	rps_wsubmit_leave(w);
	rps_wreq_seal(req);
	return rps_req_wait(req, -1);
}

struct cand {
	size_t u;
	uint64_t slot;
};

struct lookup {
	size_t *lu;	 /* rows looked up this round */
	uint8_t *moved;	 /* per row of the batch */
	struct rd_op *ops;
	struct cand *cand;
	size_t ncand, cand_cap;
};

static int cand_add(struct lookup *L, size_t u, uint64_t slot)
{
	if (L->ncand == L->cand_cap) {
		size_t cap = L->cand_cap ? L->cand_cap * 2 : 256;
		struct cand *c = rps_realloc(L->cand, cap * sizeof(*c));

		if (!c)
			return -ENOMEM;
		L->cand = c;
		L->cand_cap = cap;
	}
	L->cand[L->ncand].u = u;
	L->cand[L->ncand++].slot = slot;
	return 0;
}

/* 1. the buckets of the rows in L->lu: candidates, or moved. */
static int read_buckets(struct rps_worker *w, struct rps_wtread *rd, rps_table_t table,
			const struct rps_wtrows *b, struct rps_wtshard **cs, struct lookup *L,
			size_t nl, size_t *nmoved_p)
{
	int rc = rps_wtread_scratch(w, rd, nl * 2 * BUCKET_BYTES);

	if (rc)
		return rc;
	pthread_mutex_lock(&w->core.lock);
	for (size_t k = 0; k < nl; k++) {
		struct rps_wtshard *c = cs[L->lu[k]];
		uint64_t bk = rps_row_hash(table, b->uid[L->lu[k]]) & (c->ix_nb - 1);

		L->ops[k].c = c;
		L->ops[k].raddr = c->ix_addr + bk * BUCKET_BYTES;
		L->ops[k].rkey = c->ix_key;
		L->ops[k].len = bk + 1 < c->ix_nb ? 2 * BUCKET_BYTES : BUCKET_BYTES;
		L->ops[k].off = k * 2 * BUCKET_BYTES;
		L->ops[k].nb = c->ix_nb;
	}
	pthread_mutex_unlock(&w->core.lock);
	rc = read_all(w, rd, L->ops, nl, &w->stat_row_ix_reads);
	if (rc)
		return rc;
	L->ncand = 0;
	*nmoved_p = 0;
	for (size_t k = 0; k < nl; k++) {
		size_t u = L->lu[k];
		uint32_t smask = rps_row_entry_mask(L->ops[k].nb);
		uint32_t tag = rps_row_entry_tag(rps_row_hash(table, b->uid[u])) & ~smask;
		uint32_t n = L->ops[k].len / 4;
		const char *e = rd->scratch + L->ops[k].off;

		L->moved[u] = 0;
		for (uint32_t i = 0; i < n && !L->moved[u]; i++) {
			uint32_t v;

			memcpy(&v, e + i * 4, 4);
			L->moved[u] = v == RPS_TABLE_ENTRY_MOVED;
		}
		if (L->moved[u]) {
			atomic_fetch_add_explicit(&w->stat_row_moved, 1, memory_order_relaxed);
			(*nmoved_p)++;
			continue;
		}
		for (uint32_t i = 0; i < n; i++) {
			uint32_t v;

			memcpy(&v, e + i * 4, 4);
			if (!v)
				break; /* the server stops here too: not further */
			if ((v & ~smask) != tag)
				continue;
			rc = cand_add(L, u, (v & smask) - 1);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Candidates in chunks c does not know: ask for its map once, drop the ones
 * still unknown. */
static void check_chunks(struct rps_worker *w, struct rps_wtshard **cs, struct lookup *L)
{
	size_t keep = 0;

	for (int pass = 0; pass < 2; pass++) {
		struct rps_wtshard *fetch = NULL;

		keep = 0;
		for (size_t j = 0; j < L->ncand; j++) {
			struct rps_wtshard *c = cs[L->cand[j].u];
			int known;

			pthread_mutex_lock(&w->core.lock);
			known = c->nchunks && L->cand[j].slot >> c->chunk_shift < c->nchunks;
			pthread_mutex_unlock(&w->core.lock);
			if (known || pass == 0)
				L->cand[keep++] = L->cand[j];
			if (!known && pass == 0 && c != fetch) {
				fetch = c;
				if (rps_wtshard_map_fetch(w, c))
					RPS_DEBUG("table %u: no chunk map from server %u shard %u",
						  c->table, c->server, c->shard);
			}
		}
		L->ncand = keep;
		if (!fetch)
			break;
	}
}

/* 2. the candidate slots, again while torn. */
static int read_slots(struct rps_worker *w, struct rps_wtread *rd, uint32_t dim, uint32_t prec,
		      const struct rps_wtrows *b, float *out, struct rps_wtshard **cs,
		      struct lookup *L, uint8_t *done)
{
	size_t eb = rps_row_elem_bytes(prec);
	size_t sb = RPS_ALIGN_UP(16 + (size_t)dim * eb, 8), stride = RPS_ALIGN_UP(sb, 64);
	uint32_t tries = 0;
	int rc;

	while (L->ncand) {
		size_t keep = 0;
		struct rd_op *ops = rps_malloc(L->ncand * sizeof(*ops));

		if (!ops)
			return -ENOMEM;
		rc = rps_wtread_scratch(w, rd, L->ncand * stride);
		if (rc) {
			rps_free(ops);
			return rc;
		}
		pthread_mutex_lock(&w->core.lock);
		for (size_t j = 0; j < L->ncand; j++) {
			struct rps_wtshard *c = cs[L->cand[j].u];
			uint64_t s = L->cand[j].slot;

			ops[j].c = c;
			ops[j].raddr = c->caddr[s >> c->chunk_shift] +
				       (s & ((1ull << c->chunk_shift) - 1)) * c->slot_bytes;
			ops[j].rkey = c->ckey[s >> c->chunk_shift];
			ops[j].len = (uint32_t)sb;
			ops[j].off = j * stride;
		}
		pthread_mutex_unlock(&w->core.lock);
		rc = read_all(w, rd, ops, L->ncand, &w->stat_row_slot_reads);
		rps_free(ops);
		if (rc)
			return rc;
		for (size_t j = 0; j < L->ncand; j++) {
			const char *s = rd->scratch + j * stride;
			size_t u = L->cand[j].u;
			uint32_t bv, ev;
			uint64_t id;

			memcpy(&id, s, 8);
			memcpy(&bv, s + 8, 4);
			memcpy(&ev, s + sb - 4, 4);
			if (id != b->uid[u] || done[u])
				continue; /* another row with the same tag */
			if (bv != ev || (bv & 1)) {
				atomic_fetch_add_explicit(&w->stat_torn, 1, memory_order_relaxed);
				L->cand[keep++] = L->cand[j];
				continue;
			}
			for (uint32_t k = b->ustart[u]; k < b->uend[u]; k++) /* widened */
				rps_row_widen(prec, s + 12, out + (size_t)b->pos[k] * dim, dim);
			atomic_fetch_add_explicit(&w->stat_bytes_in, (uint64_t)dim * eb,
						  memory_order_relaxed);
			done[u] = 1;
			pthread_mutex_lock(&w->core.lock);
			(void)rps_wtshard_cache_put(cs[u], b->uid[u], (uint32_t)L->cand[j].slot);
			pthread_mutex_unlock(&w->core.lock);
		}
		L->ncand = keep;
		if (keep && ++tries > TORN_MAX)
			return -EAGAIN;
	}
	return 0;
}

int rps_wtable_index_lookup(struct rps_worker *w, struct rps_wtread *rd, rps_table_t table,
			    uint32_t dim, uint32_t prec, const struct rps_wtrows *b, float *out,
			    struct rps_wtshard **cs, const int64_t *slot, uint8_t *done)
{
	size_t nu = b->nu ? b->nu : 1;
	struct lookup L = {0};
	int rc = 0;

	/* its own scratch: the cached rows' READs land in rd's meanwhile */
	if (!rd->lk)
		rd->lk = rps_calloc(1, sizeof(*rd->lk));
	if (!rd->lk)
		return -ENOMEM;
	rd = rd->lk;

	L.lu = rps_malloc(nu * sizeof(*L.lu));
	L.moved = rps_calloc(nu, 1);
	L.ops = rps_malloc(nu * sizeof(*L.ops));
	if (!L.lu || !L.moved || !L.ops) {
		rc = -ENOMEM;
		goto out;
	}
	for (int round = 0; round < 2 && !rc; round++) {
		size_t nl = 0, nmoved = 0;

		pthread_mutex_lock(&w->core.lock);
		for (size_t u = 0; u < b->nu; u++)
			if (!done[u] && slot[u] < 0 && cs[u] && cs[u]->ix_ok &&
			    (round == 0 || L.moved[u]))
				L.lu[nl++] = u;
		pthread_mutex_unlock(&w->core.lock);
		if (!nl)
			break;
		rc = read_buckets(w, rd, table, b, cs, &L, nl, &nmoved);
		if (rc)
			break;
		check_chunks(w, cs, &L);
		rc = read_slots(w, rd, dim, prec, b, out, cs, &L, done);
		if (rc || !nmoved)
			break;
		/* a rehash: the shards' new index arrays, then those rows again */
		for (size_t k = 0; k < nl; k++) {
			struct rps_wtshard *c = cs[L.lu[k]];
			int seen = 0;

			if (!L.moved[L.lu[k]])
				continue;
			for (size_t j = 0; j < k && !seen; j++)
				seen = L.moved[L.lu[j]] && cs[L.lu[j]] == c;
			if (!seen && rps_wtshard_map_fetch(w, c))
				RPS_DEBUG("table %u: no new index map from server %u shard %u",
					  table, c->server, c->shard);
		}
	}
out:
	rps_free(L.lu);
	rps_free(L.moved);
	rps_free(L.ops);
	rps_free(L.cand);
	return rc;
}
