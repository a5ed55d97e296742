/* rdmaps-ctl's requests that reach every server (include/rdmaps/ctl.h):
 * checkpoint (each shard writes its checkpoint file now) and export (every
 * key's parameters at one clock boundary into a NumPy .npz).
 *
 * One request: connect as "ctl", send CHECKPOINT / EXPORT (struct
 * rps_ctlreq), read what the scheduler relays (DATA, RESULT frames) until
 * DONE (src/proto.h). Export assembles the slices it received per key (slices
 * 0..n-1, each complete, in slice order) and writes the .npz atomically
 * (src/npz.h): nothing is written unless everything came.
 *
 * BSP export: the scheduler asks for the largest shard clock it knows of; a
 * shard that went past it meanwhile answers at its own clock. Then the
 * clocks differ and we ask again with the largest clock we saw (up to
 * CTL_EXPORT_TRIES times).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/control_int.h"
#include "control/ctl_rows.h"
#include "src/alloc.h"
#include "src/log.h"
#include "src/npz.h"
#include "src/proto.h"
#include "src/util.h"

#include <rdmaps/ctl.h>
#include <rdmaps/types.h>

#define CTL_EXPORT_TRIES  4
#define CTL_ANSWER_MARGIN 5000 /* ms after the scheduler's own deadline */
#define CTL_MAX_SLICE	  (1ull << 34)

/* A slice as its pieces arrive: data grows with them (to cap elements), so
 * that what a frame announces (slice_elems) reserves no memory before the
 * data comes. */
struct xslice {
	uint64_t key;
	uint32_t slice, server, shard;
	uint64_t nelems, filled, clock, cap;
	float *data;
};
#define CTL_GROW_MIN 65536u /* elements: the first allocation of a slice, at most */

struct creq_run {
	FILE *out;
	uint8_t op;
	int status; /* DONE's */
	char why[512];
	int failed; /* shards or servers that failed */
	/* export */
	struct xslice *sl;
	size_t n, cap;
	int have_clock, all_bsp;
	uint64_t clock_min, clock_max, nelems;
	int bad;
	char bad_why[256];
	struct ctl_rows rows; /* tables (ctl_rows.c) */
	uint64_t want_rows;   /* table rows the servers' results announced */
};

static void run_free(struct creq_run *r)
{
	for (size_t i = 0; i < r->n; i++)
		rps_free(r->sl[i].data);
	rps_free(r->sl);
	r->sl = NULL;
	r->n = r->cap = 0;
	rps_ctl_rows_free(&r->rows);
}

