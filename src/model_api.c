/* Model files of the public API (include/rdmaps/model.h): the caller's keys
 * and buffer to and from an .npz (src/npz.c), every array named by its key in
 * decimal. A file is read whole and checked against every key before the
 * caller's buffer is touched. */
#include <rdmaps/model.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/npz.h"
#include "src/table_export.h"

#define MODEL_MAX_COMPLAINTS 8 /* problems of one file logged one by one */

static int key_cmp(const void *a, const void *b)
{
	rps_key_t x = *(const rps_key_t *)a, y = *(const rps_key_t *)b;

	return x < y ? -1 : x > y;
}

/* Arguments, each key once, and the total element count into *total_p.
 * -EINVAL (logged) or -ENOMEM. */
static int keys_check(const char *path, const rps_key_t *keys, const size_t *lens, size_t n,
		      const void *vals, size_t *total_p)
{
	rps_key_t *sorted;
	size_t total = 0;
	int rc = 0;

	if (!path || !keys || !lens || !vals || !n) {
		RPS_ERR("model file %s: %s", path ? path : "(null)",
			!n ? "no keys given" : "NULL keys, lengths or values");
		return -EINVAL;
	}
	if (n > RPS_NPZ_ENTRIES_MAX) {
		RPS_ERR("%s: %zu keys, a model file holds at most %d", path, n,
			RPS_NPZ_ENTRIES_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (lens[i] > (SIZE_MAX / sizeof(float)) - total) {
			RPS_ERR("%s: %zu keys of more than %zu floats", path, n,
				SIZE_MAX / sizeof(float));
			return -EINVAL;
		}
		total += lens[i];
	}
	sorted = rps_malloc(n * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, keys, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), key_cmp);
	for (size_t i = 1; i < n; i++) {
		if (sorted[i] == sorted[i - 1]) {
			RPS_ERR("%s: key %" PRIu64 " given twice", path, sorted[i]);
			rc = -EINVAL;
			break;
		}
	}
	rps_free(sorted);
	if (!rc)
		*total_p = total;
	return rc;
}

/* A file system's error as one of the codes status.h lists (the cause itself
 * was logged where it was seen): EROFS, EDQUOT, EISDIR ... become -EIO. */
static int file_rc(int rc)
{
	switch (rc) {
	case 0:
	case -EINVAL:
	case -ENOENT:
	case -ENOMEM:
	case -EACCES:
	case -ENOSPC:
	case -EIO:
	case -ENAMETOOLONG:
	case -ENOTDIR:
		return rc;
	default:
		return -EIO;
	}
}

static void key_name(rps_key_t k, char name[RPS_NPZ_NAME_MAX])
{
	snprintf(name, RPS_NPZ_NAME_MAX, "%" PRIu64, k);
}

int rps_model_save(const char *path, const rps_key_t *keys, const size_t *lens, size_t n,
		   const float *vals)
{
	struct rps_npz_entry *e;
	size_t total, off = 0;
	int rc;

	rc = keys_check(path, keys, lens, n, vals, &total);
	if (rc)
		return rc;
	e = rps_calloc(n, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		key_name(keys[i], e[i].name);
		e[i].ndim = 1;
		e[i].shape[0] = lens[i];
		e[i].nelems = lens[i];
		/* only read: rps_npz_write copies the values into the file */
		e[i].data = (float *)(uintptr_t)(vals + off);
		off += lens[i];
	}
	rc = file_rc(rps_npz_write(path, e, n));
	rps_free(e); /* not rps_npz_free: the data is the caller's */
	return rc;
}

/* The shape of e as "784x128" (a scalar: "()"). */
static void shape_str(const struct rps_npz_entry *e, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	if (!e->ndim)
		snprintf(buf, len, "()");
	for (uint32_t d = 0; d < e->ndim && o < len; d++) {
		int w = snprintf(buf + o, len - o, "%s%" PRIu64, d ? "x" : "", e->shape[d]);

		if (w < 0)
			break;
		o += (size_t)w;
	}
}

/* 1 if name is a key in canonical decimal ("7", not "07" or "+7"), with
 * *key_p. */
static int name_key(const char *name, rps_key_t *key_p)
{
	char back[RPS_NPZ_NAME_MAX];
	unsigned long long v;
	char *end;

	if (name[0] < '0' || name[0] > '9')
		return 0;
	errno = 0;
	v = strtoull(name, &end, 10);
	if (errno || *end)
		return 0;
	key_name((rps_key_t)v, back);
	if (strcmp(back, name))
		return 0;
	*key_p = (rps_key_t)v;
	return 1;
}

