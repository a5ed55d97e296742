/* Scheduler: the dashboard's state and its snapshot (docs/dashboard.md).
 *
 * The loop thread owns everything here: the workers' curves (REPORT frames),
 * the events (joins, deaths, restores, checkpoints) and the action the page
 * asked for. A few times a second, while someone watches, it writes the whole
 * state as one JSON document (jansson) and swaps it in under the lock; the
 * HTTP thread (sched_dash_http.c) only copies that document out, so a request
 * never waits for the loop and the loop never waits for a client.
 *
 * Bounded memory: at most DASH_SERIES curves (name x worker) of DASH_POINTS
 * points each. A full curve keeps every other point and from then on takes
 * every 2nd report (then 4th, ...): the whole run stays in the curve, evenly
 * thinned, and its newest point is always shown. DASH_EVENTS events in a
 * ring (the count of older ones is shown). Reports beyond DASH_REPORT_RATE
 * per second from one worker are dropped and counted.
 */
#include "server/sched_dash.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/ctl.h>
#include <rdmaps/status.h>

static double since_start(const struct rps_sched *s, uint64_t now)
{
	return (double)(now - s->start_ns) / 1e9;
}

int rps_sched_dash_create(struct rps_sched *s)
{
	struct sched_dash *d = rps_calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	d->start_unix_ms = rps_wall_ns() / 1000000u;
	d->secret = s->secret;
	d->reg = s->m.reg;
	s->dash = d;
	return 0;
}

void rps_sched_dash_destroy(struct rps_sched *s)
{
	struct sched_dash *d = s->dash;

	if (!d)
		return;
	if (d->export_started)
		pthread_join(d->export_thread, NULL); /* ends within its timeout */
	for (int i = 0; i < d->nseries; i++)
		rps_free(d->series[i]);
	free(d->snap); /* json_dumps: malloc */
	pthread_mutex_destroy(&d->lock);
	rps_free(d);
	s->dash = NULL;
}

void rps_sched_dash_event(struct rps_sched *s, const char *kind, const char *fmt, ...)
{
	struct sched_dash *d = s->dash;
	struct dash_event *e;
	va_list ap;

	if (!d)
		return;
	e = &d->events[d->nevents % DASH_EVENTS];
	d->nevents++;
	e->t = since_start(s, rps_now_ns());
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	va_start(ap, fmt);
	vsnprintf(e->text, sizeof(e->text), fmt, ap);
	va_end(ap);
	d->dirty = 1;
}

/* ---- curves ---------------------------------------------------------------- */

static struct dash_series *series_get(struct sched_dash *d, const char *name, uint32_t worker)
{
	struct dash_series *sr;

	for (int i = 0; i < d->nseries; i++)
		if (d->series[i]->worker == worker && !strcmp(d->series[i]->name, name))
			return d->series[i];
	if (d->nseries >= DASH_SERIES)
		return NULL;
	sr = rps_calloc(1, sizeof(*sr));
	if (!sr)
		return NULL;
	snprintf(sr->name, sizeof(sr->name), "%s", name);
	sr->worker = worker;
	sr->stride = 1;
	d->series[d->nseries++] = sr;
	return sr;
}

/* Keep every point while there is room; a full curve keeps every other one
 * and doubles its stride. */
static void series_add(struct dash_series *sr, const struct dash_point *pt)
{
	sr->total++;
	sr->last = *pt;
	sr->last_kept = 0;
	if (sr->skip) {
		sr->skip--;
		return;
	}
	sr->last_kept = 1;
	if (sr->n == DASH_POINTS) {
		for (uint32_t i = 0; i < DASH_POINTS / 2; i++)
			sr->pts[i] = sr->pts[2 * i];
		sr->n = DASH_POINTS / 2;
		sr->stride *= 2;
	}
	sr->pts[sr->n++] = *pt;
	sr->skip = sr->stride - 1;
}

