/* The public face of the control client (include/rdmaps/ctl.h): rdmaps-ctl's
 * settings and its one question to the scheduler. Connects as role "ctl"
 * over the TCP transport with the shared secret, sends STATUS and copies
 * the text the scheduler answers. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "control/control_int.h"
#include "src/config.h"
#include "src/log.h"
#include "src/proto.h"
#include "src/util.h"
#include "transport/transport.h"

#include <rdmaps/ctl.h>


_Static_assert(sizeof(((struct rps_ctl_opts *)0)->scheduler) >=
		   sizeof(((struct rps_config *)0)->scheduler),
	       "rps_ctl_opts.scheduler holds a configured scheduler address");
_Static_assert(sizeof(((struct rps_ctl_opts *)0)->secret) >=
		   sizeof(((struct rps_config *)0)->secret),
	       "rps_ctl_opts.secret holds a configured secret");

int rps_ctl_opts_from_args(int *argc_p, char **argv, FILE *out, struct rps_ctl_opts *opts_p)
{
	struct rps_config cfg;
	int dump = 0;

	rps_log_set_ident("ctl", -1);
	if (rps_config_init(&cfg) || rps_config_parse_args(&cfg, argc_p, argv, &dump))
		return -EINVAL;
	rps_log_set_level(rps_log_level_parse(cfg.log_level));
	if (dump) {
		rps_config_dump(&cfg, out);
		return 1;
	}
	memset(opts_p, 0, sizeof(*opts_p));
	opts_p->field_mask = RPS_CTL_OPT_SCHEDULER | RPS_CTL_OPT_SECRET | RPS_CTL_OPT_TIMEOUT_MS;
	snprintf(opts_p->scheduler, sizeof(opts_p->scheduler), "%s", cfg.scheduler);
	snprintf(opts_p->secret, sizeof(opts_p->secret), "%s", cfg.secret);
	opts_p->timeout_ms = cfg.timeout_ms;
	return 0;
}

/* One event of an answer: what the status table, a refusal or a closed
 * connection says; other frames go to fn. */
static int client_event(const struct rps_ctl_opts *o, const struct rps_tr_event *ev,
			int (*fn)(void *arg, const struct rps_tr_event *ev, int *done_p), void *arg,
			int *done_p)
{
	if (ev->type == RPS_TR_EV_CLOSED) {
		fprintf(stderr, "rdmaps-ctl: the scheduler at %s closed the connection (%s)\n",
			o->scheduler, ev->status ? rps_strerror(ev->status) : "end of stream");
		*done_p = 1;
		return ev->status ? ev->status : -ECONNRESET;
	}
	if (ev->type != RPS_TR_EV_RECV)
		return -EAGAIN;
	if (ev->hdr.op == RPS_OP_ERROR) {
		char why[RPS_LOG_ESC_BUF];

		*done_p = 1;
		fprintf(stderr, "rdmaps-ctl: scheduler error: %s (%s)\n",
			rps_log_escape(ev->data, ev->data_len, why, sizeof(why)),
			rps_strerror(ev->hdr.status));
		return ev->hdr.status < 0 ? ev->hdr.status : -EPROTO;
	}
	return fn(arg, ev, done_p);
}

int rps_ctl_client_wait(const struct rps_ctl_opts *o, struct rps_transport *tr, int timeout_ms,
			int (*fn)(void *arg, const struct rps_tr_event *ev, int *done_p), void *arg)
{
	uint64_t deadline = rps_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int rc = -ETIMEDOUT, done = 0;

	while (!done) {
		struct rps_tr_event ev[8];
		uint64_t now = rps_now_ns();
		int n;

		if (now >= deadline) {
			fprintf(stderr, "rdmaps-ctl: no answer from the scheduler at %s in %d ms\n",
				o->scheduler, timeout_ms);
			return -ETIMEDOUT;
		}
		n = rps_tr_poll(tr, ev, 8, (int)((deadline - now) / 1000000ull) + 1);
		if (n < 0 && n != -EINTR && n != -EAGAIN) {
			fprintf(stderr, "rdmaps-ctl: poll: %s\n", rps_strerror(n));
			return n;
		}
		for (int i = 0; i < n; i++) {
			if (!done) {
				int r = client_event(o, &ev[i], fn, arg, &done);

				if (done)
					rc = r;
			}
			if (ev[i].type == RPS_TR_EV_RECV && ev[i].token)
				rps_tr_release(tr, ev[i].token);
		}
	}
	return rc;
}

