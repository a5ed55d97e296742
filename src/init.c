/* The initialiser spec parser (src/init.h). */
#include "src/init.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define INIT_SYNTAX "expected zeros | const:V | uniform:A,B | normal:MEAN,STD | push"

/* A number that fits a float32, at *sp; *sp moves past it. */
static int parse_num(const char **sp, float *out_p)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(*sp, &end);
	if (end == *sp || errno == ERANGE || !isfinite(x) || fabs(x) > FLT_MAX)
		return -EINVAL;
	*sp = end;
	*out_p = (float)x;
	return 0;
}

static int fail(const char **why_p, const char *why)
{
	if (why_p)
		*why_p = why;
	return -EINVAL;
}

int rps_init_parse(const char *s, struct rps_init *init_p, const char **why_p)
{
	struct rps_init in = *init_p;
	const char *p;
	int nargs;

	in.a = in.b = 0;
	if (!strcmp(s, "zeros") || !strcmp(s, "push")) {
		in.kind = s[0] == 'z' ? RPS_INIT_ZEROS : RPS_INIT_PUSH;
		*init_p = in;
		return 0;
	}
	if (!strncmp(s, "const:", 6)) {
		in.kind = RPS_INIT_CONST;
		nargs = 1;
	} else if (!strncmp(s, "uniform:", 8)) {
		in.kind = RPS_INIT_UNIFORM;
		nargs = 2;
	} else if (!strncmp(s, "normal:", 7)) {
		in.kind = RPS_INIT_NORMAL;
		nargs = 2;
	} else {
		return fail(why_p, INIT_SYNTAX);
	}
	p = strchr(s, ':') + 1;
	if (parse_num(&p, &in.a))
		return fail(why_p, INIT_SYNTAX);
	if (nargs == 2 && (*p++ != ',' || parse_num(&p, &in.b)))
		return fail(why_p, INIT_SYNTAX);
	if (*p)
		return fail(why_p, INIT_SYNTAX);
	if (in.kind == RPS_INIT_UNIFORM && !(in.a < in.b))
		return fail(why_p, "uniform:A,B needs A < B");
	if (in.kind == RPS_INIT_NORMAL && !(in.b >= 0))
		return fail(why_p, "normal:MEAN,STD needs STD >= 0");
	*init_p = in;
	return 0;
}
