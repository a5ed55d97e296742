/* Internals of the RDMA transport, shared by transport/rdma/ (all .c files).
 *
 * Threads and locks
 * - t->prog_lock (mutex) serialises completion processing (progress_cq), the
 *   pending-event queue, the qpn -> conn map and the slow path (CM events,
 *   async events, teardown). poll() holds it while it works; threads that
 *   wait (post_send, read_remote, connect) try-lock it to make progress.
 *   CM events, async events and teardown run only in poll() (slow path).
 * - c->lock (spinlock) guards a connection's send side: send-queue slots,
 *   send buffers, credit counters. Held for one post.
 * - SRQ reservations and the MR cache use atomics (+ a mutex for MR cache
 *   writers only).
 *
 * Credits (per direction, cumulative 32-bit counters)
 *   the receiver reserves window = grant + 1 WQEs of its SRQ for the peer;
 *   the sender may have `grant` data frames in flight, plus one credit-only
 *   frame: in flight = sent - peer_freed. The receiver counts `freed` (frames
 *   whose WQE was re-posted: data frames at release(), credit frames at once)
 *   and sends it as the immediate data of every frame going back; when
 *   freed - reported reaches ctrl_thresh (>= 2, so credit frames never
 *   ping-pong) and no frame is going back, it sends a zero-length credit frame.
 */
#ifndef RPS_RDMA_INT_H
#define RPS_RDMA_INT_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdint.h>

#include "src/auth.h"
#include "transport/rdma/rdma.h"
#include "transport/transport.h"

#define RDMA_HDR_LEN	      ((uint32_t)sizeof(struct rps_frame_hdr))
#define RDMA_MAX_SGE	      30
/* Bytes each send / receive buffer has beyond RDMAPS_RDMA_BUF_BYTES, for the
 * frame header and a frame's fixed part: a 64 KiB gradient then travels in
 * one SEND with the default 64K, not a full one and a 72-byte tail. */
#define RDMA_BUF_HEADROOM     256u
_Static_assert(RDMA_HDR_LEN + sizeof(struct rps_push) <= RDMA_BUF_HEADROOM &&
		   RDMA_HDR_LEN + sizeof(struct rps_pull) <= RDMA_BUF_HEADROOM,
	       "frame headers fit the buffer headroom");
#define RDMA_READ_SLOTS	      64  /* RDMA READs posted per connection */
#define RDMA_MRC_SIZE	      256 /* MR cache entries */
#define RDMA_MAX_PORTS	      8
#define RDMA_POLL_BATCH	      32
#define RDMA_DRAIN_TIMEOUT_NS (3ull * 1000000000ull)
#define RDMA_WRID_RECV	      1ull /* low bit of a receive's wr_id (entries are 8-aligned) */

enum rps_rdma_wr_kind {
	WR_RECV = 1, /* struct rps_rdma_rbuf */
	WR_SEND,     /* struct rps_rdma_slot ... */
	WR_CTRL,
	WR_READ,
	WR_RNOTIFY, /* a READ of read_notify: ctx is its struct rps_tr_done */
	WR_DRAIN,
	WR_BIND, /* a memory window's bind (rdma_mw.c) */
};

struct rps_rdma_transport;
struct rps_rdma_conn;

/* One pre-registered receive buffer; wr_id of its WQE and the RECV token. */
struct rps_rdma_rbuf {
	uint8_t kind; /* WR_RECV */
	struct rps_rdma_srq *srq;
	struct rps_rdma_conn *conn; /* while a consumer holds it (holds a conn ref) */
	char *buf;
};

/* A shared receive queue: one per channel (shard) on the listening side,
 * one for all outgoing connections. */
struct rps_rdma_srq {
	struct rps_rdma_transport *t;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	char *mem;
	struct rps_rdma_rbuf *bufs;
	uint32_t nbufs;
	int channel;		   /* -1: client side */
	_Atomic uint32_t reserved; /* WQEs promised to peers (sum of windows) */
	_Atomic int32_t posted;	   /* WQEs posted now */
};

/* A send-queue entry of a connection; wr_id of its work request. */
struct rps_rdma_slot {
	uint8_t kind; /* WR_SEND, WR_CTRL, WR_READ, WR_RNOTIFY, WR_DRAIN */
	uint8_t has_buf;
	struct rps_rdma_conn *c;
	uint64_t ctx;
	struct ibv_mr **tmp_mr; /* READ into memory the MR cache could not take */
	int ntmp;
};

