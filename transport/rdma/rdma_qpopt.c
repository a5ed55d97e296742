/* RDMA transport: the retransmission settings of a connection's QP, for
 * fabrics that lose packets (RoCE without PFC; docs/rdma.md, "Retransmission:
 * InfiniBand and lossy RoCE").
 * - local ACK timeout (RDMAPS_RDMA_ACK_TIMEOUT): how long a requester waits
 *   for an ACK or READ response before it sends again. rdma_cm derives it
 *   from the path's packet lifetime (on RoCE about 2 s), so without this one
 *   dropped tail packet stalls its QP for seconds. Set with rdma_set_option
 *   before rdma_connect / rdma_accept: librdmacm applies it when it moves
 *   the QP to RTS.
 * - retry count and RNR retries: rdma_conn_param (rdma_cm.c, rdma_connect.c).
 * - RNR NAK timer (RDMAPS_RDMA_RNR_TIMER): the delay a peer that found no
 *   posted receive waits before it tries again; ib_cm sets 0 (655 ms). It may
 *   change in RTS (RTS -> RTS), so it is set once the QP is established. */
#include <errno.h>
#include <string.h>

#include "src/log.h"
#include "transport/rdma/rdma_int.h"

void rps_rdma_qpopt_pre(struct rps_rdma_transport *t, struct rdma_cm_id *id, const char *peer)
{
	uint8_t to = (uint8_t)t->ack_timeout;

	if (!t->ack_timeout)
		return;
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &to, sizeof(to)))
		RPS_WARN("rdma %s: cannot set the ACK timeout (RDMAPS_RDMA_ACK_TIMEOUT=%d): %s; "
			 "rdma_cm's default applies (a lost packet may stall the connection for "
			 "seconds)",
			 peer, t->ack_timeout, strerror(-rps_rdma_cm_err()));
}

void rps_rdma_qpopt_rts(struct rps_rdma_transport *t, struct ibv_qp *qp, const char *peer)
{
	struct ibv_qp_attr a;
	int rc;

	if (!qp)
		return;
	memset(&a, 0, sizeof(a));
	a.min_rnr_timer = (uint8_t)t->rnr_timer;
	rc = ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER);
	if (rc)
		RPS_DEBUG("rdma %s: cannot set the RNR timer (RDMAPS_RDMA_RNR_TIMER=%d): %s", peer,
			  t->rnr_timer, strerror(rc > 0 ? rc : errno));
}
