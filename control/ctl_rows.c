/* rdmaps-ctl export: tables (ctl_rows.h). Every shard sends each table's
 * rows in order (first = rows already sent); a table is written only when
 * every shard's `total` rows came and the servers' results announced as many
 * rows as came (no silent loss: a scheduler that drops ROWS frames fails the
 * export). Rows are sorted by id; an id held by two shards is an error. */
#include "control/ctl_rows.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmaps/table.h>

#include "src/alloc.h"
#include "src/proto.h"
#include "src/table_export.h"
#include "src/util.h"

#define ROWS_GROW_MIN 1024u /* rows: the first allocation of a shard's table, at most */
#define ROWS_MAX      (1ull << 32)

static struct ctl_xrows *find(struct ctl_rows *c, const struct rps_export_rows *h)
{
	for (size_t i = c->n; i-- > 0;)
		if (c->x[i].table == h->table && c->x[i].server == h->server &&
		    c->x[i].shard == h->shard)
			return &c->x[i];
	return NULL;
}

int rps_ctl_rows_add(struct ctl_rows *c, const void *data, size_t len, char *why, size_t wlen)
{
	struct rps_export_rows h;
	struct ctl_xrows *x;
	size_t rb;

	if (len < sizeof(h)) {
		snprintf(why, wlen, "a short table rows frame (%zu bytes)", len);
		return -EPROTO;
	}
	memcpy(&h, data, sizeof(h));
	rb = (size_t)h.dim * sizeof(float);
	if (!h.dim || h.dim > RPS_TABLE_MAX_DIM || h.total > ROWS_MAX || h.first > h.total ||
	    h.count > h.total - h.first || len != sizeof(h) + (size_t)h.count * (8 + rb)) {
		snprintf(why, wlen, "a malformed table rows frame (table %u server %u shard %u)",
			 h.table, h.server, h.shard);
		return -EPROTO;
	}
	x = find(c, &h);
	if (!x) {
		if (h.first) {
			snprintf(why, wlen, "table %u server %u shard %u: rows from %" PRIu64
				 " without their start", h.table, h.server, h.shard, h.first);
			return -EPROTO;
		}
		if (c->n == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 16;
			struct ctl_xrows *n = rps_realloc(c->x, cap * sizeof(*n));

			if (!n)
				return -ENOMEM;
			c->x = n;
			c->cap = cap;
		}
		x = &c->x[c->n++];
		memset(x, 0, sizeof(*x));
		x->table = h.table;
		x->server = h.server;
		x->shard = h.shard;
		x->dim = h.dim;
		x->total = h.total;
		x->clock = h.clock;
	}
	if (h.first != x->filled || h.total != x->total || h.dim != x->dim) {
		snprintf(why, wlen, "table %u server %u shard %u: rows out of order", h.table,
			 h.server, h.shard);
		return -EPROTO;
	}
	if (x->filled + h.count > x->cap) {
		/* double, up to total: never more than twice what came */
		uint64_t cap = RPS_MAX(2 * x->cap, (uint64_t)ROWS_GROW_MIN);
		uint64_t *ids;
		float *rows;

		cap = RPS_MIN(RPS_MAX(cap, x->filled + h.count), x->total);
		ids = rps_realloc(x->ids, cap * 8);
		if (!ids)
			return -ENOMEM;
		x->ids = ids;
		rows = rps_realloc(x->rows, cap * rb);
		if (!rows)
			return -ENOMEM;
		x->rows = rows;
		x->cap = cap;
	}
	if (h.count) {
		memcpy(x->ids + x->filled, (const char *)data + sizeof(h), (size_t)h.count * 8);
		memcpy(x->rows + x->filled * h.dim, (const char *)data + sizeof(h) + h.count * 8,
		       (size_t)h.count * rb);
	}
	x->filled += h.count;
	c->nrows += h.count;
	return 0;
}

static int cmp_x(const void *a, const void *b)
{
	const struct ctl_xrows *x = a, *y = b;

	return x->table < y->table ? -1 : x->table > y->table;
}

struct id_at {
	uint64_t id;
	const float *row;
};

