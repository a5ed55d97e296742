/* Unit tests: the public configuration object and version (include/rdmaps/
 * config.h, rdmaps.h), used as a program would: public headers only. */
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

#include <rdmaps/rdmaps.h>

static int setup(void **state)
{
	clear_rdmaps_env();
	return 0;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void test_create_get_set(void **state)
{
	struct rps_config *cfg = NULL;
	const char *s;
	uint64_t u;
	double d;
	int i;

	setenv("RDMAPS_SHARDS", "3", 1);
	assert_int_equal(rps_config_create(&cfg), 0);
	assert_non_null(cfg);
	/* defaults, the environment, and every type */
	assert_int_equal(rps_config_get_int(cfg, "shards", &i), 0);
	assert_int_equal(i, 3);
	assert_int_equal(rps_config_get_int(cfg, "timeout_ms", &i), 0);
	assert_int_equal(i, 30000);
	assert_int_equal(rps_config_get_int(cfg, "rdma_event_mode", &i), 0); /* bool */
	assert_int_equal(i, 1);
	assert_int_equal(rps_config_get_u64(cfg, "shard_bytes", &u), 0);
	assert_true(u == 64ull << 20);
	assert_int_equal(rps_config_get_double(cfg, "lr", &d), 0);
	assert_true(d == 0.01);
	assert_int_equal(rps_config_get_str(cfg, "transport", &s), 0);
	assert_string_equal(s, "tcp");
	/* set, by either spelling */
	assert_int_equal(rps_config_set(cfg, "transport", "RDMA"), 0);
	assert_int_equal(rps_config_get_str(cfg, "transport", &s), 0);
	assert_string_equal(s, "rdma");
	assert_int_equal(rps_config_set(cfg, "shard-bytes", "8M"), 0);
	assert_int_equal(rps_config_get_u64(cfg, "shard-bytes", &u), 0);
	assert_true(u == 8ull << 20);
	/* unknown names, wrong types, bad values */
	assert_int_equal(rps_config_get_int(cfg, "no_such", &i), -ENOENT);
	assert_int_equal(rps_config_get_str(cfg, "no_such", &s), -ENOENT);
	assert_int_equal(rps_config_get_u64(cfg, "no_such", &u), -ENOENT);
	assert_int_equal(rps_config_get_double(cfg, "no_such", &d), -ENOENT);
	assert_int_equal(rps_config_set(cfg, "no_such", "1"), -ENOENT);
	assert_int_equal(rps_config_get_u64(cfg, "shards", &u), -EINVAL);
	assert_int_equal(rps_config_get_str(cfg, "lr", &s), -EINVAL);
	assert_int_equal(rps_config_get_int(cfg, "transport", &i), -EINVAL);
	assert_int_equal(rps_config_set(cfg, "port", "70000"), -EINVAL);
	assert_int_equal(rps_config_get_int(cfg, "port", &i), 0);
	assert_int_equal(i, 0); /* unchanged */
	rps_config_destroy(cfg);
	rps_config_destroy(NULL);
	clear_rdmaps_env();
}

static void test_parse_args_dump(void **state)
{
	struct rps_config *cfg;
	char *argv[] = {"prog", "--shards", "5", "--config", "rest", NULL};
	int argc = 5, dump = 0, i;
	char buf[65536];
	FILE *f;

	assert_int_equal(rps_config_create(&cfg), 0);
	assert_int_equal(rps_config_parse_args(cfg, &argc, argv, &dump), 0);
	assert_int_equal(argc, 2);
	assert_string_equal(argv[1], "rest");
	assert_int_equal(dump, 1);
	assert_int_equal(rps_config_get_int(cfg, "shards", &i), 0);
	assert_int_equal(i, 5);
	f = tmpfile();
	assert_non_null(f);
	rps_config_dump(cfg, f);
	rps_config_usage(f);
	rewind(f);
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	assert_non_null(strstr(buf, "shards"));
	assert_non_null(strstr(buf, "--shard-bytes"));
	rps_config_destroy(cfg);
}

/* A bad or unknown variable is reported once per process, not once per
 * configuration object (every worker and server fills its own). */
static void test_env_reported_once(void **state)
{
	struct rps_config *a, *b;
	struct capture cap;
	const char *log;

	setenv("RDMAPS_PORT", "nope", 1);
	setenv("RDMAPS_SHARDZ", "2", 1);
	capture_start(&cap);
	assert_int_equal(rps_config_create(&a), -EINVAL);
	assert_null(a);
	assert_int_equal(rps_config_create(&b), -EINVAL);
	log = capture_end(&cap);
	assert_int_equal(count(log, "RDMAPS_PORT=nope"), 1);
	assert_int_equal(count(log, "unknown variable RDMAPS_SHARDZ"), 1);
	clear_rdmaps_env();
	/* a different bad value is news */
	setenv("RDMAPS_PORT", "-3", 1);
	capture_start(&cap);
	assert_int_equal(rps_config_create(&a), -EINVAL);
	log = capture_end(&cap);
	assert_int_equal(count(log, "RDMAPS_PORT=-3"), 1);
	clear_rdmaps_env();
}

static void test_version(void **state)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", RPS_VERSION_MAJOR, RPS_VERSION_MINOR,
		 RPS_VERSION_PATCH);
	assert_string_equal(rps_version(), want);
	assert_string_equal(rps_version(), RPS_VERSION_STRING);
	assert_string_equal(rps_version(), "0.1.0");
	assert_true(RPS_VERSION >= RPS_VERSION_NUM(0, 1, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_create_get_set, setup),
	    cmocka_unit_test_setup(test_parse_args_dump, setup),
	    cmocka_unit_test_setup(test_env_reported_once, setup),
	    cmocka_unit_test_setup(test_version, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
