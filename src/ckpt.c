/* Shard checkpoints: streaming writer (temp file, fsync, rename, fsync dir),
 * retention, and a verifying reader. See src/ckpt.h for the format. */
#include "src/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdmaps/types.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint files are little-endian; this build writes structs as they are in memory"
#endif

#define CKPT_BUF_BYTES	 (1u << 20)
#define CKPT_HDR_CRC_OFF offsetof(struct rps_ckpt_hdr, hdr_crc)

/* ---- CRC-32C (Castagnoli), slice-by-8 --------------------------------- */

#define CRC32C_POLY 0x82f63b78u

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tab_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			crc_tab[k][i] =
			    (crc_tab[k - 1][i] >> 8) ^ crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

uint32_t rps_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_tab_init);
	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= crc;
		crc = crc_tab[7][v & 0xff] ^ crc_tab[6][(v >> 8) & 0xff] ^
		      crc_tab[5][(v >> 16) & 0xff] ^ crc_tab[4][(v >> 24) & 0xff] ^
		      crc_tab[3][(v >> 32) & 0xff] ^ crc_tab[2][(v >> 40) & 0xff] ^
		      crc_tab[1][(v >> 48) & 0xff] ^ crc_tab[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* ---- names ------------------------------------------------------------- */

int rps_ckpt_path(const char *dir, uint32_t server_rank, uint32_t shard, uint64_t clock, char *buf,
		  size_t len)
{
	int n = snprintf(buf, len, "%s/server%" PRIu32 "-shard%" PRIu32 "-clock%" PRIu64 ".ckpt",
			 dir, server_rank, shard, clock);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int rps_ckpt_parse_name(const char *name, uint32_t *rank_p, uint32_t *shard_p, uint64_t *clock_p)
{
	unsigned int r, s;
	unsigned long long c;
	char canon[96];
	int n = 0, kind;

	if (sscanf(name, "server%u-shard%u-clock%llu.ckpt%n", &r, &s, &c, &n) != 3 || n == 0)
		return 0;
	if (name[n] == '\0')
		kind = 1;
	else if (!strcmp(name + n, ".tmp"))
		kind = 2;
	else
		return 0;
	snprintf(canon, sizeof(canon), "server%u-shard%u-clock%llu.ckpt", r, s, c);
	if (strlen(canon) != (size_t)n || strncmp(canon, name, (size_t)n))
		return 0;
	*rank_p = r;
	*shard_p = s;
	*clock_p = c;
	return kind;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0) {
		rc = -errno;
		RPS_ERR("checkpoint dir %s: open: %s", dir, strerror(-rc));
		return rc;
	}
	if (fsync(fd) < 0) {
		rc = -errno;
		RPS_ERR("checkpoint dir %s: fsync: %s", dir, strerror(-rc));
	}
	close(fd);
	return rc;
}

static int write_full(int fd, const void *buf, size_t len, int64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = off >= 0 ? pwrite(fd, p, len, (off_t)off) : write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		if (off >= 0)
			off += n;
	}
	return 0;
}

/* ---- writer ------------------------------------------------------------ */

struct rps_ckpt_writer {
	int fd;
	int err; /* first error; sticky */
	int in_slice;
	uint64_t slice_left; /* floats still expected for the open slice */
	uint32_t crc;	     /* running CRC-32C of the payload */
	struct rps_ckpt_hdr hdr;
	uint8_t *buf;
	size_t used;
	char dir[RPS_CKPT_PATH_MAX];
	char tmp[RPS_CKPT_PATH_MAX];
	char final[RPS_CKPT_PATH_MAX];
};

