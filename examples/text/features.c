#include "features.h"

#include <string.h>

#define FNV_OFF 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
	return h;
}

static int word_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static unsigned char lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

struct emit {
	uint64_t *out;
	size_t cap, n;
	uint64_t mask;
};

static void put(struct emit *e, uint64_t h)
{
	if (e->n < e->cap)
		e->out[e->n] = h & e->mask;
	e->n++;
}

/* the features of one word (w[0..len)), prev the word before (or NULL) */
static void word(struct emit *e, const char *w, size_t len, const char *prev, size_t plen)
{
	char b[TEXT_MAX_WORD + 2];
	size_t bl = len + 2;

	put(e, fnv(fnv(FNV_OFF, "w", 1), w, len));
	if (prev) {
		uint64_t h = fnv(fnv(FNV_OFF, "b", 1), prev, plen);

		put(e, fnv(fnv(h, " ", 1), w, len));
	}
	b[0] = '<';
	memcpy(b + 1, w, len);
	b[len + 1] = '>';
	for (size_t n = TEXT_MIN_N; n <= TEXT_MAX_N && n <= bl; n++)
		for (size_t i = 0; i + n <= bl; i++)
			put(e, fnv(fnv(FNV_OFF, "c", 1), b + i, n));
}

/* the words of s, continuing after the word in last[0..*llen) */
static void words(struct emit *e, const char *s, char *last, size_t *llen)
{
	char w[TEXT_MAX_WORD];

	while (*s) {
		size_t len = 0;

		while (*s && !word_byte(lower((unsigned char)*s)))
			s++;
		while (*s && word_byte(lower((unsigned char)*s))) {
			if (len < TEXT_MAX_WORD)
				w[len++] = (char)lower((unsigned char)*s);
			s++;
		}
		if (!len)
			continue;
		word(e, w, len, *llen ? last : NULL, *llen);
		memcpy(last, w, len);
		*llen = len;
	}
}

size_t text_features(const char *name, const char *desc, uint64_t mask, uint64_t *out,
		     size_t cap)
{
	struct emit e = { .out = out, .cap = cap, .mask = mask };
	char last[TEXT_MAX_WORD];
	size_t llen = 0;

	words(&e, name, last, &llen);
	words(&e, desc, last, &llen);
	return e.n;
}
