/* TCP transport: private state shared by the files of transport/tcp.
 *
 * Files, each depending only on those below it:
 *   tcp.c          ops table, create/destroy, poll() and wake()
 *   tcp_recv.c     receive state machine        tcp_connect.c  connect()
 *   tcp_listen.c   listen(), accept, the peer's HELLO
 *   tcp_conn.c     connection objects, failure, close()
 *   tcp_send.c     send path, event queue      tcp_limits.c   caps, deadlines, accept back-off
 *   tcp_pool.c     receive buffer pool         tcp_tls.c      optional TLS 1.3 (RDMAPS_TLS)
 *
 * Threads
 * - One poller thread (the caller of poll()) owns epoll, the receive state
 *   machines, the event queue, the hello list and the buffer pool's free lists.
 *   It is the only thread that closes sockets and frees connections.
 * - Any thread may post_send (under the connection's slock), release a token
 *   (lock-free push onto the pool's return list), close a connection (marks it,
 *   shuts the socket down and hands it to the poller through a lock-free list)
 *   or wake the poller.
 * - Completions found outside the poller (SEND_DONE of a frame written at
 *   once by a sender thread) are kept per connection under slock; the
 *   connection is put once on a lock-free "has completions" list that the
 *   poller drains. The eventfd is written only when the poller sleeps.
 */
#ifndef RPS_TCP_INT_H
#define RPS_TCP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "src/auth.h"
#include "src/util.h"
#include "transport/transport.h"

#define TCP_FIXED_MAX	80	      /* largest fixed part of any op */
#define TCP_STAGE_BYTES (64u * 1024)  /* per-connection receive staging buffer */
#define TCP_DIRECT_MIN	4096u	      /* data at least this big is read in place */
#define TCP_RX_BUDGET	(4u << 20)    /* bytes read from one connection per wake-up */
#define TCP_RX_FRAMES	128	      /* frames of one accepted peer per wake-up */
#define TCP_SQ_MAX	(64ull << 20) /* queued send bytes before post_send waits */
/* An accepted peer whose answers pile up (this many bytes queued) is not read
 * from until it has taken half of them: it cannot make us queue more
 * than about one read budget of answers beyond this. */
#define TCP_RX_PAUSE_BYTES (1ull << 20)
#define TCP_IOV_MAX	   1024 /* iovecs in one post_send (header included) */
#define TCP_IOV_BATCH	   64	/* iovecs gathered per flush syscall */
#define TCP_ERR_TEXT_MAX   256	/* reason text in ERROR frames we send */
#define TCP_MAX_LISTENERS  8

/* Receive buffer pool: class 0 holds no data (the fixed part only, for
 * zero-copy receives and data-less frames); class k >= 1 holds
 * 2^(TCP_POOL_MIN_SHIFT + k - 1) bytes. Larger frames get a buffer of their
 * own that is freed on release. */
#define TCP_POOL_MIN_SHIFT   8
#define TCP_POOL_CLASSES     20		   /* up to 64 MiB */
#define TCP_POOL_CLASS_BYTES (32ull << 20) /* cached bytes per class (at least 4 buffers) */

enum tcp_kind {
	TCP_K_CONN = 1,
	TCP_K_LISTENER,
	TCP_K_WAKE,
};

struct tcp_buf {
	struct tcp_buf *next; /* free list / return list */
	uint8_t *data;	      /* cap bytes, 64-byte aligned */
	size_t cap;
	int cls; /* size class, -1 when not pooled */
	_Alignas(16) uint8_t fixed[TCP_FIXED_MAX];
};

struct tcp_pool {
	struct tcp_buf *free[TCP_POOL_CLASSES]; /* poller only */
	uint32_t nfree[TCP_POOL_CLASSES];
	_Atomic(struct tcp_buf *) returned; /* any thread pushes, poller takes all */
	atomic_ullong created;		    /* buffers ever allocated */
};

struct tcp_done {
	uint64_t ctx;
	int status;
};

/* A queued (partly) unsent frame. */
struct tcp_sreq {
	struct tcp_sreq *next;
	uint64_t ctx;
	uint64_t left; /* bytes still to write */
	int iovcnt;
	int idx;		  /* first iovec not fully written (advanced in place) */
	struct rps_frame_hdr hdr; /* copy of the header when part of it is unsent */
	struct iovec iov[];
};

enum tcp_phase {
	TCP_PH_HELLO = 1, /* accepted, waiting for the peer's HELLO */
	TCP_PH_PROOF,	  /* CHALLENGE sent, waiting for the peer's PROOF */
	TCP_PH_OPEN,
	TCP_PH_TLS, /* accepted, RDMAPS_TLS=1: the TLS handshake, then TCP_PH_HELLO */
};

