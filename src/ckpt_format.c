/* Shard checkpoints: the file format's pieces shared by writer and reader:
 * CRC-32C, file names, header -> info. See src/ckpt.h for the format. */
#include "src/ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <string.h>

#include "src/ckpt_int.h"

/* ---- CRC-32C (Castagnoli): ISA-L ------------------------------------- */

/* ISA-L's crc32_iscsi (SSE4.2 crc32 / PCLMUL folding, chosen at run time)
 * neither inverts in nor out, and takes an int length. Measured against the
 * slice-by-8 it replaces: tests/bench/bench_crc32c.c, HACKING.md. */
uint32_t rps_crc32c(uint32_t crc, const void *buf, size_t len)
{
	unsigned char *p = (unsigned char *)buf;

	crc = ~crc;
	while (len) {
		int n = len > (1u << 30) ? 1 << 30 : (int)len;

		crc = crc32_iscsi(p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return ~crc;
}

/* ---- names ------------------------------------------------------------- */

int rps_ckpt_path(const char *dir, uint32_t server_rank, uint32_t shard, uint64_t clock, char *buf,
		  size_t len)
{
	int n = snprintf(buf, len, "%s/server%" PRIu32 "-shard%" PRIu32 "-clock%" PRIu64 ".ckpt",
			 dir, server_rank, shard, clock);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int rps_ckpt_parse_name(const char *name, uint32_t *rank_p, uint32_t *shard_p, uint64_t *clock_p)
{
	unsigned int r, s;
	unsigned long long c;
	char canon[96];
	int n = 0, kind;

	if (sscanf(name, "server%u-shard%u-clock%llu.ckpt%n", &r, &s, &c, &n) != 3 || n == 0)
		return 0;
	if (name[n] == '\0')
		kind = 1;
	else if (!strcmp(name + n, ".tmp"))
		kind = 2;
	else
		return 0;
	snprintf(canon, sizeof(canon), "server%u-shard%u-clock%llu.ckpt", r, s, c);
	if (strlen(canon) != (size_t)n || strncmp(canon, name, (size_t)n))
		return 0;
	*rank_p = r;
	*shard_p = s;
	*clock_p = c;
	return kind;
}

/* ---- header -> info ---------------------------------------------------- */

void rps_ckpt_info_from_hdr(const struct rps_ckpt_hdr *h, const char *path,
			    struct rps_ckpt_info *info)
{
	memset(info, 0, sizeof(*info));
	snprintf(info->path, sizeof(info->path), "%s", path);
	info->version = h->version;
	info->server_rank = h->server_rank;
	info->shard = h->shard;
	info->num_shards = h->num_shards;
	info->clock = h->clock;
	info->nslices = h->nslices;
	info->key_min = h->key_min;
	info->key_max = h->key_max;
	info->created_ns = h->created_ns;
	info->payload_bytes = h->payload_bytes;
	info->payload_crc = h->payload_crc;
}
