/* rdmaps — worker API.
 *
 * A worker connects to the scheduler (RDMAPS_SCHEDULER), learns the cluster map,
 * connects to every server and then pushes gradients and pulls parameters.
 *
 * Batched calls take n keys with per-key lengths in elements (float32), and one
 * buffer holding the tensors back to back (like ps-lite ZPush/ZPull):
 *   keys = {7, 9}, lens = {3, 2}, vals = {k7[0..2], k9[0..1]}
 * Buffers are used in place (zero copy): they must stay valid and, for a pull,
 * untouched until the request completes.
 *
 * Consistency (server option RDMAPS_CONSISTENCY): a pull at worker clock c sees
 *   BSP: exactly the pushes of clocks < c from every worker, summed and applied;
 *   SSP: at least every worker's pushes of clocks < c - s;
 *   ASP: at least this worker's own pushes of clocks < c.
 * rps_worker_clock() ends the current clock (iteration).
 */
#ifndef RDMAPS_WORKER_H
#define RDMAPS_WORKER_H

#include <rdmaps/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rps_worker;
struct rps_req;

/* Called once when a request completes, from the worker's progress thread.
 * The request is freed after the callback returns. */
typedef void (*rps_done_cb)(int status, void *arg);

/* Every setting: the configuration object of <rdmaps/config.h>
 * (rps_config_create: defaults and the RDMAPS_* environment; then flags).
 * Opaque here. */
struct rps_config;

/* Bits of rps_worker_opts.field_mask: which members are set. A member whose
 * bit is clear takes its default, so the struct can grow without breaking
 * callers (as UCX's field_mask). */
#define RPS_WORKER_OPT_SCHEDULER (1ull << 0)
#define RPS_WORKER_OPT_TRANSPORT (1ull << 1)
#define RPS_WORKER_OPT_SECRET	 (1ull << 2)
#define RPS_WORKER_OPT_TIMEOUT	 (1ull << 3)
#define RPS_WORKER_OPT_CONFIG	 (1ull << 4)

struct rps_worker_opts {
	uint64_t field_mask;   /* RPS_WORKER_OPT_* */
	const char *scheduler; /* "host:port"; unset or NULL = the configuration's */
	const char *transport; /* "tcp" or "rdma"; unset or NULL = the configuration's */
	const char *secret;    /* unset or NULL = the configuration's */
	int timeout_ms;        /* connect / rendezvous / request timeout; unset or 0 = the
				* configuration's */
	/* Every other setting (key map, slicing, message size, RDMA tuning,
	 * ...). The worker copies it at create. Unset or NULL: its own
	 * rps_config_init() (defaults + RDMAPS_* environment); there is no
	 * process-wide configuration. */
	const struct rps_config *config;
};

/* Clear opts: every member "from the configuration". */
RPS_API void rps_worker_opts_init(struct rps_worker_opts *opts);

/* Register with the scheduler, wait for the cluster, connect to every server.
 * opts may be NULL (all from rps_config_init: defaults and environment). */
RPS_API int rps_worker_create(const struct rps_worker_opts *opts, struct rps_worker **worker_p);
/* Finish outstanding requests, leave the cluster, free everything. */
RPS_API void rps_worker_destroy(struct rps_worker *worker);

RPS_API int rps_worker_rank(const struct rps_worker *worker);
/* The job's workers now: ranks 0 .. num_workers - 1 (a dead rank counts until
 * a new worker takes it). It grows while the job runs when workers join
 * beyond the initial count (RDMAPS_MAX_WORKERS, docs/scheduler.md "Growth"). */
RPS_API int rps_worker_num_workers(const struct rps_worker *worker);
/* How many times rps_worker_num_workers() grew since this worker joined: 0
 * at first. A program that splits its data by rank and worker count checks it
 * at its clock (or epoch) boundaries and splits again when it changed; the new
 * workers take part in the servers' sums from the clock they joined at. */
