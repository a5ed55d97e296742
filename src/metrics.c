/* Metrics registry and the Prometheus text rendering. See src/metrics.h. */
#include "src/metrics.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/alloc.h"
#include "src/log.h"

struct rps_metrics_family {
	char *name;
	char *help;
	enum rps_metric_type type; /* GAUGE_FN metrics live in GAUGE families */
	struct rps_metric *first, *last;
	struct rps_metrics_family *next;
};

struct rps_metrics {
	pthread_mutex_t lock;
	struct rps_metrics_family *first, *last;
};

int rps_metrics_create(struct rps_metrics **reg_p)
{
	struct rps_metrics *reg = rps_calloc(1, sizeof(*reg));

	if (!reg)
		return -ENOMEM;
	pthread_mutex_init(&reg->lock, NULL);
	*reg_p = reg;
	return 0;
}

static void metric_free(struct rps_metric *m)
{
	rps_free(m->labels);
	rps_free(m);
}

void rps_metrics_destroy(struct rps_metrics *reg)
{
	struct rps_metrics_family *f, *fn;

	if (!reg)
		return;
	for (f = reg->first; f; f = fn) {
		struct rps_metric *m, *mn;

		fn = f->next;
		for (m = f->first; m; m = mn) {
			mn = m->next;
			metric_free(m);
		}
		rps_free(f->name);
		rps_free(f->help);
		rps_free(f);
	}
	pthread_mutex_destroy(&reg->lock);
	rps_free(reg);
}

static struct rps_metrics *default_reg;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
	if (rps_metrics_create(&default_reg))
		RPS_ERR("metrics: cannot create the registry: out of memory");
}

struct rps_metrics *rps_metrics_default(void)
{
	pthread_once(&default_once, default_init);
	return default_reg;
}

/* ---- validation -------------------------------------------------------- */