enum rps_rdma_conn_state {
	C_CONNECTING = 1, /* client, until HELLO_ACK */
	C_ACCEPTING,	  /* listener, until ESTABLISHED */
	C_PROVING,	  /* listener, established, until the client's PROOF (src/auth.h) */
	C_UP,
	C_DEAD, /* QP flushed or being flushed */
};

struct rps_rdma_conn {
	struct rps_conn base;
	struct rps_rdma_transport *t;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	uint32_t qpn;
	struct rps_rdma_srq *srq;
	uint32_t window;  /* WQEs reserved in srq for this peer */
	_Atomic int refs; /* 1 (the connection) + RECV tokens out */
	_Atomic int state;
	int reason; /* first error: the CLOSED status */
	_Atomic int user_closed;
	int handed;	   /* the owner knows it (prog_lock) */
	int closed_sent;   /* CLOSED queued (prog_lock) */
	int on_close_list; /* (close_lock) */
	int in_map;	   /* (prog_lock) */
	int disconnected;  /* rdma_disconnect called (prog_lock) */
	int drain_posted;  /* (prog_lock) */
	_Atomic int drained;
	uint64_t drain_deadline;
	uint8_t max_rd; /* reads in flight the peer takes */

	/* send side. Posters take post_lock, reserve a send-queue slot (and a
	 * send buffer) under lock, drop lock, fill the buffer and post. So
	 * work requests reach the QP in slot order (completions are matched
	 * by walking the ring), and the completion path, which takes only
	 * lock, never waits for a post: under rxe ibv_post_send runs the
	 * whole transfer inside its system call (milliseconds for 64 KiB). */
	pthread_mutex_t post_lock;
	pthread_spinlock_t lock;
	uint32_t grant;	      /* data frames the peer lets us have in flight */
	uint32_t peer_window; /* grant + 1 */
	uint32_t peer_buf;    /* the peer's receive buffer */
	uint32_t sent;
	_Atomic uint32_t peer_freed;
	struct rps_rdma_slot *slots;
	uint32_t nslots; /* one more than any user of the ring may take */
	uint32_t slot_mask; /* slots[] has slot_mask + 1 >= nslots entries (a power of two) */
	uint32_t sq_head, sq_tail;
	char *sbuf;
	struct ibv_mr *smr;
	uint32_t nsbuf;
	uint32_t sb_head, sb_tail;
	uint32_t unsig;
	uint32_t sig_every;

	/* receive side */
	_Atomic uint32_t freed;
	_Atomic uint32_t reported;
	uint32_t ctrl_thresh;
	_Atomic int ctrl_pending;

	/* handshake */
	char *ack; /* client: HELLO_ACK payload; listener: ack to send */
	uint32_t ack_len;
	_Atomic int ack_state; /* client: 0 waiting, 1 arrived, < 0 error */
	struct rps_auth_challenge chal; /* listener: the challenge in the accept */
	int proof_ok; /* listener: the PROOF came before ESTABLISHED (prog_lock) */
	uint64_t born_ns; /* listener: when the request came (handshake deadline, rdma_limits.c) */

	struct rps_rdma_conn *close_next;
	struct rps_rdma_conn *all_next, *all_prev;
};

struct rps_rdma_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	int cq_size;
	_Atomic int cq_used;
	struct ibv_device_attr attr;
	char name[64];
	int max_sge;
};

struct rps_rdma_mrc_ent {
	_Atomic uint64_t gen; /* odd while being changed */
	uintptr_t start, end;
	uint32_t lkey;
	struct ibv_mr *mr;
	int owned; /* registered by the cache (else a reg_mem region) */
};

/* Pending events: a growable ring under prog_lock. */
struct rps_rdma_evq {
	struct rps_tr_event *ev;
	uint32_t cap, head, tail; /* cap: 0 or a power of two (1024, doubled) */
};

struct rps_rdma_transport {
	struct rps_transport base;
	char secret[RPS_SECRET_MAX + 1];
	char device[64];
	/* settings, from params (rps_tr_params_from_config) */
	uint32_t buf_bytes;
	uint32_t recv_bufs;
	uint32_t credits;
	int max_rd;
	int event_mode;
	uint64_t poll_spin_ns; /* event mode: spin this long after activity */
	int timeout_ms;
	int rnr_retry;
	int ack_timeout; /* 0: leave rdma_cm's (rdma_qpopt.c) */
	int retry_count;
	int rnr_timer;
	uint64_t max_msg;
	uint32_t expect_peers; /* guess of connections per SRQ, for the grant */
	uint32_t expect_out;

