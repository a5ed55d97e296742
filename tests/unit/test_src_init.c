/* Unit tests: the one initialiser spec parser (src/init.c), which both the
 * configuration (RDMAPS_INIT) and the server use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/config.h"
#include "src/init.h"

static void test_accepted(void **state)
{
	struct rps_init in = {.seed = 77};
	const char *why = NULL;

	assert_int_equal(rps_init_parse("zeros", &in, &why), 0);
	assert_int_equal(in.kind, RPS_INIT_ZEROS);
	assert_true(in.seed == 77); /* the seed is the caller's */
	assert_int_equal(rps_init_parse("push", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_PUSH);
	assert_int_equal(rps_init_parse("const:0.25", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_CONST);
	assert_true(in.a == 0.25f);
	assert_int_equal(rps_init_parse("const:-3", &in, NULL), 0);
	assert_true(in.a == -3.0f);
	assert_int_equal(rps_init_parse("const:1e-3", &in, NULL), 0);
	assert_true(in.a == 1e-3f);
	assert_int_equal(rps_init_parse("uniform:-1,1", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_UNIFORM);
	assert_true(in.a == -1.0f && in.b == 1.0f);
	assert_int_equal(rps_init_parse("normal:0,0.01", &in, NULL), 0);
	assert_int_equal(in.kind, RPS_INIT_NORMAL);
	assert_true(in.a == 0.0f && in.b == 0.01f);
	assert_int_equal(rps_init_parse("normal:1,0", &in, NULL), 0); /* STD 0: constant */
	assert_true(in.seed == 77);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
	    "",	 "zero", "Zeros", "zeros:1", "gauss", "const", "const:", "const:x", "const:1x",
	    "const:1,2", "const:nan", "const:inf", "const:1e39", "uniform", "uniform:1",
	    "uniform:1,", "uniform:,1", "uniform:2,1", "uniform:1,1", "uniform:0,1,2",
	    "normal:0", "normal:0,-1", "normal:0,1 ", "push:1", "uniform:-1;1",
	};
	struct rps_init in = {.kind = RPS_INIT_CONST, .a = 5, .b = 6, .seed = 9};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;

		if (rps_init_parse(bad[i], &in, &why) != -EINVAL)
			fail_msg("\"%s\" was accepted", bad[i]);
		assert_non_null(why);
		/* untouched on failure */
		assert_true(in.kind == RPS_INIT_CONST && in.a == 5 && in.b == 6 && in.seed == 9);
	}
}

/* The configuration accepts exactly what the parser accepts. */
static void test_config_agrees(void **state)
{
	static const char *const specs[] = {"zeros", "push", "const:2", "uniform:0,1",
					    "normal:0,1", "zero", "uniform:1,1", "const:1e39",
					    "normal:0,-1", "bogus"};
	struct rps_config c;

	assert_int_equal(rps_config_init(&c), 0);
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct rps_init in = {0};
		int want = rps_init_parse(specs[i], &in, NULL);

		assert_int_equal(rps_config_set(&c, "init", specs[i]), want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_accepted),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_config_agrees),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
