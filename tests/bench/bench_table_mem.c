/* bench_table_mem: the memory a shard's table costs per row, measured.
 *
 *   bench_table_mem [ROWS [DIM [HINT [PREC [evict]]]]]   (defaults 10000000 64 ROWS fp32)
 *
 * Creates one row table (server/rowtab.c, what a shard holds per table) and
 * ROWS rows of DIM floats in it (lazily initialised, uniform), then prints the
 * process's resident set before and after (VmRSS of /proc/self/status), the
 * bytes of row data (ROWS * DIM * 4), and the overhead per row beyond the
 * data: RSS delta / ROWS - DIM * 4. HINT is the table's capacity hint (0:
 * grow from small, the index doubling as it fills). The optimizer is sgd (no
 * per-element state; the per-row step counter, 4 bytes, is counted in the
 * overhead). PREC fp32 | fp16 | bf16: how rows are stored (2 bytes an
 * element for fp16 / bf16: the data is then ROWS * DIM * 2). `evict`: with
 * eviction on (RDMAPS_TABLE_EVICT_CLOCKS / _SECONDS: a touch word and a
 * meta word per row), then again after every row was marked updated once
 * (a trained row: its meta word written too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmaps/table.h>

#include "server/rowtab.h"
#include "src/rowinit.h"
#include "src/rowprec.h"

static long rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtol(line + 6, NULL, 10);
	fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	uint64_t rows = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000ull;
	uint32_t dim = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 64;
	uint64_t hint = argc > 3 ? strtoull(argv[3], NULL, 10) : rows;
	const char *pname = argc > 4 ? argv[4] : "fp32";
	int evict = argc > 5 && !strcmp(argv[5], "evict");
	uint32_t prec = !strcmp(pname, "fp16") ? RPS_TABLE_FP16
			: !strcmp(pname, "bf16") ? RPS_TABLE_BF16
						 : RPS_TABLE_FP32;
	uint32_t eb = rps_row_elem_bytes(prec);
	struct rps_rowtab rt;
	struct timespec t0, t1;
	long before, after;
	double per;

	before = rss_kib();
	if (rps_rowtab_init(&rt, 1, dim, RPS_TABLE_INIT_UNIFORM, 0.01f, 1, RPS_OPT_SGD, hint)) {
		fprintf(stderr, "bench_table_mem: cannot create the table\n");
		return 1;
	}
	if (strcmp(pname, rps_row_prec_name(prec)) || rps_rowtab_set_precision(&rt, prec)) {
		fprintf(stderr, "bench_table_mem: precision %s: fp32, fp16 or bf16\n", pname);
		return 2;
	}
	if (argc > 5 && (!evict || rps_rowtab_evict_enable(&rt))) {
		fprintf(stderr, "bench_table_mem: the 5th argument is `evict` or nothing\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 0; i < rows; i++)
		if (rps_rowtab_get(&rt, rps_mix64(i), NULL) < 0) {
			fprintf(stderr, "bench_table_mem: row %llu: table full or out of memory\n",
				(unsigned long long)i);
			return 1;
		}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	after = rss_kib();
	per = ((double)(after - before) * 1024.0) / (double)rows - dim * (double)eb;
	printf("rows %llu dim %u hint %llu precision %s%s\n", (unsigned long long)rows, dim,
	       (unsigned long long)hint, pname, evict ? " eviction on" : "");
	printf("rss before %ld KiB, after %ld KiB, delta %.1f MiB\n", before, after,
	       (double)(after - before) / 1024.0);
	printf("row data %.1f MiB\n", (double)rows * dim * eb / 1048576.0);
	printf("overhead per row beyond data: %.2f bytes (slot: id 8 + versions 8 + pad %u, "
	       "index %.2f, step counter 4, index rehashes %llu)\n",
	       per, rt.slot_bytes - 16 - dim * eb,
	       (double)rt.nbuckets * RPS_ROWTAB_BUCKET * 4 / (double)rows,
	       (unsigned long long)rt.rehashes);
	printf("created %.0f rows/s\n",
	       (double)rows / ((double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9));
	if (evict) {
		long upd;

		rt.epoch = 2;
		for (uint64_t s = 0; s < rows; s++)
			rps_rowtab_updated(&rt, s);
		upd = rss_kib();
		printf("every row updated once (meta words written): rss %ld KiB, overhead per "
		       "row beyond data %.2f bytes\n",
		       upd, ((double)(upd - before) * 1024.0) / (double)rows - dim * (double)eb);
	}
	rps_rowtab_fini(&rt);
	return 0;
}
