/* The transport ops table. Worker and server code call only these, never a
 * transport directly. Implementations: transport/tcp (always), transport/rdma
 * (verbs + librdmacm). Each fills a `static const struct rps_transport_ops`
 * with designated initializers; rps_transport_create() checks the mandatory
 * ops and that every capability has its op, and fills the optional ops a
 * transport leaves out with stubs returning -EOPNOTSUPP (rdma-core's
 * dummy_ops). Capabilities are queried with rps_tr_has(), never guessed
 * from NULL pointers.
 *
 * Model
 * - A transport instance is created per process and role (one for the data
 *   path, the control client makes its own TCP one).
 * - Connections carry frames (src/proto.h). connect() performs the hello
 *   handshake: the client sends struct rps_hello (TCP: HELLO frame; RDMA:
 *   rdma_cm private data) with a fresh nonce the transport draws, and both
 *   sides prove they know params.secret by challenge-response (src/auth.h,
 *   docs/protocol.md); only then does the listening side call
 *   params.on_hello (RDMA: called at the request, its ack sent only after
 *   the proof), which
 *   accepts (filling the HELLO_ACK payload) or refuses with -errno and a
 *   reason. connect() returns 0 with the ack payload, or the refusal status
 *   (-EACCES wrong secret, -EPROTO bad magic/version, ...).
 * - poll() is called by ONE thread per instance and returns events.
 *   post_send(), read_remote(), release() and close() may be called from any
 *   thread concurrently with poll(). With RPS_TR_CAP_PROGRESS, progress()
 *   too: a thread that waits for its own request reaps completions itself
 *   (as perftest does) instead of sleeping until the poll() thread wakes it.
 * - Every RECV event carries a token; the consumer gives it back with
 *   release() when done with the payload (possibly later, from another thread:
 *   that is how a push buffer travels through a shard's priority ring).
 * - A connection is freed only by close(). After a CLOSED event, the consumer
 *   fails what it had in flight on that connection and calls close().
 *   post_send() on a dead connection returns -ECONNRESET.
 */
#ifndef RPS_TRANSPORT_H
#define RPS_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "src/proto.h"

/* Capability flags (t->caps). */
#define RPS_TR_CAP_READ (1u << 0)      /* one-sided read_remote of registered memory */
#define RPS_TR_CAP_RECV_DEST (1u << 1) /* honours params.recv_dest (zero-copy receive) */
#define RPS_TR_CAP_CHANNELS (1u << 2)  /* hello.channel selects a receive queue (shard) */
#define RPS_TR_CAP_PROGRESS (1u << 3)  /* progress(): any thread may reap completions */
#define RPS_TR_CAP_READ_NOTIFY (1u << 4) /* read_notify(): a READ whose completion is a flag */

#define RPS_TR_ACK_MAX 4096 /* largest HELLO_ACK payload */

/* Memory access requested from reg_mem. */
#define RPS_TR_ACCESS_LOCAL 0u
#define RPS_TR_ACCESS_REMOTE_READ 1u

struct rps_transport;
struct rps_transport_ops;

/* Base of every connection; implementations embed it (container_of). */
struct rps_conn {
	struct rps_transport *tr;
	void *user;         /* owner's context */
	char peer[64];      /* "10.9.0.2:4000", for messages */
	struct rps_hello hello; /* listening side: the peer's hello */
};

/* The completion of a read_notify. */
enum { RPS_TR_PENDING = 0, RPS_TR_DONE, RPS_TR_PENDING_WAKE };
#define RPS_TR_CTX_NOTIFY 1ull /* READ_DONE: a read_notify that a sleeper waits for ended */

struct rps_tr_done {
	int status;       /* 0 or -errno, valid once state is RPS_TR_DONE */
	_Atomic int state;
};

/* Memory registration. A registration (reg_mem) is opaque to its user:
 * only the transport that made it interprets its handles.
 * - handle: the local handle of the registration, passed in rps_tr_sge so
 *   that a read into registered memory needs no lookup; 0 = none.
 * - remote_addr, remote_key: what a peer passes to read_remote to read the
 *   region (REMOTE_READ access); they travel on the wire (struct
 *   rps_shard_desc). */
struct rps_tr_sge {
	void *addr;
	uint32_t len;
	/* handle of a registration (rps_tr_mr.handle) covering [addr, addr +
	 * len), or 0: the transport finds or makes one. */
	uint32_t handle;
};

struct rps_tr_mr {
	void *addr;
	size_t len;
	uint64_t remote_addr; /* what a peer passes to read_remote */
	uint32_t remote_key;  /* ditto (0 where nothing can be read remotely) */
	uint32_t handle;      /* for rps_tr_sge.handle (0: none) */
	void *priv;           /* the implementation's */
};