	pthread_mutex_t setup_lock; /* device, SRQ and listener set-up */
	_Atomic(struct rps_rdma_dev *) dev;
	struct rps_rdma_srq **srqs; /* [nchannels], listening side */
	uint32_t nsrqs;
	struct rps_rdma_srq *csrq; /* outgoing connections */
	struct rdma_cm_id *lid;

	struct rdma_event_channel *cm_ch;
	int efd;  /* eventfd for wake() */
	int epfd; /* event mode */
	_Atomic int woken;
	_Atomic int poll_sleeping;
	_Atomic uint64_t last_active_ns; /* poll() last returned events */
	_Atomic uint64_t caller_poll_ns; /* a caller's progress() last ran; 0 after wake() */

	pthread_mutex_t prog_lock;
	struct rps_rdma_evq evq;
	struct rps_rdma_conn **qpmap; /* open addressing by qpn */
	uint32_t qpmap_cap, qpmap_n;
	struct rps_rdma_conn *all; /* every live conn (prog_lock) */
	uint64_t last_slow_ns;

	/* Senders out of credits / send buffers / send-queue slots spin a
	 * little, then sleep until completions free some (res_gen moves). */
	_Atomic uint64_t res_gen;
	_Atomic int res_waiters;
	pthread_mutex_t res_lock;
	pthread_cond_t res_cv;

	pthread_mutex_t close_lock;
	struct rps_rdma_conn *closing;
	_Atomic int closing_n;

	pthread_mutex_t mrc_lock;
	struct rps_rdma_mrc_ent mrc[RDMA_MRC_SIZE];
	_Atomic uint32_t mrc_n;
	int mrc_full_warned;

	_Atomic uint64_t st_frames_sent, st_frames_recv, st_ctrl_sent, st_ctrl_recv,
	    st_credit_waits, st_reads, st_mrc_hits, st_mrc_regs, st_tmp_regs;
	_Atomic int64_t st_low_water;
	_Atomic uint32_t st_conns;
	_Atomic int64_t locked_bytes;
	/* read access per connection (rdma_mw.c) */
	int mw_mode;  /* RPS_RDMA_MW_* */
	int mw_state; /* 0 undecided, 1 windows, 2 one registration for all, -1 refused (mw_lock) */
	pthread_mutex_t mw_lock;
	struct rps_rdma_mw *mws;
	uint64_t port_down_ns[RDMA_MAX_PORTS + 1]; /* since when a port is down (slow path) */
};

static inline struct rps_rdma_transport *rps_rdma_t(struct rps_transport *t)
{
	return (struct rps_rdma_transport *)t;
}

static inline struct rps_rdma_conn *rps_rdma_c(struct rps_conn *c)
{
	return (struct rps_rdma_conn *)c;
}

/* rdma_dev.c */
int rps_rdma_devices_probe(struct rps_rdma_transport *t);
int rps_rdma_dev_ensure(struct rps_rdma_transport *t, struct ibv_context *ctx, const char *why);
void rps_rdma_dev_destroy(struct rps_rdma_transport *t);
int rps_rdma_memlock_check(struct rps_rdma_transport *t, uint64_t bytes, const char *what);
void rps_rdma_locked_add(struct rps_rdma_transport *t, int64_t bytes);
int rps_rdma_srq_create(struct rps_rdma_transport *t, int channel, struct rps_rdma_srq **srq_p);
void rps_rdma_srq_destroy(struct rps_rdma_srq *s);
int rps_rdma_srq_post(struct rps_rdma_srq *s, struct rps_rdma_rbuf *b);
int rps_rdma_srq_reserve(struct rps_rdma_srq *s, uint32_t want, uint32_t min, uint32_t *got_p);
void rps_rdma_srq_unreserve(struct rps_rdma_srq *s, uint32_t n);
int rps_rdma_cq_reserve(struct rps_rdma_dev *d, int n);
void rps_rdma_cq_unreserve(struct rps_rdma_dev *d, int n);
int rps_rdma_gid_ipv4(struct rps_rdma_dev *d, uint8_t port, struct sockaddr_in *sin_p);
const char *rps_rdma_wc_reason(enum ibv_wc_status st, int *err_p);

