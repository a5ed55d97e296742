/* Fuzz target: one .npy image (rps_npy_parse, src/npz.c): magic, version,
 * the header's Python dict literal (descr, fortran_order, shape), the data
 * size against the shape. The image lies in a buffer of exactly its size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/alloc.h"
#include "src/npz.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	struct rps_npz_entry e;
	uint8_t *img;

	if (!init) {
		fuzz_quiet();
		init = 1;
	}
	img = malloc(size ? size : 1);
	if (!img)
		return 0;
	memcpy(img, data, size);
	memset(&e, 0, sizeof(e));
	strcpy(e.name, "fuzz");
	if (rps_npy_parse(img, size, &e) == 0) {
		size_t n = 1;

		if (e.ndim > RPS_NPZ_NDIM_MAX)
			abort();
		for (uint32_t i = 0; i < e.ndim; i++)
			n *= e.shape[i];
		if (n != e.nelems)
			abort(); /* nelems is the product of the shape */
		if (!e.data == !e.u64)
			abort(); /* float32 or uint64 ('<u8'), never both */
		if (e.u64)
			fuzz_touch(e.u64, e.nelems * sizeof(uint64_t));
		else
			fuzz_touch(e.data, e.nelems * sizeof(float));
		rps_free(e.data);
		rps_free(e.u64);
	}
	free(img);
	return 0;
}