enum rps_tr_event_type {
	RPS_TR_EV_ACCEPTED = 1, /* listening side: a connection passed its hello */
	RPS_TR_EV_RECV,         /* a whole frame arrived */
	RPS_TR_EV_SEND_DONE,    /* post_send with ctx != 0: its iov may be reused */
	RPS_TR_EV_READ_DONE,    /* read_remote finished (status) */
	RPS_TR_EV_CLOSED,       /* peer gone or connection failed (status = reason) */
};

struct rps_tr_event {
	enum rps_tr_event_type type;
	struct rps_conn *conn;
	int status;              /* 0 or -errno */
	uint64_t ctx;            /* SEND_DONE, READ_DONE */
	struct rps_frame_hdr hdr;/* RECV */
	void *fixed;             /* RECV: the op's fixed part (rps_proto_fixed_len bytes) */
	void *data;              /* RECV: bytes after the fixed part (in a transport
				  * buffer, or where recv_dest said) */
	size_t data_len;
	void *token;             /* RECV: give back with release() */
};

/* Settings of the RDMA transport (the RDMAPS_RDMA_* options). */
struct rps_rdma_params {
	uint64_t buf_bytes;     /* payload of one receive / send buffer */
	uint32_t recv_bufs;     /* receive buffers per SRQ */
	uint32_t credits;       /* sends in flight per connection (>= 2) */
	int max_rd;             /* outstanding RDMA READs */
	int event_mode;         /* 1: sleep on the completion channel when idle */
	int poll_spin_us;       /* event mode: spin this long after activity */
	uint32_t expect_peers;  /* connections expected per SRQ (receive grant) */
	uint32_t expect_out;    /* outgoing connections expected */
	int rnr_retry;          /* RNR retries asked of peers, 0..7 (7: forever;
				 * RDMAPS_RDMA_RNR_RETRY); tests take 0 so that an
				 * overrun receive queue is an error, not a stall */
	/* Lossy RoCE (docs/rdma.md): retransmission settings of every QP */
	int ack_timeout;        /* local ACK timeout exponent, 4.096 us x 2^N; 0: rdma_cm's */
	int retry_count;        /* retransmissions before a QP fails, 0..7 */
	int rnr_timer;          /* RNR NAK delay we ask of senders (IB encoding) */
	int mw;                 /* RPS_RDMA_MW_*: per-connection read access (RDMAPS_RDMA_MW) */
};

/* rps_rdma_params.mw (docs/rdma.md, "Read access per connection") */
enum { RPS_RDMA_MW_AUTO = 0, RPS_RDMA_MW_ON, RPS_RDMA_MW_OFF };

/* What a transport is created with. Fill it with rps_tr_params_from_config()
 * (the one place that maps options to transport settings, with the option
 * table's defaults), then set the callbacks and what the caller overrides.
 * A transport takes every value as given: it has no defaults of its own.
 * TCP uses only the common part. */
struct rps_tr_params {
	const char *secret;      /* the job's secret: the handshake's key (src/auth.h) */
	int insecure;            /* an empty secret is allowed (rps_auth_secret_ok) */
	int tls;                 /* TCP: TLS 1.3 on every connection, PSK from the secret */
	uint64_t max_msg;        /* largest frame payload accepted */
	int timeout_ms;          /* connect, handshake, send waits */
	uint32_t nchannels;      /* listening side: receive queues (shards) */
	const char *device;      /* RDMA device name or NULL (by local address) */
	struct rps_rdma_params rdma;
	/* Limits of the accepting side (TCP; 0 = none). An accepted connection
	 * never makes a sender wait: a post_send that would queue more than
	 * sq_max bytes for it cuts it instead (-ECONNRESET). */
	uint64_t sq_max;          /* output queued for one accepted peer */
	int frame_timeout_ms;     /* a started frame must end within this ... */
	uint64_t frame_min_rate;  /* ... plus its length / this many bytes per second */
	int idle_timeout_ms;      /* established, accepted: closed after this long silent */
	int max_conns;            /* accepted connections at once */
	int max_conns_per_addr;   /* of them from one address */
	int accept_backoff_ms;    /* EMFILE / ENFILE: stop accepting this long */
	void *arg;               /* passed to the callbacks */
	/* Listening side: accept (return 0 and fill ack[0..*ack_len_p), at most
	 * RPS_TR_ACK_MAX) or refuse (-errno, *why_p = reason). May be NULL:
	 * accept with an empty ack once the secret matched. */
	int (*on_hello)(void *arg, struct rps_conn *c, const struct rps_hello *h, void *ack,
			size_t *ack_len_p, const char **why_p);
	/* Zero-copy receive (RPS_TR_CAP_RECV_DEST): called once the header and
	 * fixed part of a frame are in; return where its data (hdr.len - fixed
	 * bytes) must go, or NULL for a transport buffer. The memory must hold
	 * them all. */
	void *(*recv_dest)(void *arg, struct rps_conn *c, const struct rps_frame_hdr *h,
			   const void *fixed);
};

