/* Unit tests: the configuration table and its readers (src/config_*.c) and status strings (src/status.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_env_util.h"

#include <rdmaps/status.h>

#include "src/config.h"
#include "src/log.h"

static int setup(void **state)
{
	clear_rdmaps_env();
	rps_log_set_level(RPS_LOG_INFO);
	return 0;
}

static void test_defaults(void **state)
{
	struct rps_config c;

	assert_int_equal(rps_config_init(&c), 0);
	assert_string_equal(c.role, "");
	assert_string_equal(c.scheduler, "127.0.0.1:9090");
	assert_int_equal(c.num_servers, 1);
	assert_int_equal(c.num_workers, 1);
	assert_string_equal(c.transport, "tcp");
	assert_string_equal(c.device, "");
	assert_string_equal(c.host, "127.0.0.1");
	assert_int_equal(c.port, 0);
	assert_string_equal(c.secret, "");
	assert_int_equal(c.timeout_ms, 30000);
	assert_string_equal(c.log_level, "info");
	assert_int_equal(c.shards, 2);
	assert_string_equal(c.update_cores, "");
	assert_true(c.shard_bytes == 64ull << 20);
	assert_true(c.chunk_bytes == 16ull << 10);
	assert_true(c.ring_size == 1024);
	assert_string_equal(c.priority, "fifo");
	assert_string_equal(c.consistency, "asp");
	assert_int_equal(c.staleness, 0);
	assert_string_equal(c.init, "zeros");
	assert_true(c.seed == 42);
	assert_string_equal(c.optimizer, "sgd");
	assert_true(c.lr == 0.01);
	assert_true(c.momentum == 0.9);
	assert_true(c.beta1 == 0.9);
	assert_true(c.beta2 == 0.999);
	assert_true(c.eps == 1e-8);
	assert_true(c.weight_decay == 0);
	assert_true(c.clip_norm == 0);
	assert_string_equal(c.lr_schedule, "constant");
	assert_true(c.lr_step == 1000);
	assert_true(c.lr_gamma == 0.1);
	assert_true(c.lr_total == 10000);
	assert_true(c.lr_min == 0);
	assert_int_equal(c.staleness_lr, 0);
	assert_string_equal(c.key_map, "hash");
	assert_true(c.key_range == 65536);
	assert_true(c.slice_bytes == 4ull << 20);
	assert_true(c.max_msg == 64ull << 20);
	assert_true(c.rdma_buf_bytes == 64ull << 10);
	assert_int_equal(c.rdma_recv_bufs, 256);
	assert_int_equal(c.rdma_credits, 64);
	assert_int_equal(c.rdma_max_rd, 16);
	assert_int_equal(c.rdma_event_mode, 1);
	assert_int_equal(c.rdma_poll_spin_us, 50);
	assert_int_equal(c.wait_spin_us, 200);
	assert_int_equal(c.heartbeat_ms, 1000);
	assert_int_equal(c.heartbeat_timeout_ms, 5000);
	assert_string_equal(c.checkpoint_dir, "");
	assert_int_equal(c.checkpoint_every, 0);
	assert_int_equal(c.checkpoint_secs, 0);
	assert_int_equal(c.metrics_port, 0);
	assert_string_equal(c.fault, "");
}

/* The table describes every byte of struct rps_config (padding aside), once. */
static void test_table_covers_struct(void **state)
{
	unsigned char covered[sizeof(struct rps_config)] = {0};
	struct rps_config c;
	size_t n = 0, bytes = 0;

	for (const struct rps_config_entry *e = rps_config_table; e->name; e++, n++) {
		assert_true(e->offset + e->size <= sizeof(struct rps_config));
		for (size_t i = e->offset; i < e->offset + e->size; i++) {
			assert_int_equal(covered[i], 0);
			covered[i] = 1;
		}
		bytes += e->size;
		switch (e->type) {
		case RPS_CFG_INT:
		case RPS_CFG_BOOL:
			assert_int_equal(e->size, sizeof(int));
			break;
		case RPS_CFG_U64:
			assert_int_equal(e->size, sizeof(uint64_t));
			break;
		case RPS_CFG_DOUBLE:
			assert_int_equal(e->size, sizeof(double));
			break;
		case RPS_CFG_STRING:
			assert_true(e->size > 1);
			break;
		}
		assert_non_null(e->help);
		assert_true(strlen(e->help) > 0);
		for (const struct rps_config_entry *f = e + 1; f->name; f++)
			assert_string_not_equal(e->name, f->name);
		/* the default text is itself valid */
		assert_int_equal(rps_config_init(&c), 0);
		assert_int_equal(rps_config_set(&c, e->name, e->dflt), 0);
	}
	assert_int_equal(n, 81); /* +tls, +token, +rdma_mw (issue 20), +replicas (issue 24), +table_evict_clocks (issue 22), +max_workers (issue 24), +table_evict_seconds (issue 22) */
	/* whatever is not covered is alignment padding (< 8 bytes per hole) */
	for (size_t i = 0, hole = 0; i < sizeof(covered); i++) {
		hole = covered[i] ? 0 : hole + 1;
		assert_true(hole < 8);
	}
	assert_true(bytes + 8 * 4 >= sizeof(struct rps_config));
}

