/* Values of settings: parsing text into typed fields with their validation,
 * formatting them back, and the host:port and core-list syntaxes. */
#include "src/config_int.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "src/auth.h"
#include "src/init.h"
#include "src/log.h"
#include "src/proto.h"
#include "src/util.h"

/* ---- parsing of values ---- */

int rps_cfg_parse_bool(const char *v, int *out_p)
{
	static const char *const yes[] = {"1", "yes", "on", "true"};
	static const char *const no[] = {"0", "no", "off", "false"};

	for (size_t i = 0; i < RPS_ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(v, yes[i])) {
			*out_p = 1;
			return 0;
		}
		if (!strcasecmp(v, no[i])) {
			*out_p = 0;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_int(const char *v, long long *out_p)
{
	char *end;
	long long x;

	errno = 0;
	x = strtoll(v, &end, 10);
	if (end == v || *end || errno || isspace((unsigned char)*v))
		return -EINVAL;
	*out_p = x;
	return 0;
}

/* Digits (or 0x hex) with an optional K/M/G/T suffix (1024-based), optionally
 * followed by "B" or "iB". */
static int parse_size(const char *v, uint64_t *out_p)
{
	const char *p = v;
	char *end;
	uint64_t x, mul = 1;

	if (!isdigit((unsigned char)*p))
		return -EINVAL; /* no sign, no space, not empty */
	errno = 0;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		x = strtoull(p + 2, &end, 16);
	else
		x = strtoull(p, &end, 10);
	if (errno || end == p)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case 'K':
		mul = 1ull << 10;
		break;
	case 'M':
		mul = 1ull << 20;
		break;
	case 'G':
		mul = 1ull << 30;
		break;
	case 'T':
		mul = 1ull << 40;
		break;
	default:
		break;
	}
	if (mul > 1) {
		end++;
		if (*end == 'i' && (end[1] == 'B' || end[1] == 'b'))
			end += 2;
		else if (*end == 'B' || *end == 'b')
			end++;
	}
	if (*end)
		return -EINVAL;
	if (x > UINT64_MAX / mul)
		return -ERANGE;
	*out_p = x * mul;
	return 0;
}

static int parse_double(const char *v, double *out_p)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (end == v || *end || isspace((unsigned char)*v) || !isfinite(x) || errno == ERANGE)
		return -EINVAL;
	*out_p = x;
	return 0;
}

/* Is v one of "a|b|c" (case-insensitive)? Copies the canonical spelling. */
static int match_choice(const char *choices, const char *v, char *canon, size_t canon_len)
{
	const char *p = choices;

	for (;;) {
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t)(bar - p) : strlen(p);

		if (strlen(v) == n && !strncasecmp(p, v, n) && n < canon_len) {
			memcpy(canon, p, n);
			canon[n] = '\0';
			return 0;
		}
		if (!bar)
			return -EINVAL;
		p = bar + 1;
	}
}

int rps_cfg_check_hostport(const char *v, const char **why_p)
{
	char host[RPS_STR_MAX];
	uint16_t port;

	if (rps_config_parse_hostport(v, host, sizeof(host), &port)) {
		*why_p = "expected host:port (IPv4 address or name, port 1..65535)";
		return -EINVAL;
	}
	return 0;
}

int rps_cfg_check_cores(const char *v, const char **why_p)
{
	int cores[CPU_SETSIZE];

	if (rps_config_parse_cores(v, cores, CPU_SETSIZE) < 0) {
		*why_p = "expected a core list like \"0,2-3\"";
		return -EINVAL;
	}
	return 0;
}

int rps_cfg_check_secret(const char *v, const char **why_p)
{
	if (strlen(v) > RPS_SECRET_MAX) {
		*why_p = "secret longer than 255 characters";
		return -EINVAL;
	}
	return 0;
}

/* zeros | const:V | uniform:A,B | normal:MEAN,STD | push: src/init.c says. */
int rps_cfg_check_init(const char *v, const char **why_p)
{
	struct rps_init in = {0};

	return rps_init_parse(v, &in, why_p);
}

