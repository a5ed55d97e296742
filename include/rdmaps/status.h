/* rdmaps — status codes.
 *
 * Every function returns int: 0 on success, a negative errno on failure.
 * The errno values rdmaps uses, and what they mean here:
 *   -EINVAL      bad argument (wrong length for a key, bad option value)
 *   -ENOENT      unknown key (never declared on its server)
 *   -EEXIST      key declared again with a different length
 *   -EMSGSIZE    a frame or tensor beyond the configured limit
 *   -EPROTO      malformed frame, wrong magic or protocol version
 *   -EACCES      wrong shared secret (RDMAPS_SECRET)
 *   -ECONNRESET  peer closed or died
 *   -EHOSTDOWN   node declared dead by the scheduler
 *   -ETIMEDOUT   no answer within the timeout
 *   -ENODEV      no RDMA device
 *   -ENOMEM      out of memory / locked memory
 *   -EAGAIN      try again (ring full, no credits) — internal, not returned by the API
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

/* Text for a status code (0 or negative errno); never NULL. */
RPS_API const char *rps_strerror(int status);

#ifdef __cplusplus
}
#endif
#endif
