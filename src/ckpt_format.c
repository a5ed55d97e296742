/* Shard checkpoints: the file format's pieces shared by writer and reader:
 * CRC-32C, file names, header -> info. See src/ckpt.h for the format. */
#include "src/ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "src/ckpt_int.h"

/* ---- CRC-32C (Castagnoli), slice-by-8 --------------------------------- */

#define CRC32C_POLY 0x82f63b78u

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tab_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			crc_tab[k][i] =
			    (crc_tab[k - 1][i] >> 8) ^ crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

uint32_t rps_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_tab_init);
	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= crc;
		crc = crc_tab[7][v & 0xff] ^ crc_tab[6][(v >> 8) & 0xff] ^
		      crc_tab[5][(v >> 16) & 0xff] ^ crc_tab[4][(v >> 24) & 0xff] ^
		      crc_tab[3][(v >> 32) & 0xff] ^ crc_tab[2][(v >> 40) & 0xff] ^
		      crc_tab[1][(v >> 48) & 0xff] ^ crc_tab[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
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