/* Parse and validate value for e and store it in cfg. origin names the source
 * in the error message ("RDMAPS_PORT", "--port", "port"). */
#define CFG_ERR(...)                                                                               \
	do {                                                                                       \
		if (!quiet)                                                                        \
			RPS_ERR(__VA_ARGS__);                                                      \
	} while (0)

int rps_cfg_set_entry(struct rps_config *cfg, const struct rps_config_entry *e, const char *value,
		     const char *origin, char sep, int quiet)
{
	const struct rps_cfg_rule *r = rps_cfg_rule_for(e->name);
	const char *shown = rps_cfg_is_secret(e) ? "(hidden)" : value;
	void *field = (char *)cfg + e->offset;
	const char *why = NULL;
	long long i;
	uint64_t u;
	double d;
	int b, rc;

	switch (e->type) {
	case RPS_CFG_INT:
		if (parse_int(value, &i)) {
			why = "not an integer";
			break;
		}
		if (i < r->imin || i > r->imax) {
			CFG_ERR("%s%c%s: out of range (%lld..%lld)", origin, sep, shown, r->imin,
				r->imax);
			return -EINVAL;
		}
		*(int *)field = (int)i;
		return 0;
	case RPS_CFG_BOOL:
		if (rps_cfg_parse_bool(value, &b)) {
			why = "not a boolean (1/0, yes/no, on/off, true/false)";
			break;
		}
		*(int *)field = b;
		return 0;
	case RPS_CFG_U64:
		rc = parse_size(value, &u);
		if (rc == -ERANGE) {
			why = "too large";
			break;
		}
		if (rc) {
			why = value[0] == '-' ? "negative values are not allowed"
					      : "not a number (digits with optional K/M/G suffix)";
			break;
		}
		if (u < r->umin || u > r->umax) {
			CFG_ERR("%s%c%s: out of range (%llu..%llu)", origin, sep, shown,
				(unsigned long long)r->umin, (unsigned long long)r->umax);
			return -EINVAL;
		}
		if (r->umul && u % r->umul) {
			CFG_ERR("%s%c%s: must be a multiple of %llu", origin, sep, shown,
				(unsigned long long)r->umul);
			return -EINVAL;
		}
		*(uint64_t *)field = u;
		return 0;
	case RPS_CFG_DOUBLE:
		if (parse_double(value, &d)) {
			why = "not a finite number";
			break;
		}
		if (d < r->dmin || (r->dmin_open && d == r->dmin) || d > r->dmax ||
		    (r->dmax_open && d == r->dmax)) {
			if (r->dmax < HUGE_VAL)
				CFG_ERR("%s%c%s: out of range %c%g, %g%c", origin, sep, shown,
					r->dmin_open ? '(' : '[', r->dmin, r->dmax,
					r->dmax_open ? ')' : ']');
			else
				CFG_ERR("%s%c%s: must be %s %g", origin, sep, shown,
					r->dmin_open ? ">" : ">=", r->dmin);
			return -EINVAL;
		}
		*(double *)field = d;
		return 0;
	case RPS_CFG_STRING: {
		char canon[64];
		size_t n = strlen(value);

		if (n >= e->size) {
			CFG_ERR("%s%c%s: too long (%zu characters, at most %zu)", origin, sep,
				shown, n, e->size - 1);
			return -EINVAL;
		}
		if (r->choices) {
			if (match_choice(r->choices, value, canon, sizeof(canon))) {
				const char *c = r->choices[0] == '|' ? r->choices + 1 : r->choices;

				CFG_ERR("%s%c%s: expected one of %s%s", origin, sep, shown, c,
					r->choices[0] == '|' ? " (or empty)" : "");
				return -EINVAL;
			}
			value = canon;
		}
		if (r->check && r->check(value, &why))
			break;
		memcpy(field, value, strlen(value) + 1);
		return 0;
	}
	}
	CFG_ERR("%s%c%s: %s", origin, sep, shown, why ? why : "bad value");
	return -EINVAL;
}

void rps_cfg_set_default(struct rps_config *cfg, const struct rps_config_entry *e)
{
	int rc = rps_cfg_set_entry(cfg, e, e->dflt, e->name, '=', 0);

	assert(rc == 0); /* every default passes its own validation */
	(void)rc;
}

