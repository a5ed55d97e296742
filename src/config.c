/* The configuration table and its readers: defaults, RDMAPS_* variables, --flags.
 * See src/config.h for the contract and docs/options.md for the settings. */
#include "src/config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/proto.h"
#include "src/util.h"

/* clang-format off */
#define FIELD(f) offsetof(struct rps_config, f), sizeof(((struct rps_config *)0)->f)
#define ENTRY(f, dflt, type, help) { #f, dflt, help, type, FIELD(f) }

/* Keep docs/options.md in step with this table. */
const struct rps_config_entry rps_config_table[] = {
	/* cluster */
	ENTRY(role, "", RPS_CFG_STRING, "node role: scheduler | server | worker"),
	ENTRY(scheduler, "127.0.0.1:9090", RPS_CFG_STRING, "host:port of rdmaps-sched"),
	ENTRY(num_servers, "1", RPS_CFG_INT, "number of servers in the job"),
	ENTRY(num_workers, "1", RPS_CFG_INT, "number of workers in the job"),
	ENTRY(rank, "-1", RPS_CFG_INT, "rank within the role to ask the scheduler for; -1 = any"),
	ENTRY(transport, "tcp", RPS_CFG_STRING, "data transport: tcp | rdma"),
	ENTRY(device, "", RPS_CFG_STRING, "RDMA device (rxe0, mlx5_0); empty = the one of --host"),
	ENTRY(host, "127.0.0.1", RPS_CFG_STRING, "address this node listens on and advertises"),
	ENTRY(port, "0", RPS_CFG_INT, "listen port; 0 = ephemeral"),
	ENTRY(secret, "", RPS_CFG_STRING, "shared secret checked in every hello (max 32 chars)"),
	ENTRY(timeout_ms, "30000", RPS_CFG_INT, "connect / rendezvous / request timeout (ms)"),
	ENTRY(log_level, "info", RPS_CFG_STRING, "error | warn | info | debug | trace"),
	/* server */
	ENTRY(shards, "2", RPS_CFG_INT, "shards (update threads) per server"),
	ENTRY(update_cores, "", RPS_CFG_STRING, "cores for update threads (\"0,2-3\"); empty = all"),
	ENTRY(shard_bytes, "64M", RPS_CFG_U64, "capacity of one shard's parameter store"),
	ENTRY(chunk_bytes, "16K", RPS_CFG_U64,
	      "largest seqlock chunk inside the store (multiple of 64); smaller slices get one compact chunk"),
	ENTRY(ring_size, "1024", RPS_CFG_U64, "entries of one shard's priority ring"),
	ENTRY(priority, "fifo", RPS_CFG_STRING, "push order: fifo | freshest | staleness | magnitude"),
	ENTRY(consistency, "asp", RPS_CFG_STRING, "asp | bsp | ssp"),
	ENTRY(staleness, "0", RPS_CFG_INT, "SSP staleness bound s (clocks)"),
	ENTRY(init, "zeros", RPS_CFG_STRING,
	      "initial values: zeros | const:V | uniform:A,B | normal:MEAN,STD | push"),
	ENTRY(seed, "42", RPS_CFG_U64, "seed of the random initialisers"),
	/* optimizer */
	ENTRY(optimizer, "sgd", RPS_CFG_STRING, "sgd | momentum | nesterov | adagrad | adam"),
	ENTRY(lr, "0.01", RPS_CFG_DOUBLE, "learning rate"),
	ENTRY(momentum, "0.9", RPS_CFG_DOUBLE, "momentum (momentum, nesterov)"),
	ENTRY(beta1, "0.9", RPS_CFG_DOUBLE, "adam beta1"),
	ENTRY(beta2, "0.999", RPS_CFG_DOUBLE, "adam beta2"),
	ENTRY(eps, "1e-8", RPS_CFG_DOUBLE, "epsilon (adagrad, adam)"),
	ENTRY(weight_decay, "0", RPS_CFG_DOUBLE, "L2 weight decay; 0 = off"),
	ENTRY(clip_norm, "0", RPS_CFG_DOUBLE, "clip gradients to this L2 norm; 0 = off"),
	ENTRY(lr_schedule, "constant", RPS_CFG_STRING, "constant | step | exp | cosine"),
	ENTRY(lr_step, "1000", RPS_CFG_U64, "step schedule: steps between decays"),
	ENTRY(lr_gamma, "0.1", RPS_CFG_DOUBLE, "step / exp schedule: decay factor"),
	ENTRY(lr_total, "10000", RPS_CFG_U64, "cosine schedule: total steps"),
	ENTRY(lr_min, "0", RPS_CFG_DOUBLE, "cosine schedule: final learning rate"),
	ENTRY(staleness_lr, "0", RPS_CFG_BOOL, "divide lr by 1 + staleness of the push"),
	/* keys and messages */
	ENTRY(key_map, "hash", RPS_CFG_STRING, "key -> server map: hash | range"),
	ENTRY(key_range, "65536", RPS_CFG_U64, "range map: keys [0, key_range) split evenly"),
	ENTRY(slice_bytes, "4M", RPS_CFG_U64, "tensors larger than this are split across servers"),
	ENTRY(max_msg, "64M", RPS_CFG_U64, "largest frame accepted (bytes)"),
	/* rdma */
	ENTRY(rdma_buf_bytes, "64K", RPS_CFG_U64, "payload bytes of one pre-posted receive / send buffer (+256 B for headers)"),
	ENTRY(rdma_recv_bufs, "256", RPS_CFG_INT, "receive buffers per shard SRQ"),
	ENTRY(rdma_credits, "64", RPS_CFG_INT, "sends in flight per connection"),
	ENTRY(rdma_max_rd, "16", RPS_CFG_INT, "outstanding RDMA READs (clamped to both ends)"),
	ENTRY(rdma_event_mode, "1", RPS_CFG_BOOL, "sleep on the completion channel when idle (0: spin always)"),
	ENTRY(rdma_poll_spin_us, "50", RPS_CFG_INT, "event mode: busy-poll this long after the last completion before sleeping"),
	ENTRY(wait_spin_us, "200", RPS_CFG_INT, "a waiting caller polls completions itself this long before sleeping; 0 = off"),
	/* control */
	ENTRY(heartbeat_ms, "1000", RPS_CFG_INT, "interval between heartbeats (ms)"),
	ENTRY(heartbeat_timeout_ms, "5000", RPS_CFG_INT, "silence after which a node is dead (ms)"),
	ENTRY(checkpoint_dir, "", RPS_CFG_STRING, "directory for server checkpoints; empty = none"),
	ENTRY(checkpoint_every, "0", RPS_CFG_INT, "clocks between checkpoints; 0 = off"),
	ENTRY(checkpoint_secs, "0", RPS_CFG_INT, "seconds between checkpoints; 0 = off"),
	ENTRY(metrics_port, "0", RPS_CFG_INT, "Prometheus /metrics port (servers: + 1 + rank); 0 = off"),
	ENTRY(fault, "", RPS_CFG_STRING, "fault injection (tests), see docs/operations.md"),
	{ NULL, NULL, NULL, 0, 0, 0 },
};
/* clang-format on */

