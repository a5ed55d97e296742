/* Unit tests: rps_log_escape makes peer-supplied text safe to log (no control
 * characters, no terminal escapes, bounded length). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/log.h"

static const char *esc(const void *s, size_t n)
{
	static char buf[RPS_LOG_ESC_BUF];

	return rps_log_escape(s, n, buf, sizeof(buf));
}

static void test_plain_text_unchanged(void **state)
{
	(void)state;
	assert_string_equal(esc("wrong secret", 12), "wrong secret");
	assert_string_equal(esc("", 0), "");
	assert_string_equal(esc(NULL, 5), "");
}

static void test_control_bytes_escaped(void **state)
{
	(void)state;
	assert_string_equal(esc("a\nb\r\tc", 6), "a\\x0ab\\x0d\\x09c");
	/* a terminal escape: clear screen, red text */
	assert_string_equal(esc("\x1b[2J\x1b[31mX", 10), "\\x1b[2J\\x1b[31mX");
	assert_string_equal(esc("\x7f\xff\xc3\xa9", 4), "\\x7f\\xff\\xc3\\xa9");
	/* a backslash is escaped too, so "\x0a" in a log is never the peer's own */
	assert_string_equal(esc("a\\x0a", 5), "a\\x5cx0a");
}

static void test_nul(void **state)
{
	(void)state;
	/* trailing NULs end a C string; a NUL inside is shown */
	assert_string_equal(esc("abc\0\0", 5), "abc");
	assert_string_equal(esc("ab\0cd", 5), "ab\\x00cd");
}

static void test_long_input_cut(void **state)
{
	char in[1000], want[RPS_LOG_ESC_IN + 4], small[16];
	const char *out;

	(void)state;
	memset(in, 'x', sizeof(in));
	out = esc(in, sizeof(in));
	memset(want, 'x', RPS_LOG_ESC_IN);
	memcpy(want + RPS_LOG_ESC_IN, "...", 4);
	assert_string_equal(out, want);
	/* exactly the limit: no "..." */
	assert_int_equal(strlen(esc(in, RPS_LOG_ESC_IN)), RPS_LOG_ESC_IN);
	/* all control bytes, longer than the limit: the buffer always holds it */
	memset(in, '\n', sizeof(in));
	out = esc(in, sizeof(in));
	assert_int_equal(strlen(out), RPS_LOG_ESC_IN * 4 + 3);
	assert_null(strchr(out, '\n'));
	/* a small buffer: cut, terminated, never overrun */
	memset(small, '#', sizeof(small));
	rps_log_escape(in, sizeof(in), small, 10);
	assert_true(strlen(small) < 10);
	assert_null(strchr(small, '\n'));
	assert_int_equal(small[15], '#');
}

/* The rate limiter: burst lines per window, then silence; the first line of
 * the next window carries the count of those left out. */
static void test_ratelimit(void **state)
{
	struct rps_log_rl rl;
	unsigned sup = 99;
	int shown = 0;

	(void)state;
	memset(&rl, 0, sizeof(rl));
	for (int i = 0; i < 1000; i++)
		shown += rps_log_rl_check(&rl, 200, 3, &sup);
	assert_int_equal(shown, 3);
	assert_int_equal(rps_log_rl_pending(&rl), 997);
	usleep(250 * 1000);
	assert_int_equal(rps_log_rl_check(&rl, 200, 3, &sup), 1);
	assert_int_equal(sup, 997);
	assert_int_equal(rps_log_rl_pending(&rl), 0);
	assert_int_equal(rps_log_rl_check(&rl, 200, 3, &sup), 1);
	assert_int_equal(sup, 0);
	/* the macro compiles with and without arguments, and drops past the burst */
	for (int i = 0; i < 10; i++)
		RPS_LOG_RATELIMITED_EX(RPS_LOG_ERROR, 60000, 1, "rate-limited line %d", i);
	RPS_LOG_RATELIMITED(RPS_LOG_DEBUG, "no arguments");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_text_unchanged),
	    cmocka_unit_test(test_control_bytes_escaped),
	    cmocka_unit_test(test_nul),
	    cmocka_unit_test(test_long_input_cut),
	    cmocka_unit_test(test_ratelimit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