RPS_API int rps_worker_num_workers_gen(const struct rps_worker *worker);
RPS_API int rps_worker_num_servers(const struct rps_worker *worker);
RPS_API const char *rps_worker_transport(const struct rps_worker *worker);
/* The current clock: clock() calls so far; for a worker that joined a
 * running job, the job's clock when it joined plus its own calls since (a
 * training loop goes on from there: step rps_worker_clock_value()). */
RPS_API uint32_t rps_worker_clock_value(const struct rps_worker *worker);
/* The servers' consistency model (RDMAPS_CONSISTENCY of the servers, which
 * must all agree) and, under SSP, its bound s (RDMAPS_STALENESS; 0 under BSP
 * and ASP): a job picks its recipe from them (examples/fmnist). */
RPS_API enum rps_consistency rps_worker_consistency(const struct rps_worker *worker);
RPS_API uint32_t rps_worker_staleness_bound(const struct rps_worker *worker);
/* Largest staleness a pull of this worker saw so far: its clock minus the
 * shard's clock when the data was read (0 under BSP; at most the bound s
 * under SSP). */
RPS_API uint32_t rps_worker_max_staleness(const struct rps_worker *worker);

/* Create keys on their servers (idempotent; every worker may call it).
 * init NULL = the server's initialiser. -EEXIST if a key exists with another length. */
RPS_API int rps_worker_declare(struct rps_worker *worker, const rps_key_t *keys,
			       const size_t *lens, size_t n, const struct rps_init *init);

/* The same, with the job's optimizer for these keys (optim NULL: exactly
 * rps_worker_declare, the servers' default optimizer, RDMAPS_OPTIMIZER ...).
 * The spec (struct rps_optim_opts, from rps_optim_opts_init() in
 * <rdmaps/optim.h>) travels with the declaration to every slice of every key
 * and is kept in the servers' checkpoints; the servers' environment does not
 * change it. Rules (docs/api.md):
 *   - the same spec again (from any worker): 0;
 *   - another spec for a key that has one: -EINVAL, the servers' reason
 *     (naming the key and both specs) logged; the key keeps its spec;
 *   - a spec for a key declared without one: taken while the key has had no
 *     update, -EINVAL once it was trained with the default optimizer;
 *   - a declaration without a spec leaves a key's spec as it is.
 * A malformed spec (rps_optim_opts_validate) is -EINVAL before anything is
 * sent. Keys this worker declared already are given the spec too. */
RPS_API int rps_worker_declare_opt(struct rps_worker *worker, const rps_key_t *keys,
				   const size_t *lens, size_t n, const struct rps_init *init,
				   const struct rps_optim_opts *optim);
/* Give keys this worker declared already (it knows their lengths) the
 * optimizer spec, under the rules above. -ENOENT for a key not declared
 * through this worker (nothing sent), -EINVAL for optim NULL or malformed. */
RPS_API int rps_worker_set_optimizer(struct rps_worker *worker, const rps_key_t *keys, size_t n,
				     const struct rps_optim_opts *optim);

/* Asynchronous operations: *req_p receives a handle for rps_req_wait/rps_req_test. */
RPS_API int rps_worker_push(struct rps_worker *worker, const rps_key_t *keys,
			    const float *grads, const size_t *lens, size_t n,
			    struct rps_req **req_p);
RPS_API int rps_worker_pull(struct rps_worker *worker, const rps_key_t *keys, float *vals,
			    const size_t *lens, size_t n, struct rps_req **req_p);
/* One training step: push grads at clock c, end clock c, pull the values of
 * clock c + 1 into vals (which may alias nothing else in flight). */
RPS_API int rps_worker_pushpull(struct rps_worker *worker, const rps_key_t *keys,
				const float *grads, float *vals, const size_t *lens,
				size_t n, struct rps_req **req_p);

