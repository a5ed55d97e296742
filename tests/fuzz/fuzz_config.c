/* Fuzz target: configuration values (src/config_value.c, src/config_env.c,
 * src/init.c): sizes, durations and counts, doubles, booleans, enums,
 * host:port, core lists, secrets, initialisers, and --flags.
 *
 * Input: byte 0 is a mode, the rest text (cut at its first NUL unless the
 * mode splits on NULs):
 *   mode % 6 == 0  byte 1 picks a setting of rps_config_table, the rest is
 *                  its value (rps_config_set); a value it takes is formatted
 *                  (rps_cfg_format_value) and must be taken again, to the
 *                  same value (doubles and secrets excepted: %g rounds, a
 *                  secret prints as "(set)");
 *              1  argv split on NULs, parsed as flags (rps_config_parse_args);
 *              2  a core list (rps_config_parse_cores, room for 8 cores);
 *              3  host:port (rps_config_parse_hostport, room for 16 bytes);
 *              4  an initialiser (rps_init_parse);
 *              5  a setting name with its spelling variants
 *                 (rps_cfg_entry_find_loose, rps_cfg_closest_name). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/config.h"
#include "src/config_int.h"
#include "src/init.h"
#include "tests/fuzz/fuzz_util.h"

#define MAX_ARGS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rps_config base;
static size_t nentries;

static void set_value(uint8_t pick, const char *v)
{
	const struct rps_config_entry *e = &rps_config_table[pick % nentries];
	struct rps_config cfg = base, again = base;
	char text[512];

	if (rps_config_set(&cfg, e->name, v))
		return;
	rps_cfg_format_value(&cfg, e, text, sizeof(text));
	if (e->type == RPS_CFG_DOUBLE || rps_cfg_is_secret(e))
		return;
	/* An empty string is shown as "" (two quote marks); a value that is
	 * literally "" is shown the same way and stays as it is. */
	if (e->type == RPS_CFG_STRING && !strcmp(text, "\"\"") && !((const char *)&cfg + e->offset)[0])
		text[0] = 0;
	if (rps_config_set(&again, e->name, text) || !rps_cfg_entry_equal(e, &cfg, &again)) {
		fprintf(stderr, "fuzz_config: setting %s: value \"%s\" taken, shown as \"%s\", not taken back\n",
			e->name, v, text);
		abort();
	}
}

static void parse_args(char *buf, size_t len)
{
	char *argv[MAX_ARGS + 1];
	int argc = 0, dump = 0;
	struct rps_config cfg = base;
	size_t i = 0;

	argv[argc++] = "fuzz";
	while (i <= len && argc < MAX_ARGS) {
		argv[argc++] = buf + i;
		i += strlen(buf + i) + 1;
	}
	argv[argc] = NULL;
	(void)rps_config_parse_args(&cfg, &argc, argv, &dump);
	fuzz_quiet(); /* --log-level may have been among the flags */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	char *text;
	uint8_t mode;

	if (!init) {
		fuzz_quiet();
		rps_config_init(&base);
		while (rps_config_table[nentries].name)
			nentries++;
		init = 1;
	}
	if (size < 2)
		return 0;
	mode = data[0];
	text = malloc(size); /* the rest and a NUL */
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	switch (mode % 6) {
	case 0:
		set_value((uint8_t)text[0], text + 1);
		break;
	case 1:
		parse_args(text, size - 1);
		break;
	case 2: {
		int cores[8];
		int n = rps_config_parse_cores(text, cores, 8);

		if (n > 8)
			abort();
		break;
	}
	case 3: {
		char host[16];
		uint16_t port;

		if (!rps_config_parse_hostport(text, host, sizeof(host), &port) &&
		    (port == 0 || strlen(host) >= sizeof(host)))
			abort();
		break;
	}
	case 4: {
		struct rps_init in = {0};
		const char *why = NULL;

		if (rps_init_parse(text, &in, &why) && !why)
			abort();
		break;
	}
	default: {
		const struct rps_config_entry *e = rps_cfg_entry_find_loose(text, strlen(text));

		if (e && !rps_cfg_entry_find(e->name))
			abort();
		if (strlen(text) < 64)
			(void)rps_cfg_closest_name(text);
		break;
	}
	}
	free(text);
	return 0;
}
