/* Replicated shards: a shard's whole state in one buffer, for a
 * replacement server that joins as a backup (server/repl_copy.h). */
#include "server/repl_copy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/lowprec.h"
#include "server/repl.h"
#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#define COPY_MAGIC 0x59504f434c504552ull /* "REPLCOPY" */

struct copy_hdr {
	uint64_t magic;
	uint32_t shard, nworkers;
	uint32_t win, consistency;
	uint64_t clock;
	uint64_t nslices, ndirty;
	uint32_t has_seen, reserved;
};

/* One slice; then its spec (has_spec), values, optimizer state, the map of
 * elements assigned (pending_init), the BSP lanes (dirty). */
struct copy_slice {
	uint64_t key;
	uint32_t slice, has_spec;
	uint64_t nelems;
	uint64_t step, elems_applied;
	uint64_t assigned;
	uint32_t pending_init, nlanes;
	uint32_t dirty, nstate;
	uint64_t lanes_used[RPS_MAX_WORKERS / 64];
};

struct copy_dirty {
	uint64_t key;
	uint32_t slice, reserved;
};

static size_t slice_bytes(const struct rps_shard *sh, const struct rps_slice_meta *m)
{
	const struct rps_optim_opts *o = rps_shard_slice_optim(sh, m);
	size_t n = sizeof(struct copy_slice) + (m->spec ? sizeof(struct rps_optim_wire) : 0);

	n += (size_t)m->nelems * sizeof(float) * (1 + (size_t)rps_optim_state_floats(o->kind));
	if (m->pending_init && m->assigned_map)
		n += (size_t)(m->nelems + 7) / 8;
	if (m->dirty && m->acc)
		n += (size_t)m->nlanes * m->nelems * sizeof(float);
	return n;
}

static int by_place(const void *a, const void *b)
{
	const struct rps_slice_meta *x = *(struct rps_slice_meta *const *)a;
	const struct rps_slice_meta *y = *(struct rps_slice_meta *const *)b;

	return x->data_off < y->data_off ? -1 : x->data_off > y->data_off;
}

static void put(char **p, const void *src, size_t n)
{
	if (n)
		memcpy(*p, src, n);
	*p += n;
}

int rps_repl_copy_save(struct rps_shard *sh, void **buf_p, size_t *len_p, char *why, size_t wl)
{
	struct rps_slice_meta **v;
	struct copy_hdr h;
	size_t nw = sh->p.nworkers, len, n = 0, nd = 0;
	char *buf, *p;

	if (sh->tables) {
		snprintf(why, wl, "shard %u has sparse tables, which a joining backup cannot copy "
				  "yet", sh->p.idx);
		return -ENOTSUP;
	}
	v = rps_calloc(sh->tab.count ? sh->tab.count : 1, sizeof(*v));
	if (!v) {
		snprintf(why, wl, "out of memory");
		return -ENOMEM;
	}
	for (uint64_t i = 0; i <= sh->tab.mask && n < sh->tab.count; i++) {
		struct rps_slice_meta *m = atomic_load(&sh->tab.slots[i]);

		if (m)
			v[n++] = m;
	}
	qsort(v, n, sizeof(*v), by_place); /* declared in the same order: the same places */
	for (struct rps_slice_meta *m = sh->dirty; m; m = m->dirty_next)
		nd++;
	len = sizeof(h) + nw * (sizeof(uint64_t) + 2 + sizeof(uint32_t)) +
	      nw * sh->win * 2 * sizeof(uint32_t) + (sh->seen ? nw * sizeof(*sh->seen) : 0) +
	      nd * sizeof(struct copy_dirty);
	for (size_t i = 0; i < n; i++)
		len += slice_bytes(sh, v[i]);
	buf = rps_malloc(len);
	if (!buf) {
		rps_free(v);
		snprintf(why, wl, "out of memory for %zu bytes", len);
		return -ENOMEM;
	}
	memset(&h, 0, sizeof(h));
	h.magic = COPY_MAGIC;
	h.shard = sh->p.idx;
	h.nworkers = (uint32_t)nw;
	h.win = sh->win;
	h.consistency = sh->p.consistency;
	h.clock = sh->clock;
	h.nslices = n;
	h.ndirty = nd;
	h.has_seen = sh->seen != NULL;
	p = buf;
	put(&p, &h, sizeof(h));
	put(&p, sh->wclock, nw * sizeof(uint64_t));
	put(&p, sh->live, nw);
	put(&p, sh->nwarn, nw);
	put(&p, sh->wpid, nw * sizeof(uint32_t));
	put(&p, sh->applied, nw * sh->win * sizeof(uint32_t));
	put(&p, sh->expected, nw * sh->win * sizeof(uint32_t));
	if (sh->seen)
		put(&p, sh->seen, nw * sizeof(*sh->seen));
	for (size_t i = 0; i < n; i++) {
		struct rps_slice_meta *m = v[i];
		const struct rps_optim_opts *o = rps_shard_slice_optim(sh, m);
		int nstate = rps_optim_state_floats(o->kind);
		struct copy_slice cs;
		uint64_t e = 0;

		memset(&cs, 0, sizeof(cs));
		cs.key = m->key;
		cs.slice = m->slice;
		cs.has_spec = m->spec != NULL;
		cs.nelems = m->nelems;
		cs.step = m->opt.step;
		cs.elems_applied = m->elems_applied;
		cs.assigned = m->assigned;
		cs.pending_init = m->pending_init && m->assigned_map;
		cs.nlanes = m->nlanes;
		cs.dirty = m->dirty && m->acc;
		cs.nstate = (uint32_t)nstate;
		memcpy(cs.lanes_used, m->lanes_used, sizeof(cs.lanes_used));
		put(&p, &cs, sizeof(cs));
		if (m->spec) {
			struct rps_optim_wire w;

			rps_optim_wire_encode(&m->spec->opts, &w);
			put(&p, &w, sizeof(w));
		}
		while (e < m->nelems) { /* the update thread is the writer: read directly */
			uint32_t epc = m->sl.epc;
			uint64_t c = e / epc, i2 = e % epc;
			uint64_t k = RPS_MIN(epc - i2, m->nelems - e);

			put(&p, rps_store_chunk_data(&sh->store, &m->sl, c) + i2, k * sizeof(float));
			e += k;
		}
		if (nstate >= 1)
			put(&p, m->opt.m, m->nelems * sizeof(float));
		if (nstate >= 2)
			put(&p, m->opt.v, m->nelems * sizeof(float));
		if (cs.pending_init)
			put(&p, m->assigned_map, (m->nelems + 7) / 8);
		if (cs.dirty)
			put(&p, m->acc, (size_t)m->nlanes * m->nelems * sizeof(float));
	}
	for (struct rps_slice_meta *m = sh->dirty; m; m = m->dirty_next) {
		struct copy_dirty d = {.key = m->key, .slice = m->slice};

		put(&p, &d, sizeof(d));
	}
	rps_free(v);
	if ((size_t)(p - buf) != len) {
		rps_free(buf);
		snprintf(why, wl, "shard %u: state of %zu bytes, %zu counted", sh->p.idx,
			 (size_t)(p - buf), len);
		return -EPROTO;
	}
	*buf_p = buf;
	*len_p = len;
	return 0;
}

