/* rps_strerror: what a status code means in rdmaps (include/rdmaps/status.h). */
#include <rdmaps/status.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "src/util.h"

struct status_text {
	int code;
	const char *text;
};

/* Every code status.h documents, in rdmaps' words (same order). */
/* clang-format off */
static const struct status_text status_texts[] = {
	{ EINVAL, "invalid argument (bad length or option value)" },
	{ ENOENT, "unknown key" },
	{ EEXIST, "key already declared with a different length" },
	{ EMSGSIZE, "message too large (beyond RDMAPS_MAX_MSG)" },
	{ EPROTO, "protocol error (bad frame, magic or version)" },
	{ EACCES, "wrong shared secret (RDMAPS_SECRET)" },
	{ ECONNRESET, "connection reset (peer closed or died)" },
	{ EHOSTDOWN, "node declared dead" },
	{ ETIMEDOUT, "timed out (RDMAPS_TIMEOUT_MS)" },
	{ ENODEV, "no RDMA device" },
	{ ENOMEM, "out of memory (or locked memory: ulimit -l)" },
	{ ENOSPC, "no space left (shard store full: RDMAPS_SHARD_BYTES; or disk full)" },
	{ EIO, "input/output error (push dropped by the server, or device error)" },
	{ ECANCELED, "canceled (worker or server stopping)" },
	{ EDEADLK, "would deadlock (a callback waits for a one-chunk RDMA pull)" },
	{ ENOTCONN, "not connected to that server" },
	{ EBUSY, "busy (already running, or already waited for)" },
	{ ENOTSUP, "transport not supported (unknown or not built)" },
	{ ESHUTDOWN, "scheduler shut the job down" },
	{ ECONNREFUSED, "connection refused (nothing listens there, or the peer refused)" },
	{ EHOSTUNREACH, "host unreachable (address does not resolve or route)" },
	{ ENETUNREACH, "network unreachable" },
	{ ENETDOWN, "network down (RDMA port or link down)" },
	{ ENETRESET, "network reset (local address changed)" },
	{ ECONNABORTED, "connection aborted by the peer" },
	{ EREMOTEIO, "remote I/O error (peer's queue in error)" },
	{ ENOBUFS, "no buffer space (peer had no receive buffer posted)" },
	{ EFAULT, "bad address (buffer not registered)" },
	{ EXDEV, "address on another RDMA device than RDMAPS_DEVICE" },
	{ EOPNOTSUPP, "operation not supported by the RDMA device" },
	{ EADDRINUSE, "address already in use (RDMAPS_PORT), or that worker rank is connected already" },
	{ EADDRNOTAVAIL, "address not available (RDMAPS_HOST)" },
	{ EMFILE, "too many open files (ulimit -n)" },
	{ EPERM, "not permitted (the peer refused the hello)" },
	{ EPIPE, "broken pipe (connection or ring closed)" },
	{ EBADMSG, "corrupt checkpoint file" },
	{ EPROTONOSUPPORT, "checkpoint format version not supported" },
	{ ENAMETOOLONG, "file name too long (RDMAPS_CHECKPOINT_DIR)" },
	{ ENOTDIR, "not a directory (checkpoint directory)" },
	{ EDESTADDRREQ, "bad scheduler address (expected host:port)" },
	{ EAGAIN, "try again (ring full or no credits)" },
	{ ERANGE, "clock out of range (far beyond what the server knows of this worker)" },
};
/* clang-format on */

static _Thread_local char status_buf[96];

const char *rps_strerror(int status)
{
	int code = status == INT_MIN ? 0 : status < 0 ? -status : status;
	const char *s;

	if (status == 0)
		return "success";
	for (size_t i = 0; i < RPS_ARRAY_SIZE(status_texts); i++)
		if (status_texts[i].code == code)
			return status_texts[i].text;
	/* GNU strerror_r: returns a static string or fills the buffer. */
	s = strerror_r(code, status_buf, sizeof(status_buf));
	if (!s || !*s) {
		snprintf(status_buf, sizeof(status_buf), "unknown error %d", status);
		s = status_buf;
	}
	return s;
}