static void set_bad(struct creq_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_bad(struct creq_run *r, const char *fmt, ...)
{
	va_list ap;

	if (r->bad)
		return;
	r->bad = 1;
	va_start(ap, fmt);
	vsnprintf(r->bad_why, sizeof(r->bad_why), fmt, ap);
	va_end(ap);
}

static void on_data(struct creq_run *r, const void *data, size_t len)
{
	struct rps_export_part p;
	struct xslice *x = r->n ? &r->sl[r->n - 1] : NULL;

	if (len < sizeof(p)) {
		set_bad(r, "a short export frame (%zu bytes)", len);
		return;
	}
	memcpy(&p, data, sizeof(p));
	if (len != sizeof(p) + (size_t)p.count * sizeof(float) || p.slice_elems > CTL_MAX_SLICE ||
	    p.offset > p.slice_elems || p.count > p.slice_elems - p.offset) {
		set_bad(r, "a malformed export frame (key %" PRIu64 " slice %u)", p.key, p.slice);
		return;
	}
	if (!x || x->key != p.key || x->slice != p.slice || x->server != p.server ||
	    x->shard != p.shard) {
		if (p.offset) {
			set_bad(r,
				"key %" PRIu64 " slice %u: piece at %" PRIu64 " without its start",
				p.key, p.slice, p.offset);
			return;
		}
		if (r->n == r->cap) {
			size_t cap = r->cap ? 2 * r->cap : 64;
			struct xslice *n = rps_realloc(r->sl, cap * sizeof(*n));

			if (!n) {
				set_bad(r, "out of memory");
				return;
			}
			r->sl = n;
			r->cap = cap;
		}
		x = &r->sl[r->n];
		memset(x, 0, sizeof(*x));
		r->n++;
		x->key = p.key;
		x->slice = p.slice;
		x->server = p.server;
		x->shard = p.shard;
		x->nelems = p.slice_elems;
		x->clock = p.clock;
	}
	if (p.offset != x->filled || p.slice_elems != x->nelems) {
		set_bad(r, "key %" PRIu64 " slice %u: pieces out of order", p.key, p.slice);
		return;
	}
	if (x->filled + p.count > x->cap) {
		/* double, up to the slice; never more than twice what came */
		uint64_t cap = RPS_MAX(2 * x->cap, (uint64_t)CTL_GROW_MIN);
		float *d;

		cap = RPS_MIN(RPS_MAX(cap, x->filled + p.count), x->nelems);
		d = rps_realloc(x->data, cap * sizeof(float));
		if (!d) {
			set_bad(r, "out of memory for key %" PRIu64 " (%" PRIu64 " elements)",
				p.key, cap);
			return;
		}
		x->data = d;
		x->cap = cap;
	}
	if (p.count)
		memcpy(x->data + p.offset, (const char *)data + sizeof(p),
		       (size_t)p.count * sizeof(float));
	x->filled += p.count;
}

static void on_result(struct creq_run *r, const void *data, size_t len)
{
	struct rps_ctlres res;
	struct rps_ctlres_shard s;

	if (len < sizeof(res)) {
		set_bad(r, "a short result (%zu bytes)", len);
		return;
	}
	memcpy(&res, data, sizeof(res));
	res.why[sizeof(res.why) - 1] = '\0';
	if (res.status || len != sizeof(res) + (size_t)res.num_shards * sizeof(s)) {
		if (!res.status)
			set_bad(r, "server %u: a malformed result", res.server);
		r->failed++;
		return; /* the scheduler's DONE names it */
	}
	if (res.consistency != RPS_BSP)
		r->all_bsp = 0;
	for (uint32_t k = 0; k < res.num_shards; k++) {
		memcpy(&s, (const char *)data + sizeof(res) + k * sizeof(s), sizeof(s));
		s.text[sizeof(s.text) - 1] = '\0';
		if (s.status) {
			fprintf(stderr, "rdmaps-ctl: server %u shard %u: %s failed: %s\n",
				res.server, s.shard,
				r->op == RPS_OP_CHECKPOINT ? "checkpoint" : "export",
				s.text[0] ? s.text : rps_strerror(s.status));
			r->failed++;
			continue;
		}
		if (r->op == RPS_OP_CHECKPOINT)
			fprintf(r->out, "server %u shard %u clock %" PRIu64 " %s\n", res.server,
				s.shard, s.clock, s.text);
		else
			r->want_rows += s.nrows;
		if (!r->have_clock || s.clock < r->clock_min)
			r->clock_min = s.clock;
		if (!r->have_clock || s.clock > r->clock_max)
			r->clock_max = s.clock;
		r->have_clock = 1;
	}
}

/* A frame of the answer (rps_ctl_client_wait): done at DONE. */
static int creq_frame(void *arg, const struct rps_tr_event *ev, int *done_p)
{
	struct creq_run *r = arg;

	if (ev->hdr.op != r->op || ev->hdr.req_id != 1)
		return -EAGAIN;
	switch (ev->hdr.aux) {
	case RPS_CTLREQ_DATA:
		if (r->op == RPS_OP_EXPORT && !r->bad)
			on_data(r, ev->data, ev->data_len);
		break;
	case RPS_CTLREQ_ROWS:
		if (r->op == RPS_OP_EXPORT && !r->bad) {
			char why[200];

			if (rps_ctl_rows_add(&r->rows, ev->data, ev->data_len, why, sizeof(why)))
				set_bad(r, "%s", why);
		}
		break;
	case RPS_CTLREQ_RESULT:
		on_result(r, ev->data, ev->data_len);
		break;
	case RPS_CTLREQ_DONE:
		*done_p = 1;
		r->status = ev->hdr.status;
		/* the scheduler's text, shown to the user: made safe */
		rps_log_escape(ev->data, ev->data_len, r->why, sizeof(r->why));
		break;
	}
	return 0;
}

/* One request: 0 with r filled (r->status says how it ended), or a local
 * failure (reported). */
static int creq_send_wait(const struct rps_ctl_opts *opts, uint8_t op,
			  const struct rps_ctlreq *req, struct creq_run *r)
{
	struct rps_ctl_opts o;
	struct rps_transport *tr;
	struct rps_conn *conn = NULL;
	struct rps_frame_hdr h;
	struct iovec iov = {.iov_base = (void *)req, .iov_len = sizeof(*req)};
	int rc;

	rc = rps_ctl_client_open(opts, &o, &tr, &conn);
	if (rc)
		return rc;
	r->op = op;
	r->all_bsp = 1;
	rps_proto_hdr_init(&h, op, sizeof(*req), 1);
	h.aux = RPS_CTLREQ_REQ;
	rc = rps_tr_post_send(conn, &h, &iov, 1, 0);
	if (rc) {
		fprintf(stderr, "rdmaps-ctl: sending to the scheduler at %s: %s\n", o.scheduler,
			rps_strerror(rc));
		goto out;
	}
	rc = rps_ctl_client_wait(&o, tr, (int)req->timeout_ms + CTL_ANSWER_MARGIN, creq_frame, r);
out:
	rps_tr_close(conn);
	rps_transport_destroy(tr);
	return rc;
}

/* The scheduler runs one checkpoint or export at a time and answers another
 * -EBUSY: ask again every 100 ms (for up to the request's timeout), so an
 * operator's request and a job's checkpoint-after-eval wait for each other
 * instead of failing. */
static int creq_once(const struct rps_ctl_opts *opts, uint8_t op, const struct rps_ctlreq *req,
		     struct creq_run *r)
{
	FILE *out = r->out;
	int waited_ms = 0, rc;

	for (;;) {
		rc = creq_send_wait(opts, op, req, r);
		if (rc || r->status != -EBUSY || waited_ms >= (int)req->timeout_ms)
			return rc;
		run_free(r);
		memset(r, 0, sizeof(*r));
		r->out = out;
		rps_sleep_ms(100);
		waited_ms += 100;
	}
}

static void req_init(const struct rps_ctl_opts *opts, struct rps_ctlreq *req)
{
	int t = opts && opts->field_mask & RPS_CTL_OPT_TIMEOUT_MS ? opts->timeout_ms : 0;
	struct rps_config cfg;

	if (t <= 0 && rps_config_init(&cfg) == 0)
		t = cfg.timeout_ms;
	memset(req, 0, sizeof(*req));
	req->timeout_ms = t > 0 ? (uint32_t)t : 30000;
}

int rps_ctl_checkpoint(const struct rps_ctl_opts *opts, FILE *out)
{
	struct creq_run r;
	struct rps_ctlreq req;
	int rc;

	memset(&r, 0, sizeof(r));
	r.out = out;
	req_init(opts, &req);
	rc = creq_once(opts, RPS_OP_CHECKPOINT, &req, &r);
	fflush(out);
	if (rc)
		return rc;
	if (r.status) {
		fprintf(stderr, "rdmaps-ctl: checkpoint failed: %s\n",
			r.why[0] ? r.why : rps_strerror(r.status));
		return r.status < 0 ? r.status : -EIO;
	}
	if (r.failed || r.bad) {
		fprintf(
		    stderr,
		    "rdmaps-ctl: checkpoint incomplete: %d shard(s) failed%s%s (see the servers' "
		    "logs; check the checkpoint directory's space and permissions)\n",
		    r.failed, r.bad ? ": " : "", r.bad ? r.bad_why : "");
		return -EIO;
	}
	return 0;
}

static int cmp_slice(const void *a, const void *b)
{
	const struct xslice *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->slice < y->slice ? -1 : x->slice > y->slice;
}

/* The received slices as one entry per key. 0, or -EPROTO (reported). */
static int assemble(struct creq_run *r, struct rps_npz_entry **e_p, size_t *n_p)
{
	struct rps_npz_entry *e;
	size_t ne = 0, i = 0;

	if (r->n) /* an export of no slice: r->sl is NULL, which qsort must not get */
		qsort(r->sl, r->n, sizeof(*r->sl), cmp_slice);
	e = rps_calloc(r->n ? r->n : 1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	while (i < r->n) {
		uint64_t key = r->sl[i].key, total = 0;
		size_t j = i, at = 0;

		for (; j < r->n && r->sl[j].key == key; j++) {
			const struct xslice *x = &r->sl[j];

			if (x->slice != j - i || x->filled != x->nelems) {
				fprintf(stderr,
					"rdmaps-ctl: export: key %" PRIu64 ": slice %u %s (slices "
					"must be 0..n-1, each complete)\n",
					key, x->slice,
					x->filled != x->nelems ? "incomplete"
					: x->slice < j - i     ? "twice"
							       : "follows a missing slice");
				goto err;
			}
			total += x->nelems;
		}
		snprintf(e[ne].name, sizeof(e[ne].name), "%" PRIu64, key);
		e[ne].ndim = 1;
		e[ne].shape[0] = total;
		e[ne].nelems = total;
		e[ne].data = rps_malloc(total ? total * sizeof(float) : 1);
		if (!e[ne].data)
			goto err;
		for (size_t k = i; k < j; k++) {
			if (r->sl[k].nelems) /* an empty slice has no data (NULL) */
				memcpy(e[ne].data + at, r->sl[k].data,
				       r->sl[k].nelems * sizeof(float));
			at += r->sl[k].nelems;
		}
		r->nelems += total;
		ne++;
		i = j;
	}
	*e_p = e;
	*n_p = ne;
	return 0;
err:
	for (size_t k = 0; k < ne + 1 && k < r->n; k++)
		rps_free(e[k].data);
	rps_free(e);
	return -EPROTO;
}

/* Refuse a path we cannot write before asking the servers for anything. */
static int check_dest(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!path[0] || (slash && !slash[1])) {
		fprintf(stderr, "rdmaps-ctl: export: '%s' is not a file name\n", path);
		return -EINVAL;
	}
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr,
			"rdmaps-ctl: export: cannot write %s: directory %s does not exist\n", path,
			dir);
		return -ENOENT;
	}
	if (access(dir, W_OK | X_OK)) {
		fprintf(stderr,
			"rdmaps-ctl: export: cannot write %s: directory %s is not writable\n", path,
			dir);
		return -EACCES;
	}
	return 0;
}

