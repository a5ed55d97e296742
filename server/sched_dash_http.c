/* Scheduler: the HTTP side of the dashboard, on the scheduler's metrics port
 * (docs/dashboard.md). Runs on the HTTP server's thread and never waits for
 * the loop: it copies the newest snapshot out and queues actions.
 *
 *   GET  /                 the page (server/www/index.html), /dash.js, /dash.css
 *   GET  /api/state        the snapshot (JSON, sched_dash.c)
 *   GET  /metrics          Prometheus text
 *   POST /api/checkpoint   every live server writes a checkpoint now
 *   POST /api/export       the model as .npz into the scheduler's
 *                          RDMAPS_CHECKPOINT_DIR
 *
 * The actions need "Authorization: Bearer <the job's secret>" (compared in
 * constant time): none 401, a wrong one 403, and a job without a secret 403
 * as well (nobody can be told apart); nothing changes then. One action at a
 * time (409 while one runs); 202 when queued, its outcome in the snapshot.
 */
#include "server/sched_dash.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/sched_www.h"
#include "src/alloc.h"
#include "src/log.h"
#include "src/metrics.h"
#include "src/util.h"

static int text(struct rps_http_resp *rs, unsigned int code, const char *ctype, const char *msg)
{
	rs->code = code;
	rs->body = rps_strdup(msg);
	if (!rs->body)
		return -ENOMEM;
	rs->len = strlen(msg);
	rs->ctype = ctype;
	rs->cache = "no-store";
	return 0;
}

static int json_msg(struct rps_http_resp *rs, unsigned int code, const char *msg)
{
	char buf[512];
	json_t *o = json_pack("{s:s}", code < 300 ? "ok" : "error", msg);
	char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	snprintf(buf, sizeof(buf), "%s", t ? t : "{}");
	free(t);
	return text(rs, code, "application/json", buf);
}

/* a and b equal, in time that depends on their lengths only. */
static int same_secret(const char *a, size_t alen, const char *b, size_t blen)
{
	volatile unsigned char d = (unsigned char)(alen != blen);
	size_t n = RPS_MAX(alen, blen);

	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)((i < alen ? a[i] : 0) ^ (i < blen ? b[i] : 0));
	return d == 0;
}

/* 0 if the request carries the job's secret; otherwise the answer is set. */
static int check_auth(struct rps_sched *s, const struct rps_http_req *rq, struct rps_http_resp *rs,
		      int *rc_p)
{
	struct sched_dash *d = s->dash;
	const char *a = rq->authorization, *key;
	uint64_t now = rps_now_ns();
	int log;

	if (!d->secret[0]) {
		*rc_p = json_msg(rs, 403,
				 "this job has no secret (RDMAPS_SECRET): the dashboard's actions "
				 "are disabled; start the job with a secret");
		return -EACCES;
	}
	if (!a || !*a) {
		*rc_p = json_msg(rs, 401, "the job's secret is needed: type it into the page");
		return -EACCES;
	}
	key = !strncmp(a, "Bearer ", 7) ? a + 7 : a;
	if (same_secret(key, strlen(key), d->secret, strlen(d->secret)))
		return 0;
	pthread_mutex_lock(&d->lock);
	log = now - d->last_refusal_ns > 1000000000ull;
	if (log)
		d->last_refusal_ns = now;
	pthread_mutex_unlock(&d->lock);
	if (log)
		RPS_WARN("dashboard: %s %s refused: wrong secret", rq->method, rq->path);
	*rc_p = json_msg(rs, 403, "wrong secret: nothing was done");
	return -EACCES;
}

static int action(struct rps_sched *s, const struct rps_http_req *rq, struct rps_http_resp *rs,
		  uint8_t op)
{
	struct sched_dash *d = s->dash;
	char msg[96];
	uint32_t id;
	int rc = 0;

	if (strcmp(rq->method, "POST"))
		return json_msg(rs, 405, "use POST");
	if (check_auth(s, rq, rs, &rc))
		return rc;
	if (op == RPS_OP_EXPORT && !s->cfg.checkpoint_dir[0])
		return json_msg(rs, 409,
				"the scheduler has no RDMAPS_CHECKPOINT_DIR to write the model "
				"into: start rdmaps-sched with one, or use rdmaps-ctl export FILE");
	pthread_mutex_lock(&d->lock);
	if (d->act.state == DASH_ACT_QUEUED || d->act.state == DASH_ACT_RUNNING) {
		pthread_mutex_unlock(&d->lock);
		return json_msg(rs, 409, "another action is running: wait for it");
	}
	id = ++d->act.id;
	d->act.op = op;
	d->act.state = DASH_ACT_QUEUED;
	d->act.why[0] = '\0';
	d->act.nfiles = 0;
	d->act.clock = 0;
	pthread_mutex_unlock(&d->lock);
	snprintf(msg, sizeof(msg), "{\"ok\":\"queued\",\"id\":%u}", id);
	return text(rs, 202, "application/json", msg);
}

static int state(struct rps_sched *s, struct rps_http_resp *rs)
{
	struct sched_dash *d = s->dash;

	atomic_store(&d->asked_ns, rps_now_ns());
	pthread_mutex_lock(&d->lock);
	if (!d->snap) {
		pthread_mutex_unlock(&d->lock);
		return json_msg(rs, 503, "starting: ask again");
	}
	rs->body = rps_malloc(d->snap_len + 1);
	if (rs->body) {
		memcpy(rs->body, d->snap, d->snap_len + 1);
		rs->len = d->snap_len;
	}
	pthread_mutex_unlock(&d->lock);
	if (!rs->body)
		return -ENOMEM;
	rs->ctype = "application/json";
	rs->cache = "no-store";
	return 0;
}

static int asset(const struct rps_http_req *rq, struct rps_http_resp *rs)
{
	const char *path = strcmp(rq->path, "/") ? rq->path + 1 : "index.html";

	for (size_t i = 0; i < rps_www_nfiles; i++) {
		const struct rps_www_file *f = &rps_www_files[i];

		if (strcmp(f->name, path))
			continue;
		rs->body = rps_malloc(f->len + 1);
		if (!rs->body)
			return -ENOMEM;
		memcpy(rs->body, f->data, f->len);
		rs->len = f->len;
		rs->ctype = f->ctype;
		rs->cache = "no-cache";
		/* everything from here, nothing inline, no frames around it */
		rs->csp = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'";
		return 0;
	}
	return -ENOENT;
}

int rps_sched_dash_http(const struct rps_http_req *rq, void *arg, struct rps_http_resp *rs)
{
	struct rps_sched *s = arg;
	int get = !strcmp(rq->method, "GET") || !strcmp(rq->method, "HEAD");

	if (!strcmp(rq->path, "/api/checkpoint"))
		return action(s, rq, rs, RPS_OP_CHECKPOINT);
	if (!strcmp(rq->path, "/api/export"))
		return action(s, rq, rs, RPS_OP_EXPORT);
	if (!get)
		return json_msg(rs, 405,
				"only GET here; the actions are POST /api/checkpoint and "
				"POST /api/export");
	if (!strcmp(rq->path, "/metrics")) {
		const char *ctype = NULL;
		int rc =
		    rps_http_metrics_handler(rq->path, s->dash->reg, &rs->body, &rs->len, &ctype);

		rs->ctype = ctype;
		return rc;
	}
	if (!strcmp(rq->path, "/api/state"))
		return state(s, rs);
	return asset(rq, rs);
}