/* Validation beyond the type, per setting. Settings not listed here: INT >= 0,
 * U64 any, DOUBLE >= 0 and finite, STRING any that fits. */
struct cfg_rule {
	const char *name;
	long long imin, imax;	   /* INT */
	uint64_t umin, umax, umul; /* U64: range, and a multiple of umul if set */
	double dmin, dmax;	   /* DOUBLE: [dmin, dmax]; open ends with dmin_open/dmax_open */
	int dmin_open, dmax_open;
	const char *choices; /* STRING: "a|b|c"; a leading '|' allows "" */
	int (*check)(const char *v, const char **why_p); /* STRING syntax */
};

static int check_hostport(const char *v, const char **why_p);
static int check_cores(const char *v, const char **why_p);
static int check_init(const char *v, const char **why_p);
static int check_secret(const char *v, const char **why_p);

/* clang-format off */
#define IRANGE(lo, hi) .imin = (lo), .imax = (hi)
#define URANGE(lo, hi) .umin = (lo), .umax = (hi)
#define DRANGE(lo, hi) .dmin = (lo), .dmax = (hi)

static const struct cfg_rule cfg_rules[] = {
	{ "role", .choices = "|scheduler|server|worker" },
	{ "scheduler", .check = check_hostport },
	{ "num_servers", IRANGE(1, RPS_MAX_NODES) },
	{ "num_workers", IRANGE(1, RPS_MAX_WORKERS) },
	{ "rank", IRANGE(-1, RPS_MAX_NODES - 1) },
	{ "transport", .choices = "tcp|rdma" },
	{ "port", IRANGE(0, 65535) },
	{ "secret", .check = check_secret },
	{ "timeout_ms", IRANGE(1, INT_MAX) },
	{ "log_level", .choices = "error|warn|info|debug|trace" },
	{ "shards", IRANGE(1, RPS_MAX_SHARDS) },
	{ "update_cores", .check = check_cores },
	{ "shard_bytes", URANGE(4096, UINT64_MAX) },
	/* a slice's chunk size travels in 31 bits of the DECLARE_ACK (src/store.h) */
	{ "chunk_bytes", URANGE(64, 0x7fffffc0ull), .umul = 64 },
	{ "ring_size", URANGE(1, 1ull << 30) },
	{ "priority", .choices = "fifo|freshest|staleness|magnitude" },
	{ "consistency", .choices = "asp|bsp|ssp" },
	{ "init", .check = check_init },
	{ "optimizer", .choices = "sgd|momentum|nesterov|adagrad|adam" },
	{ "momentum", DRANGE(0, 1), .dmax_open = 1 },
	{ "beta1", DRANGE(0, 1), .dmax_open = 1 },
	{ "beta2", DRANGE(0, 1), .dmax_open = 1 },
	{ "eps", DRANGE(0, HUGE_VAL), .dmin_open = 1 },
	{ "lr_schedule", .choices = "constant|step|exp|cosine" },
	{ "lr_step", URANGE(1, UINT64_MAX) },
	{ "lr_gamma", DRANGE(0, HUGE_VAL), .dmin_open = 1 },
	{ "lr_total", URANGE(1, UINT64_MAX) },
	{ "key_map", .choices = "hash|range" },
	{ "key_range", URANGE(1, UINT64_MAX) },
	{ "slice_bytes", URANGE(4, UINT64_MAX), .umul = 4 },
	{ "max_msg", URANGE(1024, UINT32_MAX) },
	{ "rdma_buf_bytes", URANGE(1024, 1ull << 30) },
	{ "rdma_recv_bufs", IRANGE(1, 65536) },
	{ "rdma_credits", IRANGE(1, 65536) },
	{ "rdma_max_rd", IRANGE(1, 256) },
	{ "rdma_poll_spin_us", IRANGE(0, 1000000) },
	{ "wait_spin_us", IRANGE(0, 1000000) },
	{ "heartbeat_ms", IRANGE(1, INT_MAX) },
	{ "heartbeat_timeout_ms", IRANGE(1, INT_MAX) },
	{ "metrics_port", IRANGE(0, 65535) },
};

