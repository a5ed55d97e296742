/* Metrics: a small registry of named counters and gauges, rendered in the
 * Prometheus text exposition format (version 0.0.4):
 *
 *   # HELP rdmaps_pushes_total pushes applied by the shard's update thread
 *   # TYPE rdmaps_pushes_total counter
 *   rdmaps_pushes_total{shard="0"} 1234
 *   rdmaps_pushes_total{shard="1"} 1187
 *
 * A family is one name with one type and one HELP text; each (name, labels)
 * is one metric of it. Families render in registration order, their metrics
 * too. Served over HTTP by http/http.h (rps_http_metrics_handler).
 *
 * Updates are lock-free and cheap enough for hot paths: a relaxed atomic add
 * (counters) or store (gauges) on the metric's own cache line. Registration,
 * removal and rendering take the registry's mutex (slow paths).
 *
 * Names: [a-zA-Z_:][a-zA-Z0-9_:]*; counters should end in _total, units in
 * the name (_bytes, _seconds). Labels: the text between the braces, e.g.
 * `shard="0",transport="tcp"` — NAME="VALUE" pairs separated by commas, NAME
 * [a-zA-Z_][a-zA-Z0-9_]* not starting with "__", VALUE with \\, \" and \n
 * escaped; NULL or "" for none.
 */
#ifndef RPS_METRICS_H
#define RPS_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RPS_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

enum rps_metric_type {
	RPS_METRIC_COUNTER = 1, /* uint64, only goes up */
	RPS_METRIC_GAUGE,	/* double, set / add */
	RPS_METRIC_GAUGE_FN,	/* double computed by a callback when rendered */
};

struct rps_metrics_family;

/* One metric. Only `value` is touched on hot paths; it has the line to itself. */
struct rps_metric {
	_Alignas(64) atomic_uint_least64_t value; /* counter, or the bits of a gauge's double */
	enum rps_metric_type type;
	double (*fn)(void *arg); /* GAUGE_FN */
	void *fn_arg;
	char *labels; /* "" if none */
	struct rps_metrics_family *family;
	struct rps_metric *next; /* in the family */
};

struct rps_metrics;

int rps_metrics_create(struct rps_metrics **reg_p);
/* Frees every metric: no updates may run any more. NULL is fine. */
void rps_metrics_destroy(struct rps_metrics *reg);
/* The process-wide registry, created on first use (never destroyed); NULL only
 * when out of memory. */
struct rps_metrics *rps_metrics_default(void);

/* Register, or find: the same (name, labels) of the same type returns the
 * existing metric (its value kept; a GAUGE_FN gets the new fn/arg). The first
 * registration of a name fixes its type and HELP. *m_p is valid until
 * rps_metrics_remove / destroy.
 * -EINVAL: bad name or labels, NULL help, the name registered with another type.
 * -ENOMEM. */
int rps_metrics_counter(struct rps_metrics *reg, const char *name, const char *help,
			const char *labels, struct rps_metric **m_p);
int rps_metrics_gauge(struct rps_metrics *reg, const char *name, const char *help,
		      const char *labels, struct rps_metric **m_p);
/* fn(arg) is called while rendering, on the renderer's thread, under the
 * registry's mutex: it must be quick and must not call into the registry.
 * m_p may be NULL. */
int rps_metrics_gauge_fn(struct rps_metrics *reg, const char *name, const char *help,
			 const char *labels, double (*fn)(void *arg), void *arg,
			 struct rps_metric **m_p);
/* Unregister and free m (e.g. before the object a GAUGE_FN reads is freed).
 * Nobody may update m any more. A family left empty is not rendered. */
void rps_metrics_remove(struct rps_metrics *reg, struct rps_metric *m);

/* The exposition text into *text_p (NUL-terminated, rps_malloc'd: rps_free it)
 * and its length into *len_p. -ENOMEM. */
int rps_metrics_render(struct rps_metrics *reg, char **text_p, size_t *len_p);

/* ---- hot path ---------------------------------------------------------- */

static inline void rps_metric_add(struct rps_metric *m, uint64_t n)
{
	atomic_fetch_add_explicit(&m->value, n, memory_order_relaxed);
}

static inline void rps_metric_inc(struct rps_metric *m)
{
	rps_metric_add(m, 1);
}

/* A counter mirrored from a count kept elsewhere (must not go down). */
static inline void rps_metric_set_count(struct rps_metric *m, uint64_t v)
{
	atomic_store_explicit(&m->value, v, memory_order_relaxed);
}

static inline uint64_t rps_metric_count(const struct rps_metric *m)
{
	return atomic_load_explicit((atomic_uint_least64_t *)&m->value, memory_order_relaxed);
}

static inline void rps_metric_set(struct rps_metric *m, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	atomic_store_explicit(&m->value, bits, memory_order_relaxed);
}

static inline double rps_metric_value(const struct rps_metric *m)
{
	uint64_t bits = rps_metric_count(m);
	double v;

	memcpy(&v, &bits, sizeof(v));
	return v;
}

/* Gauge += d (a compare-and-swap loop; for gauges several threads move). */
static inline void rps_metric_gauge_add(struct rps_metric *m, double d)
{
	uint64_t old = atomic_load_explicit(&m->value, memory_order_relaxed), nbits;
	double v;

	do {
		memcpy(&v, &old, sizeof(v));
		v += d;
		memcpy(&nbits, &v, sizeof(nbits));
	} while (!atomic_compare_exchange_weak_explicit(
	    &m->value, &old, nbits, memory_order_relaxed, memory_order_relaxed));
}

#endif