void rps_sched_dash_report(struct rps_sched *s, struct sched_peer *p, const struct rps_tr_event *ev)
{
	struct sched_dash *d = s->dash;
	struct rps_report r;
	struct dash_series *sr;
	struct dash_point pt;
	struct sched_slot *sl;
	const char *why = NULL;
	uint64_t now = rps_now_ns(), sec;

	if (!d || p->slot < 0 || p->role != RPS_ROLE_WORKER)
		return; /* no dashboard, or not a worker in the cluster: nothing to keep */
	if (ev->hdr.len != sizeof(r) || !ev->fixed)
		return; /* the transport checked the length already */
	memcpy(&r, ev->fixed, sizeof(r));
	if (rps_proto_report_check(&r, &why))
		return; /* and the name */
	sl = &s->slots[p->slot];
	sec = now / 1000000000ull;
	if (d->rate_sec[p->slot % DASH_RATE_SLOTS] != sec) {
		d->rate_sec[p->slot % DASH_RATE_SLOTS] = sec;
		d->rate_n[p->slot % DASH_RATE_SLOTS] = 0;
	}
	if (++d->rate_n[p->slot % DASH_RATE_SLOTS] > DASH_REPORT_RATE) {
		d->dropped++;
		return;
	}
	sr = series_get(d, r.name, sl->node.rank);
	if (!sr) {
		if (!d->dropped_series++)
			RPS_WARN("dashboard: more than %d curves: \"%s\" of worker %u and any "
				 "further ones are not kept",
				 DASH_SERIES, r.name, sl->node.rank);
		return;
	}
	pt.t = (float)since_start(s, now);
	pt.clock = r.clock;
	pt.v = r.value;
	series_add(sr, &pt);
	d->dirty = 1;
}

/* ---- the snapshot ---------------------------------------------------------- */

static const char *slot_state(const struct sched_slot *sl)
{
	switch (sl->state) {
	case SLOT_ALIVE:
		if (sl->rejoined && sl->node.role == RPS_ROLE_SERVER && !sl->have_srv)
			return "restoring";
		return "alive";
	case SLOT_DEAD:
		return "dead";
	case SLOT_LEFT:
		return "left";
	default:
		return "empty";
	}
}

static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *node_json(const struct rps_sched *s, const struct sched_slot *sl, uint64_t now)
{
	json_t *o = json_object();
	int alive = sl->state == SLOT_ALIVE;

	json_object_set_new(o, "id", json_integer(sl->node.id));
	json_object_set_new(o, "role", json_string(rps_sched_role_name(sl->node.role)));
	json_object_set_new(o, "rank", json_integer(sl->node.rank));
	json_object_set_new(o, "host", json_string(sl->node.host));
	json_object_set_new(o, "port", json_integer(sl->node.port));
	json_object_set_new(o, "pid", json_integer(sl->node.pid));
	json_object_set_new(o, "state", json_string(slot_state(sl)));
	json_object_set_new(o, "transport", json_string(sl->transport ? "rdma" : "tcp"));
	json_object_set_new(o, "clock", json_integer(sl->clock));
	json_object_set_new(o, "hb_age_ms",
			    alive ? json_integer((json_int_t)((now - sl->last_hb_ns) / 1000000u))
				  : json_null());
	json_object_set_new(
	    o, "cpu", alive && sl->cpu ? json_real((double)(sl->cpu - 1) / 1000.0) : json_null());
	if (sl->node.role != RPS_ROLE_SERVER)
		return o;
	json_object_set_new(o, "pushes_s", json_real(alive ? sl->rate[0] : 0));
	json_object_set_new(o, "pulls_s", json_real(alive ? sl->rate[1] : 0));
	json_object_set_new(o, "in_Bps", json_real(alive ? sl->rate[2] : 0));
	json_object_set_new(o, "out_Bps", json_real(alive ? sl->rate[3] : 0));
	json_object_set_new(o, "bytes_in", json_integer((json_int_t)sl->counters[2]));
	json_object_set_new(o, "bytes_out", json_integer((json_int_t)sl->counters[3]));
	if (sl->have_srv && alive) {
		json_t *sh = json_array();

		json_object_set_new(o, "ckpt_age_s",
				    sl->srv.ckpt_age_ms >= 0
					? json_real((double)sl->srv.ckpt_age_ms / 1e3 +
						    (double)(now - sl->srv_ns) / 1e9)
					: json_null());
		json_object_set_new(o, "ckpts", json_integer((json_int_t)sl->srv.ckpts));
		json_object_set_new(o, "ckpt_fails", json_integer((json_int_t)sl->srv.ckpt_fails));
		for (uint32_t k = 0; k < sl->srv.num_shards; k++) {
			const struct rps_hb_shard_ext *e = &sl->shards[k];

			json_array_append_new(
			    sh,
			    json_pack("{s:I,s:I,s:I,s:o,s:o,s:I}", "shard", (json_int_t)k, "ring",
				      (json_int_t)e->ring_depth, "clock", (json_int_t)e->clock,
				      "applied_s",
				      sl->have_ext ? json_real(sl->shard_rate[k][0]) : json_null(),
				      "pulls_s",
				      sl->have_ext ? json_real(sl->shard_rate[k][1]) : json_null(),
				      "ckpt_clock", (json_int_t)e->ckpt_clock));
		}
		json_object_set_new(o, "shards", sh);
	}
	(void)s;
	return o;
}

