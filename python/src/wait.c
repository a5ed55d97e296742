/* rdmaps Python binding — waiting for another thread's flag in slices, with
 * the GIL released, so that Ctrl-C is seen within a slice. */
#include "core.h"

#include <errno.h>
#include <time.h>

int rps_py_wait_flag(pthread_mutex_t *mu, pthread_cond_t *cv, const int *flag)
{
	int done = 0;

	for (;;) {
		Py_BEGIN_ALLOW_THREADS
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += RPS_PY_WAIT_SLICE_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_mutex_lock(mu);
			while (!*flag) {
				if (pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT)
					break;
			}
			done = *flag;
			pthread_mutex_unlock(mu);
		Py_END_ALLOW_THREADS
		if (done)
			return 0;
		if (PyErr_CheckSignals() < 0)
			return -1;
	}
}
