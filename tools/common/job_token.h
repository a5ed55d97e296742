/* Per-node tokens that rdmaps-launch gives the servers and workers it starts
 * in place of the job secret (docs/security.md "Tokens"). The same
 * derivation as src/auth.h / src/auth_token.c (a unit test checks that both
 * make the same token), written again here so that rdmaps-launch stays
 * standalone (OpenSSL's libcrypto only, no library function). */
#ifndef RPS_TOOLS_JOB_TOKEN_H
#define RPS_TOOLS_JOB_TOKEN_H

#include <stddef.h>

/* The token of a server (role 1) or worker (role 2) of rank under secret,
 * as text into buf. 0, or -1 (bad arguments, buf too small). */
int rps_tool_token(const char *secret, int role, unsigned rank, char *buf, size_t len);

#endif
