/* The scheduler's dashboard (server/sched_dash*.c) in one process: a
 * scheduler with its HTTP port, a server and a worker joined through the
 * control client, REPORT frames sent by hand, the page's API read with a
 * plain socket and parsed with jansson:
 *   - nodes with role, rank, state; the join events;
 *   - REPORT rate bound per worker (the excess counted, not kept);
 *   - a long curve thinned evenly (every 2nd point) with its newest point;
 *   - actions: 401 without the secret, 403 with a wrong one (nothing asked of
 *     the servers), 202 with it, then the server's files in the state;
 *   - the page and its script served, 404 for the rest, /metrics on the same port;
 *   - a server that leaves, another taking its rank: "left", then "restoring"
 *     until its heartbeat carries its shards (32-byte entries), then "alive";
 *     the worker's CPU from its heartbeats.
 * About 4 s (the rate bound is per second).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/control.h"
#include "server/sched.h"
#include "src/proto.h"
#include "src/util.h"

#define SECRET "dash-s3cret"

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

struct run {
	struct rps_sched *s;
	pthread_t th;
	atomic_int done;
};

static void *sched_thread(void *arg)
{
	struct run *r = arg;

	rps_sched_run(r->s);
	atomic_store(&r->done, 1);
	return NULL;
}

struct node {
	struct rps_ctl *ctl;
	uint8_t role;
	char sched[64];
	pthread_t th;
	int rc;
	atomic_int asked; /* CHECKPOINTs relayed to this (server) node */
};

/* The server's answer to a CHECKPOINT: one shard, one file. */
static void on_request(void *arg, const struct rps_frame_hdr *h, const void *data, size_t len)
{
	struct node *nd = arg;
	struct rps_ctlres res = {.server = 0, .num_shards = 1};
	struct rps_ctlres_shard sh = {.shard = 0, .clock = 5};

	(void)data;
	(void)len;
	snprintf(sh.text, sizeof(sh.text), "/x/server0-shard0-clock5.ckpt");
	atomic_fetch_add(&nd->asked, 1);
	rps_ctl_send(nd->ctl, h->op, h->req_id, 0, RPS_CTLREQ_RESULT, &res, sizeof(res), &sh,
		     sizeof(sh));
}

static const struct rps_ctl_events events = {.on_request = on_request};

static void *join_thread(void *arg)
{
	struct node *nd = arg;
	struct rps_ctl_join_opts o;

	memset(&o, 0, sizeof(o));
	o.scheduler = nd->sched;
	o.secret = SECRET;
	o.role = nd->role;
	o.host = "127.0.0.1";
	o.port = nd->role == RPS_ROLE_SERVER ? 4000 : 0;
	o.want_rank = UINT32_MAX;
	o.timeout_ms = 5000;
	o.heartbeat_ms = 50;
	o.events = &events;
	o.arg = nd;
	nd->rc = rps_ctl_join(&o, &nd->ctl);
	return NULL;
}

static uint16_t free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* One HTTP request; the status code, the body in *body_p (malloc'd). */
static int http(uint16_t port, const char *method, const char *path, const char *auth,
		char **body_p)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap), req[512], *b;
	int fd = socket(AF_INET, SOCK_STREAM, 0), code = 0;
	ssize_t k;

	assert_non_null(buf);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\n%s%s%sContent-Length: 0\r\n\r\n",
		 method, path, auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
	assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	while ((k = recv(fd, buf + len, cap - len - 1, 0)) > 0) {
		len += (size_t)k;
		if (len + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
	}
	close(fd);
	buf[len] = '\0';
	sscanf(buf, "HTTP/1.%*d %d", &code);
	b = strstr(buf, "\r\n\r\n");
	*body_p = strdup(b ? b + 4 : "");
	free(buf);
	return code;
}

static json_t *state(uint16_t port)
{
	char *body;
	json_t *j;
	json_error_t err;

	for (int i = 0; i < 100; i++) {
		int code = http(port, "GET", "/api/state", NULL, &body);

		if (code == 200) {
			j = json_loads(body, 0, &err);
			if (!j)
				fail_msg("/api/state is not JSON: %s: %.200s", err.text, body);
			free(body);
			return j;
		}
		free(body);
		sleep_ms(50);
	}
	fail_msg("no /api/state");
	return NULL;
}