struct rps_transport {
	const struct rps_transport_ops *ops;
	struct rps_tr_params params;
	uint32_t caps;            /* RPS_TR_CAP_* */
	uint64_t max_frame;       /* largest frame (header + payload) one post_send may carry */
	int max_read_sge;         /* read_remote: most local sges in one call */
};

struct rps_transport_ops {
	const char *name;
	int (*create)(const struct rps_tr_params *p, struct rps_transport **t_p);
	void (*destroy)(struct rps_transport *t);
	/* Listen on host:port (port 0 = any); *port_p gets the port. */
	int (*listen)(struct rps_transport *t, const char *host, uint16_t port, uint16_t *port_p);
	/* Connect and do the hello handshake (blocking, up to timeout_ms).
	 * ack/ack_cap receive the HELLO_ACK payload, *ack_len_p its length. */
	int (*connect)(struct rps_transport *t, const char *host, uint16_t port,
		       const struct rps_hello *hello, void *ack, size_t ack_cap, size_t *ack_len_p,
		       int timeout_ms, struct rps_conn **conn_p);
	/* Send one frame: hdr followed by iov[0..iovcnt) (hdr->len bytes in all).
	 * ctx == 0: the transport copies whatever it cannot send at once.
	 * ctx != 0: zero copy; iov memory must stay valid until SEND_DONE(ctx).
	 * May wait (up to the timeout) for the peer's credits. */
	int (*post_send)(struct rps_conn *c, const struct rps_frame_hdr *hdr,
			 const struct iovec *iov, int iovcnt, uint64_t ctx);
	/* One-sided read of [raddr, raddr + sum(sge.len)) under remote_key into the
	 * local sges, in order. Completion: READ_DONE(ctx). RPS_TR_CAP_READ. */
	int (*read_remote)(struct rps_conn *c, const struct rps_tr_sge *sge, int nsge,
			   uint64_t raddr, uint32_t remote_key, uint64_t ctx);
	/* RPS_TR_CAP_READ_NOTIFY: read_remote whose completion is no event but d itself:
	 * d->status, then d->state = RPS_TR_DONE (release). Whoever finds the
	 * READ still pending and wants to sleep moves d->state from
	 * RPS_TR_PENDING to RPS_TR_PENDING_WAKE; the completion of such a READ
	 * is followed by a READ_DONE event with ctx RPS_TR_CTX_NOTIFY on its
	 * connection (none once it was closed). Every READ posted completes,
	 * with an error when the connection dies, so d must stay valid until
	 * d->state is RPS_TR_DONE. */
	int (*read_notify)(struct rps_conn *c, const struct rps_tr_sge *sge, int nsge,
			   uint64_t raddr, uint32_t remote_key, struct rps_tr_done *d);
	/* Up to max events; waits up to timeout_ms (0 = don't wait, < 0 = forever). */
	int (*poll)(struct rps_transport *t, struct rps_tr_event *ev, int max, int timeout_ms);
	/* RPS_TR_CAP_PROGRESS: reap completions from the calling
	 * thread and return up to max pending events, as poll() would. Never
	 * waits: returns 0 at once when another thread is reaping right now.
	 * The caller handles the events exactly as the poll() thread does. Any
	 * thread, concurrently with poll(). */
	int (*progress)(struct rps_transport *t, struct rps_tr_event *ev, int max);
	void (*release)(struct rps_transport *t, void *token);
	/* Register memory (RDMA: ibv_reg_mr; TCP: records it, remote_key and
	 * handle 0). dereg_mem forgets it, with whatever the transport cached
	 * of its pages. */
	int (*reg_mem)(struct rps_transport *t, void *addr, size_t len, unsigned access,
		       struct rps_tr_mr *mr_p);
	void (*dereg_mem)(struct rps_transport *t, struct rps_tr_mr *mr);
	/* Listening side: the key a peer on c passes to read_remote to read mr
	 * (registered with RPS_TR_ACCESS_REMOTE_READ). RDMA with memory windows:
	 * a window on mr bound to c's queue pair, made on the first call for
	 * (c, mr), useless on any other connection and gone when c closes or mr
	 * is deregistered; may be called from on_hello (bound before the
	 * HELLO_ACK goes out) or later (bound before any frame posted after
	 * the call). Otherwise (optional op): mr->remote_key. */
	int (*grant)(struct rps_conn *c, const struct rps_tr_mr *mr, uint32_t *rkey_p);
	void (*close)(struct rps_conn *c);
	/* Make a poll() that is waiting return now. */
	void (*wake)(struct rps_transport *t);
};

