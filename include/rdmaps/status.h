/* rdmaps — status codes.
 *
 * Every function returns int: 0 on success, a negative errno on failure, and a
 * request's status is one too. rps_strerror(code) is the one way to turn a code
 * into text. Every code a public call (worker.h, server.h, config.h, ctl.h,
 * keys.h, optim.h, model.h) can return, and what it means in rdmaps (docs/api.md,
 * "Errors", says which call returns which):
 *   -EINVAL          a bad argument: NULL array or buffer, a length that is not
 *                    the declared one, a zero-length key, a bad initialiser or
 *                    option value (the reason is logged once); a model file
 *                    that is no .npz of the keys (a key missing or of another
 *                    size, not float32, truncated, corrupt)
 *   -ENOENT          a key never declared through this worker, or not declared
 *                    on its server; rps_config_get_... and _set: no setting of
 *                    that name; a model file that does not exist
 *   -EEXIST          the key exists (here or on its server) with another length
 *   -EMSGSIZE        a frame or tensor beyond RDMAPS_MAX_MSG, or the server's
 *                    frame limit holds no element; RDMA: a frame larger than
 *                    the peer's RDMAPS_RDMA_BUF_BYTES
 *   -EPROTO          malformed frame, wrong magic or protocol version, servers
 *                    that disagree (RDMAPS_SHARDS, consistency, chunk size)
 *   -EACCES          wrong RDMAPS_SECRET (or an RDMA access error on a
 *                    registered buffer); a model file or folder we may not
 *                    read or write
 *   -ECONNRESET      the connection to a server broke; every request with a
 *                    piece on it fails with this
 *   -EHOSTDOWN       the scheduler declared the server dead (or it left), or it
 *                    did not come back within RDMAPS_TIMEOUT_MS; a barrier: the
 *                    scheduler is gone
 *   -ETIMEDOUT       no scheduler, cluster or answer within RDMAPS_TIMEOUT_MS;
 *                    rps_req_wait's own limit (the request stays alive); RDMA:
 *                    retries exceeded
 *   -ENODEV          RDMAPS_TRANSPORT=rdma without a usable device
 *   -ENOMEM          out of memory, or of locked memory for RDMA registration
 *                    (ulimit -l)
 *   -ENOSPC          a server's shard store is full (RDMAPS_SHARD_BYTES); a
 *                    checkpoint or model file: the disk is full
 *   -EIO             the server dropped the push (fault injection drop,
 *                    docs/operations.md); RDMA: a device or queue-pair error;
 *                    a model file that could not be written (the cause is
 *                    logged)
 *   -ECANCELED       still in flight when rps_worker_destroy gave up, or the
 *                    server stopped meanwhile
 *   -EDEADLK         a callback (the progress thread) waits for a one-chunk
 *                    RDMA pull with RDMAPS_WAIT_SPIN_US=0: callbacks must not
 *                    wait
 *   -ENOTCONN        a request for a server the worker holds no connection to
 *                    (between a failure and the reconnection)
 *   -EBUSY           rps_server_run on a server already running; a barrier
 *                    another thread already waits for
 *   -ENOTSUP         RDMAPS_TRANSPORT names a transport this build does not
 *                    have
 *   -ESHUTDOWN       the scheduler sent SHUTDOWN: the job is over
 *   -ECONNREFUSED    nothing listens at RDMAPS_SCHEDULER or a server's address,
 *                    or the peer refused the connection
 *   -EHOSTUNREACH    the address does not resolve or route
 *   -ENETUNREACH     RDMA: no route to the peer's address
 *   -ENETDOWN        RDMA: the device's port is down, or went down
 *   -ENETRESET       RDMA: the local address changed under a connection
 *   -ECONNABORTED    RDMA: the peer aborted an operation
 *   -EREMOTEIO       RDMA: a remote operation error (the peer's receive queue
 *                    is in error)
 *   -ENOBUFS         RDMA: the receiver had no buffer posted, retries exceeded
 *   -EFAULT          RDMA: a local protection or access error (a buffer not
 *                    registered)
 *   -EXDEV           the host's address belongs to another RDMA device than
 *                    RDMAPS_DEVICE
 *   -EOPNOTSUPP      the RDMA device lacks a feature rdmaps needs (shared
 *                    receive queues)
 *   -EADDRINUSE      the listen port (RDMAPS_PORT, RDMAPS_METRICS_PORT) is
 *                    taken; a server has a live connection of this worker
 *                    rank already (two processes with one rank)
 *   -EADDRNOTAVAIL   RDMAPS_HOST is not an address of this machine
 *   -EMFILE          out of file descriptors (ulimit -n)
 *   -EPERM           the peer's hello check refused the connection
 *   -EPIPE           a connection or a shard's ring closed while sending
 *   -EBADMSG         rps_server_set_restore / --restore: a corrupt or truncated
 *                    checkpoint file
 *   -EPROTONOSUPPORT a checkpoint written by a format version this build does
 *                    not read
 *   -ENAMETOOLONG    RDMAPS_CHECKPOINT_DIR makes a checkpoint path too long;
 *                    a model file's path is too long
 *   -ENOTDIR         the restore directory is not a directory; a model file's
 *                    path goes through something that is not a directory
 *   -EDESTADDRREQ    rps_ctl_status_print: the scheduler address is not host:port
 *   -EAGAIN          internal (ring full, no credits): never returned by a
 *                    public call
 *   -ERANGE          a server refused a CLOCK, PUSH or SYNC far beyond what it
 *                    knows of the worker's clock (docs/security.md)
 * A failure is logged once, where it is first seen; the caller gets the code.
 */
#ifndef RDMAPS_STATUS_H
#define RDMAPS_STATUS_H

#include <errno.h>

#if defined(RPS_BUILDING_LIB)
#define RPS_API __attribute__((visibility("default")))
#else
#define RPS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Text for a status code (0 or negative errno; a positive errno is read as its
 * negative): rdmaps' words for the codes above, the system's text for others,
 * "unknown error N" if it has none; never NULL. */
RPS_API const char *rps_strerror(int status);

#ifdef __cplusplus
}
#endif
#endif
