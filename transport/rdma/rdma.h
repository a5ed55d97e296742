/* The RDMA transport (verbs + librdmacm): what tools and tests may see
 * beyond the ops table. See docs/rdma.md for deployment and error messages.
 */
#ifndef RPS_RDMA_H
#define RPS_RDMA_H

#include <stdint.h>

#include "transport/transport.h"

/* Counters of one transport instance (monotonic unless said otherwise). */
struct rps_rdma_stats {
	uint64_t frames_sent; /* data frames posted */
	uint64_t frames_recv; /* data frames delivered as RECV events */
	uint64_t ctrl_sent;   /* credit-only frames posted */
	uint64_t ctrl_recv;
	uint64_t credit_waits;	/* post_send calls that had to wait for credits */
	uint64_t reads;		/* RDMA READs posted */
	uint64_t mr_cache_hits; /* read_remote sges found in the MR cache */
	uint64_t mr_cache_regs; /* registrations the MR cache made */
	uint64_t mr_tmp_regs;	/* per-read registrations (cache full) */
	int64_t srq_low_water;	/* fewest receive WQEs seen posted in any SRQ
				 * after a receive (-1: no receive yet) */
	uint32_t conns;		/* live connections (gauge) */
	int32_t mw;		/* read access (rdma_mw.c): 1 memory windows per
				 * connection, 2 one registration for all, 0 not
				 * decided yet (nothing registered for reads) */
	uint32_t mws;		/* memory windows now (gauge) */
};

void rps_rdma_get_stats(struct rps_transport *t, struct rps_rdma_stats *st_p);

/* The private data of the connection handshake (docs/rdma.md). */
#define RPS_RDMA_CM_MAGIC   0x4d435052u /* "RPCM" */
#define RPS_RDMA_CM_VERSION 2 /* 2: the accept carries the challenge (src/auth.h) */

/* Appended to struct rps_hello in the connect request: 48 + 8 = 56 bytes,
 * the most an IB/RoCE connect request carries through rdma_cm. */
struct rps_rdma_req_ext {
	uint16_t credits; /* data frames the client lets the server have in flight */
	uint8_t version;  /* RPS_RDMA_CM_VERSION */
	uint8_t reserved;
	uint32_t buf_bytes; /* the client's receive buffer: the largest frame it takes */
};
_Static_assert(sizeof(struct rps_hello) + sizeof(struct rps_rdma_req_ext) == 56,
	       "connect private data is 56 bytes");

/* Private data of the accept (IB limit 196 bytes). */
struct rps_rdma_rep {
	uint32_t magic;	  /* RPS_RDMA_CM_MAGIC */
	int32_t status;	  /* 0 */
	uint16_t credits; /* data frames the server lets the client have in flight */
	uint8_t version;
	uint8_t rd_atomic;  /* RDMA READs the server takes in flight from this client */
	uint32_t buf_bytes; /* the server's receive buffer */
	uint32_t ack_len;   /* payload bytes of the HELLO_ACK frame that follows */
	/* Ns and the server's MAC (src/auth.h): the client answers with a PROOF
	 * frame, the first it sends; the HELLO_ACK comes only after it. */
	uint8_t nonce[RPS_NONCE_LEN];
	uint8_t mac[RPS_MAC_LEN];
};
_Static_assert(sizeof(struct rps_rdma_rep) == 84, "rps_rdma_rep is 84 bytes");

/* Private data of a reject (IB limit 148 bytes). */
struct rps_rdma_rej {
	uint32_t magic;	  /* RPS_RDMA_CM_MAGIC */
	int32_t status;	  /* -EACCES wrong secret, -EPROTO bad hello, ... */
	char reason[100]; /* NUL-terminated */
};
_Static_assert(sizeof(struct rps_rdma_rej) <= 148, "reject private data fits");

#endif