struct ssl_st;	       /* OpenSSL's SSL, only tcp_tls.c sees inside */
struct ssl_ctx_st;     /* SSL_CTX */
struct ssl_session_st; /* SSL_SESSION */

enum tcp_rx_state {
	TCP_RX_HDR = 0,
	TCP_RX_FIXED,
	TCP_RX_DATA,
};

struct tcp_conn {
	int kind; /* TCP_K_CONN: epoll data.ptr points here */
	struct rps_conn base;
	struct tcp_transport *tt;

	/* Poller only. */
	int phase;
	int failed; /* tcp_conn_fail ran */
	int rx_state;
	struct rps_frame_hdr rx_hdr;
	uint32_t rx_fixed_len;
	uint64_t rx_data_len;
	uint64_t rx_got;
	uint8_t *rx_dst;
	struct tcp_buf *rx_buf;
	_Alignas(16) uint8_t rx_fixed[TCP_FIXED_MAX];
	uint8_t *stage;
	size_t stage_pos, stage_len;
	uint64_t hello_deadline;	/* ns, TCP_PH_HELLO and TCP_PH_PROOF */
	struct rps_auth_challenge chal; /* TCP_PH_PROOF: what we sent */
	struct tcp_conn *hnext, *hprev;
	int accepted;	      /* listening side (immutable): limits apply, senders never wait */
	int counted;	      /* in tt->naccepted (until its socket is closed) */
	char ip[64];	      /* accepted: the peer's address without the port */
	uint64_t rx_deadline; /* ns: the frame being received must be whole by then; 0 none */
	uint64_t last_rx_ns;  /* the last byte read */
	uint32_t rx_frames;   /* frames taken in this tcp_rx call */
	int again_listed;     /* on tt->again: whole frames wait in the staging buffer */
	struct tcp_conn *again_next;
	int tls_seen; /* TCP_PH_TLS: the first byte was a TLS record */

	/* TLS (tcp_tls.c): NULL without. Every call on it under tlock (the
	 * poller reads, senders write under slock; lock order slock, tlock). */
	struct ssl_st *ssl;
	pthread_mutex_t tlock;

	/* Under slock. */
	pthread_mutex_t slock;
	pthread_cond_t scond; /* room in the send queue, or dead */
	int fd;		      /* -1 once the poller closed it */
	int dead;	      /* no more sends */
	int user_closed;      /* close() was called: no more events */
	int wr_err;	      /* a write failed; the poller will see the reset */
	int out_armed;	      /* EPOLLOUT requested */
	int rx_paused;	      /* EPOLLIN off: our answers to it pile up unread */
	int nsenders;	      /* threads waiting inside post_send */
	struct tcp_sreq *sq_head, *sq_tail;
	uint64_t sq_bytes;
	uint64_t last_tx_ns; /* the queue last moved (or became non-empty) */
	struct tcp_done *done;
	uint32_t done_n, done_cap;
	int done_listed; /* on tt->done_head */

	struct tcp_conn *done_next;	/* tt->done_head */
	struct tcp_conn *close_next;	/* tt->close_head, deferred list */
	struct tcp_conn *anext, *aprev; /* tt->conns, under tt->lock */
};

struct tcp_listener {
	int kind; /* TCP_K_LISTENER */
	int fd;
	uint16_t port;
};

struct tcp_evq {
	struct rps_tr_event *ev;
	size_t head, tail, cap;
};

struct tcp_transport {
	struct rps_transport base;
	int ep;
	int wfd;       /* eventfd */
	int wake_kind; /* TCP_K_WAKE: epoll data.ptr of wfd */
	char *secret;
	uint64_t max_msg;
	int timeout_ms; /* connect, hello, send backpressure */

	pthread_mutex_t lock; /* conns, listeners */
	struct tcp_conn *conns;
	struct tcp_listener *listeners[TCP_MAX_LISTENERS];
	int nlisteners;

	_Atomic(struct tcp_conn *) done_head;
	_Atomic(struct tcp_conn *) close_head;
	atomic_int sleeping;	 /* poller is (about to be) in epoll_wait */
	atomic_int wake_pending; /* eventfd written, not yet drained */
	atomic_int user_wake;	 /* wake() called */

	/* Poller only. */
	struct tcp_conn *deferred; /* closed, waiting for senders to leave */
	struct tcp_conn *hello_head, *hello_tail;
	struct tcp_evq evq;
	uint8_t ack[RPS_TR_ACK_MAX];
	struct tcp_pool pool;
	int naccepted;		   /* accepted connections whose socket is open */
	struct tcp_conn *again;	   /* to parse again: they used up their frames per wake-up */
	int reserve_fd;		   /* /dev/null, given up to shed a connection on EMFILE; -1 */
	uint64_t accept_resume_ns; /* listeners off until then (out of descriptors); 0 on */
	uint64_t next_sweep_ns;	   /* deadlines of accepted connections checked then */

