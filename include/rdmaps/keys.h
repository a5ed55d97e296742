/* rdmaps — where keys live.
 *
 * Every node computes a key's place from the same settings (RDMAPS_KEY_MAP,
 * RDMAPS_KEY_RANGE, RDMAPS_SLICE_BYTES; docs/options.md), so a program can
 * too: a benchmark that wants its keys spread evenly over the servers picks
 * them with this.
 */
#ifndef RDMAPS_KEYS_H
#define RDMAPS_KEYS_H

#include <stdint.h>

#include <rdmaps/config.h>
#include <rdmaps/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The server (0 .. num_servers - 1) holding the first slice of key in a
 * cluster of num_servers servers under cfg's key settings (the next slices of
 * a large tensor go to the next servers). 0, or -EINVAL (num_servers 0). */
RPS_API int rps_key_server(const struct rps_config *cfg, uint32_t num_servers, rps_key_t key,
			   uint32_t *server_p);

#ifdef __cplusplus
}
#endif
#endif