int rps_ctl_export(const struct rps_ctl_opts *opts, const char *path, FILE *out)
{
	struct rps_npz_entry *e = NULL;
	struct creq_run r;
	struct rps_ctlreq req;
	size_t ne = 0, nkeys;
	char tabs[64] = "";
	int rc, tries = 0;

	if (!path)
		return -EINVAL;
	rc = check_dest(path);
	if (rc)
		return rc;
	req_init(opts, &req);
	for (;;) {
		memset(&r, 0, sizeof(r));
		r.out = out;
		rc = creq_once(opts, RPS_OP_EXPORT, &req, &r);
		if (rc)
			goto out;
		if (r.status) {
			fprintf(stderr, "rdmaps-ctl: export failed: %s; nothing written\n",
				r.why[0] ? r.why : rps_strerror(r.status));
			rc = r.status < 0 ? r.status : -EIO;
			goto out;
		}
		if (r.failed || r.bad) {
			fprintf(stderr, "rdmaps-ctl: export failed: %s; nothing written\n",
				r.bad ? r.bad_why
				      : "a shard failed (see above and the servers' logs)");
			rc = -EIO;
			goto out;
		}
		if (!r.all_bsp || r.clock_min == r.clock_max || ++tries >= CTL_EXPORT_TRIES)
			break;
		/* BSP: a shard went past the scheduler's target meanwhile */
		req.clock = (uint32_t)r.clock_max;
		req.flags = RPS_CTLREQ_CLOCK;
		run_free(&r);
	}
	if (r.all_bsp && r.clock_min != r.clock_max) {
		fprintf(stderr,
			"rdmaps-ctl: export: the shards answered at clocks %" PRIu64 "..%" PRIu64
			" %d times: the job moves too fast; nothing written, try again\n",
			r.clock_min, r.clock_max, tries);
		rc = -EAGAIN;
		goto out;
	}
	rc = assemble(&r, &e, &ne);
	if (rc)
		goto out;
	nkeys = ne;
	rc = rps_ctl_rows_entries(&r.rows, r.want_rows, &e, &ne);
	if (rc) {
		fprintf(stderr, "rdmaps-ctl: export failed: %s; nothing written\n",
			rc == -ENOMEM ? "out of memory for the tables' rows"
				      : "the tables' rows are incomplete (see above)");
		goto out;
	}
	rc = rps_npz_write(path, e, ne);
	if (rc) {
		fprintf(stderr, "rdmaps-ctl: export: writing %s: %s; nothing written\n", path,
			rps_strerror(rc));
		goto out;
	}
	if (r.rows.ntables)
		snprintf(tabs, sizeof(tabs), ", %u tables, %" PRIu64 " rows", r.rows.ntables,
			 r.rows.nrows);
	if (r.all_bsp)
		fprintf(out, "exported clock %" PRIu64 ": %zu keys, %" PRIu64 " elements%s to %s\n",
			r.clock_min, nkeys, r.nelems, tabs, path);
	else
		fprintf(
		    out,
		    "exported clocks %" PRIu64 "..%" PRIu64
		    " (asp/ssp: each shard as it was when it took the request): %zu keys, %" PRIu64
		    " elements%s to %s\n",
		    r.clock_min, r.clock_max, nkeys, r.nelems, tabs, path);
	fflush(out);
out:
	rps_npz_free(e, ne);
	run_free(&r);
	return rc;
}