/* rdma_conn.c */
int rps_rdma_conn_setup(struct rps_rdma_transport *t, struct rps_rdma_conn *c,
			struct rdma_cm_id *id, struct rps_rdma_srq *srq, uint32_t window);
void rps_rdma_conn_free_res(struct rps_rdma_conn *c);
void rps_rdma_conn_put(struct rps_rdma_conn *c);
void rps_rdma_conn_fail(struct rps_rdma_conn *c, int status, const char *why);
void rps_rdma_conn_drained(struct rps_rdma_conn *c);
void rps_rdma_all_add(struct rps_rdma_transport *t, struct rps_rdma_conn *c);
void rps_rdma_all_del(struct rps_rdma_transport *t, struct rps_rdma_conn *c);
void rps_rdma_qpmap_add(struct rps_rdma_transport *t, struct rps_rdma_conn *c);
void rps_rdma_qpmap_del(struct rps_rdma_transport *t, struct rps_rdma_conn *c);
struct rps_rdma_conn *rps_rdma_qpmap_get(struct rps_rdma_transport *t, uint32_t qpn);
void rps_rdma_peer_name(struct rdma_cm_id *id, char *buf, size_t len);
void rps_rdma_slow_path(struct rps_rdma_transport *t);
void rps_rdma_teardown_all(struct rps_rdma_transport *t);
void rps_rdma_close(struct rps_conn *conn);

/* rdma_cm.c */
int rps_rdma_listen(struct rps_transport *tr, const char *host, uint16_t port, uint16_t *port_p);
void rps_rdma_cm_events(struct rps_rdma_transport *t);
/* Listener: the first frame of c (C_ACCEPTING or C_PROVING), which must be
 * the client's PROOF; the buffer stays the caller's. prog_lock held. */
void rps_rdma_proof_in(struct rps_rdma_conn *c, const struct rps_frame_hdr *hdr,
		       const void *payload);
/* -errno of a failed librdmacm call (-EIO if it set none). */
int rps_rdma_cm_err(void);
/* -ENETDOWN (logged) if the id's port is not ACTIVE. */
int rps_rdma_port_check(struct rdma_cm_id *id, const char *what);
/* Data frames in flight we grant one peer of srq: the configured credits,
 * cut so that `expect` peers fit. */
uint32_t rps_rdma_grant_want(struct rps_rdma_transport *t, struct rps_rdma_srq *s,
			     uint32_t expect);

/* rdma_connect.c */
int rps_rdma_connect(struct rps_transport *tr, const char *host, uint16_t port,
		     const struct rps_hello *hello, void *ack, size_t ack_cap, size_t *ack_len_p,
		     int timeout_ms, struct rps_conn **conn_p);

/* rdma_send.c */
int rps_rdma_post_send(struct rps_conn *conn, const struct rps_frame_hdr *hdr,
		       const struct iovec *iov, int iovcnt, uint64_t ctx);
void rps_rdma_progress_or_yield(struct rps_rdma_transport *t);
/* A sender found no resource at res_gen `gen` (read before it looked) and has
 * waited since `since_ns`: reap completions if no one else does, else spin
 * for a while, then sleep until res_gen moves (at most a millisecond). */
void rps_rdma_progress_or_wait(struct rps_rdma_transport *t, uint64_t gen, uint64_t since_ns);
/* Completions freed send resources (prog_lock held): wake sleeping senders. */
void rps_rdma_res_freed(struct rps_rdma_transport *t);
int rps_rdma_send_frame(struct rps_rdma_conn *c, const struct rps_frame_hdr *hdr,
			const void *payload, uint32_t len, int timeout_ms);
int rps_rdma_post_drain(struct rps_rdma_conn *c);
void rps_rdma_maybe_ctrl(struct rps_rdma_conn *c);
/* Unlock c->post_lock, then send the credits another thread left pending. */
void rps_rdma_post_unlock(struct rps_rdma_conn *c);
/* Reap completions unless another thread is at it; events it queued go to
 * the poll() thread. Returns how many. */
int rps_rdma_reap_if_free(struct rps_rdma_transport *t);

