/* Private to src/ckpt_*.c: what the checkpoint files share.
 * Dependencies point one way: ckpt_write -> ckpt_dir (retention) ->
 * ckpt_read (verify) -> ckpt_format (CRC, names, header -> info). */
#ifndef RPS_CKPT_INT_H
#define RPS_CKPT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "src/ckpt.h"

#define CKPT_BUF_BYTES	 (1u << 20)
#define CKPT_HDR_CRC_OFF offsetof(struct rps_ckpt_hdr, hdr_crc)

/* info from a header that passed the checks (or was just written). */
void rps_ckpt_info_from_hdr(const struct rps_ckpt_hdr *h, const char *path,
			    struct rps_ckpt_info *info);

/* One pass over a file: header checks, then every slice (fn may be NULL:
 * verify only). rps_ckpt_read is a verify pass then a callback pass. */
int rps_ckpt_read_once(const char *path, uint32_t rank, uint32_t shard, uint32_t num_shards,
		       rps_ckpt_slice_fn fn, void *arg, struct rps_ckpt_info *info_p);

#endif