	/* RDMAPS_TLS=1 (tcp_tls.c); NULL without */
	struct ssl_ctx_st *ssl_ctx;
	struct ssl_session_st *psk_sess; /* the job's PSK */
};

#define TCP_SWEEP_MS 100 /* how often frame, idle and send deadlines are checked */

/* tcp_pool.c */
void tcp_pool_init(struct tcp_pool *p);
void tcp_pool_fini(struct tcp_pool *p);
struct tcp_buf *tcp_pool_get(struct tcp_pool *p, size_t size); /* poller only */
void tcp_pool_put(struct tcp_pool *p, struct tcp_buf *b);      /* any thread */
/* Poller: the buffer of a frame that never completed (its connection died):
 * a big one is freed, not cached, so a peer that starts big frames and
 * stalls leaves nothing behind. */
void tcp_pool_discard(struct tcp_pool *p, struct tcp_buf *b);
#define TCP_POOL_KEEP_MAX (1u << 20)

static inline struct tcp_transport *tcp_tt(struct rps_transport *t)
{
	return rps_container_of(t, struct tcp_transport, base);
}

/* tcp_send.c */
/* The transport whose poll() this thread last ran (one poller per instance). */
extern _Thread_local struct tcp_transport *tcp_polling;
int tcp_evq_push(struct tcp_transport *tt, const struct rps_tr_event *ev);
/* Wake the poller if it sleeps. */
void tcp_kick(struct tcp_transport *tt);
int tcp_post_send(struct rps_conn *bc, const struct rps_frame_hdr *hdr, const struct iovec *iov,
		  int iovcnt, uint64_t ctx);
/* post_send without the max_msg bound, ctx 0 (HELLO_ACK). */
int tcp_send_internal(struct tcp_conn *c, const struct rps_frame_hdr *hdr, const struct iovec *iov,
		      int iovcnt);
/* ERROR frame (status, reason text), best effort, only if nothing is queued. */
void tcp_send_error(struct tcp_conn *c, int status, const char *why);
/* Poller, accepted connection: stop reading while too much output waits
 * (TCP_RX_PAUSE_BYTES; tcp_out resumes). 1 if paused. */
int tcp_rx_pause_check(struct tcp_conn *c);
/* Poller: the socket is writable. -ECONNRESET: the connection broke. */
int tcp_out(struct tcp_conn *c);
/* Poller, slock held: sending is over. An ERROR frame (status, why) first
 * unless why is NULL (best effort), then the completions in order: what was
 * written, then what never will be (-ECONNRESET). */
void tcp_send_end_locked(struct tcp_conn *c, int status, const char *why);
/* Poller: SEND_DONE events of completions recorded by other threads. */
void tcp_drain_done(struct tcp_transport *tt);
/* Any thread: EPOLLOUT on or off (the TLS handshake). */
void tcp_want_out(struct tcp_conn *c, int on);

/* tcp_conn.c */
void tcp_sockaddr_str(const struct sockaddr *sa, char *out, size_t n);
void tcp_set_nodelay(int fd);
struct tcp_conn *tcp_conn_new(struct tcp_transport *tt, int fd, const char *peer, int phase);
/* Register with epoll and list it; 0 or -errno. */
int tcp_conn_add(struct tcp_transport *tt, struct tcp_conn *c);
/* A connection never added. */
void tcp_conn_destroy(struct tcp_conn *c);
void tcp_conn_free(struct tcp_conn *c);
/* Poller: the connection is over. Logs "closing <peer>: <why>" unless fmt is
 * NULL, sends an ERROR frame first if send_error, closes the socket, fails
 * queued zero-copy sends, emits CLOSED (open, not closed by the user) or
 * frees the connection (hello phase). */