static const struct cfg_rule cfg_rule_default = {
	NULL, IRANGE(0, INT_MAX), URANGE(0, UINT64_MAX), DRANGE(0, HUGE_VAL),
};
/* clang-format on */

static const struct cfg_rule *rule_for(const char *name)
{
	for (size_t i = 0; i < RPS_ARRAY_SIZE(cfg_rules); i++)
		if (!strcmp(cfg_rules[i].name, name))
			return &cfg_rules[i];
	return &cfg_rule_default;
}

static const struct rps_config_entry *entry_find(const char *name)
{
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

/* "shard-bytes" or "shard_bytes" -> the entry; NULL if unknown. */
static const struct rps_config_entry *entry_find_loose(const char *name, size_t len)
{
	char buf[64];

	if (len >= sizeof(buf))
		return NULL;
	for (size_t i = 0; i < len; i++)
		buf[i] = name[i] == '-' ? '_' : (char)tolower((unsigned char)name[i]);
	buf[len] = '\0';
	return entry_find(buf);
}

/* Never echo the shared secret into logs or dumps. */
static int is_secret(const struct rps_config_entry *e)
{
	return !strcmp(e->name, "secret");
}

static int is_size_entry(const struct rps_config_entry *e)
{
	size_t n = strlen(e->name);

	return (n > 6 && !strcmp(e->name + n - 6, "_bytes")) || !strcmp(e->name, "max_msg");
}

/* Levenshtein distance, for "did you mean" (names are short). */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];

	if (lb >= RPS_ARRAY_SIZE(row) || la >= 64)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t cost = tolower((unsigned char)a[i - 1]) != b[j - 1];

			row[j] = RPS_MIN(RPS_MIN(row[j] + 1, row[j - 1] + 1), diag + cost);
			diag = up;
		}
	}
	return row[lb];
}