static json_t *nodes_json(struct rps_sched *s, uint64_t now)
{
	json_t *a = json_array();

	for (int i = 0; i < s->nslots; i++)
		if (s->slots[i].state != SLOT_EMPTY)
			json_array_append_new(a, node_json(s, &s->slots[i], now));
	for (const struct sched_peer *p = s->peers; p; p = p->next) {
		if (!p->registered || p->slot >= 0 || p->closing)
			continue;
		json_array_append_new(
		    a, json_pack("{s:n,s:s,s:n,s:s,s:I,s:I,s:s,s:s,s:n,s:n,s:n}", "id", "role",
				 rps_sched_role_name(p->reg.role), "rank", "host", p->reg.host,
				 "port", (json_int_t)p->reg.port, "pid", (json_int_t)p->reg.pid,
				 "state", "waiting", "transport", p->reg.transport ? "rdma" : "tcp",
				 "clock", "hb_age_ms", "cpu"));
	}
	return a;
}

static json_t *series_json(const struct dash_series *sr)
{
	json_t *t = json_array(), *c = json_array(), *v = json_array();
	uint32_t n = sr->n;
	int with_last = sr->total && !sr->last_kept;

	for (uint32_t i = 0; i < n + (uint32_t)with_last; i++) {
		const struct dash_point *p = i < n ? &sr->pts[i] : &sr->last;

		json_array_append_new(t, json_real(round(p->t * 1000.0) / 1000.0));
		json_array_append_new(c, json_integer(p->clock));
		json_array_append_new(v, num_or_null(p->v));
	}
	return json_pack("{s:s,s:I,s:I,s:I,s:o,s:o,s:o}", "name", sr->name, "worker",
			 (json_int_t)sr->worker, "stride", (json_int_t)sr->stride, "total",
			 (json_int_t)sr->total, "t", t, "clock", c, "v", v);
}

static const char *sched_state_name(enum sched_state st)
{
	return st == SCHED_WAITING ? "waiting" : st == SCHED_RUNNING ? "running" : "ending";
}

static json_t *job_json(struct rps_sched *s, uint64_t now)
{
	char addr[RPS_STR_MAX + 8];

	snprintf(addr, sizeof(addr), "%s:%u", s->host[0] ? s->host : "0.0.0.0", s->port);
	return json_pack(
	    "{s:s,s:s,s:f,s:I,s:I,s:I,s:I,s:I,s:b,s:I,s:I}", "state", sched_state_name(s->state),
	    "scheduler", addr, "up_s", since_start(s, now), "start_unix_ms",
	    (json_int_t)s->dash->start_unix_ms, "epoch", (json_int_t)s->epoch, "num_servers",
	    (json_int_t)s->num_servers, "num_workers", (json_int_t)s->num_workers, "hb_timeout_ms",
	    (json_int_t)s->hb_timeout_ms, "secret_set", s->secret[0] != '\0', "reports_dropped",
	    (json_int_t)s->dash->dropped, "events_total", (json_int_t)s->dash->nevents);
}

