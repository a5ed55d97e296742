/* A shard's tables in its checkpoints: one file per table next to the
 * shard's checkpoint file of the same clock, written before that file is
 * committed and read after it (docs/tables.md, Checkpoints).
 *
 *   <dir>/server<R>-shard<S>-clock<C>.table<T>
 *   struct table_file_hdr (96 bytes), struct rps_optim_wire (80 bytes), then
 *   nrows records: u64 id, u32 step, u32 0, float row[dim], float state[nstate][dim]
 *   (rows in slot order; nstate as the optimizer's kind: 0, 1 or 2). Rows of
 *   an fp16 / bf16 table are written widened to fp32 (exact) and rounded back
 *   when read (exact again): restored bit for bit.
 * payload_crc: CRC-32C of everything after the header; hdr_crc: of the
 * header's first 92 bytes (the rest). Written to "<name>.tmp", fsync'ed, renamed.
 * The shard's checkpoint file commits after its tables' files: a .ckpt file
 * always has its tables beside it; table files with no .ckpt of their clock
 * (a crash in between, or pruned checkpoints) are removed at the next commit.
 */
#include "server/table.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmaps/table.h>

#include "src/alloc.h"
#include "src/ckpt.h"
#include "src/log.h"
#include "src/optim.h"

#define TABLE_MAGIC   "RDPSTABL"
#define TABLE_VERSION 1u

struct table_file_hdr {
	char magic[8];
	uint32_t version;
	uint32_t hdr_bytes;
	uint32_t server_rank;
	uint32_t shard;
	uint32_t table;
	uint32_t dim;
	uint32_t precision;
	uint32_t init;
	float init_scale;
	uint32_t nstate;
	uint64_t seed;
	uint64_t clock;
	uint64_t nrows;
	uint64_t capacity_hint;
	uint64_t payload_bytes;
	uint32_t payload_crc;
	uint32_t hdr_crc;
};
_Static_assert(sizeof(struct table_file_hdr) == 96, "table file header is 96 bytes");

