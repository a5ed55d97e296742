#include "src/npz.h"

#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_HDR_MAX 65535u /* version 1.0: a 16-bit header length */
#define NPY_ALIGN 64       /* numpy pads magic + header to a multiple of 64 */

static int name_ok(const char *s)
{
	size_t n = strnlen(s, RPS_NPZ_NAME_MAX);

	if (n == 0 || n == RPS_NPZ_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isprint((unsigned char)s[i]) || s[i] == '/' || s[i] == '\\')
			return 0;
	return 1;
}

/* nelems of a shape, or 0 with -EOVERFLOW in *rc_p */
static size_t shape_elems(const uint64_t *shape, uint32_t ndim, int *rc_p)
{
	size_t n = 1;

	for (uint32_t i = 0; i < ndim; i++) {
		if (shape[i] && n > SIZE_MAX / sizeof(uint64_t) / shape[i]) {
			*rc_p = -EOVERFLOW;
			return 0;
		}
		n *= shape[i];
	}
	*rc_p = 0;
	return n;
}

/* magic, version, header (padded), values: one malloc'd image */
static int npy_build(const struct rps_npz_entry *e, void **img_p, size_t *len_p)
{
	char hdr[96 + RPS_NPZ_NDIM_MAX * 24];
	size_t hl, pre, total;
	int k;
	uint8_t *img;

	size_t es = e->u64 ? sizeof(uint64_t) : sizeof(float);

	k = snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': False, 'shape': (",
		     e->u64 ? "<u8" : "<f4");
	for (uint32_t i = 0; i < e->ndim; i++)
		k += snprintf(hdr + k, sizeof(hdr) - (size_t)k, "%llu,%s",
			      (unsigned long long)e->shape[i], i + 1 < e->ndim ? " " : "");
	k += snprintf(hdr + k, sizeof(hdr) - (size_t)k, "), }");
	hl = (size_t)k;
	pre = NPY_MAGIC_LEN + 4 + hl + 1; /* + '\n' */
	pre = (pre + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
	total = pre + e->nelems * es;
	img = rps_malloc(total ? total : 1);
	if (!img)
		return -ENOMEM;
	memcpy(img, NPY_MAGIC, NPY_MAGIC_LEN);
	img[6] = 1;
	img[7] = 0;
	img[8] = (uint8_t)((pre - 10) & 0xff);
	img[9] = (uint8_t)((pre - 10) >> 8);
	memcpy(img + 10, hdr, hl);
	memset(img + 10 + hl, ' ', pre - 10 - hl - 1);
	img[pre - 1] = '\n';
	for (size_t i = 0; i < e->nelems && e->u64; i++) {
		uint64_t v = htole64(e->u64[i]);

		memcpy(img + pre + i * sizeof(v), &v, sizeof(v));
	}
	for (size_t i = 0; i < e->nelems && !e->u64; i++) {
		uint32_t v;

		memcpy(&v, &e->data[i], sizeof(v));
		v = htole32(v);
		memcpy(img + pre + i * sizeof(v), &v, sizeof(v));
	}
	*img_p = img;
	*len_p = total;
	return 0;
}

static void free_images(void **img, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rps_free(img[i]);
	rps_free(img);
}

/* Every entry as an archive member; libzip reads the images at zip_close,
 * so they stay ours (freep = 0) until then. */
static int add_members(zip_t *z, const char *tmp, const struct rps_npz_entry *e, size_t n,
		       void **img)
{
	for (size_t i = 0; i < n; i++) {
		char fname[RPS_NPZ_NAME_MAX + 8];
		zip_source_t *src;
		size_t len;
		int rc = npy_build(&e[i], &img[i], &len);

		if (rc)
			return rc;
		snprintf(fname, sizeof(fname), "%s.npy", e[i].name);
		src = zip_source_buffer(z, img[i], len, 0);
		if (!src)
			return -ENOMEM;
		/* without ZIP_FL_OVERWRITE a name given twice fails here */
		if (zip_file_add(z, fname, src, ZIP_FL_ENC_UTF_8) < 0) {
			RPS_ERR("%s: add %s: %s", tmp, fname, zip_strerror(z));
			zip_source_free(src);
			return -EINVAL;
		}
	}
	return 0;
}

