/* rdmaps — asking a running job's scheduler, as rdmaps-ctl does.
 *
 *   struct rps_ctl_opts o;
 *   if (rps_ctl_opts_from_args(&argc, argv, stdout, &o) == 0)
 *           rc = rps_ctl_status_print(&o, stdout);
 */
#ifndef RDMAPS_CTL_H
#define RDMAPS_CTL_H

#include <stdint.h>
#include <stdio.h>
#include <rdmaps/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RPS_CTL_STR_MAX 256

/* Bits of rps_ctl_opts.field_mask: bit N says member N (after field_mask) is set. */
enum {
	RPS_CTL_OPT_SCHEDULER = 1u << 0,
	RPS_CTL_OPT_SECRET = 1u << 1,
	RPS_CTL_OPT_TIMEOUT_MS = 1u << 2,
};

/* Where the scheduler is and how to talk to it. Members whose bit is not in
 * field_mask take RDMAPS_SCHEDULER, RDMAPS_SECRET, RDMAPS_TIMEOUT_MS or
 * their defaults. */
struct rps_ctl_opts {
	uint64_t field_mask;
	char scheduler[RPS_CTL_STR_MAX]; /* "host:port" */
	char secret[RPS_CTL_STR_MAX];    /* the job's shared secret */
	int timeout_ms;                  /* connect and answer */
};

/* Settings from the built-in defaults, the RDMAPS_* environment, then every
 * rdmaps setting given as a flag in argv (--scheduler H:P, --secret S,
 * --timeout-ms N, ...; the flags are removed from argv and *argc_p shrinks,
 * other arguments stay in order). Sets the log level and names the process
 * "ctl" in log lines. Sets every member of *opts_p (and its field_mask).
 * Returns 0; 1 when --config was given (the settings were printed to out);
 * -EINVAL for a bad flag or value (reported). */
RPS_API int rps_ctl_opts_from_args(int *argc_p, char **argv, FILE *out,
				   struct rps_ctl_opts *opts_p);

/* Ask the scheduler for its status table (nodes, roles, ranks, liveness,
 * clocks, rates, per-server shard lines) and write it to out. A problem is
 * reported on stderr as one line starting "rdmaps-ctl: ". opts NULL: all
 * from the environment. Returns 0; -EDESTADDRREQ when the scheduler address
 * is not host:port; -EACCES when the
 * scheduler refuses the secret; another negative errno when it cannot be
 * reached, closes the connection, answers with an error or not in time. */
RPS_API int rps_ctl_status_print(const struct rps_ctl_opts *opts, FILE *out);

/* Ask every live server of the job for a checkpoint now: each shard writes
 * its file (RDMAPS_CHECKPOINT_DIR of the server) and the answer comes back
 * through the scheduler. Writes one line per file to out:
 *   server R shard S clock C PATH
 * Returns 0 once every shard of every live server wrote its file; otherwise
 * a negative errno after reporting on stderr what failed and what to do:
 * -ENOTSUP a server has no checkpoint directory, -EHOSTDOWN a server died
 * or went away meanwhile, -ETIMEDOUT a server did not answer within
 * opts->timeout_ms, -EBUSY another checkpoint or export is running, -EIO a
 * shard failed to write (disk full, permissions), or the errors of
 * rps_ctl_status_print about reaching the scheduler. */
RPS_API int rps_ctl_checkpoint(const struct rps_ctl_opts *opts, FILE *out);

/* Write every key's parameters, as the servers hold them at one clock
 * boundary, to path as a NumPy .npz: one 1-D float32 array per key, named
 * by the key in decimal ("7"), its slices concatenated in slice order.
 * Under BSP every shard takes its snapshot at the same clock T (the largest
 * clock among the shards when asked: a shard below it waits until it gets
 * there, so the job must be training or T already reached); under ASP/SSP
 * each shard takes it when the request reaches it (no common boundary
 * exists). Writes one line to out: the clock(s), the number of keys and
 * elements, the file. The file is written atomically, and only when every
 * slice of every key (0..n-1, each complete) arrived. Returns 0, -ENOENT /
 * -EACCES when path's directory does not exist / is not writable (checked
 * first), the errors of rps_ctl_checkpoint, -EAGAIN when BSP shards did not
 * meet at one clock after several tries, -EPROTO an incomplete key, or the
 * .npz write's error; each reported on stderr. */
RPS_API int rps_ctl_export(const struct rps_ctl_opts *opts, const char *path, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
