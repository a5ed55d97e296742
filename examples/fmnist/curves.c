/* fmnist-train --curves: see curves.h. */
#include "curves.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const names[CURVE_N] = {"training loss", "test accuracy", "samples/s"};
static const char *const colors[CURVE_N] = {"#d62728", "#1f77b4", "#2ca02c"};

void curves_init(struct curves *cv)
{
	memset(cv, 0, sizeof(*cv));
	for (int k = 0; k < CURVE_N; k++)
		cv->c[k].stride = 1;
}

void curves_add(struct curves *cv, enum curve_kind k, double x, double y)
{
	struct curve *c = &cv->c[k];

	if (!isfinite(y))
		return;
	if (c->skip) {
		c->skip--;
		return;
	}
	if (c->n == CURVES_MAX) {
		for (size_t i = 0; i < CURVES_MAX / 2; i++) {
			c->x[i] = c->x[2 * i];
			c->y[i] = c->y[2 * i];
		}
		c->n = CURVES_MAX / 2;
		c->stride *= 2;
	}
	c->x[c->n] = x;
	c->y[c->n] = y;
	c->n++;
	c->skip = c->stride - 1;
}

/* One panel of the SVG: the curve k in the box at (ox, oy), w x h. */
static void svg_panel(FILE *f, const struct curve *c, int k, double ox, double oy, double w,
		      double h)
{
	const double L = 60, B = 28, T = 24, R = 12;
	double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;

	for (size_t i = 0; i < c->n; i++) {
		x1 = fmax(x1, c->x[i]);
		y0 = fmin(y0, c->y[i]);
		y1 = fmax(y1, c->y[i]);
	}
	if (!c->n) {
		y0 = 0;
		y1 = 1;
	}
	if (y1 - y0 < 1e-12) {
		y0 -= 0.5;
		y1 += 0.5;
	}
	fprintf(f, "<g transform=\"translate(%.0f,%.0f)\">\n", ox, oy);
	fprintf(f, "<text x=\"%.0f\" y=\"16\" font-weight=\"bold\">%s (%zu points)</text>\n", L,
		names[k], c->n);
	fprintf(f,
		"<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fbfcfd\" "
		"stroke=\"#9aa1b0\"/>\n",
		L, T, w - L - R, h - T - B);
	for (int i = 0; i <= 4; i++) {
		double v = y0 + (y1 - y0) * i / 4, y = T + (1 - (double)i / 4) * (h - T - B);

		fprintf(f,
			"<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eceef2\"/>"
			"<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
			L, w - R, y, y, L - 4, y + 4, v);
	}
	for (int i = 0; i <= 5; i++) {
		double v = x0 + (x1 - x0) * i / 5, x = L + (double)i / 5 * (w - L - R);

		fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.3g s</text>\n", x,
			h - 8, v);
	}
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
		colors[k]);
	for (size_t i = 0; i < c->n; i++)
		fprintf(f, "%s%.1f,%.1f", i ? " " : "",
			L + (c->x[i] - x0) / (x1 - x0) * (w - L - R),
			T + (1 - (c->y[i] - y0) / (y1 - y0)) * (h - T - B));
	fprintf(f, "\"/>\n</g>\n");
}

static int write_svg(const struct curves *cv, const char *path, const char *title)
{
	const double W = 720, H = 240;
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "fmnist-train: --curves %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"font-family=\"sans-serif\" font-size=\"11\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		"<text x=\"12\" y=\"22\" font-size=\"14\" font-weight=\"bold\">%s</text>\n",
		W, 30 + H * CURVE_N, title);
	for (int k = 0; k < CURVE_N; k++)
		svg_panel(f, &cv->c[k], k, 0, 30 + H * k, W, H);
	fprintf(f, "</svg>\n");
	if (ferror(f) | fclose(f) || rename(tmp, path)) {
		fprintf(stderr, "fmnist-train: --curves %s: write failed: %s\n", path,
			strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* PNG: the points into a data file, gnuplot draws three panels. */
static int write_png(const struct curves *cv, const char *path, const char *title)
{
	char dat[4096], cmd[8400];
	FILE *f, *g;
	int rc;

	if (system("command -v gnuplot >/dev/null 2>&1")) {
		fprintf(stderr,
			"fmnist-train: --curves %s: a PNG needs gnuplot (apt-get install "
			"gnuplot-nox); or ask for FILE.svg, written without it\n",
			path);
		return -1;
	}
	snprintf(dat, sizeof(dat), "%s.dat", path);
	f = fopen(dat, "w");
	if (!f) {
		fprintf(stderr, "fmnist-train: --curves %s: %s\n", dat, strerror(errno));
		return -1;
	}
	for (int k = 0; k < CURVE_N; k++) {
		for (size_t i = 0; i < cv->c[k].n; i++)
			fprintf(f, "%.6g %.9g\n", cv->c[k].x[i], cv->c[k].y[i]);
		fprintf(f, "%s", cv->c[k].n ? "\n\n" : "0 NaN\n\n\n");
	}
	fclose(f);
	snprintf(cmd, sizeof(cmd), "gnuplot > /dev/null");
	g = popen(cmd, "w");
	if (!g) {
		unlink(dat);
		return -1;
	}
	fprintf(g,
		"set terminal pngcairo size 720,720\nset output '%s'\nset multiplot layout 3,1 "
		"title '%s'\nset xlabel 's'\nset grid\n",
		path, title);
	for (int k = 0; k < CURVE_N; k++)
		fprintf(g, "plot '%s' index %d using 1:2 with lines lw 2 lc rgb '%s' title '%s'\n",
			dat, k, colors[k], names[k]);
	fprintf(g, "unset multiplot\n");
	rc = pclose(g);
	unlink(dat);
	if (rc) {
		fprintf(stderr, "fmnist-train: --curves %s: gnuplot failed (status %d)\n", path,
			rc);
		return -1;
	}
	return 0;
}

int curves_write(const struct curves *cv, const char *path, const char *title)
{
	size_t n = strlen(path);

	if (n > 4 && !strcasecmp(path + n - 4, ".png"))
		return write_png(cv, path, title);
	return write_svg(cv, path, title);
}