/* The closest known name, if close enough to be a typo; else NULL. */
static const char *closest_name(const char *name)
{
	const char *best = NULL;
	size_t best_d = (size_t)-1;
	size_t limit = RPS_MAX((size_t)2, strlen(name) / 4);

	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		size_t d = edit_distance(name, e->name);

		if (d < best_d) {
			best_d = d;
			best = e->name;
		}
	}
	return best_d <= limit ? best : NULL;
}

/* ---- parsing of values ---- */

static int parse_bool(const char *v, int *out_p)
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

static int check_hostport(const char *v, const char **why_p)
{
	char host[RPS_STR_MAX];
	uint16_t port;

	if (rps_config_parse_hostport(v, host, sizeof(host), &port)) {
		*why_p = "expected host:port (IPv4 address or name, port 1..65535)";
		return -EINVAL;
	}
	return 0;
}

static int check_cores(const char *v, const char **why_p)
{
	int cores[CPU_SETSIZE];

	if (rps_config_parse_cores(v, cores, CPU_SETSIZE) < 0) {
		*why_p = "expected a core list like \"0,2-3\"";
		return -EINVAL;
	}
	return 0;
}

static int check_secret(const char *v, const char **why_p)
{
	if (strlen(v) > RPS_SECRET_LEN) {
		*why_p = "secret longer than 32 characters";
		return -EINVAL;
	}
	return 0;
}

/* zeros | const:V | uniform:A,B | normal:MEAN,STD | push */
static int check_init(const char *v, const char **why_p)
{
	const char *arg = strchr(v, ':');
	size_t kind_len = arg ? (size_t)(arg - v) : strlen(v);
	int nargs;
	char *end;
	double a, b = 0;

	*why_p = "expected zeros | const:V | uniform:A,B | normal:MEAN,STD | push";
	if (!arg)
		return (!strcmp(v, "zeros") || !strcmp(v, "push")) ? 0 : -EINVAL;
	if (kind_len == 5 && !strncmp(v, "const", 5))
		nargs = 1;
	else if ((kind_len == 7 && !strncmp(v, "uniform", 7)) ||
		 (kind_len == 6 && !strncmp(v, "normal", 6)))
		nargs = 2;
	else
		return -EINVAL;
	arg++;
	a = strtod(arg, &end);
	if (end == arg || !isfinite(a))
		return -EINVAL;
	if (nargs == 2) {
		if (*end != ',')
			return -EINVAL;
		arg = end + 1;
		b = strtod(arg, &end);
		if (end == arg || !isfinite(b))
			return -EINVAL;
		if (!strncmp(v, "uniform", 7) && !(a < b)) {
			*why_p = "uniform:A,B needs A < B";
			return -EINVAL;
		}
		if (!strncmp(v, "normal", 6) && b < 0) {
			*why_p = "normal:MEAN,STD needs STD >= 0";
			return -EINVAL;
		}
	}
	return *end ? -EINVAL : 0;
}

/* Parse and validate value for e and store it in cfg. origin names the source
 * in the error message ("RDMAPS_PORT", "--port", "port"). */
#define CFG_ERR(...)                                                                               \
	do {                                                                                       \
		if (!quiet)                                                                        \
			RPS_ERR(__VA_ARGS__);                                                      \
	} while (0)

