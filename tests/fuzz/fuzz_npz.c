/* Fuzz target: the .npz model reader (rps_npz_read, src/npz.c, on libzip).
 *
 * Input: byte 0 is a mode.
 *   mode even  the rest is the archive file itself, as rdmaps-ctl or a
 *              worker would open it (zip structure, member names, sizes,
 *              CRCs, compression: libzip's; what we do with each member:
 *              ours);
 *   mode odd   the rest is a list of members, each a name length (1 byte), a
 *              name, an image length (2 bytes, little-endian) and the image;
 *              they are packed into a valid archive (libzip,
 *              zip_source_buffer; stored, or deflated if mode & 2) and read
 *              back, so that mutations reach the member handling and the
 *              .npy parser behind valid CRCs.
 * Whatever is read is freed with rps_npz_free. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "src/npz.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MEMBERS_MAX 8

/* Pack the member list into an archive in memory; its bytes in *out_p. */
static int pack(const uint8_t *data, size_t size, int deflate, uint8_t **out_p, size_t *len_p)
{
	zip_error_t ze;
	zip_source_t *src;
	zip_t *z;
	zip_stat_t st;
	int n = 0;

	zip_error_init(&ze);
	src = zip_source_buffer_create(NULL, 0, 0, &ze);
	if (!src)
		return -1;
	zip_source_keep(src);
	z = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
	if (!z) {
		zip_source_free(src);
		return -1;
	}
	while (size >= 3 && n < MEMBERS_MAX) {
		char name[256];
		size_t nl = data[0], il;
		zip_source_t *m;
		zip_int64_t idx;

		if (size < 1 + nl + 2)
			break;
		memcpy(name, data + 1, nl);
		name[nl] = 0;
		il = (size_t)data[1 + nl] | (size_t)data[2 + nl] << 8;
		data += 3 + nl;
		size -= 3 + nl;
		if (il > size)
			il = size;
		m = zip_source_buffer(z, data, il, 0);
		if (!m)
			break;
		idx = zip_file_add(z, name, m, ZIP_FL_ENC_UTF_8);
		if (idx < 0) {
			zip_source_free(m);
		} else {
			zip_set_file_compression(z, (zip_uint64_t)idx,
						 deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 1);
			n++;
		}
		data += il;
		size -= il;
	}
	if (zip_close(z) < 0) {
		zip_discard(z);
		zip_source_free(src);
		return -1;
	}
	/* the buffer source now holds the archive */
	if (zip_source_stat(src, &st) < 0 || zip_source_open(src) < 0) {
		zip_source_free(src);
		return -1;
	}
	*out_p = malloc(st.size ? st.size : 1);
	if (!*out_p || zip_source_read(src, *out_p, st.size) != (zip_int64_t)st.size) {
		free(*out_p);
		zip_source_close(src);
		zip_source_free(src);
		return -1;
	}
	*len_p = st.size;
	zip_source_close(src);
	zip_source_free(src);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	struct rps_npz_entry *e = NULL;
	size_t n = 0;
	char path[64];
	uint8_t *packed = NULL;
	size_t plen = 0;

	if (!init) {
		fuzz_quiet();
		init = 1;
	}
	if (size < 1)
		return 0;
	if (data[0] & 1) {
		if (pack(data + 1, size - 1, data[0] & 2, &packed, &plen))
			return 0;
		fuzz_file(packed, plen, path, sizeof(path));
	} else {
		fuzz_file(data + 1, size - 1, path, sizeof(path));
	}
	if (rps_npz_read(path, &e, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (!e[i].name[0] || strlen(e[i].name) >= RPS_NPZ_NAME_MAX)
				abort();
			if (!e[i].data == !e[i].u64)
				abort(); /* float32 or uint64 ('<u8'), never both */
			if (e[i].u64)
				fuzz_touch(e[i].u64, e[i].nelems * sizeof(uint64_t));
			else
				fuzz_touch(e[i].data, e[i].nelems * sizeof(float));
		}
		rps_npz_free(e, n);
	}
	free(packed);
	return 0;
}
