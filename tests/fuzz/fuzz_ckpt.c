/* Fuzz target: the checkpoint reader (src/ckpt_read.c) and checkpoint file
 * names (rps_ckpt_parse_name, src/ckpt_format.c).
 *
 * Input: byte 0 is a mode, the rest a checkpoint file. Mode bits:
 *   1  recompute the header's CRC-32C before reading (so that mutations get
 *      past the header checksum to the slice records),
 *   2  recompute the payload's CRC-32C,
 *   4  read with a callback (rps_ckpt_read: verify, then a second pass that
 *      hands out each slice; the callback touches every float) instead of
 *      rps_ckpt_verify,
 *   8  the rest is a file name for rps_ckpt_parse_name instead.
 * The file is read as the server it names (rank and shard from its header),
 * so the checks after the rank check are reached. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/ckpt.h"
#include "src/ckpt_int.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_slice(const struct rps_ckpt_slice *s, void *arg)
{
	(void)arg;
	if (s->nelems == 0 || s->nstate > 2)
		abort(); /* the reader promised to refuse these */
	fuzz_touch(s->params, s->nelems * sizeof(float));
	for (uint32_t k = 0; k < s->nstate; k++)
		fuzz_touch(s->state[k], s->nelems * sizeof(float));
	if (s->optim)
		fuzz_touch(s->optim, sizeof(*s->optim));
	return 0;
}

static void parse_name(const uint8_t *data, size_t size)
{
	char name[512];
	uint32_t rank, shard;
	uint64_t clock;

	if (size >= sizeof(name))
		size = sizeof(name) - 1;
	memcpy(name, data, size);
	name[size] = 0;
	if (rps_ckpt_parse_name(name, &rank, &shard, &clock) == 1) {
		char again[RPS_CKPT_PATH_MAX];

		/* a name it takes is the canonical name of what it parsed */
		if (rps_ckpt_path(".", rank, shard, clock, again, sizeof(again)) ||
		    strcmp(again + 2, name))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	struct rps_ckpt_hdr h;
	struct rps_ckpt_info info;
	char path[64];
	uint8_t *file;
	uint8_t mode;

	if (!init) {
		fuzz_quiet();
		init = 1;
	}
	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	if (mode & 8) {
		parse_name(data, size);
		return 0;
	}
	file = malloc(size ? size : 1);
	if (!file)
		return 0;
	memcpy(file, data, size);
	memset(&h, 0, sizeof(h));
	if (size >= sizeof(h)) {
		memcpy(&h, file, sizeof(h));
		if (mode & 2)
			h.payload_crc = rps_crc32c(0, file + sizeof(h), size - sizeof(h));
		if (mode & 1)
			h.hdr_crc = rps_crc32c(0, &h, CKPT_HDR_CRC_OFF);
		memcpy(file, &h, sizeof(h));
	}
	fuzz_file(file, size, path, sizeof(path));
	if (mode & 4)
		(void)rps_ckpt_read(path, h.server_rank, h.shard, 0, on_slice, NULL, &info);
	else
		(void)rps_ckpt_verify(path, h.server_rank, h.shard, (mode & 16) ? h.num_shards : 0,
				      &info);
	free(file);
	return 0;
}
