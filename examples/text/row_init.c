/* Until <rdmaps/table.h> exports the servers' own function: the formula the
 * servers use, reproduced (see text_row_init's callers in local_table.c). */
#include "row_init.h"

#include <math.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [0, 1) with 24 bits */
static float unit(uint64_t *s)
{
	return (float)(splitmix64(s) >> 40) * (1.0f / 16777216.0f);
}

void text_row_init(const struct rps_table_spec *spec, uint64_t id, float *row)
{
	uint64_t s = spec->seed ^ (id * 0xd1b54a32d192ed03ull);

	switch (spec->init) {
	case RPS_TABLE_INIT_ZERO:
		memset(row, 0, spec->dim * sizeof(float));
		break;
	case RPS_TABLE_INIT_UNIFORM:
		for (uint32_t d = 0; d < spec->dim; d++)
			row[d] = spec->init_scale * (2.0f * unit(&s) - 1.0f);
		break;
	default: /* normal: Box-Muller */
		for (uint32_t d = 0; d < spec->dim; d += 2) {
			float u1 = unit(&s), u2 = unit(&s);
			float r = sqrtf(-2.0f * logf(1.0f - u1)), a = 6.2831853f * u2;

			row[d] = spec->init_scale * r * cosf(a);
			if (d + 1 < spec->dim)
				row[d + 1] = spec->init_scale * r * sinf(a);
		}
		break;
	}
}