extern const struct rps_transport_ops rps_tcp_ops;
#ifdef RPS_WITH_RDMA
extern const struct rps_transport_ops rps_rdma_ops;
#endif

struct rps_config;

/* Fill *p_p from cfg: secret, max_msg, timeout_ms, device and the RDMA
 * settings; nchannels 1, no callbacks. Strings point into cfg. */
void rps_tr_params_from_config(const struct rps_config *cfg, struct rps_tr_params *p_p);

/* By name ("tcp", "rdma"): checks the mandatory ops and creates it.
 * -ENOTSUP for an unknown or not-built transport, with a logged reason;
 * -EACCES without a secret unless p->insecure (rps_auth_secret_ok). */
int rps_transport_create(const char *name, const struct rps_tr_params *p,
			 struct rps_transport **t_p);

/* Call sites use these wrappers, never t->ops->op(...) (as verbs.h does for
 * ibv_post_send): one place to see what every op costs. An optional op
 * without its capability returns -EOPNOTSUPP. */
static inline void rps_transport_destroy(struct rps_transport *t)
{
	t->ops->destroy(t);
}

static inline int rps_tr_has(const struct rps_transport *t, uint32_t cap)
{
	return (t->caps & cap) == cap;
}

static inline int rps_tr_listen(struct rps_transport *t, const char *host, uint16_t port,
				uint16_t *port_p)
{
	return t->ops->listen(t, host, port, port_p);
}

static inline int rps_tr_connect(struct rps_transport *t, const char *host, uint16_t port,
				 const struct rps_hello *hello, void *ack, size_t ack_cap,
				 size_t *ack_len_p, int timeout_ms, struct rps_conn **conn_p)
{
	return t->ops->connect(t, host, port, hello, ack, ack_cap, ack_len_p, timeout_ms, conn_p);
}

static inline int rps_tr_post_send(struct rps_conn *c, const struct rps_frame_hdr *hdr,
				   const struct iovec *iov, int iovcnt, uint64_t ctx)
{
	return c->tr->ops->post_send(c, hdr, iov, iovcnt, ctx);
}

/* RPS_TR_CAP_READ only. */
static inline int rps_tr_read_remote(struct rps_conn *c, const struct rps_tr_sge *sge, int nsge,
				     uint64_t raddr, uint32_t remote_key, uint64_t ctx)
{
	return c->tr->ops->read_remote(c, sge, nsge, raddr, remote_key, ctx);
}

/* RPS_TR_CAP_READ_NOTIFY only. */
static inline int rps_tr_read_notify(struct rps_conn *c, const struct rps_tr_sge *sge, int nsge,
				     uint64_t raddr, uint32_t remote_key, struct rps_tr_done *d)
{
	return c->tr->ops->read_notify(c, sge, nsge, raddr, remote_key, d);
}

static inline int rps_tr_poll(struct rps_transport *t, struct rps_tr_event *ev, int max,
			      int timeout_ms)
{
	return t->ops->poll(t, ev, max, timeout_ms);
}

/* RPS_TR_CAP_PROGRESS only. */
static inline int rps_tr_progress(struct rps_transport *t, struct rps_tr_event *ev, int max)
{
	return t->ops->progress(t, ev, max);
}

static inline void rps_tr_release(struct rps_transport *t, void *token)
{
	t->ops->release(t, token);
}

static inline int rps_tr_reg_mem(struct rps_transport *t, void *addr, size_t len,
				 unsigned access, struct rps_tr_mr *mr_p)
{
	return t->ops->reg_mem(t, addr, len, access, mr_p);
}

static inline int rps_tr_grant(struct rps_conn *c, const struct rps_tr_mr *mr,
			       uint32_t *rkey_p)
{
	return c->tr->ops->grant(c, mr, rkey_p);
}

static inline void rps_tr_dereg_mem(struct rps_transport *t, struct rps_tr_mr *mr)
{
	t->ops->dereg_mem(t, mr);
}

static inline void rps_tr_close(struct rps_conn *c)
{
	c->tr->ops->close(c);
}

static inline void rps_tr_wake(struct rps_transport *t)
{
	t->ops->wake(t);
}

#endif
