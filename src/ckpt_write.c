/* Shard checkpoints: the streaming writer (temp file, fsync, rename, fsync
 * dir). See src/ckpt.h for the format. */
#include "src/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdmaps/types.h>

#include "src/alloc.h"
#include "src/ckpt_int.h"
#include "src/log.h"
#include "src/proto.h"
#include "src/util.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint files are little-endian; this build writes structs as they are in memory"
#endif

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

/* Bytes per write(2): the kernel copies a write into the page cache without
 * giving up the core (a kernel built without preemption, the common server
 * configuration), so a 1 MiB write by the background checkpoint writer
 * (server/ckpt_async.c) delays a push that wakes on its core by the whole
 * copy; pieces of 128 KiB bound that to tens of microseconds. */
#define CKPT_WRITE_PIECE (128u << 10)

static int write_full(int fd, const void *buf, size_t len, int64_t off)
{
	const char *p = buf;

	while (len) {
		size_t k = RPS_MIN(len, CKPT_WRITE_PIECE);
		ssize_t n = off >= 0 ? pwrite(fd, p, k, (off_t)off) : write(fd, p, k);

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
	if (s->nstate > 2 || s->nelems == 0 || s->kind > RPS_OPT_ADAMW ||
	    s->nelems > UINT64_MAX / 4 / 3)
		return w_fail(w, "bad slice (nstate > 2, nelems 0 or too large, or unknown kind)");
	memset(&rec, 0, sizeof(rec));
	rec.key = s->key;
	rec.slice = s->slice;
	rec.kind = s->kind;
	rec.nelems = s->nelems;
	rec.step = s->step;
	rec.nstate = s->nstate;
	if (s->optim) {
		if ((uint32_t)s->optim->kind != s->kind)
			return w_fail(w, "slice of one kind with an optimizer spec of another");
		rec.flags = RPS_CKPT_SLICE_OPTIM;
	}
	if (w_put(w, &rec, sizeof(rec)))
		return w->err;
	if (s->optim) {
		struct rps_optim_wire spec;

		rps_optim_wire_encode(s->optim, &spec);
		if (w_put(w, &spec, sizeof(spec)))
			return w->err;
	}
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
		rps_ckpt_info_from_hdr(&w->hdr, w->final, info_p);
	if (!rc)
		RPS_DEBUG("checkpoint %s: %" PRIu64 " slices, %" PRIu64 " bytes", w->final,
			  w->hdr.nslices, w->hdr.payload_bytes + sizeof(w->hdr));
	rps_ckpt_prune_upto(w->dir, w->hdr.server_rank, w->hdr.shard, keep, w->hdr.clock);
	writer_free(w);
	return rc;

err_abort:
	rps_ckpt_writer_abort(w);
	return rc;
}