int rps_ckpt_writer_open(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
			 uint64_t clock, struct rps_ckpt_writer **w_p)
{
	struct rps_ckpt_writer *w;
	int rc;

	if (!dir || !*dir || num_shards == 0 || shard >= num_shards) {
		RPS_ERR("checkpoint writer: bad arguments (dir %s, shard %u of %u)",
			dir ? dir : "(null)", shard, num_shards);
		return -EINVAL;
	}
	w = rps_calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->buf = rps_malloc(CKPT_BUF_BYTES);
	if (!w->buf) {
		rc = -ENOMEM;
		goto err_free_w;
	}
	if (strlen(dir) >= sizeof(w->dir) ||
	    rps_ckpt_path(dir, server_rank, shard, clock, w->final, sizeof(w->final)) ||
	    snprintf(w->tmp, sizeof(w->tmp), "%s.tmp", w->final) >= (int)sizeof(w->tmp)) {
		RPS_ERR("checkpoint dir %s: path too long", dir);
		rc = -ENAMETOOLONG;
		goto err_free_buf;
	}
	strcpy(w->dir, dir);
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		rc = -errno;
		RPS_ERR("checkpoint %s: create: %s", w->tmp, strerror(-rc));
		goto err_free_buf;
	}
	memcpy(w->hdr.magic, RPS_CKPT_MAGIC, sizeof(w->hdr.magic));
	w->hdr.version = RPS_CKPT_VERSION;
	w->hdr.hdr_bytes = sizeof(w->hdr);
	w->hdr.server_rank = server_rank;
	w->hdr.shard = shard;
	w->hdr.num_shards = num_shards;
	w->hdr.clock = clock;
	w->hdr.key_min = UINT64_MAX;
	/* room for the header, written last */
	memset(w->buf, 0, sizeof(w->hdr));
	w->used = sizeof(w->hdr);
	*w_p = w;
	return 0;

err_free_buf:
	rps_free(w->buf);
err_free_w:
	rps_free(w);
	return rc;
}

static int w_flush(struct rps_ckpt_writer *w)
{
	int rc;

	if (!w->used)
		return 0;
	rc = write_full(w->fd, w->buf, w->used, -1);
	if (rc) {
		RPS_ERR("checkpoint %s: write: %s", w->tmp, strerror(-rc));
		w->err = rc;
		return rc;
	}
	w->used = 0;
	return 0;
}

/* Payload bytes: checksummed and counted. */
static int w_put(struct rps_ckpt_writer *w, const void *data, size_t len)
{
	const uint8_t *p = data;

	w->crc = rps_crc32c(w->crc, data, len);
	w->hdr.payload_bytes += len;
	while (len) {
		size_t n = RPS_MIN(len, CKPT_BUF_BYTES - w->used);

		memcpy(w->buf + w->used, p, n);
		w->used += n;
		p += n;
		len -= n;
		if (w->used == CKPT_BUF_BYTES && w_flush(w))
			return w->err;
	}
	return 0;
}

static int w_fail(struct rps_ckpt_writer *w, const char *why)
{
	RPS_ERR("checkpoint %s: %s", w->tmp, why);
	w->err = -EINVAL;
	return -EINVAL;
}

int rps_ckpt_writer_begin_slice(struct rps_ckpt_writer *w, const struct rps_ckpt_slice *s)
{
	struct rps_ckpt_slice_rec rec;

	if (w->err)
		return w->err;
	if (w->in_slice)
		return w_fail(w, "slice begun before the previous one ended");
	if (s->nstate > 2 || s->nelems == 0 || s->kind > RPS_OPT_ADAM ||
	    s->nelems > UINT64_MAX / 4 / 3)
		return w_fail(w, "bad slice (nstate > 2, nelems 0 or too large, or unknown kind)");
	memset(&rec, 0, sizeof(rec));
	rec.key = s->key;
	rec.slice = s->slice;
	rec.kind = s->kind;
	rec.nelems = s->nelems;
	rec.step = s->step;
	rec.nstate = s->nstate;
	if (w_put(w, &rec, sizeof(rec)))
		return w->err;
	w->in_slice = 1;
	w->slice_left = s->nelems * (1 + s->nstate);
	w->hdr.nslices++;
	w->hdr.key_min = RPS_MIN(w->hdr.key_min, s->key);
	w->hdr.key_max = RPS_MAX(w->hdr.key_max, s->key);
	return 0;
}

int rps_ckpt_writer_append(struct rps_ckpt_writer *w, const float *data, uint64_t n)
{
	if (w->err)
		return w->err;
	if (!w->in_slice || n > w->slice_left)
		return w_fail(w, "more floats appended than the slice holds");
	w->slice_left -= n;
	return w_put(w, data, n * sizeof(float));
}

int rps_ckpt_writer_end_slice(struct rps_ckpt_writer *w)
{
	if (w->err)
		return w->err;
	if (!w->in_slice || w->slice_left)
		return w_fail(w, "slice ended with floats missing (or none begun)");
	w->in_slice = 0;
	return 0;
}