/* The same with a completion callback instead of a handle. */
RPS_API int rps_worker_push_cb(struct rps_worker *worker, const rps_key_t *keys,
			       const float *grads, const size_t *lens, size_t n,
			       rps_done_cb cb, void *arg);
RPS_API int rps_worker_pull_cb(struct rps_worker *worker, const rps_key_t *keys, float *vals,
			       const size_t *lens, size_t n, rps_done_cb cb, void *arg);

/* Wait for completion (timeout_ms < 0: forever). Returns the request's status
 * and frees it; -ETIMEDOUT leaves it alive for another wait. */
RPS_API int rps_req_wait(struct rps_req *req, int timeout_ms);
/* *done_p = 1 when complete; then the status is returned and req is freed. */
RPS_API int rps_req_test(struct rps_req *req, int *done_p);

/* Registered pull buffers.
 *
 * A pull may go into any buffer. Over a transport that reads the servers'
 * memory directly (rdma), a pull into an UNREGISTERED buffer is read into the
 * worker's own registered bounce memory and copied out: always safe, even
 * when the buffer is freed and another one allocated at the same address
 * (as garbage-collected callers do), at the cost of one copy.
 * rps_worker_register() registers [buf, buf + len) with the transport until
 * rps_worker_unregister(): pulls whose whole destination lies in it are read
 * into it directly, with no copy. Register buffers you pull into again and
 * again (the usual training loop); unregister a buffer BEFORE freeing it.
 * Over tcp registration changes nothing but the bookkeeping below.
 *
 * rps_worker_register: 0, -EINVAL (NULL, len 0), -EEXIST (overlaps a
 * registered buffer), -ENOSPC (64 buffers registered already), or the
 * transport's error (-ENOMEM: locked memory limit, see docs/rdma.md).
 * rps_worker_unregister (buf as registered): 0, -EINVAL, -ENOENT (not
 * registered), -EBUSY (a pull into it is still in flight: wait for it). */
RPS_API int rps_worker_register(struct rps_worker *worker, void *buf, size_t len);
RPS_API int rps_worker_unregister(struct rps_worker *worker, void *buf);

/* Counters of one worker since it was created (each read with a relaxed
 * load: a snapshot, not one instant). Set field_mask to the RPS_WORKER_STAT_*
 * bits of the members you want; only those are written, so the struct can
 * grow without breaking callers. */
#define RPS_WORKER_STAT_PULLS	      (1ull << 0)
#define RPS_WORKER_STAT_PUSHES	      (1ull << 1)
#define RPS_WORKER_STAT_BYTES_OUT     (1ull << 2)
#define RPS_WORKER_STAT_BYTES_IN      (1ull << 3)
#define RPS_WORKER_STAT_TORN_RETRIES  (1ull << 4)
#define RPS_WORKER_STAT_DIRECT_PULLS  (1ull << 5)
#define RPS_WORKER_STAT_DIRECT_SLEEPS (1ull << 6)
#define RPS_WORKER_STAT_DIRECT_NAPS   (1ull << 7)
#define RPS_WORKER_STAT_PUSH_RAW_BYTES	     (1ull << 8)
#define RPS_WORKER_STAT_PUSH_WIRE_BYTES	     (1ull << 9)
#define RPS_WORKER_STAT_LAST_STEP_PUSH_BYTES (1ull << 10)
#define RPS_WORKER_STAT_ROW_INDEX_READS      (1ull << 11)
#define RPS_WORKER_STAT_ROW_SLOT_READS	     (1ull << 12)
#define RPS_WORKER_STAT_ROW_PULL_FRAMES	     (1ull << 13)
#define RPS_WORKER_STAT_ROW_INDEX_MOVED      (1ull << 14)
#define RPS_WORKER_STAT_ALL	      ((1ull << 15) - 1)