/* The last action (under d->lock). */
static json_t *action_json(const struct sched_dash *d)
{
	static const char *const states[] = {"none", "queued", "running", "done", "failed"};
	json_t *files = json_array();

	for (int i = 0; i < d->act.nfiles; i++)
		json_array_append_new(files, json_string(d->act.files[i]));
	return json_pack("{s:I,s:s,s:s,s:s,s:I,s:o}", "id", (json_int_t)d->act.id, "op",
			 d->act.op == RPS_OP_EXPORT ? "export" : "checkpoint", "state",
			 states[d->act.state], "why", d->act.why, "clock", (json_int_t)d->act.clock,
			 "files", files);
}

static void build_snapshot(struct rps_sched *s, uint64_t now)
{
	struct sched_dash *d = s->dash;
	json_t *root = json_object(), *series = json_array(), *events = json_array();
	uint64_t first = d->nevents > DASH_EVENTS ? d->nevents - DASH_EVENTS : 0;
	char *text;

	json_object_set_new(root, "job", job_json(s, now));
	json_object_set_new(root, "nodes", nodes_json(s, now));
	for (int i = 0; i < d->nseries; i++)
		json_array_append_new(series, series_json(d->series[i]));
	json_object_set_new(root, "series", series);
	for (uint64_t i = first; i < d->nevents; i++) {
		const struct dash_event *e = &d->events[i % DASH_EVENTS];

		json_array_append_new(events, json_pack("{s:f,s:s,s:s}", "t", e->t, "kind", e->kind,
							"text", e->text));
	}
	json_object_set_new(root, "events", events);
	pthread_mutex_lock(&d->lock);
	json_object_set_new(root, "action", action_json(d));
	pthread_mutex_unlock(&d->lock);
	text = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(9));
	json_decref(root);
	if (!text) {
		RPS_WARN("dashboard: out of memory for the snapshot");
		return;
	}
	pthread_mutex_lock(&d->lock);
	free(d->snap);
	d->snap = text;
	d->snap_len = strlen(text);
	pthread_mutex_unlock(&d->lock);
	d->built_ns = now;
	d->dirty = 0;
}

/* ---- export: rps_ctl_export to ourselves ------------------------------------ */

static void *export_main(void *arg)
{
	struct rps_sched *s = arg;
	struct sched_dash *d = s->dash;
	struct rps_ctl_opts o;
	char *out = NULL;
	size_t outlen = 0;
	FILE *f = open_memstream(&out, &outlen);
	int rc = -ENOMEM;

	memset(&o, 0, sizeof(o));
	o.field_mask = RPS_CTL_OPT_SCHEDULER | RPS_CTL_OPT_SECRET | RPS_CTL_OPT_TIMEOUT_MS;
	memcpy(o.scheduler, d->export_sched, RPS_MIN(sizeof(o.scheduler), sizeof(d->export_sched)));
	snprintf(o.secret, sizeof(o.secret), "%s", s->secret);
	o.timeout_ms = s->cfg.timeout_ms;
	if (f) {
		/* the scheduler's own address must fit a ctl option */
		if (o.scheduler[sizeof(o.scheduler) - 1])
			rc = -ENAMETOOLONG;
		else
			rc = rps_ctl_export(&o, d->export_path, f);
		fclose(f);
	}
	pthread_mutex_lock(&d->lock);
	d->act.state = rc ? DASH_ACT_FAILED : DASH_ACT_DONE;
	if (rc) {
		snprintf(d->act.why, sizeof(d->act.why),
			 "export to %s failed: %s (the scheduler's log says more)", d->export_path,
			 rps_strerror(rc));
	} else {
		d->act.nfiles = 1;
		snprintf(d->act.files[0], sizeof(d->act.files[0]), "%s", d->export_path);
		snprintf(d->act.why, sizeof(d->act.why), "%.*s", (int)strcspn(out ? out : "", "\n"),
			 out ? out : "");
	}
	pthread_mutex_unlock(&d->lock);
	free(out);
	atomic_store(&d->export_done, 1);
	return NULL;
}