static json_t *series(json_t *st, const char *name)
{
	size_t i;
	json_t *s;

	json_array_foreach(
	    json_object_get(st, "series"), i,
	    s) if (!strcmp(json_string_value(json_object_get(s, "name")), name)) return s;
	return NULL;
}

static void report(struct node *w, const char *name, double v)
{
	struct rps_report r;

	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "%s", name);
	r.value = v;
	assert_int_equal(rps_ctl_send(w->ctl, RPS_OP_REPORT, 0, 0, 0, &r, sizeof(r), NULL, 0), 0);
}

/* Just after a second starts (the rate bound counts per second). */
static void second_start(void)
{
	while (rps_now_ns() % 1000000000ull > 50000000ull)
		sleep_ms(5);
}

/* Wait until the state (rebuilt every 250 ms) shows what fn says. */
static json_t *state_until(uint16_t port, int (*fn)(json_t *))
{
	for (int i = 0; i < 60; i++) {
		json_t *st = state(port);

		if (fn(st))
			return st;
		json_decref(st);
		sleep_ms(100);
	}
	fail_msg("the dashboard's state never showed what the test waits for");
	return NULL;
}

static int two_alive(json_t *st)
{
	size_t i, n = 0;
	json_t *nd;

	json_array_foreach(json_object_get(st, "nodes"), i, nd) n +=
	    !strcmp(json_string_value(json_object_get(nd, "state")), "alive");
	return n == 2;
}

static int burst_seen(json_t *st)
{
	json_t *s = series(st, "burst");

	return s && json_integer_value(json_object_get(s, "total")) == 200;
}

static int long_seen(json_t *st)
{
	json_t *s = series(st, "long");

	return s && json_integer_value(json_object_get(s, "total")) == 600;
}

static int action_ended(json_t *st)
{
	const char *a = json_string_value(json_object_get(json_object_get(st, "action"), "state"));

	return !strcmp(a, "done") || !strcmp(a, "failed");
}

static json_t *server_of(json_t *st)
{
	size_t i;
	json_t *nd;

	json_array_foreach(
	    json_object_get(st, "nodes"), i,
	    nd) if (!strcmp(json_string_value(json_object_get(nd, "role")), "server")) return nd;
	return NULL;
}

static int server_in(json_t *st, const char *state)
{
	json_t *nd = server_of(st);

	return nd && !strcmp(json_string_value(json_object_get(nd, "state")), state);
}

static int server_left(json_t *st)
{
	return server_in(st, "left");
}

static int server_restoring(json_t *st)
{
	return server_in(st, "restoring");
}

static int server_alive_with_shards(json_t *st)
{
	return server_in(st, "alive") &&
	       json_array_size(json_object_get(server_of(st), "shards")) == 2;
}

static int worker_cpu_known(json_t *st)
{
	size_t i;
	json_t *nd;

	json_array_foreach(
	    json_object_get(st, "nodes"), i,
	    nd) if (!strcmp(json_string_value(json_object_get(nd, "role")),
			    "worker")) return json_is_real(json_object_get(nd, "cpu"));
	return 0;
}

static json_t *event_of(json_t *st, const char *kind)
{
	size_t i;
	json_t *e;

	json_array_foreach(
	    json_object_get(st, "events"), i,
	    e) if (!strcmp(json_string_value(json_object_get(e, "kind")), kind)) return e;
	return NULL;
}

