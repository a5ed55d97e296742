#include "data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "features.h"

#define LINE_MAX_LEN 4096
#define MAX_FEATURES 4096 /* per example; longer ones are cut (said once) */

static FILE *open_part(const char *dir, const char *file)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		fprintf(stderr,
			"text-train: cannot read %s: %s\n"
			"text-train: make the data set from this machine's package lists with\n"
			"    /usr/bin/python3 " TEXT_EXTRACT_SCRIPT " %s\n"
			"  (or: cmake --build <build dir> --target text-data, which writes "
			TEXT_DIR_DEFAULT "), or pass --data DIR\n",
			path, strerror(errno), dir);
	return f;
}

int text_load_classes(const char *dir, struct text_classes *c)
{
	char line[LINE_MAX_LEN];
	FILE *f = open_part(dir, "classes.tsv");
	int n = 0;

	if (!f)
		return -ENOENT;
	memset(c, 0, sizeof(*c));
	c->name = calloc(256, sizeof(*c->name));
	if (!c->name) {
		fclose(f);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f)) {
		int idx;
		char name[32];

		if (sscanf(line, "%d\t%31[^\t\n]", &idx, name) != 2 || idx != n || n >= 255) {
			fprintf(stderr,
				"text-train: %s/classes.tsv line %d: want \"%d<tab>SECTION...\" "
				"(at most 255 classes); run " TEXT_EXTRACT_SCRIPT " again\n",
				dir, n + 1, n);
			fclose(f);
			text_free_classes(c);
			return -EINVAL;
		}
		snprintf(c->name[n], sizeof(c->name[n]), "%s", name);
		n++;
	}
	fclose(f);
	if (n < 2) {
		fprintf(stderr, "text-train: %s/classes.tsv: %d classes, need >= 2\n", dir, n);
		text_free_classes(c);
		return -EINVAL;
	}
	c->n = n;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 1024;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	q = realloc(*p, c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

int text_load(const char *dir, const char *part, uint64_t mask, int nclasses,
	      struct text_set *s)
{
	char file[64], line[LINE_MAX_LEN];
	size_t ncap = 0, ocap = 1, icap = 0, lineno = 0, cut = 0;
	uint64_t feat[MAX_FEATURES];
	FILE *f;
	int rc = 0;

	snprintf(file, sizeof(file), "%s.tsv", part);
	if (!(f = open_part(dir, file)))
		return -ENOENT;
	memset(s, 0, sizeof(*s));
	s->off = malloc(sizeof(size_t));
	if (!s->off) {
		fclose(f);
		return -ENOMEM;
	}
	s->off[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		char *f1, *f2, *f3, *end;
		long y;
		size_t nf, k;

		lineno++;
		line[strcspn(line, "\n")] = '\0';
		f1 = strchr(line, '\t');
		f2 = f1 ? strchr(f1 + 1, '\t') : NULL;
		f3 = f2 ? strchr(f2 + 1, '\t') : NULL;
		y = strtol(line, &end, 10);
		if (!f3 || end != f1 || y < 0 || y >= nclasses) {
			fprintf(stderr,
				"text-train: %s/%s line %zu: want CLASS<tab>SECTION<tab>NAME<tab>"
				"DESCRIPTION with CLASS in 0..%d; run " TEXT_EXTRACT_SCRIPT
				" again\n",
				dir, file, lineno, nclasses - 1);
			rc = -EINVAL;
			goto out;
		}
		*f3 = '\0';
		nf = text_features(f2 + 1, f3 + 1, mask, feat, MAX_FEATURES);
		if (nf > MAX_FEATURES) {
			nf = MAX_FEATURES;
			cut++;
		}
		if (nf == 0) /* no word at all: an id of its own, the empty text */
			feat[nf++] = 0;
		if (grow((void **)&s->y, &ncap, s->n + 1, 1) ||
		    grow((void **)&s->off, &ocap, s->n + 2, sizeof(size_t)) ||
		    grow((void **)&s->ids, &icap, s->off[s->n] + nf, sizeof(uint64_t))) {
			rc = -ENOMEM;
			goto out;
		}
		for (k = 0; k < nf; k++)
			s->ids[s->off[s->n] + k] = feat[k];
		s->y[s->n] = (uint8_t)y;
		s->off[s->n + 1] = s->off[s->n] + nf;
		s->n++;
	}
	if (ferror(f)) {
		fprintf(stderr, "text-train: reading %s/%s: %s\n", dir, file, strerror(errno));
		rc = -EIO;
	} else if (s->n == 0) {
		fprintf(stderr, "text-train: %s/%s is empty; run " TEXT_EXTRACT_SCRIPT " again\n",
			dir, file);
		rc = -EINVAL;
	} else if (cut) {
		fprintf(stderr, "text-train: %s/%s: %zu examples cut to %d features\n", dir, file,
			cut, MAX_FEATURES);
	}
out:
	fclose(f);
	if (rc)
		text_free(s);
	return rc;
}

void text_free(struct text_set *s)
{
	free(s->y);
	free(s->off);
	free(s->ids);
	memset(s, 0, sizeof(*s));
}

void text_free_classes(struct text_classes *c)
{
	free(c->name);
	memset(c, 0, sizeof(*c));
}
