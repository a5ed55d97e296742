/* The initialiser spec, the one parser of it: RDMAPS_INIT / --init (checked
 * when the configuration is read) and the server's default initialiser. */
#ifndef RPS_INIT_H
#define RPS_INIT_H

#include <rdmaps/types.h>

/* "zeros" | "const:V" | "uniform:A,B" (A < B) | "normal:MEAN,STD" (STD >= 0) |
 * "push"; numbers as strtod reads them, finite as float32, nothing after them.
 * On success fills kind, a and b of *init_p (seed untouched) and returns 0;
 * otherwise -EINVAL, *init_p untouched and, if why_p is not NULL, *why_p says
 * why. */
int rps_init_parse(const char *s, struct rps_init *init_p, const char **why_p);

#endif