struct rps_worker_stats {
	uint64_t field_mask;	/* RPS_WORKER_STAT_*: the members wanted */
	uint64_t pulls;		/* pull messages sent (frames, or one-sided reads of a slice) */
	uint64_t pushes;	/* push frames sent */
	uint64_t bytes_out;	/* gradient bytes pushed */
	uint64_t bytes_in;	/* parameter bytes received in pull answers (frames) */
	uint64_t torn_retries;	/* chunks read again because a read met them mid-update
				 * (one-sided reads only) */
	uint64_t direct_pulls;	/* one-chunk pulls read straight into the destination */
	uint64_t direct_sleeps; /* waits for a direct pull that went to sleep */
	uint64_t direct_naps;	/* of those, woken by their 10 ms nap, not the read */
	/* compression (<rdmaps/compress.h>): what the pushes were as float32,
	 * and what they put on the wire (whole PUSH frames: header, fixed part,
	 * data as sent); bytes_out above counts the data as sent */
	uint64_t push_raw_bytes;
	uint64_t push_wire_bytes;
	uint64_t last_step_push_bytes; /* push_wire_bytes of the last clock that ended */
	/* sparse tables over RDMA (docs/tables.md): READs of the servers' row
	 * index (bucket lookups), READs of row slots, ROWS_PULL frames sent (any
	 * transport), index buckets a lookup found moved by a rehash */
	uint64_t row_index_reads;
	uint64_t row_slot_reads;
	uint64_t row_pull_frames;
	uint64_t row_index_moved;
};

/* 0, or -EINVAL (worker or stats_p NULL). */
RPS_API int rps_worker_stats(const struct rps_worker *worker, struct rps_worker_stats *stats_p);

/* Models in and out (.npz files, see <rdmaps/model.h>; keys declared
 * through this worker, lens as declared).
 *
 * rps_worker_save_model: pull the keys at the worker's current clock (one
 * batched pull, with the consistency of any pull) and write them to path,
 * one 1-D float32 array per key named by the decimal key. Writes nothing if
 * the pull fails.
 *
 * rps_worker_load_model: read the whole file and check it (as
 * rps_model_load: every key present, float32, the declared element count, no
 * other array) before anything is sent; on any mismatch nothing changes on
 * the servers and the message names the file, the key and what is wrong.
 * Then every slice of every key is ASSIGNED on its server: the values become
 * the parameters (under the stores' version words, so a one-sided read never
 * sees half of it), that slice's optimizer state and step count start afresh.
 * An assignment belongs to no clock: it is not counted in any clock's pushes,
 * and a BSP clock neither waits for nor includes it. Returns when every slice
 * was acknowledged.
 * The rule: call it on ONE worker (e.g. rank 0) after its declare and before
 * any push, then every worker calls rps_worker_barrier() before its first
 * pull, which then sees the loaded values. Assigning while others push is
 * allowed but races with their updates.
 *
 * Both: 0, -EINVAL (NULL argument, n 0, a length not the declared one, a bad
 * file), -ENOENT (a key not declared through this worker; no such file),
 * -ENOMEM, a pull's, a file system's or a server's error (logged). A server's
 * refusal or a lost server during the assignments may leave some slices
 * assigned: load again. */
RPS_API int rps_worker_save_model(struct rps_worker *worker, const rps_key_t *keys,
				  const size_t *lens, size_t n, const char *path);
RPS_API int rps_worker_load_model(struct rps_worker *worker, const rps_key_t *keys,
				  const size_t *lens, size_t n, const char *path);

