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

/* The codes status.h documents, in rdmaps' words. */
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
	{ EAGAIN, "try again (ring full or no credits)" },
	{ ENOSPC, "no space left (shard store full: RDMAPS_SHARD_BYTES)" },
	{ EPIPE, "broken pipe (connection or ring closed)" },
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