int rps_ckpt_writer_add(struct rps_ckpt_writer *w, const struct rps_ckpt_slice *s)
{
	int rc;

	if (w->err)
		return w->err;
	if (!s->params || (s->nstate > 0 && !s->state[0]) || (s->nstate > 1 && !s->state[1]))
		return w_fail(w, "slice without its arrays");
	rc = rps_ckpt_writer_begin_slice(w, s);
	if (rc)
		return rc;
	rc = rps_ckpt_writer_append(w, s->params, s->nelems);
	for (uint32_t i = 0; !rc && i < s->nstate; i++)
		rc = rps_ckpt_writer_append(w, s->state[i], s->nelems);
	return rc ? rc : rps_ckpt_writer_end_slice(w);
}

static void writer_free(struct rps_ckpt_writer *w)
{
	rps_free(w->buf);
	rps_free(w);
}

void rps_ckpt_writer_abort(struct rps_ckpt_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (unlink(w->tmp) < 0 && errno != ENOENT)
		RPS_WARN("checkpoint %s: unlink: %s", w->tmp, strerror(errno));
	writer_free(w);
}

static void info_from_hdr(const struct rps_ckpt_hdr *h, const char *path,
			  struct rps_ckpt_info *info)
{
	memset(info, 0, sizeof(*info));
	snprintf(info->path, sizeof(info->path), "%s", path);
	info->version = h->version;
	info->server_rank = h->server_rank;
	info->shard = h->shard;
	info->num_shards = h->num_shards;
	info->clock = h->clock;
	info->nslices = h->nslices;
	info->key_min = h->key_min;
	info->key_max = h->key_max;
	info->created_ns = h->created_ns;
	info->payload_bytes = h->payload_bytes;
	info->payload_crc = h->payload_crc;
}

int rps_ckpt_writer_commit(struct rps_ckpt_writer *w, int keep, struct rps_ckpt_info *info_p)
{
	int rc;

	if (!w->err && w->in_slice)
		w_fail(w, "commit with a slice not ended");
	if (w->err || w_flush(w)) {
		rc = w->err;
		goto err_abort;
	}
	if (w->hdr.nslices == 0)
		w->hdr.key_min = 0;
	w->hdr.payload_crc = w->crc;
	w->hdr.created_ns = rps_wall_ns();
	w->hdr.hdr_crc = rps_crc32c(0, &w->hdr, CKPT_HDR_CRC_OFF);
	rc = write_full(w->fd, &w->hdr, sizeof(w->hdr), 0);
	if (rc) {
		RPS_ERR("checkpoint %s: write header: %s", w->tmp, strerror(-rc));
		goto err_abort;
	}
	if (fsync(w->fd) < 0) {
		rc = -errno;
		RPS_ERR("checkpoint %s: fsync: %s", w->tmp, strerror(-rc));
		goto err_abort;
	}
	rc = close(w->fd) < 0 ? -errno : 0;
	w->fd = -1;
	if (rc) {
		RPS_ERR("checkpoint %s: close: %s", w->tmp, strerror(-rc));
		goto err_abort;
	}
	if (rename(w->tmp, w->final) < 0) {
		rc = -errno;
		RPS_ERR("checkpoint %s: rename to %s: %s", w->tmp, w->final, strerror(-rc));
		goto err_abort;
	}
	/* The file is complete and renamed; a failed directory fsync means it
	 * may not survive a power loss, which the caller is told. */
	rc = fsync_dir(w->dir);
	if (!rc && info_p)
		info_from_hdr(&w->hdr, w->final, info_p);
	if (!rc)
		RPS_DEBUG("checkpoint %s: %" PRIu64 " slices, %" PRIu64 " bytes", w->final,
			  w->hdr.nslices, w->hdr.payload_bytes + sizeof(w->hdr));
	rps_ckpt_prune(w->dir, w->hdr.server_rank, w->hdr.shard, keep);
	writer_free(w);
	return rc;

err_abort:
	rps_ckpt_writer_abort(w);
	return rc;
}

/* ---- listing and retention --------------------------------------------- */

struct ckpt_ent {
	uint64_t clock;
	int kind; /* 1 final, 2 temp */
};

static int ent_newest_first(const void *a, const void *b)
{
	const struct ckpt_ent *x = a, *y = b;

	return x->clock < y->clock ? 1 : x->clock > y->clock ? -1 : 0;
}

