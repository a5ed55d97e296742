/* The allocator switch: every allocation of rdmaps goes through here.
 * With RPS_WITH_JEMALLOC it is jemalloc's mallocx/dallocx (non-standard API,
 * so it cannot silently fall back to libc); otherwise libc (sanitizer builds). */
#ifndef RPS_ALLOC_H
#define RPS_ALLOC_H

#include <stddef.h>

void *rps_malloc(size_t size);
void *rps_calloc(size_t n, size_t size);
void *rps_realloc(void *ptr, size_t size);
/* align: power of two >= sizeof(void *); size rounded up to align. */
void *rps_aligned_alloc(size_t align, size_t size);
void rps_free(void *ptr);
char *rps_strdup(const char *s);
/* "jemalloc <version>" or "libc" */
const char *rps_allocator_name(void);

#endif
