/* The dashboard's page, script and style (server/www/), embedded into the
 * library at build time (cmake/embed.cmake writes sched_www_data.c). */
#ifndef RPS_SCHED_WWW_H
#define RPS_SCHED_WWW_H

#include <stddef.h>

struct rps_www_file {
	const char *name;  /* "index.html" */
	const char *ctype; /* "text/html; charset=utf-8" */
	const unsigned char *data;
	size_t len;
};

extern const struct rps_www_file rps_www_files[];
extern const size_t rps_www_nfiles;

#endif
