/* fmnist-train --curves FILE: the run's curves (training loss, test accuracy,
 * samples/s against seconds since the start) drawn at the end as an SVG
 * (written here, no dependency) or, for FILE.png, a PNG by gnuplot (it must
 * be installed: the error says so otherwise). Memory is bounded: a curve
 * longer than CURVES_MAX points keeps every other point. */
#ifndef FMNIST_CURVES_H
#define FMNIST_CURVES_H

#include <stddef.h>

#define CURVES_MAX 4096

enum curve_kind { CURVE_LOSS, CURVE_ACCURACY, CURVE_SPS, CURVE_N };

struct curve {
	size_t n, stride, skip;
	double x[CURVES_MAX], y[CURVES_MAX];
};

struct curves {
	struct curve c[CURVE_N];
};

void curves_init(struct curves *cv);
void curves_add(struct curves *cv, enum curve_kind k, double x, double y);
/* Write path (.svg, or .png through gnuplot). 0, or -1 with the reason on
 * stderr. */
int curves_write(const struct curves *cv, const char *path, const char *title);

#endif