static int set_entry(struct rps_config *cfg, const struct rps_config_entry *e, const char *value,
		     const char *origin, char sep, int quiet)
{
	const struct cfg_rule *r = rule_for(e->name);
	const char *shown = is_secret(e) ? "(hidden)" : value;
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
		if (parse_bool(value, &b)) {
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

static void set_default(struct rps_config *cfg, const struct rps_config_entry *e)
{
	int rc = set_entry(cfg, e, e->dflt, e->name, '=', 0);

	assert(rc == 0); /* every default passes its own validation */
	(void)rc;
}

int rps_config_set(struct rps_config *cfg, const char *name, const char *value)
{
	const struct rps_config_entry *e = entry_find_loose(name, strlen(name));

	if (!e)
		return -ENOENT;
	return set_entry(cfg, e, value, e->name, '=', 0);
}

static void env_name(const struct rps_config_entry *e, char *buf, size_t len)
{
	size_t n = 0;

	n = (size_t)snprintf(buf, len, "RDMAPS_");
	for (const char *p = e->name; *p && n + 1 < len; p++)
		buf[n++] = (char)toupper((unsigned char)*p);
	buf[n] = '\0';
}

static void flag_name(const struct rps_config_entry *e, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "--");

	for (const char *p = e->name; *p && n + 1 < len; p++)
		buf[n++] = *p == '_' ? '-' : *p;
	buf[n] = '\0';
}

/* RDMAPS_* variables that are not settings but belong to the test harness
 * (tools/softroce/rxe-run exports RDMAPS_RXE_DEV0, RDMAPS_RXE_IP0, ...) or
 * the benchmark suite (RDMAPS_BENCH_ROUNDS, read by tools/bench). */
static const char *const env_not_settings[] = {"RDMAPS_RXE_", "RDMAPS_SOFTROCE_",
					       "RDMAPS_BENCH_"};

static int env_is_harness(const char *v)
{
	for (size_t i = 0; i < RPS_ARRAY_SIZE(env_not_settings); i++)
		if (!strncmp(v, env_not_settings[i], strlen(env_not_settings[i])))
			return 1;
	return 0;
}

static void warn_unknown_env(void)
{
	for (char **ep = environ; ep && *ep; ep++) {
		const char *v = *ep;
		const char *eq = strchr(v, '=');
		char name[64];
		size_t n;

		if (strncmp(v, "RDMAPS_", 7) || !eq || env_is_harness(v))
			continue;
		n = (size_t)(eq - v) - 7;
		if (n < sizeof(name)) {
			for (size_t i = 0; i < n; i++)
				name[i] = (char)tolower((unsigned char)v[7 + i]);
			name[n] = '\0';
			if (entry_find(name))
				continue;
		} else {
			name[0] = '\0';
		}
		const char *near = name[0] ? closest_name(name) : NULL;

		if (near) {
			char suggest[80];

			env_name(entry_find(near), suggest, sizeof(suggest));
			RPS_WARN("unknown variable %.*s ignored (did you mean %s?)", (int)(eq - v),
				 v, suggest);
		} else {
			RPS_WARN("unknown variable %.*s ignored (not an rdmaps setting; --config "
				 "lists them)",
				 (int)(eq - v), v);
		}
	}
}

int rps_config_init(struct rps_config *cfg)
{
	int rc = 0;

#ifndef NDEBUG
	for (size_t i = 0; i < RPS_ARRAY_SIZE(cfg_rules); i++)
		assert(entry_find(cfg_rules[i].name)); /* a rule for a setting that exists */
#endif
	memset(cfg, 0, sizeof(*cfg));
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++)
		set_default(cfg, e);
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char var[80];
		const char *v;

		env_name(e, var, sizeof(var));
		v = getenv(var);
		if (v && set_entry(cfg, e, v, var, '=', 0) && !rc)
			rc = -EINVAL;
	}
	rps_log_set_level(rps_log_level_parse(cfg->log_level));
	warn_unknown_env();
	return rc;
}

static int is_bool_word(const char *s)
{
	int b;

	return parse_bool(s, &b) == 0;
}

int rps_config_parse_args(struct rps_config *cfg, int *argc_p, char **argv, int *dump_p)
{
	struct rps_config tmp = *cfg;
	int argc = *argc_p, nkeep = 0, dump = 0, level_set = 0;
	char **keep;
	int i;

	keep = rps_malloc(sizeof(*keep) * ((size_t)argc + 1));
	if (!keep) {
		RPS_ERR("parse flags: out of memory");
		return -ENOMEM;
	}
	if (argc > 0)
		keep[nkeep++] = argv[0];
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct rps_config_entry *e;
		const char *name, *eq, *value;
		char origin[80];
		size_t len;

		if (!strcmp(a, "--")) {
			while (i < argc)
				keep[nkeep++] = argv[i++];
			break;
		}
		if (strncmp(a, "--", 2) || !strcmp(a, "--help")) {
			keep[nkeep++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--config")) {
			dump = 1;
			continue;
		}
		name = a + 2;
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		e = entry_find_loose(name, len);
		if (!e) {
			char lname[64];
			const char *near = NULL;

			if (len < sizeof(lname)) {
				for (size_t k = 0; k < len; k++)
					lname[k] = name[k] == '-' ? '_' : name[k];
				lname[len] = '\0';
				near = closest_name(lname);
			}
			if (near) {
				flag_name(entry_find(near), origin, sizeof(origin));
				RPS_ERR("unknown flag --%.*s (did you mean %s?)", (int)len, name,
					origin);
			} else {
				RPS_ERR("unknown flag --%.*s (--help lists the flags)", (int)len,
					name);
			}
			goto err_free_keep;
		}
		flag_name(e, origin, sizeof(origin));
		if (eq) {
			value = eq + 1;
		} else if (e->type == RPS_CFG_BOOL) {
			value = "1";
			if (i + 1 < argc && is_bool_word(argv[i + 1]))
				value = argv[++i];
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			RPS_ERR("flag %s needs a value", origin);
			goto err_free_keep;
		}
		if (set_entry(&tmp, e, value, origin, eq ? '=' : ' ', 0))
			goto err_free_keep;
		if (!strcmp(e->name, "log_level"))
			level_set = 1;
	}
	for (int k = 0; k < nkeep; k++)
		argv[k] = keep[k];
	argv[nkeep] = NULL;
	*argc_p = nkeep;
	*cfg = tmp;
	if (dump && dump_p)
		*dump_p = 1;
	if (level_set)
		rps_log_set_level(rps_log_level_parse(cfg->log_level));
	rps_free(keep);
	return 0;

err_free_keep:
	rps_free(keep);
	return -EINVAL;
}