struct key_idx {
	rps_key_t key;
	size_t idx;
};

static int key_idx_cmp(const void *a, const void *b)
{
	return key_cmp(&((const struct key_idx *)a)->key, &((const struct key_idx *)b)->key);
}

/* Match the file's arrays to the keys: by[i] = the array of keys[i]. Every
 * problem is logged (up to MODEL_MAX_COMPLAINTS); -EINVAL if any. */
static int match_arrays(const char *path, const struct rps_npz_entry *e, size_t ne,
			const rps_key_t *keys, const size_t *lens, size_t n,
			const struct rps_npz_entry **by)
{
	struct key_idx *named = rps_malloc((ne ? ne : 1) * sizeof(*named));
	uint8_t *used = rps_calloc(ne ? ne : 1, 1);
	size_t nnamed = 0, bad = 0;

	if (!named || !used) {
		rps_free(named);
		rps_free(used);
		return -ENOMEM;
	}
	/* the arrays named by a key, sorted by it (names are unique in a file) */
	for (size_t j = 0; j < ne; j++)
		if (!e[j].u64 && name_key(e[j].name, &named[nnamed].key))
			named[nnamed++].idx = j;
	qsort(named, nnamed, sizeof(*named), key_idx_cmp);
	for (size_t i = 0; i < n; i++) {
		struct key_idx want = {.key = keys[i]};
		const struct key_idx *f =
		    nnamed ? bsearch(&want, named, nnamed, sizeof(*named), key_idx_cmp) : NULL;

		if (f) {
			by[i] = &e[f->idx];
			used[f->idx] = 1;
		}
		if (!by[i]) {
			if (bad++ < MODEL_MAX_COMPLAINTS)
				RPS_ERR("%s: key %" PRIu64 " missing (no array named '%" PRIu64
					"')",
					path, keys[i], keys[i]);
		} else if (by[i]->nelems != lens[i]) {
			if (bad++ < MODEL_MAX_COMPLAINTS) {
				char shape[RPS_NPZ_NDIM_MAX * 21 + 4];

				shape_str(by[i], shape, sizeof(shape));
				if (by[i]->ndim == 1)
					RPS_ERR("%s: key %" PRIu64
						" has %zu floats, the job declared %zu",
						path, keys[i], by[i]->nelems, lens[i]);
				else
					RPS_ERR("%s: key %" PRIu64
						" has %s = %zu floats, the job declared %zu",
						path, keys[i], shape, by[i]->nelems, lens[i]);
			}
		}
	}
	rps_free(named);
	for (size_t j = 0; j < ne; j++) {
		rps_key_t k;

		if (used[j] || rps_table_export_name(e[j].name, NULL, NULL))
			continue; /* a table of an export (docs/tables.md): not a key */
		if (bad++ >= MODEL_MAX_COMPLAINTS)
			continue;
		if (name_key(e[j].name, &k))
			RPS_ERR("%s: array '%s' is key %" PRIu64 ", which is not one of the %zu "
				"keys given",
				path, e[j].name, k, n);
		else
			RPS_ERR("%s: array '%s' is not a key (arrays are named by their key in "
				"decimal, e.g. '7')",
				path, e[j].name);
	}
	if (bad > MODEL_MAX_COMPLAINTS)
		RPS_ERR("%s: %zu problems in all, the first %d listed", path, bad,
			MODEL_MAX_COMPLAINTS);
	rps_free(used);
	return bad ? -EINVAL : 0;
}

int rps_model_load(const char *path, const rps_key_t *keys, const size_t *lens, size_t n,
		   float *vals)
{
	const struct rps_npz_entry **by;
	struct rps_npz_entry *e = NULL;
	size_t total, ne = 0, off = 0;
	int rc;

	rc = keys_check(path, keys, lens, n, vals, &total);
	if (rc)
		return rc;
	rc = rps_npz_read(path, &e, &ne); /* logs why it cannot */
	if (rc)
		return file_rc(rc);
	by = rps_calloc(n, sizeof(*by));
	if (!by) {
		rc = -ENOMEM;
		goto out_entries;
	}
	rc = match_arrays(path, e, ne, keys, lens, n, by);
	if (rc)
		goto out_by;
	/* everything checked: only now the caller's buffer */
	for (size_t i = 0; i < n; i++) {
		if (lens[i])
			memcpy(vals + off, by[i]->data, lens[i] * sizeof(float));
		off += lens[i];
	}
	RPS_DEBUG("%s: %zu keys, %zu floats read", path, n, total);
out_by:
	rps_free(by);
out_entries:
	rps_npz_free(e, ne);
	return rc;
}