static int table_path(char *buf, size_t len, const char *dir, uint32_t rank, uint32_t shard,
		      uint64_t clock, uint32_t table, const char *suffix)
{
	int n = snprintf(buf, len, "%s/server%u-shard%u-clock%llu.table%u%s", dir, rank, shard,
			 (unsigned long long)clock, table, suffix);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

struct wbuf {
	FILE *f;
	uint32_t crc;
	uint64_t bytes;
	int err;
};

static void put(struct wbuf *b, const void *p, size_t n)
{
	if (b->err)
		return;
	if (fwrite(p, 1, n, b->f) != n) {
		b->err = errno ? -errno : -EIO;
		return;
	}
	b->crc = rps_crc32c(b->crc, p, n);
	b->bytes += n;
}

static int write_table(const struct rps_shard_table *t, const char *dir, uint32_t rank,
		       uint32_t shard, uint64_t clock)
{
	char tmp[RPS_CKPT_PATH_MAX + 32], path[RPS_CKPT_PATH_MAX + 32];
	const struct rps_rowtab *rt = &t->rt;
	struct table_file_hdr h;
	struct rps_optim_wire ow;
	struct wbuf b = {0};
	uint32_t zero = 0;
	float *wide = NULL;
	int rc, fd;

	rc = table_path(path, sizeof(path), dir, rank, shard, clock, t->decl.table, "");
	if (!rc)
		rc = table_path(tmp, sizeof(tmp), dir, rank, shard, clock, t->decl.table, ".tmp");
	if (rc)
		return rc;
	b.f = fopen(tmp, "wb");
	if (!b.f) {
		rc = -errno;
		RPS_ERR("checkpoint of table %u: %s: %s", t->decl.table, tmp, strerror(-rc));
		return rc;
	}
	memset(&h, 0, sizeof(h));
	if (fwrite(&h, sizeof(h), 1, b.f) != 1) /* placeholder, rewritten at the end */
		b.err = -EIO;
	rps_optim_wire_encode(&t->optim, &ow);
	put(&b, &ow, sizeof(ow));
	if (rt->prec != RPS_TABLE_FP32 && !(wide = rps_malloc((size_t)rt->dim * 4)))
		b.err = -ENOMEM;
	for (uint64_t s = 0; s < rt->nrows && !b.err; s++) {
		uint64_t id = rps_rowtab_slot_id(rt, s);

		if (!rps_rowtab_live(rt, s))
			continue; /* evicted */
		put(&b, &id, 8);
		put(&b, rps_rowtab_step(rt, s), 4);
		put(&b, &zero, 4);
		if (wide) {
			rps_rowtab_load(rt, s, wide);
			put(&b, wide, (size_t)rt->dim * 4);
		} else {
			put(&b, rps_rowtab_data(rt, s), (size_t)rt->dim * 4);
		}
		if (rt->state_floats >= 1)
			put(&b, rps_rowtab_m(rt, s), (size_t)rt->dim * 4);
		if (rt->state_floats >= 2)
			put(&b, rps_rowtab_v(rt, s), (size_t)rt->dim * 4);
	}
	rps_free(wide);
	memcpy(h.magic, TABLE_MAGIC, 8);
	h.version = TABLE_VERSION;
	h.hdr_bytes = sizeof(h);
	h.server_rank = rank;
	h.shard = shard;
	h.table = t->decl.table;
	h.dim = t->decl.dim;
	h.precision = t->decl.precision;
	h.init = t->decl.init;
	h.init_scale = t->decl.init_scale;
	h.nstate = (uint32_t)rt->state_floats;
	h.seed = t->decl.seed;
	h.clock = clock;
	h.nrows = rps_rowtab_rows(rt);
	h.capacity_hint = t->decl.capacity_hint;
	h.payload_bytes = b.bytes;
	h.payload_crc = b.crc;
	h.hdr_crc = rps_crc32c(0, &h, offsetof(struct table_file_hdr, hdr_crc));
	if (!b.err && (fseek(b.f, 0, SEEK_SET) || fwrite(&h, sizeof(h), 1, b.f) != 1))
		b.err = -EIO;
	if (!b.err && fflush(b.f))
		b.err = -errno;
	fd = fileno(b.f);
	if (!b.err && fsync(fd))
		b.err = -errno;
	if (fclose(b.f) && !b.err)
		b.err = -EIO;
	if (!b.err && rename(tmp, path))
		b.err = -errno;
	if (b.err) {
		RPS_ERR("checkpoint of table %u: %s: %s", t->decl.table, tmp, strerror(-b.err));
		unlink(tmp);
	}
	return b.err;
}

int rps_shard_tables_ckpt_write(struct rps_shard *sh, const char *dir, uint32_t rank,
				uint64_t clock)
{
	const struct rps_shard_tables *ts = sh->tables;
	int rc = 0;

	for (uint32_t i = 0; ts && i < ts->n && !rc; i++)
		rc = write_table(ts->t[i], dir, rank, sh->p.idx, clock);
	if (!rc)
		rps_shard_tables_ckpt_written(sh);
	return rc;
}

/* "server<R>-shard<S>-clock<C>.table<T>[.tmp]": 1 with the numbers, else 0. */
static int parse_table_name(const char *name, uint32_t *rank, uint32_t *shard, uint64_t *clock)
{
	unsigned r, s, t;
	unsigned long long c;
	int n = 0;

	if (sscanf(name, "server%u-shard%u-clock%llu.table%u%n", &r, &s, &c, &t, &n) != 4 || !n)
		return 0;
	if (name[n] && strcmp(name + n, ".tmp"))
		return 0;
	*rank = r;
	*shard = s;
	*clock = c;
	return 1;
}

void rps_shard_tables_ckpt_prune(struct rps_shard *sh, const char *dir, uint32_t rank)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		char ck[RPS_CKPT_PATH_MAX], tp[RPS_CKPT_PATH_MAX + 300];
		uint32_t r, s;
		uint64_t c;

		if (!parse_table_name(de->d_name, &r, &s, &c) || r != rank || s != sh->p.idx)
			continue;
		if (!rps_ckpt_path(dir, r, s, c, ck, sizeof(ck)) && access(ck, F_OK) == 0 &&
		    !strstr(de->d_name, ".tmp"))
			continue; /* its checkpoint is there */
		snprintf(tp, sizeof(tp), "%s/%s", dir, de->d_name);
		if (unlink(tp))
			RPS_WARN("checkpoint: cannot remove %s: %m", tp);
	}
	closedir(d);
}