/* The value of e in cfg as text. */
static void format_value(const struct rps_config *cfg, const struct rps_config_entry *e, char *buf,
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

		while (is_size_entry(e) && u && u % 1024 == 0 && s < 3) {
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
			snprintf(buf, len, "%s", is_secret(e) ? "(set)" : (const char *)field);
		break;
	}
}

static int entry_equal(const struct rps_config_entry *e, const struct rps_config *a,
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

/* Where the current value came from, derived without extra state: the
 * environment if the variable is set and gives this value, the default if
 * no variable is set and it is the default, a flag otherwise. */
static const char *value_source(const struct rps_config *cfg, const struct rps_config_entry *e,
				struct rps_config *scratch)
{
	char var[80];
	const char *v;

	env_name(e, var, sizeof(var));
	v = getenv(var);
	/* quiet: a bad variable was reported by rps_config_init, which kept the default */
	if (v && set_entry(scratch, e, v, var, '=', 1) == 0)
		return entry_equal(e, cfg, scratch) ? "env" : "flag";
	set_default(scratch, e);
	return entry_equal(e, cfg, scratch) ? "default" : "flag";
}

void rps_config_dump(const struct rps_config *cfg, FILE *out)
{
	struct rps_config scratch;

	memset(&scratch, 0, sizeof(scratch));
	fprintf(out, "# %-22s %-24s %-8s %s\n", "setting", "value", "source", "meaning");
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char val[RPS_STR_MAX + 8];

		format_value(cfg, e, val, sizeof(val));
		fprintf(out, "  %-22s %-24s %-8s %s\n", e->name, val,
			value_source(cfg, e, &scratch), e->help);
	}
}

void rps_config_usage(FILE *out)
{
	fprintf(out, "settings (flag, or variable RDMAPS_<NAME>; flags win over variables):\n");
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char flag[96];
		const char *arg;
		size_t n;

		flag_name(e, flag, sizeof(flag));
		switch (e->type) {
		case RPS_CFG_INT:
			arg = " N";
			break;
		case RPS_CFG_U64:
			arg = is_size_entry(e) ? " SIZE" : " N";
			break;
		case RPS_CFG_DOUBLE:
			arg = " X";
			break;
		case RPS_CFG_BOOL:
			arg = "[=0|1]";
			break;
		default:
			arg = " STR";
			break;
		}
		n = strlen(flag);
		snprintf(flag + n, sizeof(flag) - n, "%s", arg);
		fprintf(out, "  %-28s %s (default %s)\n", flag, e->help,
			e->dflt[0] ? e->dflt : "\"\"");
	}
	fprintf(out, "  %-28s %s\n", "--config", "print every setting, its value and source");
	fprintf(out, "  %-28s %s\n", "--", "stop parsing flags");
}

/* ---- process-wide configuration ---- */

static struct rps_config global_cfg;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;

static void global_init(void)
{
	rps_config_init(&global_cfg); /* bad variables were logged; defaults kept */
}

const struct rps_config *rps_config_get(void)
{
	pthread_once(&global_once, global_init);
	return &global_cfg;
}

void rps_config_set_global(const struct rps_config *cfg)
{
	pthread_once(&global_once, global_init);
	pthread_mutex_lock(&global_lock);
	if (cfg != &global_cfg)
		global_cfg = *cfg;
	rps_log_set_level(rps_log_level_parse(global_cfg.log_level));
	pthread_mutex_unlock(&global_lock);
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