static int name_ok(const char *s)
{
	if (!s || !(isalpha((unsigned char)*s) || *s == '_' || *s == ':'))
		return 0;
	for (s++; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_' || *s == ':'))
			return 0;
	return 1;
}

/* NAME="VALUE"(,NAME="VALUE")* */
static int labels_ok(const char *s)
{
	if (!*s)
		return 1;
	for (;;) {
		const char *n = s;

		if (!(isalpha((unsigned char)*s) || *s == '_'))
			return 0;
		while (isalnum((unsigned char)*s) || *s == '_')
			s++;
		if (s - n >= 2 && n[0] == '_' && n[1] == '_')
			return 0;
		if (*s++ != '=' || *s++ != '"')
			return 0;
		while (*s != '"') {
			if (!*s || *s == '\n')
				return 0;
			if (*s == '\\') {
				s++;
				if (*s != '\\' && *s != '"' && *s != 'n')
					return 0;
			}
			s++;
		}
		s++;
		if (!*s)
			return 1;
		if (*s++ != ',')
			return 0;
	}
}

static const char *type_name(enum rps_metric_type t)
{
	return t == RPS_METRIC_COUNTER ? "counter" : "gauge";
}

/* ---- registration ------------------------------------------------------ */

static int metric_register(struct rps_metrics *reg, const char *name, const char *help,
			   const char *labels, enum rps_metric_type type, double (*fn)(void *),
			   void *arg, struct rps_metric **m_p)
{
	enum rps_metric_type ftype =
	    type == RPS_METRIC_COUNTER ? RPS_METRIC_COUNTER : RPS_METRIC_GAUGE;
	struct rps_metrics_family *f;
	struct rps_metric *m;
	int rc = 0;

	if (!labels)
		labels = "";
	if (!reg || !name_ok(name) || !help || !labels_ok(labels)) {
		RPS_ERR("metrics: bad registration of %s{%s} (name, labels or help)",
			name ? name : "(null)", labels);
		return -EINVAL;
	}
	pthread_mutex_lock(&reg->lock);
	for (f = reg->first; f; f = f->next)
		if (!strcmp(f->name, name))
			break;
	if (f && f->type != ftype) {
		RPS_ERR("metrics: %s is a %s, not a %s", name, type_name(f->type),
			type_name(ftype));
		rc = -EINVAL;
		goto out_unlock;
	}
	for (m = f ? f->first : NULL; m; m = m->next) {
		if (strcmp(m->labels, labels))
			continue;
		if (m->type != type) {
			RPS_ERR("metrics: %s{%s} registered twice with other kinds", name, labels);
			rc = -EINVAL;
			goto out_unlock;
		}
		if (type == RPS_METRIC_GAUGE_FN) {
			m->fn = fn;
			m->fn_arg = arg;
		}
		goto out_found;
	}
	if (!f) {
		f = rps_calloc(1, sizeof(*f));
		if (!f || !(f->name = rps_strdup(name)) || !(f->help = rps_strdup(help))) {
			if (f) {
				rps_free(f->name);
				rps_free(f);
			}
			rc = -ENOMEM;
			goto out_unlock;
		}
		f->type = ftype;
		if (reg->last)
			reg->last->next = f;
		else
			reg->first = f;
		reg->last = f;
	}
	m = rps_aligned_alloc(64, sizeof(*m));
	if (!m) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	memset(m, 0, sizeof(*m));
	atomic_init(&m->value, 0);
	m->labels = rps_strdup(labels);
	if (!m->labels) {
		rps_free(m);
		rc = -ENOMEM;
		goto out_unlock;
	}
	m->type = type;
	m->fn = fn;
	m->fn_arg = arg;
	m->family = f;
	if (f->last)
		f->last->next = m;
	else
		f->first = m;
	f->last = m;
out_found:
	if (m_p)
		*m_p = m;
out_unlock:
	pthread_mutex_unlock(&reg->lock);
	return rc;
}

int rps_metrics_counter(struct rps_metrics *reg, const char *name, const char *help,
			const char *labels, struct rps_metric **m_p)
{
	return metric_register(reg, name, help, labels, RPS_METRIC_COUNTER, NULL, NULL, m_p);
}

int rps_metrics_gauge(struct rps_metrics *reg, const char *name, const char *help,
		      const char *labels, struct rps_metric **m_p)
{
	return metric_register(reg, name, help, labels, RPS_METRIC_GAUGE, NULL, NULL, m_p);
}

int rps_metrics_gauge_fn(struct rps_metrics *reg, const char *name, const char *help,
			 const char *labels, double (*fn)(void *arg), void *arg,
			 struct rps_metric **m_p)
{
	if (!fn) {
		RPS_ERR("metrics: %s: gauge without a function", name ? name : "(null)");
		return -EINVAL;
	}
	return metric_register(reg, name, help, labels, RPS_METRIC_GAUGE_FN, fn, arg, m_p);
}

void rps_metrics_remove(struct rps_metrics *reg, struct rps_metric *m)
{
	struct rps_metrics_family *f;
	struct rps_metric **pp, *prev = NULL;

	if (!reg || !m)
		return;
	pthread_mutex_lock(&reg->lock);
	f = m->family;
	for (pp = &f->first; *pp; prev = *pp, pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			if (f->last == m)
				f->last = prev;
			metric_free(m);
			break;
		}
	pthread_mutex_unlock(&reg->lock);
}

/* ---- rendering --------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};

static int sb_grow(struct sbuf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *np;

	while (cap < b->len + need + 1)
		cap *= 2;
	if (cap == b->cap)
		return 0;
	np = rps_realloc(b->p, cap);
	if (!np) {
		b->err = -ENOMEM;
		return -ENOMEM;
	}
	b->p = np;
	b->cap = cap;
	return 0;
}

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err || sb_grow(b, 128))
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->err = -EINVAL;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		if (sb_grow(b, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

/* HELP text: backslash and newline escaped. */
static void sb_help(struct sbuf *b, const char *s)
{
	for (; *s && !b->err; s++) {
		if (sb_grow(b, 2))
			return;
		if (*s == '\\' || *s == '\n') {
			b->p[b->len++] = '\\';
			b->p[b->len++] = *s == '\n' ? 'n' : '\\';
		} else {
			b->p[b->len++] = *s;
		}
	}
}

static void sb_double(struct sbuf *b, double v)
{
	char tmp[40];

	if (isnan(v)) {
		sb_printf(b, "NaN");
		return;
	}
	if (isinf(v)) {
		sb_printf(b, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	/* shortest of %.15g / %.17g that reads back exactly */
	snprintf(tmp, sizeof(tmp), "%.15g", v);
	if (strtod(tmp, NULL) != v)
		snprintf(tmp, sizeof(tmp), "%.17g", v);
	sb_printf(b, "%s", tmp);
}

int rps_metrics_render(struct rps_metrics *reg, char **text_p, size_t *len_p)
{
	struct sbuf b = {0};

	if (sb_grow(&b, 0))
		return -ENOMEM;
	b.p[0] = '\0';
	pthread_mutex_lock(&reg->lock);
	for (struct rps_metrics_family *f = reg->first; f && !b.err; f = f->next) {
		if (!f->first)
			continue;
		sb_printf(&b, "# HELP %s ", f->name);
		sb_help(&b, f->help);
		sb_printf(&b, "\n# TYPE %s %s\n", f->name, type_name(f->type));
		for (struct rps_metric *m = f->first; m && !b.err; m = m->next) {
			if (m->labels[0])
				sb_printf(&b, "%s{%s} ", f->name, m->labels);
			else
				sb_printf(&b, "%s ", f->name);
			if (m->type == RPS_METRIC_COUNTER)
				sb_printf(&b, "%" PRIu64, rps_metric_count(m));
			else if (m->type == RPS_METRIC_GAUGE)
				sb_double(&b, rps_metric_value(m));
			else
				sb_double(&b, m->fn(m->fn_arg));
			sb_printf(&b, "\n");
		}
	}
	pthread_mutex_unlock(&reg->lock);
	if (b.err) {
		rps_free(b.p);
		return b.err;
	}
	*text_p = b.p;
	*len_p = b.len;
	return 0;
}
