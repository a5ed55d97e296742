/* rdmaps — configuration objects.
 *
 * Every setting of rdmaps (docs/options.md) has a name ("shard_bytes"), an
 * environment variable (RDMAPS_SHARD_BYTES) and a flag (--shard-bytes). A
 * configuration object holds one value for each: the built-in default, then
 * the RDMAPS_* environment, then whatever the program sets or parses. Programs
 * hand it to rps_worker_create / rps_server_create through their opts; the
 * library keeps no process-wide configuration.
 *
 *   struct rps_config *cfg;
 *   int dump = 0;
 *   if (rps_config_create(&cfg) || rps_config_parse_args(cfg, &argc, argv, &dump))
 *           exit(2);                  // the bad setting was reported once
 *   rps_config_set(cfg, "transport", "rdma");
 *   ...
 *   rps_config_destroy(cfg);
 *
 * Names accept '-' for '_' and any case. Sizes accept K/M/G/T suffixes
 * (1024-based). Returns: 0, or
 *   -ENOENT  no setting of that name
 *   -EINVAL  a value the setting does not accept, or a getter of the wrong type
 *            (it is logged once, with the reason, where it was found)
 *   -ENOMEM  out of memory
 */
#ifndef RDMAPS_CONFIG_H
#define RDMAPS_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include <rdmaps/status.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rps_config; /* opaque */

/* A new configuration: defaults, then RDMAPS_* variables. Unknown RDMAPS_*
 * variables are warned about once per process. A bad variable: -EINVAL (logged
 * once) and *cfg_p is NULL. */
RPS_API int rps_config_create(struct rps_config **cfg_p);
/* NULL is allowed. */
RPS_API void rps_config_destroy(struct rps_config *cfg);

/* Set one setting from text: rps_config_set(cfg, "shard_bytes", "8M"). */
RPS_API int rps_config_set(struct rps_config *cfg, const char *name, const char *value);
/* Parse --flags from argv, removing the ones consumed (*argc_p updated).
 * "--config" sets *dump_p = 1 (dump_p may be NULL); "--help" and arguments
 * that are not flags are left in argv, and so is everything after "--".
 * Unknown flag or bad value: -EINVAL, logged once, cfg and argv unchanged. */
RPS_API int rps_config_parse_args(struct rps_config *cfg, int *argc_p, char **argv, int *dump_p);
/* Print every setting: name, value, where it came from (default/env/flag), help. */
RPS_API void rps_config_dump(const struct rps_config *cfg, FILE *out);
/* Print every flag with its default, for --help. */
RPS_API void rps_config_usage(FILE *out);

/* Typed getters by name. _str: strings (the pointer lives as long as cfg and
 * until the setting changes); _int: integers and booleans (0/1); _u64: sizes
 * and counts; _double: real numbers. A getter of another type than the
 * setting's: -EINVAL. */
RPS_API int rps_config_get_str(const struct rps_config *cfg, const char *name,
			       const char **value_p);
RPS_API int rps_config_get_int(const struct rps_config *cfg, const char *name, int *value_p);
RPS_API int rps_config_get_u64(const struct rps_config *cfg, const char *name, uint64_t *value_p);
RPS_API int rps_config_get_double(const struct rps_config *cfg, const char *name,
				  double *value_p);

#ifdef __cplusplus
}
#endif
#endif