/* libzip does not fsync: the data is on disk before the rename shows it */
static int sync_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

int rps_npz_write(const char *path, const struct rps_npz_entry *e, size_t n)
{
	char tmp[4096];
	void **img;
	zip_t *z;
	int zerr = 0, rc;

	if (n > RPS_NPZ_ENTRIES_MAX) {
		RPS_ERR("%s: %zu arrays, at most %d", path, n, RPS_NPZ_ENTRIES_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		int orc;

		if (!name_ok(e[i].name) || e[i].ndim > RPS_NPZ_NDIM_MAX ||
		    shape_elems(e[i].shape, e[i].ndim, &orc) != e[i].nelems || orc ||
		    (e[i].nelems && !e[i].data && !e[i].u64)) {
			RPS_ERR("%s: array %zu ('%.*s'): bad name, shape or data", path, i,
				RPS_NPZ_NAME_MAX - 1, e[i].name);
			return -EINVAL;
		}
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	img = rps_calloc(n ? n : 1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	unlink(tmp);
	z = zip_open(tmp, ZIP_CREATE | ZIP_EXCL, &zerr);
	if (!z) {
		zip_error_t ze;

		zip_error_init_with_code(&ze, zerr);
		RPS_ERR("%s: cannot create: %s", tmp, zip_error_strerror(&ze));
		zip_error_fini(&ze);
		rc = -EIO;
		goto err_images;
	}
	rc = add_members(z, tmp, e, n, img);
	if (rc)
		goto err_zip;
	if (zip_close(z) < 0) {
		RPS_ERR("%s: write: %s", tmp, zip_strerror(z));
		rc = -EIO;
		goto err_zip;
	}
	free_images(img, n);
	rc = sync_file(tmp);
	if (rc == 0 && rename(tmp, path))
		rc = -errno;
	if (rc) {
		RPS_ERR("%s: sync or rename to %s: %s", tmp, path, strerror(-rc));
		unlink(tmp);
	}
	return rc;
err_zip:
	zip_discard(z);
	unlink(tmp);
err_images:
	free_images(img, n);
	return rc;
}

/* The value after 'key': in a .npy header dict; NULL if absent. */
static const char *dict_value(const char *h, const char *key)
{
	const char *p = strstr(h, key);

	if (!p)
		return NULL;
	p += strlen(key);
	while (*p == ' ')
		p++;
	if (*p != ':')
		return NULL;
	p++;
	while (*p == ' ')
		p++;
	return p;
}

static int parse_header(const char *h, struct rps_npz_entry *e, int *u64_p, const char **why_p)
{
	const char *d = dict_value(h, "'descr'");
	const char *f = dict_value(h, "'fortran_order'");
	const char *s = dict_value(h, "'shape'");

	if (!d || !f || !s) {
		*why_p = "header lacks descr, fortran_order or shape";
		return -EINVAL;
	}
	if (strncmp(d, "'<u8'", 5) == 0) {
		*u64_p = 1;
	} else if (strncmp(d, "'<f4'", 5) != 0) {
		*why_p = "not float32 little-endian ('<f4'): convert with .astype(np.float32)";
		return -EINVAL;
	}
	if (strncmp(f, "False", 5) != 0) {
		*why_p = "Fortran order: save a C-contiguous array";
		return -EINVAL;
	}
	if (*s != '(') {
		*why_p = "shape is not a tuple";
		return -EINVAL;
	}
	s++;
	e->ndim = 0;
	for (;;) {
		char *end;
		unsigned long long v;

		while (*s == ' ')
			s++;
		if (*s == ')')
			break;
		if (!isdigit((unsigned char)*s) || e->ndim == RPS_NPZ_NDIM_MAX) {
			*why_p = "bad shape (at most 8 non-negative dimensions)";
			return -EINVAL;
		}
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno) {
			*why_p = "shape dimension out of range";
			return -EINVAL;
		}
		e->shape[e->ndim++] = v;
		s = end;
		while (*s == ' ')
			s++;
		if (*s == ',')
			s++;
		else if (*s != ')') {
			*why_p = "bad shape tuple";
			return -EINVAL;
		}
	}
	return 0;
}

/* rps_npy_parse; path (NULL: none) names the file in the message. */
static int npy_parse(const void *buf, size_t len, struct rps_npz_entry *e, const char *path)
{
	const uint8_t *b = buf;
	size_t hl, off;
	char *h;
	const char *why = NULL;
	int rc, is_u64 = 0;

	if (len < 10 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
		why = "not a .npy image (magic)";
		goto bad;
	}
	if (b[6] == 1) {
		hl = (size_t)b[8] | (size_t)b[9] << 8;
		off = 10;
	} else if ((b[6] == 2 || b[6] == 3) && len >= 12) {
		hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
		off = 12;
	} else {
		why = "unknown .npy version";
		goto bad;
	}
	if (hl > NPY_HDR_MAX || hl > len - off) {
		why = "header longer than the file";
		goto bad;
	}
	h = rps_malloc(hl + 1);
	if (!h)
		return -ENOMEM;
	memcpy(h, b + off, hl);
	h[hl] = '\0';
	rc = parse_header(h, e, &is_u64, &why);
	rps_free(h);
	if (rc)
		goto bad;
	e->nelems = shape_elems(e->shape, e->ndim, &rc);
	if (rc) {
		why = "shape too large";
		goto bad;
	}
	off += hl;
	if (is_u64) {
		if (len - off != e->nelems * sizeof(uint64_t)) {
			why = "data size does not match the shape";
			goto bad;
		}
		e->u64 = rps_malloc(e->nelems ? e->nelems * sizeof(uint64_t) : sizeof(uint64_t));
		if (!e->u64)
			return -ENOMEM;
		for (size_t i = 0; i < e->nelems; i++) {
			uint64_t v;

			memcpy(&v, b + off + i * sizeof(v), sizeof(v));
			e->u64[i] = le64toh(v);
		}
		return 0;
	}
	if (len - off != e->nelems * sizeof(float)) {
		why = "data size does not match the shape";
		goto bad;
	}
	e->data = rps_malloc(e->nelems ? e->nelems * sizeof(float) : sizeof(float));
	if (!e->data)
		return -ENOMEM;
	for (size_t i = 0; i < e->nelems; i++) {
		uint32_t v;

		memcpy(&v, b + off + i * sizeof(v), sizeof(v));
		v = le32toh(v);
		memcpy(&e->data[i], &v, sizeof(v));
	}
	return 0;
bad:
	if (path)
		RPS_ERR("%s: array '%s': %s", path, e->name, why);
	else
		RPS_ERR("array '%s': %s", e->name, why);
	return -EINVAL;
}

int rps_npy_parse(const void *buf, size_t len, struct rps_npz_entry *e)
{
	return npy_parse(buf, len, e, NULL);
}

void rps_npz_free(struct rps_npz_entry *e, size_t n)
{
	if (!e)
		return;
	for (size_t i = 0; i < n; i++) {
		rps_free(e[i].data);
		rps_free(e[i].u64);
	}
	rps_free(e);
}

const struct rps_npz_entry *rps_npz_find(const struct rps_npz_entry *e, size_t n,
					 const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(e[i].name, name))
			return &e[i];
	return NULL;
}

/* The size bytes of an open member into *buf_p (allocated). The buffer
 * grows with what comes, so that the size a member's header announces (up to
 * SIZE_MAX / 2, and a few bytes of deflated data can claim gigabytes)
 * reserves no memory before its data does. 0, -EINVAL (a read error:
 * zip_file_strerror says which), -EBADMSG (fewer bytes than announced) or
 * -ENOMEM. */
#define NPZ_READ_STEP (1u << 20)
static int read_all(zip_file_t *f, size_t size, void **buf_p)
{
	uint8_t *buf = NULL;
	size_t got = 0, cap = 0;

	for (;;) {
		zip_int64_t n;

		if (got == cap && got < size) {
			size_t ncap = RPS_MIN(size, RPS_MAX(2 * cap, (size_t)NPZ_READ_STEP));
			uint8_t *nb = rps_realloc(buf, ncap);

			if (!nb) {
				rps_free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		if (got == size)
			break;
		n = zip_fread(f, buf + got, cap - got);
		if (n <= 0) {
			rps_free(buf);
			return n ? -EINVAL : -EBADMSG;
		}
		got += (size_t)n;
	}
	*buf_p = buf ? buf : rps_malloc(1);
	return *buf_p ? 0 : -ENOMEM;
}

/* One archive member into e: its name without ".npy", its parsed image. */
static int read_member(zip_t *z, const char *path, zip_uint64_t idx, struct rps_npz_entry *e)
{
	zip_stat_t st;
	zip_file_t *f;
	const char *name;
	char tail;
	size_t nl;
	void *buf;
	int rc;

	zip_stat_init(&st);
	if (zip_stat_index(z, idx, 0, &st) < 0 || !(st.valid & ZIP_STAT_SIZE) ||
	    !(st.valid & ZIP_STAT_NAME)) {
		RPS_ERR("%s: member %llu: %s", path, (unsigned long long)idx, zip_strerror(z));
		return -EINVAL;
	}
	name = st.name;
	nl = strlen(name);
	if (nl < 5 || strcmp(name + nl - 4, ".npy") != 0 || nl - 4 >= RPS_NPZ_NAME_MAX) {
		RPS_ERR("%s: member '%.*s' is not NAME.npy (names up to %d bytes)", path,
			RPS_NPZ_NAME_MAX, name, RPS_NPZ_NAME_MAX - 1);
		return -EINVAL;
	}
	if (zip_name_locate(z, name, 0) != (zip_int64_t)idx) {
		RPS_ERR("%s: member %s twice", path, name);
		return -EINVAL;
	}
	memcpy(e->name, name, nl - 4);
	e->name[nl - 4] = '\0';
	if (st.size > (zip_uint64_t)SIZE_MAX / 2) {
		RPS_ERR("%s: member %s too large", path, name);
		return -EINVAL;
	}
	f = zip_fopen_index(z, idx, 0);
	/* then read on to the end: libzip checks the member's CRC-32 there, so a
	 * corrupted member of the right length is not taken as it is */
	rc = f ? read_all(f, (size_t)st.size, &buf) : -EINVAL;
	if (rc || zip_fread(f, &tail, 1) != 0) {
		if (rc == -ENOMEM)
			RPS_ERR("%s: read %s: out of memory", path, name);
		else if (rc == -EBADMSG)
			RPS_ERR("%s: read %s: the member ends before the %llu bytes its header "
				"announces (a damaged file)",
				path, name, (unsigned long long)st.size);
		else
			RPS_ERR("%s: read %s: %s", path, name,
				f ? zip_file_strerror(f) : zip_strerror(z));
		if (f)
			zip_fclose(f);
		if (!rc)
			rps_free(buf);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	zip_fclose(f);
	rc = npy_parse(buf, (size_t)st.size, e, path);
	rps_free(buf);
	return rc;
}

int rps_npz_read(const char *path, struct rps_npz_entry **e_p, size_t *n_p)
{
	struct rps_npz_entry *e;
	zip_int64_t n;
	int zerr = 0, rc = 0;
	zip_t *z;

	z = zip_open(path, ZIP_RDONLY, &zerr);
	if (!z) {
		zip_error_t ze;

		if (zerr == ZIP_ER_NOENT || zerr == ZIP_ER_OPEN) {
			rc = zerr == ZIP_ER_NOENT ? -ENOENT : errno ? -errno : -EIO;
			RPS_ERR("%s: %s", path, strerror(-rc));
			return rc;
		}
		zip_error_init_with_code(&ze, zerr);
		RPS_ERR("%s: not an .npz (zip) archive: %s", path, zip_error_strerror(&ze));
		zip_error_fini(&ze);
		return -EINVAL;
	}
	n = zip_get_num_entries(z, 0);
	if (n < 0 || n > RPS_NPZ_ENTRIES_MAX) {
		RPS_ERR("%s: %lld members, at most %d", path, (long long)n, RPS_NPZ_ENTRIES_MAX);
		zip_discard(z);
		return -EINVAL;
	}
	e = rps_calloc(n ? (size_t)n : 1, sizeof(*e));
	if (!e) {
		zip_discard(z);
		return -ENOMEM;
	}
	for (zip_int64_t i = 0; i < n && !rc; i++) {
		rc = read_member(z, path, (zip_uint64_t)i, &e[i]);
	}
	zip_discard(z);
	if (rc) {
		rps_npz_free(e, (size_t)n);
		return rc;
	}
	*e_p = e;
	*n_p = (size_t)n;
	return 0;
}
