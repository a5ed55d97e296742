/* Helpers of the configuration tests (test_src_config.c, test_src_config_api.c):
 * a clean RDMAPS_* environment and a capture of what was logged to stderr.
 * Include after <cmocka.h>. */
#ifndef TEST_ENV_UTIL_H
#define TEST_ENV_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Run without any RDMAPS_* variable the caller's shell may have set. */
static void clear_rdmaps_env(void)
{
	for (;;) {
		char name[256];
		char **ep;

		for (ep = environ; *ep; ep++)
			if (!strncmp(*ep, "RDMAPS_", 7))
				break;
		if (!*ep)
			return;
		size_t n = (size_t)(strchr(*ep, '=') - *ep);

		assert_true(n < sizeof(name));
		memcpy(name, *ep, n);
		name[n] = '\0';
		unsetenv(name);
	}
}

/* stderr capture, to check what was logged */
struct capture {
	int saved;
	FILE *tmp;
	char text[16384];
};

static void capture_start(struct capture *c)
{
	fflush(stderr);
	c->saved = dup(2);
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	dup2(fileno(c->tmp), 2);
}

static const char *capture_end(struct capture *c)
{
	size_t n;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	rewind(c->tmp);
	n = fread(c->text, 1, sizeof(c->text) - 1, c->tmp);
	c->text[n] = '\0';
	fclose(c->tmp);
	return c->text;
}

#endif
