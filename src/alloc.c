#include "src/alloc.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#ifdef RPS_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>

void *rps_malloc(size_t size)
{
	return mallocx(size ? size : 1, 0);
}

void *rps_calloc(size_t n, size_t size)
{
	size_t total;

	if (size && n > (size_t)-1 / size)
		return NULL;
	total = n * size;
	return mallocx(total != 0 ? total : 1, MALLOCX_ZERO);
}

void *rps_realloc(void *ptr, size_t size)
{
	if (!ptr)
		return rps_malloc(size);
	return rallocx(ptr, size ? size : 1, 0);
}

void *rps_aligned_alloc(size_t align, size_t size)
{
	size = (size + align - 1) & ~(align - 1);
	return mallocx(size ? size : align, MALLOCX_ALIGN(align));
}

void rps_free(void *ptr)
{
	if (ptr)
		dallocx(ptr, 0);
}

const char *rps_allocator_name(void)
{
	static char name[64];
	const char *v = NULL;
	size_t sz = sizeof(v);

	if (!name[0]) {
		if (mallctl("version", &v, &sz, NULL, 0) != 0)
			v = "?";
		snprintf(name, sizeof(name), "jemalloc %s", v);
	}
	return name;
}
#else
void *rps_malloc(size_t size)
{
	return malloc(size ? size : 1);
}

void *rps_calloc(size_t n, size_t size)
{
	return calloc(n ? n : 1, size ? size : 1);
}

void *rps_realloc(void *ptr, size_t size)
{
	return realloc(ptr, size ? size : 1);
}

void *rps_aligned_alloc(size_t align, size_t size)
{
	size = (size + align - 1) & ~(align - 1);
	return aligned_alloc(align, size ? size : align);
}

void rps_free(void *ptr)
{
	free(ptr);
}

const char *rps_allocator_name(void)
{
	return "libc";
}
#endif

char *rps_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = rps_malloc(n);

	if (d)
		memcpy(d, s, n);
	return d;
}
