/* The servers' formula for a new row (librdmaps' src/rowinit.c, documented in
 * docs/tables.md), reproduced here because the public API has no call for it:
 * element e of row id is a function of splitmix64 counters
 *     base = mix(seed ^ mix(id)),  x_e = mix(base + 2e),  y_e = mix(base + 2e + 1)
 * with u(x) = (x >> 11) / 2^53:
 *     uniform: (2 u(x_e) - 1) * scale
 *     normal:  sqrt(-2 ln u(x_e)) cos(2 pi u(y_e)) * scale   (u(x_e) >= 1e-300)
 *     zero:    0
 * computed in double and rounded to float once. integration.text's check
 * that --local and a distributed run agree fails if the two drift apart. */
#include "row_init.h"

#include <math.h>

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double unit(uint64_t x)
{
	return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

void text_row_init(const struct rps_table_spec *spec, uint64_t id, float *row)
{
	uint64_t base = mix(spec->seed ^ mix(id));
	double scale = spec->init_scale;

	for (uint32_t e = 0; e < spec->dim; e++) {
		uint64_t x = mix(base + 2ull * e);

		switch (spec->init) {
		case RPS_TABLE_INIT_UNIFORM:
			row[e] = (float)((2.0 * unit(x) - 1.0) * scale);
			break;
		case RPS_TABLE_INIT_NORMAL: {
			double u1 = unit(x), u2 = unit(mix(base + 2ull * e + 1));

			if (u1 < 1e-300)
				u1 = 1e-300;
			row[e] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * scale);
			break;
		}
		default:
			row[e] = 0.0f;
			break;
		}
	}
}
