/* Shard checkpoints: the verifying reader. See src/ckpt.h for the format
 * and the order of the checks. */
#include "src/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
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
	if (h->version < RPS_CKPT_VERSION_MIN || h->version > RPS_CKPT_VERSION)
		return refuse(path, -EPROTONOSUPPORT,
			      "format version %u, this build reads versions %u to %u", h->version,
			      RPS_CKPT_VERSION_MIN, RPS_CKPT_VERSION);
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
		struct rps_optim_opts optim;
		uint64_t nfl;
		int rc = rd_take(r, &rec, sizeof(rec));

		if (rc)
			return rc;
		if (rec.flags & ~(h->version >= 2 ? RPS_CKPT_SLICE_OPTIM : 0u))
			return refuse(r->path, -EBADMSG,
				      "slice %" PRIu64 " (key %" PRIu64 "): unknown flags 0x%x", i,
				      rec.key, rec.flags);
		if (rec.flags & RPS_CKPT_SLICE_OPTIM) {
			struct rps_optim_wire spec;
			char why[160];

			rc = rd_take(r, &spec, sizeof(spec));
			if (rc)
				return rc;
			if (rps_optim_wire_decode(&spec, &optim, why, sizeof(why)))
				return refuse(r->path, -EBADMSG,
					      "slice %" PRIu64 " (key %" PRIu64
					      "): bad optimizer spec: %s",
					      i, rec.key, why);
			if ((uint32_t)optim.kind != rec.kind)
				return refuse(r->path, -EBADMSG,
					      "slice %" PRIu64 " (key %" PRIu64
					      "): optimizer spec of kind %u, record of kind %u",
					      i, rec.key, (unsigned)optim.kind, rec.kind);
		}
		if (rec.nstate > 2 || rec.kind > RPS_OPT_ADAMW || rec.nelems == 0 ||
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
		s.optim = rec.flags & RPS_CKPT_SLICE_OPTIM ? &optim : NULL;
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

/* See src/ckpt_int.h. */
int rps_ckpt_read_once(const char *path, uint32_t rank, uint32_t shard, uint32_t num_shards,
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
		rps_ckpt_info_from_hdr(&h, path, info_p);
	rps_free(r.fl);
	rps_free(r.buf);
out_close:
	close(r.fd);
	return rc;
}

int rps_ckpt_verify(const char *path, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		    struct rps_ckpt_info *info_p)
{
	return rps_ckpt_read_once(path, server_rank, shard, num_shards, NULL, NULL, info_p);
}

int rps_ckpt_read(const char *path, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		  rps_ckpt_slice_fn fn, void *arg, struct rps_ckpt_info *info_p)
{
	int rc = rps_ckpt_read_once(path, server_rank, shard, num_shards, NULL, NULL, NULL);

	if (rc)
		return rc;
	return rps_ckpt_read_once(path, server_rank, shard, num_shards, fn, arg, info_p);
}