void tcp_conn_fail(struct tcp_conn *c, int status, int send_error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void tcp_hello_unlink(struct tcp_transport *tt, struct tcp_conn *c);
void tcp_conn_uncount(struct tcp_conn *c);
void tcp_close(struct rps_conn *bc);
/* Poller: free the connections closed by their owner. */
void tcp_process_closes(struct tcp_transport *tt);

/* tcp_limits.c: what one accepted peer may hold, and the accept back-off */
/* Poller: check deadlines (frame, idle, stalled output) and resume accepting. */
void tcp_limits_sweep(struct tcp_transport *tt, uint64_t now);
/* Poller: the longest poll() may sleep before tcp_limits_sweep has work (ms, -1 none). */
int tcp_limits_wait_ms(struct tcp_transport *tt, uint64_t now);
/* Poller: accept4 failed with err: shed and back off. */
void tcp_accept_failed(struct tcp_transport *tt, struct tcp_listener *l, int err);
/* Poller: may an accepted socket from ip stay? 0, or -EMFILE with a log line. */
int tcp_admit(struct tcp_transport *tt, const char *ip, const char *peer);
/* A cut peer: close() resets the connection and drops its kernel buffers. */
void tcp_abort_on_close(struct tcp_conn *c);
/* Poller: frame bookkeeping after a read (the frame deadline). */
void tcp_rx_mark(struct tcp_conn *c, uint64_t now);

/* tcp_listen.c */
int tcp_listen(struct rps_transport *t, const char *host, uint16_t port, uint16_t *port_p);
/* Poller: a listening socket is readable. */
void tcp_accept(struct tcp_transport *tt, struct tcp_listener *l);
/* Poller: the peer's HELLO arrived (c->rx_fixed): answered with a
 * CHALLENGE. Then its PROOF: checked, then on_hello, HELLO_ACK and ACCEPTED.
 * 0 going on, <0 refused (the connection is freed). */
int tcp_hello_in(struct tcp_conn *c);
int tcp_proof_in(struct tcp_conn *c);

/* tcp_connect.c */
int tcp_connect(struct rps_transport *t, const char *host, uint16_t port,
		const struct rps_hello *hello, void *ack, size_t ack_cap, size_t *ack_len_p,
		int timeout_ms, struct rps_conn **conn_p);

/* tcp_recv.c */
/* Poller: the socket is readable. <0: the connection failed (and, in the hello
 * phase, is freed: do not touch it again). An accepted peer gives at most
 * TCP_RX_FRAMES frames per call (what it may have outstanding in one poll
 * round); the rest waits staged, and the connection goes on tt->again. */
int tcp_rx(struct tcp_conn *c);
/* Poller: put c on tt->again / take it off. */
void tcp_again_add(struct tcp_conn *c);
void tcp_again_del(struct tcp_conn *c);
/* Poller: run tcp_rx for the connections on tt->again. */
void tcp_again_run(struct tcp_transport *tt);

/* tcp_tls.c: optional TLS 1.3 with a PSK from the job secret */
/* create: the context (params.tls). 0 or -errno (logged). */
int tcp_tls_init(struct tcp_transport *tt);
void tcp_tls_fini(struct tcp_transport *tt);
/* Accepted connection: its SSL (server side); phase TCP_PH_TLS is the caller's. */
int tcp_tls_attach(struct tcp_conn *c);
void tcp_tls_ssl_free(struct ssl_st *ssl);
/* connect(): the hello exchange is over: read ahead from now on (not before,
 * or frames sent right after the ack would wait inside the SSL unseen). */
void tcp_tls_opened(struct ssl_st *ssl);
/* Poller, TCP_PH_TLS: advance the handshake (TCP_PH_HELLO once done).
 * 0 going on, <0 failed (the connection is freed). */
int tcp_tls_accept_step(struct tcp_conn *c);
/* connect(): the handshake on fd, blocking up to deadline. 0 (*ssl_p set) or
 * -EPROTO (a listener without TLS), -EACCES (another key), -errno; logged. */
int tcp_tls_connect(struct tcp_transport *tt, int fd, const char *peer, uint64_t deadline,
		    struct ssl_st **ssl_p);
/* connect(): exactly len bytes through ssl, blocking up to deadline. */
int tcp_tls_io_full(struct ssl_st *ssl, int fd, void *buf, size_t len, uint64_t deadline,
		    int writing);
/* readv / sendmsg through c->ssl (same returns and errno); sendmsg under slock. */
ssize_t tcp_tls_readv(struct tcp_conn *c, const struct iovec *v, int cnt);
ssize_t tcp_tls_sendmsg(struct tcp_conn *c, const struct msghdr *msg);
/* slock held: send the ciphertext gathered in the BIO. 0 all sent, 1 some
 * left (the socket is full: EPOLLOUT), -errno. */
int tcp_tls_flush(struct tcp_conn *c);
/* slock held: ciphertext waits in the BIO (EPOLLOUT must stay on). */
int tcp_tls_out_pending(struct tcp_conn *c);
/* Poller: bytes wait inside the SSL, decrypted or read ahead (epoll will not say so). */
int tcp_tls_pending(struct tcp_conn *c);
/* The ERROR text a TLS listener sends a plain peer. */
extern const char tcp_tls_mismatch_server[];

#endif