static int read_table(struct rps_shard *sh, const char *path, uint32_t rank, uint64_t clock)
{
	struct table_file_hdr h;
	struct rps_optim_wire ow;
	struct rps_optim_opts o;
	struct rps_table_decl d;
	struct rps_shard_table *t;
	char why[RPS_DECLARE_REASON_MAX];
	size_t rec;
	char *buf = NULL;
	uint32_t crc;
	int rc = -EBADMSG;
	FILE *f = fopen(path, "rb");

	if (!f) {
		rc = -errno;
		RPS_ERR("restore: %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fread(&h, sizeof(h), 1, f) != 1 || memcmp(h.magic, TABLE_MAGIC, 8) ||
	    h.hdr_bytes != sizeof(h) ||
	    h.hdr_crc != rps_crc32c(0, &h, offsetof(struct table_file_hdr, hdr_crc))) {
		RPS_ERR("restore: %s: not a table checkpoint, or its header is corrupt", path);
		goto out;
	}
	if (h.version != TABLE_VERSION) {
		RPS_ERR("restore: %s: table file version %u, this build reads %u", path, h.version,
			TABLE_VERSION);
		rc = -EPROTONOSUPPORT;
		goto out;
	}
	if (h.server_rank != rank || h.shard != sh->p.idx || h.clock != clock || !h.dim ||
	    h.dim > RPS_TABLE_MAX_DIM || h.nstate > 2) {
		RPS_ERR("restore: %s: for server %u shard %u clock %llu dim %u, not this shard's",
			path, h.server_rank, h.shard, (unsigned long long)h.clock, h.dim);
		rc = -EINVAL;
		goto out;
	}
	rec = 16 + (size_t)h.dim * 4 * (1 + h.nstate);
	if (h.payload_bytes != sizeof(ow) + h.nrows * rec) {
		RPS_ERR("restore: %s: %llu payload bytes for %llu rows of dim %u", path,
			(unsigned long long)h.payload_bytes, (unsigned long long)h.nrows, h.dim);
		goto out;
	}
	if (fread(&ow, sizeof(ow), 1, f) != 1)
		goto out;
	crc = rps_crc32c(0, &ow, sizeof(ow));
	if (rps_optim_wire_decode(&ow, &o, why, sizeof(why))) {
		RPS_ERR("restore: %s: optimizer: %s", path, why);
		goto out;
	}
	if (rps_optim_state_floats(o.kind) != (int)h.nstate) {
		RPS_ERR("restore: %s: %u state arrays for optimizer %s", path, h.nstate,
			rps_optim_kind_name(o.kind));
		goto out;
	}
	memset(&d, 0, sizeof(d));
	d.table = h.table;
	d.shard = sh->p.idx;
	d.dim = h.dim;
	d.precision = h.precision;
	d.init = h.init;
	d.init_scale = h.init_scale;
	d.seed = h.seed;
	d.capacity_hint = h.capacity_hint > h.nrows ? h.capacity_hint : h.nrows;
	rc = rps_shard_table_declare(sh, &d, &o, why, sizeof(why));
	if (rc) {
		RPS_ERR("restore: %s: %s", path, why);
		goto out;
	}
	rc = -EBADMSG;
	t = rps_shard_table_find(sh, h.table);
	buf = rps_malloc(rec);
	if (!t || !buf)
		goto out;
	for (uint64_t i = 0; i < h.nrows; i++) {
		uint64_t id;
		uint32_t step;
		int64_t s;

		if (fread(buf, rec, 1, f) != 1) {
			RPS_ERR("restore: %s: truncated at row %llu", path, (unsigned long long)i);
			goto out;
		}
		crc = rps_crc32c(crc, buf, rec);
		memcpy(&id, buf, 8);
		memcpy(&step, buf + 8, 4);
		s = rps_rowtab_put(&t->rt, id, (const float *)(buf + 16));
		if (s < 0) {
			rc = (int)s;
			goto out;
		}
		*rps_rowtab_step(&t->rt, (uint64_t)s) = step;
		if (h.nstate >= 1)
			memcpy(rps_rowtab_m(&t->rt, (uint64_t)s), buf + 16 + (size_t)h.dim * 4,
			       (size_t)h.dim * 4);
		if (h.nstate >= 2)
			memcpy(rps_rowtab_v(&t->rt, (uint64_t)s), buf + 16 + (size_t)h.dim * 8,
			       (size_t)h.dim * 4);
	}
	if (crc != h.payload_crc) {
		RPS_ERR("restore: %s: payload checksum mismatch", path);
		goto out;
	}
	RPS_INFO("shard %u: table %u restored from %s: %llu rows of dim %u", sh->p.idx, h.table,
		 path, (unsigned long long)h.nrows, h.dim);
	rc = 0;
out:
	rps_free(buf);
	fclose(f);
	return rc;
}

int rps_shard_tables_ckpt_restore(struct rps_shard *sh, const char *dir, uint32_t rank,
				  uint64_t clock)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int rc = 0;

	if (!d)
		return -errno;
	while (!rc && (de = readdir(d))) {
		char tp[RPS_CKPT_PATH_MAX + 300];
		uint32_t r, s;
		uint64_t c;

		if (!parse_table_name(de->d_name, &r, &s, &c) || r != rank || s != sh->p.idx ||
		    c != clock || strstr(de->d_name, ".tmp"))
			continue;
		snprintf(tp, sizeof(tp), "%s/%s", dir, de->d_name);
		rc = read_table(sh, tp, rank, clock);
	}
	closedir(d);
	return rc;
}