/* rdma_qpopt.c: retransmission settings (lossy RoCE, docs/rdma.md) */
/* Before rdma_connect / rdma_accept: the local ACK timeout of id's QP. */
void rps_rdma_qpopt_pre(struct rps_rdma_transport *t, struct rdma_cm_id *id, const char *peer);
/* Once the QP is in RTS: its RNR NAK timer. */
void rps_rdma_qpopt_rts(struct rps_rdma_transport *t, struct ibv_qp *qp, const char *peer);

/* rdma_read.c */
int rps_rdma_read_remote(struct rps_conn *conn, const struct rps_tr_sge *sge, int nsge,
			 uint64_t raddr, uint32_t rkey, uint64_t ctx);
int rps_rdma_read_notify(struct rps_conn *conn, const struct rps_tr_sge *sge, int nsge,
			 uint64_t raddr, uint32_t rkey, struct rps_tr_done *d);

/* rdma_limits.c: listening side (prog_lock held) */
/* 0, or -errno and msg when id's request is beyond max_conns(_per_addr). */
int rps_rdma_admit(struct rps_rdma_transport *t, struct rdma_cm_id *id, char *msg, size_t len);
/* Fail accepted connections still without their proof after timeout_ms. */
void rps_rdma_handshake_deadlines(struct rps_rdma_transport *t, uint64_t now);

/* rdma_mw.c: read access per connection (memory windows) */
struct rps_rdma_mw;
/* Decide once whether regions get windows (RDMAPS_RDMA_MW against what d
 * can do; logged). -EOPNOTSUPP when windows are required but impossible. */
int rps_rdma_mw_resolve(struct rps_rdma_transport *t, struct rps_rdma_dev *d);
int rps_rdma_mw_active(struct rps_rdma_transport *t);
int rps_rdma_grant(struct rps_conn *conn, const struct rps_tr_mr *mr, uint32_t *rkey_p);
/* accept_up (state C_UP, before the HELLO_ACK): bind the windows granted in on_hello. */
int rps_rdma_mw_bind_pending(struct rps_rdma_conn *c);
void rps_rdma_mw_conn_gone(struct rps_rdma_conn *c);
void rps_rdma_mw_mr_gone(struct rps_rdma_transport *t, struct ibv_mr *mr);
void rps_rdma_mw_destroy(struct rps_rdma_transport *t);
/* Windows of c (NULL: all) now. */
unsigned rps_rdma_mw_count(struct rps_rdma_transport *t, struct rps_rdma_conn *c);

/* rdma_cq.c */
/* Given up on c's drain marker (prog_lock held): its read_notify READs end
 * now with status. */
void rps_rdma_notify_abandon(struct rps_rdma_conn *c, int status);
void rps_rdma_release(struct rps_transport *tr, void *token);
int rps_rdma_progress_cq(struct rps_rdma_transport *t);

/* Send-queue slots (c->post_lock held). */
static inline uint32_t rps_rdma_sq_used(const struct rps_rdma_conn *c)
{
	return c->sq_head - c->sq_tail;
}

static inline struct rps_rdma_slot *rps_rdma_sq_next(struct rps_rdma_conn *c)
{
	return &c->slots[c->sq_head & c->slot_mask];
}

static inline int rps_rdma_want_signal(struct rps_rdma_conn *c, uint64_t ctx)
{
	if (ctx || ++c->unsig >= c->sig_every) {
		c->unsig = 0;
		return 1;
	}
	return 0;
}
void rps_rdma_evq_push(struct rps_rdma_transport *t, const struct rps_tr_event *ev);
int rps_rdma_evq_pop(struct rps_rdma_transport *t, struct rps_tr_event *ev_p);
void rps_rdma_evq_purge(struct rps_rdma_transport *t, struct rps_rdma_conn *c);
void rps_rdma_notify_poller(struct rps_rdma_transport *t);

/* rdma_mr.c */
int rps_rdma_reg_mem(struct rps_transport *tr, void *addr, size_t len, unsigned access,
		     struct rps_tr_mr *mr_p);
void rps_rdma_dereg_mem(struct rps_transport *tr, struct rps_tr_mr *mr);
int rps_rdma_mrc_lkey(struct rps_rdma_transport *t, void *addr, uint32_t len, uint32_t *lkey_p,
		      struct ibv_mr **tmp_p);
void rps_rdma_mrc_evict(struct rps_rdma_transport *t, uintptr_t start, uintptr_t end);
void rps_rdma_mrc_destroy(struct rps_rdma_transport *t);

#endif