/* ---- loading ------------------------------------------------------------------- */

struct rd {
	const char *p, *end;
};

static int get(struct rd *r, void *dst, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return -EPROTO;
	if (n)
		memcpy(dst, r->p, n);
	r->p += n;
	return 0;
}

static int load_slice(struct rps_shard *sh, struct rd *r, char *why, size_t wl)
{
	struct copy_slice cs;
	struct rps_optim_wire w;
	struct rps_optim_opts spec, *ps = NULL;
	struct rps_declare d;
	struct rps_declare_ack ack;
	struct rps_slice_meta *m;
	char dwhy[RPS_DECLARE_REASON_MAX];
	uint64_t e = 0;
	int rc;

	if (get(r, &cs, sizeof(cs)))
		return -EPROTO;
	if (cs.has_spec) {
		if (get(r, &w, sizeof(w)) || rps_optim_wire_decode(&w, &spec, why, wl))
			return -EPROTO;
		ps = &spec;
	}
	memset(&d, 0, sizeof(d));
	d.key = cs.key;
	d.slice = cs.slice;
	d.shard = sh->p.idx;
	d.nelems = cs.nelems;
	d.init_kind = RPS_INIT_ZEROS; /* the values follow */
	rc = rps_shard_declare_opt(sh, &d, ps, &ack, dwhy, sizeof(dwhy));
	m = rc ? NULL : rps_srv_keytab_lookup(&sh->tab, cs.key, cs.slice);
	if (!m) {
		snprintf(why, wl, "key %llu slice %u of %llu elements: %s",
			 (unsigned long long)cs.key, cs.slice, (unsigned long long)cs.nelems,
			 dwhy[0] ? dwhy : rps_strerror(rc ? rc : -EPROTO));
		return rc ? rc : -EPROTO;
	}
	if ((int)cs.nstate != rps_optim_state_floats(rps_shard_slice_optim(sh, m)->kind) ||
	    (cs.dirty && (cs.nlanes != m->nlanes || !m->acc))) {
		snprintf(why, wl, "key %llu slice %u: another optimizer or BSP sum here (check "
				  "that every server runs the job's settings)",
			 (unsigned long long)cs.key, cs.slice);
		return -EINVAL;
	}
	while (e < m->nelems) {
		uint32_t epc = m->sl.epc;
		uint64_t c = e / epc, i = e % epc;
		uint64_t k = RPS_MIN(epc - i, m->nelems - e);

		rps_store_write_begin(&sh->store, &m->sl, c);
		rc = get(r, rps_store_chunk_data(&sh->store, &m->sl, c) + i, k * sizeof(float));
		rps_store_write_end(&sh->store, &m->sl, c);
		if (rc)
			return rc;
		e += k;
	}
	rps_lp_refresh(sh, m, 0, m->nelems); /* a low-precision copy, if any */
	if (cs.nstate >= 1 && get(r, m->opt.m, m->nelems * sizeof(float)))
		return -EPROTO;
	if (cs.nstate >= 2 && get(r, m->opt.v, m->nelems * sizeof(float)))
		return -EPROTO;
	m->opt.step = cs.step;
	m->elems_applied = cs.elems_applied;
	if (cs.pending_init) {
		m->assigned_map = rps_calloc((m->nelems + 7) / 8, 1);
		if (!m->assigned_map)
			return -ENOMEM;
		if (get(r, m->assigned_map, (m->nelems + 7) / 8))
			return -EPROTO;
		m->pending_init = 1;
		m->assigned = cs.assigned;
	}
	if (cs.dirty) {
		if (get(r, m->acc, (size_t)m->nlanes * m->nelems * sizeof(float)))
			return -EPROTO;
		memcpy(m->lanes_used, cs.lanes_used, sizeof(m->lanes_used));
	}
	return 0;
}