static void test_env_override(void **state)
{
	struct rps_config c;

	setenv("RDMAPS_SHARD_BYTES", "1G", 1);
	setenv("RDMAPS_TRANSPORT", "RDMA", 1);
	setenv("RDMAPS_LR", "0.5", 1);
	setenv("RDMAPS_ROLE", "server", 1);
	setenv("RDMAPS_STALENESS_LR", "yes", 1);
	setenv("RDMAPS_DEVICE", "rxe0", 1);
	assert_int_equal(rps_config_init(&c), 0);
	assert_true(c.shard_bytes == 1ull << 30);
	assert_string_equal(c.transport, "rdma"); /* canonical spelling */
	assert_true(c.lr == 0.5);
	assert_string_equal(c.role, "server");
	assert_int_equal(c.staleness_lr, 1);
	assert_string_equal(c.device, "rxe0");
	assert_int_equal(c.port, 0);
	clear_rdmaps_env();
}

/* The dump line of a setting has this value and source. */
static void assert_dump_line(const char *dump, const char *name, const char *value,
			     const char *source)
{
	char pat[64], v[256], src[32];
	const char *line;

	snprintf(pat, sizeof(pat), "\n  %s ", name);
	line = strstr(dump, pat);
	if (!line)
		fail_msg("no dump line for %s", name);
	assert_int_equal(sscanf(line + strlen(pat), "%255s %31s", v, src), 2);
	assert_string_equal(v, value);
	assert_string_equal(src, source);
}

static void test_flags_precedence(void **state)
{
	struct rps_config c;
	char *argv[] = {"prog",
			"--port",
			"2000",
			"pos1",
			"--num-workers=3",
			"--staleness-lr",
			"--rdma-event-mode",
			"off",
			"--config",
			"--lr=0.25",
			"-v",
			"--",
			"--port",
			"7",
			NULL};
	int argc = 14, dump = 0;
	char buf[16384];
	FILE *f;

	setenv("RDMAPS_PORT", "1000", 1);
	setenv("RDMAPS_NUM_SERVERS", "4", 1);
	assert_int_equal(rps_config_init(&c), 0);
	assert_int_equal(c.port, 1000); /* env > default */
	assert_int_equal(rps_config_parse_args(&c, &argc, argv, &dump), 0);
	assert_int_equal(c.port, 2000); /* flag > env */
	assert_int_equal(c.num_servers, 4);
	assert_int_equal(c.num_workers, 3);
	assert_int_equal(c.staleness_lr, 1); /* bare bool flag */
	assert_int_equal(c.rdma_event_mode, 0);
	assert_true(c.lr == 0.25);
	assert_int_equal(dump, 1);
	/* left: program name, positional, single-dash, and "--" with what follows */
	assert_int_equal(argc, 6);
	assert_string_equal(argv[0], "prog");
	assert_string_equal(argv[1], "pos1");
	assert_string_equal(argv[2], "-v");
	assert_string_equal(argv[3], "--");
	assert_string_equal(argv[4], "--port");
	assert_string_equal(argv[5], "7");
	assert_null(argv[6]);

	/* the dump says where each value came from */
	f = fmemopen(buf, sizeof(buf), "w");
	rps_config_dump(&c, f);
	fclose(f);
	assert_dump_line(buf, "port", "2000", "flag");
	assert_dump_line(buf, "num_servers", "4", "env");
	assert_dump_line(buf, "num_workers", "3", "flag");
	assert_dump_line(buf, "shards", "2", "default");
	assert_dump_line(buf, "shard_bytes", "64M", "default");
	assert_dump_line(buf, "lr", "0.25", "flag");
	assert_dump_line(buf, "device", "\"\"", "default");
	clear_rdmaps_env();
}