/* The answer to STATUS (request 1): the text, written to out (arg). */
static int status_frame(void *arg, const struct rps_tr_event *ev, int *done_p)
{
	if (ev->hdr.op != RPS_OP_STATUS || ev->hdr.req_id != 1)
		return -EAGAIN;
	*done_p = 1;
	if (ev->hdr.status) {
		fprintf(stderr, "rdmaps-ctl: status: %s\n", rps_strerror(ev->hdr.status));
		return ev->hdr.status < 0 ? ev->hdr.status : -EPROTO;
	}
	if (ev->data_len)
		fwrite(ev->data, 1, ev->data_len, arg);
	return 0;
}

/* opts with every member set: the caller's, the rest from cfg (defaults
 * and the environment) */
static void opts_complete(const struct rps_ctl_opts *in, const struct rps_config *cfg,
			  struct rps_ctl_opts *o)
{
	uint64_t m = in ? in->field_mask : 0;

	memset(o, 0, sizeof(*o));
	snprintf(o->scheduler, sizeof(o->scheduler), "%s",
		 m & RPS_CTL_OPT_SCHEDULER ? in->scheduler : cfg->scheduler);
	snprintf(o->secret, sizeof(o->secret), "%s",
		 m & RPS_CTL_OPT_SECRET ? in->secret : cfg->secret);
	o->timeout_ms = m & RPS_CTL_OPT_TIMEOUT_MS ? in->timeout_ms : cfg->timeout_ms;
	o->field_mask = RPS_CTL_OPT_SCHEDULER | RPS_CTL_OPT_SECRET | RPS_CTL_OPT_TIMEOUT_MS;
}

int rps_ctl_client_open(const struct rps_ctl_opts *opts, struct rps_ctl_opts *full_p,
			struct rps_transport **tr_p, struct rps_conn **conn_p)
{
	struct rps_ctl_opts *o = full_p;
	struct rps_config cfg;
	struct rps_transport *tr;
	struct rps_hello hello;
	char host[RPS_STR_MAX], ack[64];
	size_t ack_len = 0;
	uint16_t port;
	int rc;

	rc = rps_config_init(&cfg);
	if (rc)
		return rc;
	opts_complete(opts, &cfg, full_p);
	if (rps_config_parse_hostport(o->scheduler, host, sizeof(host), &port)) {
		fprintf(stderr, "rdmaps-ctl: scheduler address '%s': expected host:port\n",
			o->scheduler);
		return -EDESTADDRREQ;
	}
	rc = rps_ctl_transport_create(&cfg, o->secret, CTL_STATUS_MAX_MSG, o->timeout_ms, NULL,
				      NULL, &tr);
	if (rc) {
		fprintf(stderr, "rdmaps-ctl: tcp transport: %s\n", rps_strerror(rc));
		return rc;
	}
	rps_proto_hello_init(&hello, RPS_ROLE_CTL, UINT32_MAX);
	rc = rps_tr_connect(tr, host, port, &hello, ack, sizeof(ack), &ack_len, o->timeout_ms,
			    conn_p);
	if (rc) {
		if (rc == -EACCES)
			fprintf(stderr,
				"rdmaps-ctl: scheduler %s refused us: wrong secret "
				"(RDMAPS_SECRET / --secret)\n",
				o->scheduler);
		else
			fprintf(stderr,
				"rdmaps-ctl: cannot reach the scheduler at %s: %s; is the job "
				"running there (RDMAPS_SCHEDULER, --scheduler)?\n",
				o->scheduler, rps_strerror(rc));
		rps_transport_destroy(tr);
		return rc;
	}
	*tr_p = tr;
	return 0;
}

int rps_ctl_status_print(const struct rps_ctl_opts *opts, FILE *out)
{
	struct rps_ctl_opts full;
	const struct rps_ctl_opts *o = &full;
	struct rps_transport *tr;
	struct rps_conn *conn = NULL;
	struct rps_frame_hdr h;
	int rc;

	rc = rps_ctl_client_open(opts, &full, &tr, &conn);
	if (rc)
		return rc;
	rps_proto_hdr_init(&h, RPS_OP_STATUS, 0, 1);
	rc = rps_tr_post_send(conn, &h, NULL, 0, 0);
	if (rc) {
		fprintf(stderr, "rdmaps-ctl: sending to the scheduler at %s: %s\n", o->scheduler,
			rps_strerror(rc));
		goto out_conn;
	}
	rc = rps_ctl_client_wait(o, tr, o->timeout_ms, status_frame, out);
	fflush(out);
out_conn:
	rps_tr_close(conn);
	rps_transport_destroy(tr);
	return rc;
}
