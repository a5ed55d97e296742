/* Scheduler: the STATUS table (rdmaps-ctl status) and /metrics. */
#include "server/sched_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

#include <rdmaps/status.h>

void rps_sched_on_status(struct rps_sched *s, struct sched_peer *p, const struct rps_frame_hdr *h)
{
	/* a line per node, and per server one of shard figures (up to 64 shards) */
	size_t cap = 1024 + 200 * ((size_t)s->nslots + 16) + 1600 * (size_t)s->num_servers;
	uint64_t lim = p->conn->tr->max_frame;
	char *buf;
	size_t n;

	if (lim > sizeof(struct rps_frame_hdr) && cap > lim - sizeof(struct rps_frame_hdr))
		cap = lim - sizeof(struct rps_frame_hdr);
	buf = rps_malloc(cap);
	if (!buf) {
		rps_sched_send_frame(p, RPS_OP_STATUS, h->req_id, -ENOMEM, 0, NULL, 0, NULL, 0);
		return;
	}
	n = rps_sched_status_text(s, buf, cap);
	/* A peer we could not send to is gone (or was cut for not reading):
	 * no more tables for its queued requests. Nodes go through on_closed. */
	if (rps_sched_send_frame(p, RPS_OP_STATUS, h->req_id, 0, 0, buf, n, NULL, 0) ==
		-ECONNRESET &&
	    !p->registered && p->slot < 0)
		p->closing = 1;
	rps_free(buf);
}

/* Node gauges, from the loop (the HTTP thread only renders). */
void rps_sched_metrics_update(struct rps_sched *s)
{
	int n[2][3] = {{0}};

	for (int i = 0; i < s->nslots; i++) {
		const struct sched_slot *sl = &s->slots[i];
		int r = sl->node.role == RPS_ROLE_SERVER ? 0 : 1, st;

		if (sl->state == SLOT_EMPTY)
			continue;
		st = sl->state == SLOT_ALIVE ? 0 : sl->state == SLOT_DEAD ? 1 : 2;
		n[r][st]++;
	}
	for (int r = 0; r < 2; r++)
		for (int st = 0; st < 3; st++)
			rps_metric_set(s->m.nodes[r][st], n[r][st]);
}

int rps_sched_metrics_start(struct rps_sched *s, const char *host, int port)
{
	static const char *const roles[2] = {"server", "worker"};
	static const char *const states[3] = {"alive", "dead", "left"};
	static const char *const dirs[2] = {"rx", "tx"};
	char lab[96];
	int rc;

	rc = rps_metrics_create(&s->m.reg);
	if (rc)
		return rc;
	for (int r = 0; r < 2 && !rc; r++) {
		for (int st = 0; st < 3 && !rc; st++) {
			snprintf(lab, sizeof(lab), "role=\"%s\",state=\"%s\"", roles[r],
				 states[st]);
			rc = rps_metrics_gauge(s->m.reg, "rdmaps_nodes",
					       "nodes by role and liveness", lab,
					       &s->m.nodes[r][st]);
		}
		snprintf(lab, sizeof(lab), "role=\"%s\"", roles[r]);
		if (!rc)
			rc = rps_metrics_counter(s->m.reg, "rdmaps_heartbeats_missed_total",
						 "nodes declared dead (silent, or closed without "
						 "SHUTDOWN)",
						 lab, &s->m.missed[r]);
	}
	for (int d = 0; d < 2 && !rc; d++) {
		snprintf(lab, sizeof(lab), "transport=\"tcp\",dir=\"%s\"", dirs[d]);
		rc = rps_metrics_counter(s->m.reg, "rdmaps_bytes_total",
					 "bytes of frames sent / received (headers included)", lab,
					 &s->m.bytes[d]);
		if (!rc)
			rc = rps_metrics_counter(s->m.reg, "rdmaps_messages_total",
						 "frames sent / received", lab, &s->m.msgs[d]);
	}
	if (!rc)
		rc = rps_sched_dash_create(s);
	if (!rc) {
		rc = rps_http_start_req(host, (uint16_t)port, NULL, rps_sched_dash_http, s,
					&s->m.http);
	}
	if (rc) {
		RPS_ERR("scheduler: /metrics and the dashboard on %s:%d: %s (RDMAPS_HTTP_HOST, "
			"RDMAPS_METRICS_PORT)",
			host, port, rps_strerror(rc));
		rps_sched_dash_destroy(s);
		rps_metrics_destroy(s->m.reg);
		memset(&s->m, 0, sizeof(s->m));
		return rc;
	}
	RPS_INFO("dashboard on http://%s:%u/ (metrics on /metrics)", rps_http_shown_host(host),
		 rps_http_port(s->m.http));
	return 0;
}

static const char *slot_state_name(enum slot_state st)
{
	switch (st) {
	case SLOT_EMPTY:
		return "empty";
	case SLOT_ALIVE:
		return "alive";
	case SLOT_LEFT:
		return "left";
	case SLOT_DEAD:
		return "dead";
	}
	return "?";
}

static const char *state_name(enum sched_state st)
{
	switch (st) {
	case SCHED_WAITING:
		return "waiting for nodes";
	case SCHED_RUNNING:
		return "running";
	case SCHED_ENDING:
		return "ending";
	}
	return "?";
}