static void test_sizes(void **state)
{
	static const struct {
		const char *text;
		uint64_t value;
	} ok[] = {
	    {"16K", 16ull << 10}, {"2M", 2ull << 20}, {"1G", 1ull << 30}, {"3KiB", 3ull << 10},
	    {"4kb", 4ull << 10},  {"8192", 8192},     {"0x2000", 0x2000}, {"2T", 2ull << 40},
	};
	static const char *const bad[] = {
	    "-1", "1.5M", "", "12Q", " 4K", "4K ", "M", "99999999999G", "18446744073709551616",
	    "+5"};
	struct rps_config c;

	assert_int_equal(rps_config_init(&c), 0);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(rps_config_set(&c, "seed", ok[i].text), 0);
		assert_true(c.seed == ok[i].value);
		if (ok[i].value >= 4096) {
			assert_int_equal(rps_config_set(&c, "shard_bytes", ok[i].text), 0);
			assert_true(c.shard_bytes == ok[i].value);
		}
	}
	rps_log_level_cur = -1; /* keep the expected errors quiet */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(rps_config_set(&c, "shard_bytes", bad[i]), -EINVAL);
		assert_true(c.shard_bytes == 2ull << 40); /* unchanged */
	}
	rps_log_level_cur = RPS_LOG_INFO;
	/* sizes in the dump come back with a suffix */
	assert_int_equal(rps_config_set(&c, "chunk_bytes", "4096"), 0);
	assert_true(c.chunk_bytes == 4096);
}

static void test_bad_values(void **state)
{
	static const struct {
		const char *name, *value;
	} bad[] = {
	    {"port", "abc"},
	    {"port", "70000"},
	    {"port", "-1"},
	    {"port", "12x"},
	    {"num_workers", "0"},
	    {"num_workers", "100000"},
	    {"shards", "65"},
	    {"transport", "ib"},
	    {"priority", "random"},
	    {"consistency", "xsp"},
	    {"bsp_sum", "sorted"},
	    {"optimizer", "lbfgs"},
	    {"lr_schedule", "poly"},
	    {"key_map", "tree"},
	    {"log_level", "loud"},
	    {"role", "boss"},
	    {"chunk_bytes", "100"},
	    {"chunk_bytes", "0"},
	    {"lr", "x"},
	    {"lr", "-0.1"},
	    {"lr", "nan"},
	    {"eps", "0"},
	    {"beta2", "1"},
	    {"staleness", "-3"},
	    {"staleness_lr", "maybe"},
	    {"init", "uniform:1,0"},
	    {"init", "gauss"},
	    {"init", "const:"},
	    {"init", "normal:0"},
	    {"update_cores", "3-1"},
	    {"update_cores", "a"},
	    {"scheduler", "nohost"},
	    {"scheduler", "h:0"},
	    {"max_msg", "100"},
	    {"slice_bytes", "6"},
	    {"timeout_ms", "0"},
	    {"rdma_max_rd", "0"},
	    {"secret", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		       "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		       "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		       "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdefX"},
	    {"device", "0123456789012345678901234567890123456789012345678901234567890123"},
	};
	struct rps_config c, before;

	assert_int_equal(rps_config_init(&c), 0);
	before = c;
	rps_log_level_cur = -1;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = rps_config_set(&c, bad[i].name, bad[i].value);

		if (rc != -EINVAL)
			fail_msg("%s=%s accepted (rc %d)", bad[i].name, bad[i].value, rc);
		assert_memory_equal(&c, &before, sizeof(c));
	}
	rps_log_level_cur = RPS_LOG_INFO;
	assert_int_equal(rps_config_set(&c, "no_such_setting", "1"), -ENOENT);
	/* accepted edge values */
	assert_int_equal(rps_config_set(&c, "secret", "0123456789abcdef0123456789abcdefX"), 0);
	assert_int_equal(rps_config_set(&c, "init", "uniform:-0.1,0.1"), 0);
	assert_int_equal(rps_config_set(&c, "init", "normal:0,0.01"), 0);
	assert_int_equal(rps_config_set(&c, "init", "const:1.5"), 0);
	assert_int_equal(rps_config_set(&c, "init", "push"), 0);
	assert_int_equal(rps_config_set(&c, "port", "65535"), 0);
	assert_int_equal(rps_config_set(&c, "update_cores", "0,2-3"), 0);
	assert_int_equal(rps_config_set(&c, "role", ""), 0);
	assert_int_equal(rps_config_set(&c, "shard-bytes", "8M"), 0); /* dashes too */
	assert_true(c.shard_bytes == 8ull << 20);
}