int rps_repl_copy_load(struct rps_shard *sh, const void *buf, size_t len, char *why, size_t wl)
{
	struct rd r = {.p = buf, .end = (const char *)buf + len};
	struct rps_slice_meta *tail = NULL;
	struct copy_hdr h;
	size_t nw = sh->p.nworkers;
	int rc;

	why[0] = 0;
	if (get(&r, &h, sizeof(h)) || h.magic != COPY_MAGIC) {
		snprintf(why, wl, "not a shard's state");
		return -EPROTO;
	}
	if (h.shard != sh->p.idx || h.nworkers != nw || h.win != sh->win ||
	    h.consistency != (uint32_t)sh->p.consistency) {
		snprintf(why, wl, "the state of shard %u (%u workers, window %u, consistency %u) "
				  "does not fit shard %u here (%zu workers, window %u, consistency %u): "
				  "run every server with the job's settings",
			 h.shard, h.nworkers, h.win, h.consistency, sh->p.idx, nw, sh->win,
			 (unsigned)sh->p.consistency);
		return -EINVAL;
	}
	if (rps_srv_keytab_count(&sh->tab)) {
		snprintf(why, wl, "shard %u has slices already", sh->p.idx);
		return -EEXIST;
	}
	if (h.has_seen && !sh->seen) {
		sh->seen = rps_calloc(nw, sizeof(*sh->seen));
		if (!sh->seen) {
			snprintf(why, wl, "out of memory");
			return -ENOMEM;
		}
	}
	if (get(&r, sh->wclock, nw * sizeof(uint64_t)) || get(&r, sh->live, nw) ||
	    get(&r, sh->nwarn, nw) || get(&r, sh->wpid, nw * sizeof(uint32_t)) ||
	    get(&r, sh->applied, nw * sh->win * sizeof(uint32_t)) ||
	    get(&r, sh->expected, nw * sh->win * sizeof(uint32_t)) ||
	    (h.has_seen && get(&r, sh->seen, nw * sizeof(*sh->seen)))) {
		snprintf(why, wl, "truncated");
		return -EPROTO;
	}
	for (uint64_t i = 0; i < h.nslices; i++) {
		rc = load_slice(sh, &r, why, wl);
		if (rc) {
			if (!why[0])
				snprintf(why, wl, "truncated slice record");
			return rc;
		}
	}
	sh->dirty = NULL;
	for (uint64_t i = 0; i < h.ndirty; i++) {
		struct copy_dirty d;
		struct rps_slice_meta *m;

		if (get(&r, &d, sizeof(d)) || !(m = rps_srv_keytab_lookup(&sh->tab, d.key, d.slice))) {
			snprintf(why, wl, "bad list of BSP sums");
			return -EPROTO;
		}
		m->dirty = 1;
		m->dirty_next = NULL;
		if (tail)
			tail->dirty_next = m;
		else
			sh->dirty = m;
		tail = m;
	}
	if (r.p != r.end) {
		snprintf(why, wl, "%zu bytes too many", (size_t)(r.end - r.p));
		return -EPROTO;
	}
	sh->clock = h.clock;
	rps_store_set_clock(&sh->store, h.clock);
	for (size_t w = 0; w < nw; w++)
		rps_store_set_worker_clock(&sh->store, (uint32_t)w, sh->wclock[w]);
	sh->changed = 1;
	return 0;
}