static int cmp_id(const void *a, const void *b)
{
	const struct id_at *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Tables x[i..j) (one table) as entries e[0], e[1]. */
static int one_table(const struct ctl_xrows *x, size_t i, size_t j, struct rps_npz_entry *e)
{
	uint32_t t = x[i].table, dim = x[i].dim;
	uint64_t n = 0, k = 0;
	struct id_at *a;

	for (size_t m = i; m < j; m++) {
		if (x[m].dim != dim) {
			fprintf(stderr,
				"rdmaps-ctl: export: table %u has dim %u on server %u shard %u "
				"and %u on server %u shard %u\n",
				t, dim, x[i].server, x[i].shard, x[m].dim, x[m].server, x[m].shard);
			return -EPROTO;
		}
		if (x[m].filled != x[m].total) {
			fprintf(stderr,
				"rdmaps-ctl: export: table %u: server %u shard %u sent %" PRIu64
				" of its %" PRIu64 " rows\n",
				t, x[m].server, x[m].shard, x[m].filled, x[m].total);
			return -EPROTO;
		}
		n += x[m].total;
	}
	a = rps_malloc((n ? n : 1) * sizeof(*a));
	rps_table_export_names(t, e[0].name, e[1].name, sizeof(e[0].name));
	e[0].u64 = rps_malloc((n ? n : 1) * 8);
	e[1].data = rps_malloc((n ? n : 1) * dim * sizeof(float));
	if (!a || !e[0].u64 || !e[1].data) {
		rps_free(a);
		return -ENOMEM;
	}
	for (size_t m = i; m < j; m++)
		for (uint64_t r = 0; r < x[m].total; r++) {
			a[k].id = x[m].ids[r];
			a[k++].row = x[m].rows + r * dim;
		}
	if (n)
		qsort(a, n, sizeof(*a), cmp_id);
	for (k = 0; k < n; k++) {
		if (k && a[k].id == a[k - 1].id) {
			fprintf(stderr,
				"rdmaps-ctl: export: table %u: row %" PRIu64
				" came from two shards (every id belongs to one): nothing written\n",
				t, a[k].id);
			rps_free(a);
			return -EPROTO;
		}
		e[0].u64[k] = a[k].id;
		memcpy(e[1].data + k * dim, a[k].row, (size_t)dim * sizeof(float));
	}
	rps_free(a);
	e[0].ndim = 1;
	e[0].shape[0] = n;
	e[0].nelems = n;
	e[1].ndim = 2;
	e[1].shape[0] = n;
	e[1].shape[1] = dim;
	e[1].nelems = n * dim;
	return 0;
}

int rps_ctl_rows_entries(struct ctl_rows *c, uint64_t want, struct rps_npz_entry **e_p,
			 size_t *n_p)
{
	struct rps_npz_entry *e;
	size_t ntab = 0, base = *n_p;

	if (c->nrows != want) {
		fprintf(stderr,
			"rdmaps-ctl: export: %" PRIu64 " table rows came, the servers sent %" PRIu64
			" (a scheduler that does not relay table rows?)\n",
			c->nrows, want);
		return -EPROTO;
	}
	if (!c->n)
		return 0;
	qsort(c->x, c->n, sizeof(*c->x), cmp_x);
	for (size_t i = 0; i < c->n; i++)
		ntab += !i || c->x[i].table != c->x[i - 1].table;
	e = rps_realloc(*e_p, (base + 2 * ntab) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e_p = e;
	memset(e + base, 0, 2 * ntab * sizeof(*e));
	for (size_t i = 0; i < c->n;) {
		size_t j = i + 1;
		int rc;

		while (j < c->n && c->x[j].table == c->x[i].table)
			j++;
		rc = one_table(c->x, i, j, e + *n_p);
		*n_p += 2; /* counted even on failure: rps_npz_free frees what was made */
		if (rc)
			return rc;
		c->ntables++;
		i = j;
	}
	return 0;
}

void rps_ctl_rows_free(struct ctl_rows *c)
{
	for (size_t i = 0; i < c->n; i++) {
		rps_free(c->x[i].ids);
		rps_free(c->x[i].rows);
	}
	rps_free(c->x);
	memset(c, 0, sizeof(*c));
}