static void test_bad_value_logged(void **state)
{
	struct capture cap;
	struct rps_config c;
	const char *log;
	int rc;

	setenv("RDMAPS_PORT", "abc", 1);
	capture_start(&cap);
	rc = rps_config_init(&c);
	log = capture_end(&cap);
	assert_int_equal(rc, -EINVAL);
	assert_int_equal(c.port, 0); /* default kept */
	assert_non_null(strstr(log, "RDMAPS_PORT=abc"));
	assert_non_null(strstr(log, "not an integer"));
	clear_rdmaps_env();

	char *argv[] = {"prog", "--transport", "ib", NULL};
	int argc = 3;

	assert_int_equal(rps_config_init(&c), 0);
	capture_start(&cap);
	rc = rps_config_parse_args(&c, &argc, argv, NULL);
	log = capture_end(&cap);
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(log, "--transport ib"));
	assert_non_null(strstr(log, "tcp|rdma"));
	assert_string_equal(c.transport, "tcp");
}

static void test_unknown_flag(void **state)
{
	struct rps_config c, before;
	char *argv[] = {"prog", "--port", "5", "--shard-byte", "1M", NULL};
	char *argv2[] = {"prog", "--port", NULL};
	int argc = 5, argc2 = 2;
	struct capture cap;
	const char *log;

	assert_int_equal(rps_config_init(&c), 0);
	before = c;
	capture_start(&cap);
	assert_int_equal(rps_config_parse_args(&c, &argc, argv, NULL), -EINVAL);
	log = capture_end(&cap);
	assert_non_null(strstr(log, "unknown flag --shard-byte"));
	assert_non_null(strstr(log, "did you mean --shard-bytes"));
	/* nothing changed on failure */
	assert_int_equal(argc, 5);
	assert_string_equal(argv[1], "--port");
	assert_memory_equal(&c, &before, sizeof(c));
	/* a flag without its value */
	rps_log_level_cur = -1;
	assert_int_equal(rps_config_parse_args(&c, &argc2, argv2, NULL), -EINVAL);
	rps_log_level_cur = RPS_LOG_INFO;
	assert_int_equal(argc2, 2);
}

static void test_unknown_env_warned(void **state)
{
	struct capture cap;
	struct rps_config c;
	const char *log;

	setenv("RDMAPS_SHARD_BYTE", "1M", 1);
	setenv("RDMAPS_ZZZZZZZZZZZZ", "1", 1);
	setenv("RDMAPS_SHARDS", "3", 1);
	setenv("RDMAPS_RXE_IP0", "10.9.0.1", 1); /* SoftRoCE harness, not a setting */
	setenv("RDMAPS_BENCH_ROUNDS", "3", 1);   /* benchmark suite, not a setting */
	capture_start(&cap);
	assert_int_equal(rps_config_init(&c), 0);
	log = capture_end(&cap);
	assert_int_equal(c.shards, 3);
	assert_true(c.shard_bytes == 64ull << 20);
	assert_non_null(strstr(log, "unknown variable RDMAPS_SHARD_BYTE "));
	assert_non_null(strstr(log, "did you mean RDMAPS_SHARD_BYTES?"));
	assert_non_null(strstr(log, "unknown variable RDMAPS_ZZZZZZZZZZZZ"));
	assert_null(strstr(log, "RDMAPS_SHARDS"));
	assert_null(strstr(log, "RDMAPS_RXE_IP0"));
	assert_null(strstr(log, "RDMAPS_BENCH_ROUNDS"));
	clear_rdmaps_env();
}

