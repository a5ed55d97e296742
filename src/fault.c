/* Fault injection: spec parser, per-thread PRNG decisions, kill matching.
 * See src/fault.h for the syntax and docs/operations.md for the switches. */
#include "src/fault.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/log.h"

#define FAULT_SPEC_MAX	   1024
#define FAULT_DEFAULT_SEED 1
#define FAULT_MAX_SLOW	   100.0
#define FAULT_SPEC_DEFAULTS                                                                        \
	{.delay_p = 1,                                                                             \
	 .stall_p = 1,                                                                             \
	 .kill_rank = -1,                                                                          \
	 .slow_rank = -1,                                                                          \
	 .slow_factor = 1,                                                                         \
	 .seed = FAULT_DEFAULT_SEED}

int rps_fault_on;

static struct rps_fault_spec fault_cur = FAULT_SPEC_DEFAULTS;
static atomic_uint fault_gen = 1;   /* bumped by init / reset: threads reseed */
static atomic_ullong fault_streams; /* next unpinned stream */
static atomic_int fault_kill_fired;
static _Atomic uint64_t fault_slow_last_ns; /* end of the straggler's previous clock */

static _Thread_local struct {
	unsigned int gen;
	int pinned;
	uint64_t stream;
	uint64_t state;
} tl_rng;

/* ---- parsing ----------------------------------------------------------- */

enum {
	K_DROP,
	K_DELAY_MS,
	K_DELAY_P,
	K_STALL_MS,
	K_STALL_P,
	K_KILL_CLOCK,
	K_KILL_ROLE,
	K_KILL_RANK,
	K_SEED,
	K_SLOW_RANK,
	K_SLOW_FACTOR,
	K_COUNT,
};

static const char *const key_names[K_COUNT] = {
    "drop",	 "delay_ms",  "delay_p", "stall_update_ms", "stall_p", "kill_at_clock",
    "kill_role", "kill_rank", "seed",	 "slow_rank", "slow_factor",
};

