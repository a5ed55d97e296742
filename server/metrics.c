/* What the server reports: the heartbeat tail for the scheduler and the
 * /metrics endpoint (RDMAPS_METRICS_PORT > 0: server rank r serves on
 * port + 1 + r). */
#include "server/server_int.h"

#include <stdio.h>
#include <string.h>

#include "control/control.h"
#include "http/http.h"
#include "src/config.h"
#include "src/log.h"
#include "src/metrics.h"
#include "src/util.h"

/* Age (ms) of the oldest shard's newest checkpoint, -1 if a shard has none. */
static int64_t ckpt_age_ms(struct rps_server *srv)
{
	uint64_t oldest = UINT64_MAX, now = rps_wall_ns();

	for (int s = 0; s < srv->nshards; s++) {
		uint64_t t = atomic_load(&srv->shards[s].ckpt_wall_ns);

		if (!t)
			return -1;
		if (t < oldest)
			oldest = t;
	}
	if (oldest == UINT64_MAX)
		return -1;
	return now > oldest ? (int64_t)((now - oldest) / 1000000u) : 0;
}

void rps_srv_heartbeat(struct rps_server *srv)
{
	struct {
		struct rps_heartbeat_srv t;
		struct rps_hb_shard_ext sh[RPS_MAX_SHARDS];
	} tail;
	uint64_t counters[4];
	uint64_t min = UINT64_MAX;

	memset(&tail.t, 0, sizeof(tail.t));
	tail.t.num_shards = (uint32_t)srv->nshards;
	tail.t.shard_len = sizeof(tail.sh[0]);
	tail.t.ckpt_age_ms = ckpt_age_ms(srv);
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_shard *sh = &srv->shards[s];
		uint64_t c = rps_store_clock(&sh->store);

		if (c < min)
			min = c;
		tail.sh[s].clock = (uint32_t)RPS_MIN(c, UINT32_MAX);
		tail.sh[s].ring_depth = (uint32_t)RPS_MIN(rps_ring_depth(sh->ring), UINT32_MAX);
		tail.sh[s].pushes_applied = atomic_load(&sh->pushes_applied);
		tail.sh[s].pulls_served = atomic_load(&sh->pulls_served);
		tail.sh[s].ckpt_clock = atomic_load(&sh->ckpt_clock);
		tail.t.ckpts += atomic_load(&sh->ckpts_ok);
		tail.t.ckpt_fails += atomic_load(&sh->ckpts_failed);
	}
	counters[0] = atomic_load_explicit(&srv->n_push, memory_order_relaxed);
	counters[1] = atomic_load_explicit(&srv->n_pull, memory_order_relaxed);
	counters[2] = atomic_load_explicit(&srv->bytes_in, memory_order_relaxed);
	counters[3] = atomic_load_explicit(&srv->bytes_out, memory_order_relaxed);
	rps_ctl_set_heartbeat(srv->ctl, (uint32_t)RPS_MIN(min, UINT32_MAX), counters);
	rps_ctl_set_heartbeat_tail(srv->ctl, &tail,
				   sizeof(tail.t) + (size_t)srv->nshards * sizeof(tail.sh[0]));
}

/* ---- /metrics ---------------------------------------------------------------- */

/* Mirror the server's own counters into the registry, then render (HTTP thread). */
static int metrics_handler(const char *path, void *arg, char **body_p, size_t *len_p,
			   const char **ctype_p)
{
	struct rps_server *srv = arg;
	struct srv_metrics *m = &srv->m;
	uint64_t now = rps_wall_ns();

	pthread_mutex_lock(&m->lock);
	for (int s = 0; s < srv->nshards; s++) {
		struct rps_shard *sh = &srv->shards[s];
		uint64_t t = atomic_load(&sh->ckpt_wall_ns);

		rps_metric_set_count(m->pushes[s], atomic_load(&sh->pushes_applied));
		rps_metric_set_count(m->pulls[s], atomic_load(&sh->pulls_served));
		rps_metric_set(m->depth[s], (double)rps_ring_depth(sh->ring));
		rps_metric_set(m->clock[s], (double)rps_store_clock(&sh->store));
		rps_metric_set_count(m->ckpts[s], atomic_load(&sh->ckpts_ok));
		rps_metric_set_count(m->ckpt_fail[s], atomic_load(&sh->ckpts_failed));
		rps_metric_set(m->ckpt_age[s], t ? (now > t ? (double)(now - t) / 1e9 : 0) : -1);
	}
	rps_metric_set_count(m->bytes[0], atomic_load(&srv->bytes_in));
	rps_metric_set_count(m->bytes[1], atomic_load(&srv->bytes_out));
	rps_metric_set_count(m->msgs[0], atomic_load(&srv->msgs_in));
	rps_metric_set_count(m->msgs[1], atomic_load(&srv->msgs_out));
	rps_metric_set_count(m->faults[0], atomic_load(&srv->faults_drop));
	rps_metric_set_count(m->faults[1], atomic_load(&srv->faults_delay));
	{
		uint64_t st = 0;

		for (int s = 0; s < srv->nshards; s++)
			st += atomic_load(&srv->shards[s].faults_stall);
		rps_metric_set_count(m->faults[2], st);
	}
	for (int c = 0; c < RPS_CODEC_COUNT; c++) {
		rps_metric_set_count(m->codec[c][0], atomic_load(&srv->codec_frames[c]));
		rps_metric_set_count(m->codec[c][1], atomic_load(&srv->codec_bytes[c]));
		rps_metric_set_count(m->codec[c][2], atomic_load(&srv->codec_raw[c]));
	}
	pthread_mutex_unlock(&m->lock);
	return rps_http_metrics_handler(path, m->reg, body_p, len_p, ctype_p);
}

