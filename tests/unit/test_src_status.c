/* Unit tests: every status code is documented in include/rdmaps/status.h and
 * docs/api.md and has rdmaps' own text from rps_strerror (src/status.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/status.h>

#define C(e) {e, #e}
static const struct {
	int code;
	const char *name;
} codes[] = {
    C(EINVAL), C(ENOENT), C(EEXIST), C(EMSGSIZE), C(EPROTO), C(EACCES),
    C(ECONNRESET), C(EHOSTDOWN), C(ETIMEDOUT), C(ENODEV), C(ENOMEM), C(ENOSPC),
    C(EIO), C(ECANCELED), C(EDEADLK), C(ENOTCONN), C(EBUSY), C(ENOTSUP),
    C(ESHUTDOWN), C(ECONNREFUSED), C(EHOSTUNREACH), C(ENETUNREACH), C(ENETDOWN), C(ENETRESET),
    C(ECONNABORTED), C(EREMOTEIO), C(ENOBUFS), C(EFAULT), C(EXDEV), C(EOPNOTSUPP),
    C(EADDRINUSE), C(EADDRNOTAVAIL), C(EMFILE), C(EPERM), C(EPIPE), C(EBADMSG),
    C(EPROTONOSUPPORT), C(ENAMETOOLONG), C(ENOTDIR), C(EDESTADDRREQ), C(EAGAIN),
    C(ERANGE),
};

static size_t read_file(const char *rel, char *buf, size_t len)
{
	const char *slash = strrchr(__FILE__, '/');
	char path[1024];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%.*s/../../%s", slash ? (int)(slash - __FILE__) : 1,
		 slash ? __FILE__ : ".", rel);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return n;
}

static void test_every_code_has_text(void **state)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *t = rps_strerror(-codes[i].code);

		assert_non_null(t);
		if (!strcmp(t, strerror(codes[i].code)))
			fail_msg("%s: rps_strerror has no text of its own", codes[i].name);
		assert_string_equal(rps_strerror(codes[i].code), t); /* sign does not matter */
	}
}

/* status.h and docs/api.md list exactly these codes. */
static void check_listed(const char *rel)
{
	static char doc[65536];
	char want[64];

	if (!read_file(rel, doc, sizeof(doc))) {
		printf("skipped: %s not found\n", rel);
		skip();
	}
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		snprintf(want, sizeof(want), "-%s", codes[i].name);
		if (!strstr(doc, want))
			fail_msg("%s does not document %s", rel, want);
	}
	for (const char *p = strstr(doc, "-E"); p; p = strstr(p + 1, "-E")) {
		size_t n = 1;
		int known = 0;

		while (p[n] >= 'A' && p[n] <= 'Z')
			n++;
		if (n < 3)
			continue;
		for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
			known |= strlen(codes[i].name) == n - 1 && !strncmp(codes[i].name, p + 1, n - 1);
		if (!known)
			fail_msg("%s mentions %.*s, which rps_strerror does not know", rel, (int)n, p);
	}
}

static void test_status_h_lists_all(void **state)
{
	check_listed("include/rdmaps/status.h");
}

static void test_api_md_lists_all(void **state)
{
	check_listed("docs/api.md");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_code_has_text),
	    cmocka_unit_test(test_status_h_lists_all),
	    cmocka_unit_test(test_api_md_lists_all),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