static int export_start(struct rps_sched *s)
{
	struct sched_dash *d = s->dash;
	const char *h = s->host[0] && strcmp(s->host, "0.0.0.0") ? s->host : "127.0.0.1";
	int rc;

	if (d->export_started)
		return -EBUSY;
	snprintf(d->export_sched, sizeof(d->export_sched), "%s%s%s:%u", strchr(h, ':') ? "[" : "",
		 h, strchr(h, ':') ? "]" : "", s->port);
	snprintf(d->export_path, sizeof(d->export_path), "%s/model-%" PRIu64 ".npz",
		 s->cfg.checkpoint_dir, (uint64_t)(rps_wall_ns() / 1000000000u));
	atomic_store(&d->export_done, 0);
	rc = -pthread_create(&d->export_thread, NULL, export_main, s);
	if (!rc)
		d->export_started = 1;
	return rc;
}

static void export_reap(struct rps_sched *s)
{
	struct sched_dash *d = s->dash;
	int failed;

	if (!d->export_started || !atomic_load(&d->export_done))
		return;
	pthread_join(d->export_thread, NULL);
	d->export_started = 0;
	pthread_mutex_lock(&d->lock);
	failed = d->act.state == DASH_ACT_FAILED;
	pthread_mutex_unlock(&d->lock);
	rps_sched_dash_event(s, "action", "dashboard export %s: %s", failed ? "failed" : "done",
			     failed ? "see the scheduler's log" : d->export_path);
	d->built_ns = 0;
}

/* From the loop: start what the page asked for; a new snapshot every
 * DASH_SNAP_MS while someone watches (every DASH_IDLE_MS otherwise). */
void rps_sched_dash_tick(struct rps_sched *s, uint64_t now)
{
	struct sched_dash *d = s->dash;
	uint64_t asked;
	uint8_t op = 0;

	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	if (d->act.state == DASH_ACT_QUEUED) {
		op = d->act.op;
		d->act.state = DASH_ACT_RUNNING;
	}
	pthread_mutex_unlock(&d->lock);
	export_reap(s);
	if (op) {
		int rc = op == RPS_OP_EXPORT ? export_start(s) : rps_sched_creq_start_dash(s, op);

		rps_sched_dash_event(s, "action", "%s asked from the dashboard%s%s",
				     op == RPS_OP_CHECKPOINT ? "checkpoint" : "export",
				     rc ? ": refused: " : "", rc ? rps_strerror(rc) : "");
		if (rc)
			rps_sched_dash_creq_done(
			    s, rc,
			    rc == -EBUSY ? "another checkpoint or export is running: try again"
			    : rc == -EAGAIN
				? "the job is not running (waiting for nodes, or ending)"
				: rps_strerror(rc));
	}
	asked = atomic_load(&d->asked_ns);
	if (now - d->built_ns < DASH_SNAP_MS * 1000000ull)
		return;
	if (!op && now - asked > 3000000000ull && now - d->built_ns < DASH_IDLE_MS * 1000000ull)
		return;
	build_snapshot(s, now);
}

void rps_sched_dash_creq_done(struct rps_sched *s, int status, const char *why)
{
	struct sched_dash *d = s->dash;
	const struct sched_creq *q = &s->creq;

	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->act.state = status ? DASH_ACT_FAILED : DASH_ACT_DONE;
	snprintf(d->act.why, sizeof(d->act.why), "%s",
		 status ? (why && *why ? why : rps_strerror(status)) : "");
	d->act.nfiles = 0;
	if (!status && q->from_dash) {
		d->act.clock = q->done_clock;
		for (int i = 0; i < q->nfiles && i < DASH_ACT_FILES; i++)
			snprintf(d->act.files[d->act.nfiles++], sizeof(d->act.files[0]), "%s",
				 q->files[i]);
	}
	pthread_mutex_unlock(&d->lock);
	if (status)
		rps_sched_dash_event(s, "action", "dashboard %s failed: %s",
				     d->act.op == RPS_OP_EXPORT ? "export" : "checkpoint",
				     d->act.why);
	else
		rps_sched_dash_event(s, "action", "dashboard %s done at clock %" PRIu64,
				     d->act.op == RPS_OP_EXPORT ? "export" : "checkpoint",
				     d->act.clock);
	d->built_ns = 0; /* show it at once */
}