static int metrics_register(struct rps_server *srv)
{
	static const char *const dirs[2] = {"rx", "tx"};
	static const char *const kinds[3] = {"drop", "delay", "stall"};
	struct srv_metrics *m = &srv->m;
	char lab[96];
	int rc = 0;

	for (int s = 0; s < srv->nshards && !rc; s++) {
		snprintf(lab, sizeof(lab), "shard=\"%d\"", s);
		rc = rps_metrics_counter(m->reg, "rdmaps_pushes_total",
					 "pushes applied by the shard's update thread", lab,
					 &m->pushes[s]);
		if (!rc)
			rc = rps_metrics_counter(
			    m->reg, "rdmaps_pull_requests_total",
			    "pulls served by the server's CPU (TCP; RDMA reads do not reach it)",
			    lab, &m->pulls[s]);
		if (!rc)
			rc = rps_metrics_gauge(m->reg, "rdmaps_ring_depth",
					       "pushes waiting in the shard's priority ring", lab,
					       &m->depth[s]);
		if (!rc)
			rc = rps_metrics_gauge(m->reg, "rdmaps_shard_clock",
					       "the shard's applied clock", lab, &m->clock[s]);
		if (!rc)
			rc = rps_metrics_counter(m->reg, "rdmaps_checkpoints_total",
						 "checkpoints written", lab, &m->ckpts[s]);
		if (!rc)
			rc = rps_metrics_counter(m->reg, "rdmaps_checkpoint_failures_total",
						 "checkpoints that failed", lab, &m->ckpt_fail[s]);
		if (!rc)
			rc = rps_metrics_gauge(m->reg, "rdmaps_checkpoint_age_seconds",
					       "time since the shard's last checkpoint (-1: none)",
					       lab, &m->ckpt_age[s]);
	}
	for (int d = 0; d < 2 && !rc; d++) {
		snprintf(lab, sizeof(lab), "transport=\"%s\",dir=\"%s\"", srv->transport, dirs[d]);
		rc = rps_metrics_counter(m->reg, "rdmaps_bytes_total",
					 "bytes of frames sent / received (headers included)", lab,
					 &m->bytes[d]);
		if (!rc)
			rc = rps_metrics_counter(m->reg, "rdmaps_messages_total",
						 "frames sent / received", lab, &m->msgs[d]);
	}
	for (int k = 0; k < 3 && !rc; k++) {
		snprintf(lab, sizeof(lab), "kind=\"%s\"", kinds[k]);
		rc = rps_metrics_counter(m->reg, "rdmaps_faults_injected_total",
					 "faults injected (RDMAPS_FAULT)", lab, &m->faults[k]);
	}
	for (int c = 0; c < RPS_CODEC_COUNT && !rc; c++) { /* docs/compression.md */
		snprintf(lab, sizeof(lab), "codec=\"%s\"", rps_codec_name((unsigned)c));
		rc = rps_metrics_counter(m->reg, "rdmaps_push_frames_total",
					 "PUSH frames received, by codec", lab, &m->codec[c][0]);
		if (!rc)
			rc = rps_metrics_counter(m->reg, "rdmaps_push_data_bytes_total",
						 "PUSH data bytes received as sent, by codec", lab,
						 &m->codec[c][1]);
		if (!rc)
			rc = rps_metrics_counter(m->reg, "rdmaps_push_raw_bytes_total",
						 "PUSH data as float32 (before the codec), by codec",
						 lab, &m->codec[c][2]);
	}
	return rc;
}

/* /metrics on port + 1 + rank (the scheduler takes port itself), so that a
 * scheduler and several servers fit on one host. */
int rps_srv_metrics_start(struct rps_server *srv, uint32_t rank)
{
	int base = srv->cfg->metrics_port, port;
	int rc;

	if (base <= 0)
		return 0;
	port = base + 1 + (int)rank;
	if (port > 65535) {
		RPS_ERR("metrics port %d + 1 + rank %u is beyond 65535", base, rank);
		return -EINVAL;
	}
	pthread_mutex_init(&srv->m.lock, NULL);
	rc = rps_metrics_create(&srv->m.reg);
	if (!rc)
		rc = metrics_register(srv);
	if (!rc)
		rc = rps_http_start(srv->cfg->http_host, (uint16_t)port, NULL, metrics_handler, srv,
				    &srv->m.http);
	if (rc) {
		RPS_ERR("/metrics on %s:%d: %s (RDMAPS_HTTP_HOST)", srv->cfg->http_host, port,
			rps_strerror(rc));
		rps_metrics_destroy(srv->m.reg);
		srv->m.reg = NULL;
		return rc;
	}
	RPS_INFO("metrics on http://%s:%d/metrics", rps_http_shown_host(srv->cfg->http_host), port);
	return 0;
}

void rps_srv_metrics_stop(struct rps_server *srv)
{
	if (!srv->m.reg)
		return;
	rps_http_stop(srv->m.http);
	rps_metrics_destroy(srv->m.reg);
	pthread_mutex_destroy(&srv->m.lock);
	memset(&srv->m, 0, sizeof(srv->m));
}