int rps_config_set(struct rps_config *cfg, const char *name, const char *value)
{
	const struct rps_config_entry *e = rps_cfg_entry_find_loose(name, strlen(name));

	int rc;

	if (!e)
		return -ENOENT;
	rc = rps_cfg_set_entry(cfg, e, value, e->name, '=', 0);
	if (!rc && !strcmp(e->name, "token")) /* issue 20: it becomes the credential */
		rc = rps_cfg_token_apply(cfg);
	return rc;
}

/* The value of e in cfg as text. */
void rps_cfg_format_value(const struct rps_config *cfg, const struct rps_config_entry *e, char *buf,
			 size_t len)
{
	const void *field = (const char *)cfg + e->offset;
	static const char suffix[] = "KMGT";

	switch (e->type) {
	case RPS_CFG_INT:
	case RPS_CFG_BOOL:
		snprintf(buf, len, "%d", *(const int *)field);
		break;
	case RPS_CFG_U64: {
		uint64_t u = *(const uint64_t *)field;
		int s = -1;

		while (rps_cfg_is_size(e) && u && u % 1024 == 0 && s < 3) {
			u /= 1024;
			s++;
		}
		if (s >= 0)
			snprintf(buf, len, "%llu%c", (unsigned long long)u, suffix[s]);
		else
			snprintf(buf, len, "%llu", (unsigned long long)u);
		break;
	}
	case RPS_CFG_DOUBLE:
		snprintf(buf, len, "%g", *(const double *)field);
		break;
	case RPS_CFG_STRING:
		if (!*(const char *)field)
			snprintf(buf, len, "\"\"");
		else
			snprintf(buf, len, "%s", rps_cfg_is_secret(e) ? "(set)" : (const char *)field);
		break;
	}
}

int rps_cfg_entry_equal(const struct rps_config_entry *e, const struct rps_config *a,
		       const struct rps_config *b)
{
	const void *fa = (const char *)a + e->offset;
	const void *fb = (const char *)b + e->offset;

	if (e->type == RPS_CFG_STRING)
		return !strcmp(fa, fb);
	if (e->type == RPS_CFG_DOUBLE)
		return *(const double *)fa == *(const double *)fb;
	return !memcmp(fa, fb, e->size);
}

/* ---- helpers ---- */

static int parse_uint_prefix(const char **sp, long *out_p)
{
	const char *s = *sp;
	char *end;
	long x;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	x = strtol(s, &end, 10);
	if (errno)
		return -EINVAL;
	while (*end == ' ' || *end == '\t')
		end++;
	*sp = end;
	*out_p = x;
	return 0;
}

int rps_config_parse_cores(const char *s, int *cores, int max)
{
	const char *p = s;
	int n = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 0;
	for (;;) {
		long lo, hi;

		if (parse_uint_prefix(&p, &lo))
			return -EINVAL;
		hi = lo;
		if (*p == '-') {
			p++;
			if (parse_uint_prefix(&p, &hi))
				return -EINVAL;
		}
		if (hi < lo || hi >= CPU_SETSIZE)
			return -EINVAL;
		for (long c = lo; c <= hi; c++) {
			if (n >= max)
				return -EINVAL;
			cores[n++] = (int)c;
		}
		if (!*p)
			return n;
		if (*p != ',')
			return -EINVAL;
		p++;
	}
}

int rps_config_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port_p)
{
	const char *colon = strrchr(s, ':');
	size_t n;
	long port = 0;

	if (!colon || colon == s)
		return -EINVAL;
	n = (size_t)(colon - s);
	if (n >= hostlen)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '.' && c != '-' && c != '_')
			return -EINVAL; /* also rejects a second ':' (IPv6) */
	}
	if (!colon[1] || strlen(colon + 1) > 5)
		return -EINVAL;
	for (const char *p = colon + 1; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		port = port * 10 + (*p - '0');
	}
	if (port < 1 || port > 65535)
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	*port_p = (uint16_t)port;
	return 0;
}