/* The shard's checkpoint names in dir, newest first. */
static int list_shard(const char *dir, uint32_t rank, uint32_t shard, struct ckpt_ent **ents_p,
		      size_t *n_p)
{
	DIR *d = opendir(dir);
	struct ckpt_ent *ents = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		uint32_t r, s;
		uint64_t c;
		int kind = rps_ckpt_parse_name(de->d_name, &r, &s, &c);

		if (!kind || r != rank || s != shard)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct ckpt_ent *ne = rps_realloc(ents, ncap * sizeof(*ents));

			if (!ne) {
				rps_free(ents);
				closedir(d);
				return -ENOMEM;
			}
			ents = ne;
			cap = ncap;
		}
		ents[n].clock = c;
		ents[n].kind = kind;
		n++;
	}
	closedir(d);
	if (n)
		qsort(ents, n, sizeof(*ents), ent_newest_first);
	*ents_p = ents;
	*n_p = n;
	return 0;
}

int rps_ckpt_prune(const char *dir, uint32_t server_rank, uint32_t shard, int keep)
{
	struct ckpt_ent *ents;
	size_t n;
	int kept = 0, removed = 0;
	int rc = list_shard(dir, server_rank, shard, &ents, &n);

	if (rc) {
		RPS_ERR("checkpoint dir %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (keep <= 0)
		keep = RPS_CKPT_KEEP_DEFAULT;
	for (size_t i = 0; i < n; i++) {
		char path[RPS_CKPT_PATH_MAX];

		if (ents[i].kind == 1 && kept < keep) {
			kept++;
			continue;
		}
		if (rps_ckpt_path(dir, server_rank, shard, ents[i].clock, path, sizeof(path)) ||
		    (ents[i].kind == 2 && strlen(path) + 5 > sizeof(path)))
			continue;
		if (ents[i].kind == 2)
			strcat(path, ".tmp");
		if (unlink(path) < 0) {
			if (errno != ENOENT)
				RPS_WARN("checkpoint %s: unlink: %s", path, strerror(errno));
			continue;
		}
		RPS_DEBUG("checkpoint %s: removed (keeping the newest %d)", path, keep);
		removed++;
	}
	rps_free(ents);
	return removed;
}

/* ---- reading ----------------------------------------------------------- */

struct ckpt_rd {
	int fd;
	const char *path;
	uint8_t *buf;
	size_t pos, len; /* unread bytes are buf[pos, len) */
	uint64_t off;	 /* file offset of buf[len] */
	uint64_t left;	 /* payload bytes not yet consumed */
	uint32_t crc;
	float *fl; /* slice arrays (callback pass) */
	uint64_t fl_cap;
};

__attribute__((format(printf, 3, 4))) static int refuse(const char *path, int rc, const char *fmt,
							...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	RPS_ERR("checkpoint %s refused: %s", path, why);
	return rc;
}

/* Consume n payload bytes into dst (NULL: checksum and skip). */
static int rd_take(struct ckpt_rd *r, void *dst, uint64_t n)
{
	uint8_t *d = dst;

	if (n > r->left)
		return refuse(r->path, -EBADMSG, "a slice runs past the end of the payload");
	r->left -= n;
	while (n) {
		size_t k;

		if (r->pos == r->len) {
			ssize_t got;

			do
				got = pread(r->fd, r->buf, CKPT_BUF_BYTES, (off_t)r->off);
			while (got < 0 && errno == EINTR);
			if (got < 0)
				return refuse(r->path, -errno, "read: %s", strerror(errno));
			if (got == 0)
				return refuse(r->path, -EBADMSG, "file shrank while being read");
			r->pos = 0;
			r->len = (size_t)got;
			r->off += (uint64_t)got;
		}
		k = (size_t)RPS_MIN(n, (uint64_t)(r->len - r->pos));
		r->crc = rps_crc32c(r->crc, r->buf + r->pos, k);
		if (d) {
			memcpy(d, r->buf + r->pos, k);
			d += k;
		}
		r->pos += k;
		n -= k;
	}
	return 0;
}

static int check_hdr(const char *path, const struct rps_ckpt_hdr *h, uint64_t fsize, uint32_t rank,
		     uint32_t shard, uint32_t num_shards)
{
	if (memcmp(h->magic, RPS_CKPT_MAGIC, sizeof(h->magic)))
		return refuse(path, -EBADMSG, "bad magic (not an rdmaps checkpoint)");
	if (h->version != RPS_CKPT_VERSION)
		return refuse(path, -EPROTONOSUPPORT,
			      "format version %u, this build reads version %u", h->version,
			      RPS_CKPT_VERSION);
	if (h->hdr_bytes != sizeof(*h))
		return refuse(path, -EBADMSG, "header length %u, expected %zu", h->hdr_bytes,
			      sizeof(*h));
	if (rps_crc32c(0, h, CKPT_HDR_CRC_OFF) != h->hdr_crc)
		return refuse(path, -EBADMSG, "header checksum mismatch (corrupt header)");
	if (h->shard >= h->num_shards)
		return refuse(path, -EBADMSG, "header says shard %u of %u", h->shard,
			      h->num_shards);
	if (h->server_rank != rank || h->shard != shard)
		return refuse(path, -EINVAL,
			      "written by server %u shard %u, expected server %u shard %u",
			      h->server_rank, h->shard, rank, shard);
	if (num_shards && h->num_shards != num_shards)
		return refuse(path, -EINVAL,
			      "written with %u shards per server, this server has %u",
			      h->num_shards, num_shards);
	if (fsize != sizeof(*h) + h->payload_bytes)
		return refuse(
		    path, -EBADMSG, "%s: file has %" PRIu64 " bytes, header says %" PRIu64,
		    fsize < sizeof(*h) + h->payload_bytes ? "truncated" : "trailing bytes", fsize,
		    (uint64_t)sizeof(*h) + h->payload_bytes);
	if (h->nslices && h->key_min > h->key_max)
		return refuse(path, -EBADMSG, "key range %" PRIu64 "..%" PRIu64 " is empty",
			      h->key_min, h->key_max);
	return 0;
}

static int scan_slices(struct ckpt_rd *r, const struct rps_ckpt_hdr *h, rps_ckpt_slice_fn fn,
		       void *arg)
{
	for (uint64_t i = 0; i < h->nslices; i++) {
		struct rps_ckpt_slice_rec rec;
		struct rps_ckpt_slice s;
		uint64_t nfl;
		int rc = rd_take(r, &rec, sizeof(rec));

		if (rc)
			return rc;
		if (rec.nstate > 2 || rec.kind > RPS_OPT_ADAM || rec.nelems == 0 ||
		    rec.nelems > r->left / sizeof(float) / (1 + rec.nstate))
			return refuse(r->path, -EBADMSG,
				      "slice %" PRIu64 " (key %" PRIu64 "): bad record (kind %u, "
				      "nstate %u, nelems %" PRIu64 ")",
				      i, rec.key, rec.kind, rec.nstate, rec.nelems);
		if (rec.key < h->key_min || rec.key > h->key_max)
			return refuse(r->path, -EBADMSG,
				      "slice %" PRIu64 ": key %" PRIu64
				      " outside the header's range",
				      i, rec.key);
		nfl = rec.nelems * (1 + rec.nstate);
		if (!fn) {
			rc = rd_take(r, NULL, nfl * sizeof(float));
			if (rc)
				return rc;
			continue;
		}
		if (nfl > r->fl_cap) {
			rps_free(r->fl);
			r->fl = rps_malloc(nfl * sizeof(float));
			r->fl_cap = r->fl ? nfl : 0;
			if (!r->fl)
				return -ENOMEM;
		}
		rc = rd_take(r, r->fl, nfl * sizeof(float));
		if (rc)
			return rc;
		memset(&s, 0, sizeof(s));
		s.key = rec.key;
		s.slice = rec.slice;
		s.kind = rec.kind;
		s.nelems = rec.nelems;
		s.step = rec.step;
		s.nstate = rec.nstate;
		s.params = r->fl;
		for (uint32_t k = 0; k < rec.nstate; k++)
			s.state[k] = r->fl + rec.nelems * (1 + k);
		rc = fn(&s, arg);
		if (rc)
			return rc;
	}
	if (r->left)
		return refuse(r->path, -EBADMSG, "%" PRIu64 " bytes after the last slice", r->left);
	if (r->crc != h->payload_crc)
		return refuse(r->path, -EBADMSG,
			      "payload checksum mismatch (crc32c 0x%08x, header says 0x%08x)",
			      r->crc, h->payload_crc);
	return 0;
}

/* One pass over a file: header checks, then every slice (fn may be NULL). */
static int ckpt_pass(const char *path, uint32_t rank, uint32_t shard, uint32_t num_shards,
		     rps_ckpt_slice_fn fn, void *arg, struct rps_ckpt_info *info_p)
{
	struct ckpt_rd r;
	struct rps_ckpt_hdr h;
	struct stat st;
	ssize_t got;
	int rc;

	memset(&r, 0, sizeof(r));
	r.path = path;
	r.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r.fd < 0)
		return refuse(path, -errno, "open: %s", strerror(errno));
	if (fstat(r.fd, &st) < 0) {
		rc = refuse(path, -errno, "stat: %s", strerror(errno));
		goto out_close;
	}
	if ((uint64_t)st.st_size < sizeof(h)) {
		rc = refuse(path, -EBADMSG, "truncated: %lld bytes, smaller than the header",
			    (long long)st.st_size);
		goto out_close;
	}
	do
		got = pread(r.fd, &h, sizeof(h), 0);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)sizeof(h)) {
		rc = refuse(path, got < 0 ? -errno : -EBADMSG, "reading the header: %s",
			    got < 0 ? strerror(errno) : "short read");
		goto out_close;
	}
	rc = check_hdr(path, &h, (uint64_t)st.st_size, rank, shard, num_shards);
	if (rc)
		goto out_close;
	r.buf = rps_malloc(CKPT_BUF_BYTES);
	if (!r.buf) {
		rc = -ENOMEM;
		goto out_close;
	}
	r.off = sizeof(h);
	r.left = h.payload_bytes;
	rc = scan_slices(&r, &h, fn, arg);
	if (!rc && info_p)
		info_from_hdr(&h, path, info_p);
	rps_free(r.fl);
	rps_free(r.buf);