static void test_dashboard(void **state_)
{
	struct rps_sched_opts o;
	struct run r = {0};
	struct node srv = {.role = RPS_ROLE_SERVER}, wk = {.role = RPS_ROLE_WORKER}, srv2 = {0};
	uint16_t port = free_port();
	json_t *st, *s, *v, *nd;
	char *body;
	size_t i;

	(void)state_;
	rps_sched_opts_init(&o, NULL);
	o.host = "127.0.0.1";
	o.port = 0;
	o.secret = SECRET;
	o.num_servers = 1;
	o.num_workers = 1;
	o.heartbeat_timeout_ms = 3000;
	o.metrics_port = port;
	assert_int_equal(rps_sched_create(&o, &r.s), 0);
	assert_int_equal(pthread_create(&r.th, NULL, sched_thread, &r), 0);
	snprintf(srv.sched, sizeof(srv.sched), "127.0.0.1:%u", rps_sched_port(r.s));
	memcpy(wk.sched, srv.sched, sizeof(wk.sched));
	assert_int_equal(pthread_create(&srv.th, NULL, join_thread, &srv), 0);
	assert_int_equal(pthread_create(&wk.th, NULL, join_thread, &wk), 0);
	pthread_join(srv.th, NULL);
	pthread_join(wk.th, NULL);
	assert_int_equal(srv.rc, 0);
	assert_int_equal(wk.rc, 0);

	/* the cluster, and its joins */
	st = state_until(port, two_alive);
	json_array_foreach(json_object_get(st, "nodes"), i, nd)
	{
		const char *role = json_string_value(json_object_get(nd, "role"));

		assert_true(!strcmp(role, "server") || !strcmp(role, "worker"));
		assert_int_equal(json_integer_value(json_object_get(nd, "rank")), 0);
		assert_non_null(json_object_get(nd, "cpu")); /* a number, or null at first */
	}
	assert_string_equal(json_string_value(json_object_get(json_object_get(st, "job"), "state")),
			    "running");
	assert_int_equal(json_array_size(json_object_get(st, "events")), 2);
	assert_true(
	    json_integer_value(json_object_get(json_object_get(st, "job"), "start_unix_ms")) >
	    1600000000000ll); /* milliseconds, exact (not a rounded real) */
	json_decref(st);

	/* 300 reports in one second: 200 kept, 100 dropped */
	second_start();
	for (int k = 0; k < 300; k++)
		report(&wk, "burst", k);
	st = state_until(port, burst_seen);
	s = series(st, "burst");
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(st, "job"), "reports_dropped")),
	    100);
	assert_int_equal(json_array_size(json_object_get(s, "v")), 200);
	json_decref(st);

	/* 600 reports (3 seconds of 200): 512 points fill, then every 2nd is kept;
	 * the newest is shown too */
	for (int sec = 0; sec < 3; sec++) {
		second_start();
		for (int k = 0; k < 200; k++)
			report(&wk, "long", sec * 200 + k);
		sleep_ms(100);
	}
	st = state_until(port, long_seen);
	s = series(st, "long");
	assert_int_equal(json_integer_value(json_object_get(s, "stride")), 2);
	v = json_object_get(s, "v");
	assert_int_equal(json_array_size(v), 301); /* 0, 2, ..., 598, then 599 */
	for (i = 0; i < 300; i++)
		assert_int_equal((int)json_real_value(json_array_get(v, i)), (int)(2 * i));
	assert_int_equal((int)json_real_value(json_array_get(v, 300)), 599);
	json_decref(st);

	/* actions: refused without the secret; nothing reaches the server */
	assert_int_equal(http(port, "POST", "/api/checkpoint", NULL, &body), 401);
	free(body);
	assert_int_equal(http(port, "POST", "/api/checkpoint", "Bearer dash-s3creT", &body), 403);
	free(body);
	assert_int_equal(http(port, "POST", "/api/checkpoint", "Bearer dash-s3cre", &body), 403);
	free(body);
	assert_int_equal(http(port, "GET", "/api/checkpoint", NULL, &body), 405);
	free(body);
	sleep_ms(400);
	assert_int_equal(atomic_load(&srv.asked), 0);
	st = state(port);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(st, "action"), "state")), "none");
	json_decref(st);
	/* with it: asked, done, the file shown */
	assert_int_equal(http(port, "POST", "/api/checkpoint", "Bearer " SECRET, &body), 202);
	assert_non_null(strstr(body, "\"id\":1"));
	free(body);
	st = state_until(port, action_ended);
	assert_int_equal(atomic_load(&srv.asked), 1);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(st, "action"), "state")), "done");
	assert_string_equal(json_string_value(json_array_get(
				json_object_get(json_object_get(st, "action"), "files"), 0)),
			    "/x/server0-shard0-clock5.ckpt");
	json_decref(st);
	/* export: the scheduler has no checkpoint directory here: refused, said why */
	assert_int_equal(http(port, "POST", "/api/export", "Bearer " SECRET, &body), 409);
	assert_non_null(strstr(body, "RDMAPS_CHECKPOINT_DIR"));
	free(body);

	/* the page, its script and style; /metrics on the same port */
	assert_int_equal(http(port, "GET", "/", NULL, &body), 200);
	assert_non_null(strstr(body, "<script src=\"dash.js\">"));
	free(body);
	assert_int_equal(http(port, "GET", "/dash.js", NULL, &body), 200);
	assert_non_null(strstr(body, "api/state"));
	free(body);
	assert_int_equal(http(port, "GET", "/dash.css", NULL, &body), 200);
	free(body);
	assert_int_equal(http(port, "GET", "/nope", NULL, &body), 404);
	free(body);
	assert_int_equal(http(port, "GET", "/metrics", NULL, &body), 200);
	assert_non_null(strstr(body, "rdmaps_nodes{role=\"worker\",state=\"alive\"} 1"));
	free(body);

	/* the server goes, another takes its rank: "restoring" until its first
	 * heartbeat with its shards, then alive with them (32-byte entries) */
	rps_ctl_leave(srv.ctl);
	st = state_until(port, server_left);
	json_decref(st);
	srv2.role = RPS_ROLE_SERVER;
	memcpy(srv2.sched, srv.sched, sizeof(srv2.sched));
	join_thread(&srv2);
	assert_int_equal(srv2.rc, 0);
	st = state_until(port, server_restoring);
	assert_non_null(event_of(st, "restore"));
	assert_non_null(event_of(st, "left"));
	json_decref(st);
	{
		struct {
			struct rps_heartbeat_srv t;
			struct rps_hb_shard_ext sh[2];
		} tail = {.t = {.num_shards = 2,
				.shard_len = sizeof(struct rps_hb_shard_ext),
				.ckpt_age_ms = -1},
			  .sh = {{.ring_depth = 3, .clock = 9, .pushes_applied = 100},
				 {.ring_depth = 4, .clock = 9, .pushes_applied = 200}}};

		assert_int_equal(rps_ctl_set_heartbeat_tail(srv2.ctl, &tail, sizeof(tail)), 0);
		st = state_until(port, server_alive_with_shards);
		nd = server_of(st);
		assert_int_equal(json_integer_value(json_object_get(
				     json_array_get(json_object_get(nd, "shards"), 1), "ring")),
				 4);
		json_decref(st);
	}
	/* the worker's CPU, from its heartbeats */
	st = state_until(port, worker_cpu_known);
	json_decref(st);

	rps_ctl_leave(wk.ctl);
	rps_ctl_leave(srv2.ctl);
	for (int k = 0; k < 400 && !atomic_load(&r.done); k++)
		sleep_ms(10);
	rps_sched_stop(r.s);
	pthread_join(r.th, NULL);
	rps_sched_destroy(r.s);
}

/* Report names: what the worker API and the scheduler accept. */
static void test_report_names(void **state)
{
	static const char *const good[] = {"loss", "test_accuracy", "a.b-c_9", "x",
					   "abcdefghijklmnopqrstuvw"};
	static const char *const bad[] = {"", "a b", "lo\nss", "a/b", "abcdefghijklmnopqrstuvwx"};
	struct rps_report r;
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		memset(&r, 0, sizeof(r));
		memcpy(r.name, good[i], strlen(good[i]));
		assert_int_equal(rps_proto_report_check(&r, &why), 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&r, 0, sizeof(r));
		memcpy(r.name, bad[i],
		       strlen(bad[i]) < sizeof(r.name) ? strlen(bad[i]) : sizeof(r.name));
		why = NULL;
		assert_int_equal(rps_proto_report_check(&r, &why), -EINVAL);
		assert_non_null(why);
	}
	/* not NUL padded after the name */
	memset(&r, 0, sizeof(r));
	memcpy(r.name, "ab", 2);
	r.name[5] = 'x';
	assert_int_equal(rps_proto_report_check(&r, &why), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_report_names),
	    cmocka_unit_test(test_dashboard),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