static void test_log_level_applied(void **state)
{
	struct rps_config c;
	char *argv[] = {"prog", "--log-level", "warn", NULL};
	int argc = 3;

	setenv("RDMAPS_LOG_LEVEL", "debug", 1);
	assert_int_equal(rps_config_init(&c), 0);
	assert_int_equal(rps_log_level_cur, RPS_LOG_DEBUG);
	assert_int_equal(rps_config_parse_args(&c, &argc, argv, NULL), 0);
	assert_int_equal(rps_log_level_cur, RPS_LOG_WARN);
	clear_rdmaps_env();
	rps_log_set_level(RPS_LOG_INFO);
}

static void test_parse_cores(void **state)
{
	int cores[8];

	assert_int_equal(rps_config_parse_cores("0,2-3", cores, 8), 3);
	assert_int_equal(cores[0], 0);
	assert_int_equal(cores[1], 2);
	assert_int_equal(cores[2], 3);
	assert_int_equal(rps_config_parse_cores("5", cores, 8), 1);
	assert_int_equal(cores[0], 5);
	assert_int_equal(rps_config_parse_cores("1-1, 7", cores, 8), 2);
	assert_int_equal(cores[1], 7);
	assert_int_equal(rps_config_parse_cores("", cores, 8), 0);
	assert_int_equal(rps_config_parse_cores("0-7", cores, 8), 8);
	assert_int_equal(rps_config_parse_cores("0-8", cores, 8), -EINVAL); /* > max */
	assert_int_equal(rps_config_parse_cores("3-1", cores, 8), -EINVAL);
	assert_int_equal(rps_config_parse_cores("a", cores, 8), -EINVAL);
	assert_int_equal(rps_config_parse_cores("1,", cores, 8), -EINVAL);
	assert_int_equal(rps_config_parse_cores(",1", cores, 8), -EINVAL);
	assert_int_equal(rps_config_parse_cores("-1", cores, 8), -EINVAL);
	assert_int_equal(rps_config_parse_cores("1-", cores, 8), -EINVAL);
	assert_int_equal(rps_config_parse_cores("1;2", cores, 8), -EINVAL);
	assert_int_equal(rps_config_parse_cores("99999999", cores, 8), -EINVAL);
}

static void test_parse_hostport(void **state)
{
	char host[64] = "unchanged";
	char small[4];
	uint16_t port = 0;

	assert_int_equal(rps_config_parse_hostport("127.0.0.1:9090", host, sizeof(host), &port), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 9090);
	assert_int_equal(rps_config_parse_hostport("node-1.cluster:1", host, sizeof(host), &port),
			 0);
	assert_string_equal(host, "node-1.cluster");
	assert_int_equal(port, 1);
	assert_int_equal(rps_config_parse_hostport("h:65535", host, sizeof(host), &port), 0);
	assert_int_equal(port, 65535);

	port = 77;
	static const char *const bad[] = {"host",	":90",	    "host:", "host:0",
					  "host:65536", "::1:80",   "h:12a", "h:-1",
					  "a b:80",	"h:099999", "",	     "h:+80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(rps_config_parse_hostport(bad[i], host, sizeof(host), &port),
				 -EINVAL);
		assert_int_equal(port, 77); /* outputs only set on success */
	}
	assert_int_equal(rps_config_parse_hostport("longhost:80", small, sizeof(small), &port),
			 -EINVAL);
}

static void test_dump_and_usage_complete(void **state)
{
	static char buf[65536];
	struct rps_config c;
	FILE *f;

	assert_int_equal(rps_config_init(&c), 0);
	f = fmemopen(buf, sizeof(buf), "w");
	rps_config_dump(&c, f);
	fclose(f);
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char line[128];

		snprintf(line, sizeof(line), "  %s ", e->name);
		if (!strstr(buf, line))
			fail_msg("dump lacks %s", e->name);
		assert_non_null(strstr(buf, e->help));
	}
	assert_non_null(strstr(buf, "127.0.0.1:9090"));

	f = fmemopen(buf, sizeof(buf), "w");
	rps_config_usage(f);
	fclose(f);
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char flag[128];
		size_t n = (size_t)snprintf(flag, sizeof(flag), "--");

		for (const char *p = e->name; *p; p++)
			flag[n++] = *p == '_' ? '-' : *p;
		flag[n] = '\0';
		if (!strstr(buf, flag))
			fail_msg("usage lacks %s", flag);
	}
	assert_non_null(strstr(buf, "--config"));
}