__attribute__((format(printf, 2, 3))) static int bad_spec(const char *spec, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	RPS_ERR("fault spec \"%s\": %s", spec, why);
	return -EINVAL;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int parse_double(const char *v, double lo, double hi, double *d_p)
{
	char *end;
	double d;

	if (!*v)
		return -EINVAL;
	errno = 0;
	d = strtod(v, &end);
	if (errno || *end || !isfinite(d) || d < lo || d > hi)
		return -EINVAL;
	*d_p = d;
	return 0;
}

static int parse_u64(const char *v, uint64_t *u_p)
{
	int hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
	char *end;
	unsigned long long u;

	if (!isdigit((unsigned char)v[0]) || (hex && !isxdigit((unsigned char)v[2])))
		return -EINVAL;
	errno = 0;
	u = strtoull(v, &end, hex ? 16 : 10);
	if (errno || *end)
		return -EINVAL;
	*u_p = u;
	return 0;
}

static int parse_item(const char *spec, char *key, char *val, struct rps_fault_spec *f,
		      unsigned int *seen)
{
	double d;
	uint64_t u;
	int k;

	for (k = 0; k < K_COUNT; k++)
		if (!strcmp(key, key_names[k]))
			break;
	if (k == K_COUNT)
		return bad_spec(
		    spec,
		    "unknown switch '%s' (known: drop, delay_ms, delay_p, "
		    "stall_update_ms, stall_p, kill_at_clock, kill_role, kill_rank, seed, "
		    "slow_rank, slow_factor)",
		    key);
	if (*seen & (1u << k))
		return bad_spec(spec, "'%s' given twice", key);
	*seen |= 1u << k;

	switch (k) {
	case K_DROP:
	case K_DELAY_P:
	case K_STALL_P:
		if (parse_double(val, 0, 1, &d))
			return bad_spec(spec, "%s=%s: want a probability in [0, 1]", key, val);
		if (k == K_DROP)
			f->drop_p = d;
		else if (k == K_DELAY_P)
			f->delay_p = d;
		else
			f->stall_p = d;
		break;
	case K_DELAY_MS:
	case K_STALL_MS:
		if (parse_double(val, 0, RPS_FAULT_MAX_MS, &d))
			return bad_spec(spec, "%s=%s: want milliseconds in [0, %.0f]", key, val,
					RPS_FAULT_MAX_MS);
		if (k == K_DELAY_MS)
			f->delay_ns = (uint64_t)llround(d * 1e6);
		else
			f->stall_ns = (uint64_t)llround(d * 1e6);
		break;
	case K_KILL_CLOCK:
		if (parse_u64(val, &u))
			return bad_spec(spec, "%s=%s: want a clock (integer >= 0)", key, val);
		f->kill = 1;
		f->kill_clock = u;
		break;
	case K_KILL_ROLE:
		if (strcmp(val, "scheduler") && strcmp(val, "server") && strcmp(val, "worker") &&
		    strcmp(val, "any"))
			return bad_spec(spec, "%s=%s: want scheduler, server, worker or any", key,
					val);
		snprintf(f->kill_role, sizeof(f->kill_role), "%s", strcmp(val, "any") ? val : "");
		break;
	case K_KILL_RANK:
		if (!strcmp(val, "any") || !strcmp(val, "-1")) {
			f->kill_rank = -1;
			break;
		}
		if (parse_u64(val, &u) || u > INT_MAX)
			return bad_spec(spec, "%s=%s: want a rank >= 0, -1 or any", key, val);
		f->kill_rank = (int)u;
		break;
	case K_SLOW_RANK:
		if (parse_u64(val, &u) || u > INT_MAX)
			return bad_spec(spec, "%s=%s: want a worker rank >= 0", key, val);
		f->slow_rank = (int)u;
		break;
	case K_SLOW_FACTOR:
		if (parse_double(val, 1, FAULT_MAX_SLOW, &d))
			return bad_spec(spec, "%s=%s: want a factor in [1, %.0f]", key, val,
					FAULT_MAX_SLOW);
		f->slow_factor = d;
		break;
	case K_SEED:
		if (parse_u64(val, &u))
			return bad_spec(spec, "%s=%s: want an unsigned integer", key, val);
		f->seed = u;
		break;
	}
	return 0;
}

int rps_fault_parse(const char *s, struct rps_fault_spec *spec_p)
{
	struct rps_fault_spec f = FAULT_SPEC_DEFAULTS;
	char buf[FAULT_SPEC_MAX], *save = NULL, *item;
	unsigned int seen = 0;
	size_t len = s ? strlen(s) : 0;

	if (len >= sizeof(buf))
		return bad_spec("...", "longer than %d characters", FAULT_SPEC_MAX - 1);
	memcpy(buf, s ? s : "", len + 1);
	if (!*trim(buf)) {
		*spec_p = f;
		return 0;
	}
	/* strtok_r would skip empty items; find commas by hand */
	for (item = buf; item; item = save) {
		char *comma = strchr(item, ',');
		char *eq, *key, *val;
		int rc;

		save = comma ? comma + 1 : NULL;
		if (comma)
			*comma = '\0';
		key = trim(item);
		if (!*key)
			return bad_spec(s, "empty item (two commas, or a comma at an end)");
		eq = strchr(key, '=');
		if (!eq)
			return bad_spec(s, "'%s': want NAME=VALUE", key);
		*eq = '\0';
		val = trim(eq + 1);
		key = trim(key);
		rc = parse_item(s, key, val, &f, &seen);
		if (rc)
			return rc;
	}
	if ((seen & (1u << K_DELAY_P)) && !(seen & (1u << K_DELAY_MS)))
		return bad_spec(s, "delay_p needs delay_ms");
	if ((seen & (1u << K_STALL_P)) && !(seen & (1u << K_STALL_MS)))
		return bad_spec(s, "stall_p needs stall_update_ms");
	if ((seen & ((1u << K_KILL_ROLE) | (1u << K_KILL_RANK))) && !f.kill)
		return bad_spec(s, "kill_role and kill_rank need kill_at_clock");
	if (!(seen & (1u << K_SLOW_RANK)) != !(seen & (1u << K_SLOW_FACTOR)))
		return bad_spec(s, "slow_rank and slow_factor go together");
	*spec_p = f;
	return 0;
}

int rps_fault_describe(const struct rps_fault_spec *f, char *buf, size_t len)
{
	char tmp[FAULT_SPEC_MAX];
	size_t n = 0;

	tmp[0] = '\0';
#define ADD(...) n += (size_t)snprintf(tmp + n, n < sizeof(tmp) ? sizeof(tmp) - n : 0, __VA_ARGS__)
	if (f->drop_p > 0)
		ADD(",drop=%g", f->drop_p);
	if (f->delay_ns && f->delay_p > 0)
		ADD(",delay_ms=%g,delay_p=%g", (double)f->delay_ns / 1e6, f->delay_p);
	if (f->stall_ns && f->stall_p > 0)
		ADD(",stall_update_ms=%g,stall_p=%g", (double)f->stall_ns / 1e6, f->stall_p);
	if (f->kill) {
		ADD(",kill_at_clock=%" PRIu64 ",kill_role=%s", f->kill_clock,
		    f->kill_role[0] ? f->kill_role : "any");
		if (f->kill_rank >= 0)
			ADD(",kill_rank=%d", f->kill_rank);
		else
			ADD(",kill_rank=any");
	}
	if (f->slow_rank >= 0 && f->slow_factor > 1)
		ADD(",slow_rank=%d,slow_factor=%g", f->slow_rank, f->slow_factor);
	if (n)
		ADD(",seed=%" PRIu64, f->seed);
#undef ADD
	return snprintf(buf, len, "%s", n ? tmp + 1 : "off");
}

static int spec_active(const struct rps_fault_spec *f)
{
	return f->drop_p > 0 || (f->delay_ns && f->delay_p > 0) ||
	       (f->stall_ns && f->stall_p > 0) || f->kill ||
	       (f->slow_rank >= 0 && f->slow_factor > 1);
}

static void install(const struct rps_fault_spec *f)
{
	fault_cur = *f;
	atomic_store(&fault_streams, 0);
	atomic_store(&fault_kill_fired, 0);
	atomic_store(&fault_slow_last_ns, 0);
	atomic_fetch_add(&fault_gen, 1);
	rps_fault_on = spec_active(f);
}

int rps_fault_init(const char *s)
{
	struct rps_fault_spec f;
	char text[FAULT_SPEC_MAX];
	int rc = rps_fault_parse(s, &f);

	if (rc)
		return rc;
	install(&f);
	if (rps_fault_on) {
		rps_fault_describe(&f, text, sizeof(text));
		RPS_WARN("fault injection on: %s", text);
	}
	return 0;
}

void rps_fault_reset(void)
{
	struct rps_fault_spec f = FAULT_SPEC_DEFAULTS;

	install(&f);
}

const struct rps_fault_spec *rps_fault_current(void)
{
	return &fault_cur;
}

/* ---- decisions --------------------------------------------------------- */

static void rng_seed(unsigned int gen)
{
	if (!tl_rng.pinned)
		tl_rng.stream = atomic_fetch_add(&fault_streams, 1);
	tl_rng.state = rps_hash64(fault_cur.seed ^ rps_hash64(tl_rng.stream + 1));
	tl_rng.gen = gen;
}

void rps_fault_thread_seed(uint64_t stream)
{
	tl_rng.pinned = 1;
	tl_rng.stream = stream;
	rng_seed(atomic_load_explicit(&fault_gen, memory_order_relaxed));
}

/* splitmix64 step: uniform double in [0, 1). */
static double rng_uniform(void)
{
	unsigned int gen = atomic_load_explicit(&fault_gen, memory_order_relaxed);
	uint64_t z;

	if (RPS_UNLIKELY(tl_rng.gen != gen))
		rng_seed(gen);
	tl_rng.state += 0x9e3779b97f4a7c15ull;
	z = tl_rng.state;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-53;
}

int rps_fault_drop(void)
{
	return fault_cur.drop_p > 0 && rng_uniform() < fault_cur.drop_p;
}

uint64_t rps_fault_delay_ns(void)
{
	if (!fault_cur.delay_ns || fault_cur.delay_p <= 0)
		return 0;
	return rng_uniform() < fault_cur.delay_p ? fault_cur.delay_ns : 0;
}

uint64_t rps_fault_stall_ns(void)
{
	if (!fault_cur.stall_ns || fault_cur.stall_p <= 0)
		return 0;
	return rng_uniform() < fault_cur.stall_p ? fault_cur.stall_ns : 0;
}

int rps_fault_should_kill(const char *role, int rank, uint64_t clock)
{
	const struct rps_fault_spec *f = &fault_cur;

	if (!f->kill || clock < f->kill_clock)
		return 0;
	if (f->kill_role[0] && (!role || strcmp(role, f->kill_role)))
		return 0;
	if (f->kill_rank >= 0 && rank != f->kill_rank)
		return 0;
	return atomic_exchange(&fault_kill_fired, 1) == 0;
}

void rps_fault_slow_down(const char *role, int rank)
{
	const struct rps_fault_spec *f = &fault_cur;
	uint64_t now, last, extra = 0;

	if (f->slow_rank < 0 || f->slow_factor <= 1 || !role || strcmp(role, "worker") ||
	    rank != f->slow_rank)
		return;
	now = rps_now_ns();
	last = atomic_load(&fault_slow_last_ns);
	if (last && now > last)
		extra = (uint64_t)((double)(now - last) * (f->slow_factor - 1));
	if (extra > (uint64_t)(RPS_FAULT_MAX_MS * 1e6))
		extra = (uint64_t)(RPS_FAULT_MAX_MS * 1e6);
	if (extra)
		rps_fault_sleep_ns(extra);
	atomic_store(&fault_slow_last_ns, rps_now_ns());
}

void rps_fault_sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

_Noreturn void rps_fault_kill(const char *why)
{
	RPS_ERR("fault injection: killing this process (pid %d): %s", (int)getpid(), why);
	raise(SIGKILL);
	_exit(137);
}