struct textbuf {
	char *buf;
	size_t len;
	size_t n;
};

static void tb_printf(struct textbuf *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tb_printf(struct textbuf *t, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (t->n + 1 >= t->len)
		return;
	va_start(ap, fmt);
	k = vsnprintf(t->buf + t->n, t->len - t->n, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	t->n += (size_t)k;
	if (t->n >= t->len)
		t->n = t->len - 1;
}

size_t rps_sched_status_text(struct rps_sched *s, char *buf, size_t len)
{
	struct textbuf t = {.buf = buf, .len = len, .n = 0};
	uint64_t now = rps_now_ns();
	int alive[4] = {0}, dead = 0, left = 0;

	if (!len)
		return 0;
	buf[0] = '\0';
	for (int i = 0; i < s->nslots; i++) {
		alive[s->slots[i].node.role & 3] += s->slots[i].state == SLOT_ALIVE;
		dead += s->slots[i].state == SLOT_DEAD;
		left += s->slots[i].state == SLOT_LEFT;
	}
	tb_printf(&t, "scheduler %s:%u  %s  map epoch %u  up %.1f s  heartbeat timeout %d ms\n",
		  s->host[0] ? s->host : "0.0.0.0", s->port, state_name(s->state), s->epoch,
		  (double)(now - s->start_ns) / 1e9, s->hb_timeout_ms);
	if (s->state == SCHED_WAITING) {
		char text[256];

		rps_sched_progress_text(s, text, sizeof(text));
		tb_printf(&t, "%s\n", text);
	} else {
		tb_printf(&t, "servers %d/%d alive, workers %d/%d alive, %d dead, %d left\n",
			  alive[RPS_ROLE_SERVER], s->num_servers, alive[RPS_ROLE_WORKER],
			  s->num_workers, dead, left);
	}
	tb_printf(&t, "%-5s %-7s %-5s %-28s %-8s %-7s %-9s %-5s %-10s %-9s %-9s %s\n", "ID", "ROLE",
		  "RANK", "HOST:PORT", "PID", "STATE", "HB_AGE_MS", "TR", "CLOCK", "PUSHES/S",
		  "PULLS/S", "COUNTERS (pushes pulls bytes_in bytes_out)");
	for (int i = 0; i < s->nslots; i++) {
		const struct sched_slot *sl = &s->slots[i];
		char hp[96], age[24];

		if (sl->state == SLOT_EMPTY)
			continue;
		snprintf(hp, sizeof(hp), "%s:%u", sl->node.host, sl->node.port);
		if (sl->state == SLOT_ALIVE)
			snprintf(age, sizeof(age), "%" PRIu64,
				 (uint64_t)((now - sl->last_hb_ns) / 1000000u));
		else
			snprintf(age, sizeof(age), "-");
		tb_printf(&t,
			  "%-5u %-7s %-5u %-28s %-8u %-7s %-9s %-5s %-10u %-9.0f %-9.0f %" PRIu64
			  " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
			  sl->node.id, rps_sched_role_name(sl->node.role), sl->node.rank, hp,
			  sl->node.pid, slot_state_name(sl->state), age,
			  sl->transport ? "rdma" : "tcp", sl->clock,
			  sl->state == SLOT_ALIVE ? sl->rate[0] : 0.0,
			  sl->state == SLOT_ALIVE ? sl->rate[1] : 0.0, sl->counters[0],
			  sl->counters[1], sl->counters[2], sl->counters[3]);
		if (sl->have_srv && sl->state == SLOT_ALIVE) {
			/* servers: per shard ring depth and clock, checkpoint age */
			tb_printf(&t, "      shards %u: ring depth", sl->srv.num_shards);
			for (uint32_t k = 0; k < sl->srv.num_shards; k++)
				tb_printf(&t, " %u", sl->shards[k].ring_depth);
			tb_printf(&t, " | clock");
			for (uint32_t k = 0; k < sl->srv.num_shards; k++)
				tb_printf(&t, " %u", sl->shards[k].clock);
			if (sl->srv.ckpt_age_ms >= 0)
				tb_printf(&t,
					  " | checkpoint age %.1f s (%" PRIu64 " written, %" PRIu64
					  " failed)\n",
					  (double)sl->srv.ckpt_age_ms / 1e3 +
					      (double)(now - sl->srv_ns) / 1e9,
					  sl->srv.ckpts, sl->srv.ckpt_fails);
			else
				tb_printf(&t, " | checkpoint none (%" PRIu64 " failed)\n",
					  sl->srv.ckpt_fails);
		}
	}
	for (const struct sched_peer *p = s->peers; p; p = p->next) {
		char hp[96];

		if (!p->registered || p->slot >= 0 || p->closing)
			continue;
		snprintf(hp, sizeof(hp), "%s:%u", p->reg.host, p->reg.port);
		tb_printf(&t, "%-5s %-7s %-5s %-28s %-8u %-7s %-9s %-5s %-10s %-9s %-9s %s\n", "-",
			  rps_sched_role_name(p->reg.role), "-", hp, p->reg.pid, "waiting", "-",
			  p->reg.transport ? "rdma" : "tcp", "-", "-", "-", "-");
	}
	return t.n;
}
