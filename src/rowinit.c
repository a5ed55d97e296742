/* Sparse tables: initial row values (src/rowinit.h). */
#include "src/rowinit.h"
#include "src/rowprec.h"

#include <errno.h>
#include <math.h>

#include <rdmaps/table.h>

/* A double in [0, 1) from 53 bits of x. */
static inline double unit(uint64_t x)
{
	return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

void rps_row_init(uint32_t init, float scale, uint64_t seed, uint64_t id, uint32_t dim, float *out)
{
	uint64_t base = rps_mix64(seed ^ rps_mix64(id));

	for (uint32_t e = 0; e < dim; e++) {
		uint64_t x = rps_mix64(base + 2ull * e);

		switch (init) {
		case RPS_TABLE_INIT_UNIFORM:
			out[e] = (float)((2.0 * unit(x) - 1.0) * scale);
			break;
		case RPS_TABLE_INIT_NORMAL: {
			/* Box-Muller on two counters of the element */
			double u1 = unit(x), u2 = unit(rps_mix64(base + 2ull * e + 1));

			if (u1 < 1e-300)
				u1 = 1e-300;
			out[e] =
			    (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * scale);
			break;
		}
		case RPS_TABLE_INIT_ZERO:
		default:
			out[e] = 0.0f;
			break;
		}
	}
}

int rps_table_initial_row(const struct rps_table_spec *spec, uint64_t id, float *row)
{
	if (!spec || !row || !spec->dim)
		return -EINVAL;
	if (spec->init != RPS_TABLE_INIT_ZERO && spec->init != RPS_TABLE_INIT_UNIFORM &&
	    spec->init != RPS_TABLE_INIT_NORMAL)
		return -EINVAL;
	rps_row_init(spec->init, spec->init_scale, spec->seed, id, spec->dim, row);
	if (spec->precision == RPS_TABLE_FP16 || spec->precision == RPS_TABLE_BF16)
		rps_row_round(spec->precision, row, spec->dim); /* what the server stores */
	return 0;
}