/* Ring all-reduce among the job's workers, beside the parameter server
 * (docs/allreduce.md): every worker calls it with the same keys and lengths
 * (n tensors back to back in vals, as a push's gradients); when it returns 0,
 * vals holds on every worker the element-wise SUM over all workers (divide by
 * rps_worker_num_workers() for the mean), the same bits on every worker. A
 * chunked ring reduce-scatter + all-gather: each worker sends and receives
 * 2(W-1)/W of the tensor. No server takes part; keys need not be declared.
 * Blocking; one call at a time per worker (others wait); the first call
 * connects to the ring neighbours (same handshake and secret as every other
 * connection). Worker <-> worker frames go over RDMAPS_RING_TRANSPORT (tcp,
 * the default, or rdma: RDMA SENDs), whatever the servers' transport.
 * Returns 0, or:
 *   -EINVAL   NULL argument, n 0, a length 0, or the workers passed
 *             different keys or lengths (logged, naming both ranks);
 *   -EHOSTDOWN a ring neighbour died or its connection was lost (logged,
 *             naming the rank); the others get it too, not a hang;
 *   -ETIMEDOUT nothing from the left neighbour for the worker's timeout;
 *   -ENOTCONN an offline worker.
 * After a failure the ring is not used again: later calls return the same
 * error (a job whose worker died restarts). One worker: 0, vals unchanged. */
RPS_API int rps_worker_allreduce(struct rps_worker *worker, const rps_key_t *keys, float *vals,
				 const size_t *lens, size_t n);
/* Why the ring failed: 0 while it works (buf ""), else the error every later
 * rps_worker_allreduce returns, with its reason as logged in buf (at most cap
 * bytes, NUL-terminated), e.g. "lost worker rank 3 (left ring neighbour):
 * ..." or "worker rank 0 failed: ...". For bindings that show the reason
 * with the error. -EINVAL for NULL or cap 0. */
RPS_API int rps_worker_allreduce_error(struct rps_worker *worker, char *buf, size_t cap);

/* End the current clock: every push of this clock has been sent before. */
RPS_API int rps_worker_clock(struct rps_worker *worker);
/* Wait until every live worker reaches the barrier. Barriers are counted
 * from the job's first: the n-th call of a worker that joined a running job
 * (it replaced a dead one) is the job's n-th barrier, and returns at once if
 * the job passed it before the worker joined (its start-up barrier). */
RPS_API int rps_worker_barrier(struct rps_worker *worker);

/* Ask every live server for a checkpoint (through the scheduler) and wait
 * until every shard wrote its file. clock: under BSP a shard below it writes
 * when it reaches it (its parameters after clocks < clock, exactly), a shard
 * at or past it writes at once; ASP/SSP write at once. UINT32_MAX: no target,
 * at once. Typical: after evaluating the parameters pulled at clock c (before
 * pushing clock c), ask for c: the file holds exactly what was evaluated.
 * Under BSP the target must be reachable: the servers wait for it until
 * timeout_ms (<= 0: RDMAPS_TIMEOUT_MS). Returns 0, or -errno with the reason
 * logged: -ENOTCONN no scheduler connection, -ENOTSUP a server has no
 * RDMAPS_CHECKPOINT_DIR, -EHOSTDOWN a server died (or the scheduler is gone),
 * -ETIMEDOUT, -EBUSY another checkpoint or export is running, -EIO a shard
 * failed to write. */
RPS_API int rps_worker_checkpoint(struct rps_worker *worker, uint32_t clock, int timeout_ms);

/* Report a figure of the job (loss, test accuracy, samples/s, staleness, ...)
 * to the scheduler, which keeps it for the dashboard's curves (docs/dashboard.md):
 * one small control message tagged with this worker's rank and current clock,
 * no answer awaited, nothing else blocked. name: 1 to 23 characters of
 * [A-Za-z0-9_.-]; value: any double (a value that is not finite shows as a
 * gap). At most RPS_WORKER_REPORT_RATE reports per second per worker: more in
 * the same second are dropped with -EAGAIN. Returns 0, -EINVAL (NULL worker
 * or a bad name), -ENOTCONN (no scheduler connection: an offline worker),
 * -EAGAIN (over the rate), or the control channel's error. */
#define RPS_WORKER_REPORT_RATE 100
RPS_API int rps_worker_report(struct rps_worker *worker, const char *name, double value);

#ifdef __cplusplus
}
#endif
#endif
