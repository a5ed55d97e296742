/* Options -> transport settings: the one place that does it. Every setting's
 * default is the option table's (src/config.c); transports have none. */
#include <string.h>

#include "src/config.h"
#include "src/util.h"
#include "transport/transport.h"

void rps_tr_params_from_config(const struct rps_config *cfg, struct rps_tr_params *p_p)
{
	memset(p_p, 0, sizeof(*p_p));
	p_p->secret = cfg->secret;
	p_p->insecure = cfg->insecure;
	p_p->tls = cfg->tls;
	p_p->max_msg = cfg->max_msg;
	p_p->timeout_ms = cfg->timeout_ms;
	p_p->nchannels = 1;
	p_p->sq_max = cfg->send_queue_bytes;
	p_p->frame_timeout_ms = cfg->frame_timeout_ms;
	p_p->frame_min_rate = cfg->frame_min_rate;
	p_p->idle_timeout_ms = cfg->idle_timeout_ms;
	p_p->max_conns = cfg->max_conns;
	p_p->max_conns_per_addr = cfg->max_conns_per_addr;
	p_p->accept_backoff_ms = cfg->accept_backoff_ms;
	p_p->device = cfg->device[0] ? cfg->device : NULL;
	p_p->rdma.buf_bytes = cfg->rdma_buf_bytes;
	p_p->rdma.recv_bufs = (uint32_t)cfg->rdma_recv_bufs;
	p_p->rdma.credits = (uint32_t)cfg->rdma_credits;
	p_p->rdma.max_rd = cfg->rdma_max_rd;
	p_p->rdma.event_mode = cfg->rdma_event_mode;
	p_p->rdma.poll_spin_us = cfg->rdma_poll_spin_us;
	p_p->rdma.expect_peers = (uint32_t)RPS_MAX(cfg->num_workers, 1);
	p_p->rdma.rnr_retry = cfg->rdma_rnr_retry;
	p_p->rdma.ack_timeout = cfg->rdma_ack_timeout;
	p_p->rdma.retry_count = cfg->rdma_retry_count;
	p_p->rdma.rnr_timer = cfg->rdma_rnr_timer;
	p_p->rdma.mw = !strcmp(cfg->rdma_mw, "on")    ? RPS_RDMA_MW_ON
		       : !strcmp(cfg->rdma_mw, "off") ? RPS_RDMA_MW_OFF
						      : RPS_RDMA_MW_AUTO;
	p_p->rdma.expect_out =
	    (uint32_t)RPS_MAX(cfg->num_servers, 1) * (uint32_t)RPS_MAX(cfg->shards, 1);
}