/* docs/options.md lists every setting with its exact default and help. */
static void test_docs_in_step(void **state)
{
	static char doc[65536];
	char path[1024];
	const char *slash = strrchr(__FILE__, '/');
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%.*s/../../docs/options.md",
		 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".");
	f = fopen(path, "r");
	if (!f) {
		printf("skipped: %s not found\n", path);
		skip();
	}
	n = fread(doc, 1, sizeof(doc) - 1, f);
	doc[n] = '\0';
	fclose(f);
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		char var[96], want[512], help[256];
		const char *line, *eol;
		size_t k = 0;

		k = (size_t)snprintf(var, sizeof(var), "| `RDMAPS_");
		for (const char *p = e->name; *p; p++)
			var[k++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		snprintf(var + k, sizeof(var) - k, "` | `--");
		k = strlen(var);
		for (const char *p = e->name; *p; p++)
			var[k++] = *p == '_' ? '-' : *p;
		var[k] = '\0';
		line = strstr(doc, var);
		if (!line)
			fail_msg("docs/options.md lacks %s", e->name);
		eol = strchr(line, '\n');
		assert_non_null(eol);
		if (e->dflt[0])
			snprintf(want, sizeof(want), "` | `%s` | ", e->dflt);
		else
			snprintf(want, sizeof(want), "` | (empty) | ");
		if (!strstr(line, want) || strstr(line, want) > eol)
			fail_msg("docs/options.md: default of %s is not %s", e->name, e->dflt);
		k = 0;
		for (const char *p = e->help; *p && k + 2 < sizeof(help); p++) {
			if (*p == '|')
				help[k++] = '\\';
			help[k++] = *p;
		}
		help[k] = '\0';
		snprintf(want, sizeof(want), "| %s |", help);
		if (!strstr(line, want) || strstr(line, want) > eol)
			fail_msg("docs/options.md: help of %s differs", e->name);
	}
}

static void test_strerror(void **state)
{
	assert_string_equal(rps_strerror(0), "success");
	assert_string_equal(rps_strerror(-ENOENT), "unknown key");
	assert_string_equal(rps_strerror(-EACCES), "wrong shared secret (RDMAPS_SECRET)");
	assert_string_equal(rps_strerror(-EPROTO), "protocol error (bad frame, magic or version)");
	assert_string_equal(rps_strerror(-EHOSTDOWN), "node declared dead");
	assert_string_equal(rps_strerror(-ENODEV), "no RDMA device");
	assert_non_null(strstr(rps_strerror(-EMSGSIZE), "RDMAPS_MAX_MSG"));
	assert_non_null(strstr(rps_strerror(-ETIMEDOUT), "timed out"));
	/* others: the system's text, never NULL */
	assert_string_equal(rps_strerror(-EBADF), strerror(EBADF));
	assert_non_null(rps_strerror(-123456));
	assert_true(strlen(rps_strerror(-123456)) > 0);
	assert_non_null(rps_strerror(INT32_MIN));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_defaults, setup),
	    cmocka_unit_test_setup(test_table_covers_struct, setup),
	    cmocka_unit_test_setup(test_env_override, setup),
	    cmocka_unit_test_setup(test_flags_precedence, setup),
	    cmocka_unit_test_setup(test_sizes, setup),
	    cmocka_unit_test_setup(test_bad_values, setup),
	    cmocka_unit_test_setup(test_bad_value_logged, setup),
	    cmocka_unit_test_setup(test_unknown_flag, setup),
	    cmocka_unit_test_setup(test_unknown_env_warned, setup),
	    cmocka_unit_test_setup(test_log_level_applied, setup),
	    cmocka_unit_test_setup(test_parse_cores, setup),
	    cmocka_unit_test_setup(test_parse_hostport, setup),
	    cmocka_unit_test_setup(test_dump_and_usage_complete, setup),
	    cmocka_unit_test_setup(test_docs_in_step, setup),
	    cmocka_unit_test_setup(test_strerror, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
