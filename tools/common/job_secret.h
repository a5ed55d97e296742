/* The job secret that rdmaps-launch and rdmaps-perf's local cluster give the
 * processes they start (docs/security.md). Shared by the tools only: it uses
 * no library function, so rdmaps-launch stays standalone. */
#ifndef RPS_TOOLS_JOB_SECRET_H
#define RPS_TOOLS_JOB_SECRET_H

/* Unless RDMAPS_SECRET is set and not empty: 32 bytes from getrandom, as 64
 * hex characters, into RDMAPS_SECRET. 0, or -errno after a message naming
 * prog on stderr. */
int rps_tool_ensure_secret(const char *prog);

#endif