out_close:
	close(r.fd);
	return rc;
}

int rps_ckpt_verify(const char *path, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		    struct rps_ckpt_info *info_p)
{
	return ckpt_pass(path, server_rank, shard, num_shards, NULL, NULL, info_p);
}

int rps_ckpt_read(const char *path, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		  rps_ckpt_slice_fn fn, void *arg, struct rps_ckpt_info *info_p)
{
	int rc = ckpt_pass(path, server_rank, shard, num_shards, NULL, NULL, NULL);

	if (rc)
		return rc;
	return ckpt_pass(path, server_rank, shard, num_shards, fn, arg, info_p);
}

int rps_ckpt_find(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		  struct rps_ckpt_info *info_p)
{
	return rps_ckpt_find_max(dir, server_rank, shard, num_shards, UINT64_MAX, info_p);
}

int rps_ckpt_find_max(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		      uint64_t max_clock, struct rps_ckpt_info *info_p)
{
	struct ckpt_ent *ents;
	size_t n;
	int refused = 0;
	char upto[48] = "";
	int rc = list_shard(dir, server_rank, shard, &ents, &n);

	if (rc == -ENOENT || rc == -ENOTDIR) {
		RPS_ERR("no checkpoint for server %u shard %u: directory %s: %s", server_rank,
			shard, dir, strerror(-rc));
		return -ENOENT;
	}
	if (rc) {
		RPS_ERR("checkpoint dir %s: %s", dir, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		char path[RPS_CKPT_PATH_MAX];

		if (ents[i].kind != 1 || ents[i].clock > max_clock ||
		    rps_ckpt_path(dir, server_rank, shard, ents[i].clock, path, sizeof(path)))
			continue;
		if (rps_ckpt_verify(path, server_rank, shard, num_shards, info_p)) {
			refused++;
			continue;
		}
		if (refused)
			RPS_WARN("checkpoint %s: using it; %d newer file(s) refused", path,
				 refused);
		rps_free(ents);
		return 0;
	}
	rps_free(ents);
	if (max_clock != UINT64_MAX)
		snprintf(upto, sizeof(upto), " at clock <= %" PRIu64, max_clock);
	if (refused)
		RPS_ERR("no valid checkpoint for server %u shard %u%s in %s (%d refused)",
			server_rank, shard, upto, dir, refused);
	else
		RPS_ERR("no checkpoint for server %u shard %u%s in %s", server_rank, shard, upto,
			dir);
	return -ENOENT;
}

int rps_ckpt_restore(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		     rps_ckpt_slice_fn fn, void *arg, struct rps_ckpt_info *info_p)
{
	struct rps_ckpt_info info;
	int rc = rps_ckpt_find(dir, server_rank, shard, num_shards, &info);

	if (rc)
		return rc;
	rc = ckpt_pass(info.path, server_rank, shard, num_shards, fn, arg, info_p);
	if (!rc)
		RPS_INFO("restored server %u shard %u from %s (clock %" PRIu64 ", %" PRIu64
			 " slices)",
			 server_rank, shard, info.path, info.clock, info.nslices);
	return rc;
}
