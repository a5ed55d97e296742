/* A random job secret for the processes a tool starts (job_secret.h). */
#include "job_secret.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#define SECRET_BYTES 32

int rps_tool_ensure_secret(const char *prog)
{
	unsigned char r[SECRET_BYTES];
	char hex[2 * SECRET_BYTES + 1];
	const char *s = getenv("RDMAPS_SECRET");
	size_t got = 0;

	if (s && s[0])
		return 0;
	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;

			fprintf(stderr, "%s: no random bytes for the job secret: %s\n", prog,
				strerror(err));
			return -err;
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(hex + 2 * i, 3, "%02x", r[i]);
	memset(r, 0, sizeof(r));
	setenv("RDMAPS_SECRET", hex, 1);
	memset(hex, 0, sizeof(hex));
	return 0;
}
