/* Joining the job (rps_worker_create) from a thread of its own, so that
 * Ctrl-C interrupts Worker() at once: creating a worker waits for the whole
 * cluster, up to the timeout. The caller waits in slices with the GIL
 * released, checking signals; when it gives up (KeyboardInterrupt), the
 * thread finishes alone and destroys the worker it may still get. */
#include "core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct join {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rps_worker_opts o;
	char *strs[3]; /* copies of scheduler, transport, secret */
	struct rps_worker *w;
	int rc;
	int done;      /* mu */
	int abandoned; /* mu: the caller left; the thread cleans up */
};

static void join_free(struct join *j)
{
	for (int i = 0; i < 3; i++)
		free(j->strs[i]);
	pthread_cond_destroy(&j->cv);
	pthread_mutex_destroy(&j->mu);
	free(j);
}

static void *join_thread(void *arg)
{
	struct join *j = arg;
	struct rps_worker *w = NULL;
	int rc = rps_worker_create(&j->o, &w), abandoned;

	pthread_mutex_lock(&j->mu);
	j->w = w;
	j->rc = rc;
	j->done = 1;
	abandoned = j->abandoned;
	pthread_cond_broadcast(&j->cv);
	pthread_mutex_unlock(&j->mu);
	if (abandoned) {
		if (!rc)
			rps_worker_destroy(w);
		join_free(j);
	}
	return NULL;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int rps_py_join(const struct rps_worker_opts *o, struct rps_worker **w_p)
{
	struct join *j = calloc(1, sizeof(*j));
	pthread_t t;
	int rc, done = 0;

	if (!j) {
		PyErr_NoMemory();
		return -1;
	}
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->cv, NULL);
	j->o = *o;
	j->o.scheduler = j->strs[0] = dup_or_null(o->scheduler);
	j->o.transport = j->strs[1] = dup_or_null(o->transport);
	j->o.secret = j->strs[2] = dup_or_null(o->secret);
	rc = pthread_create(&t, NULL, join_thread, j);
	if (rc) {
		join_free(j);
		rps_py_raise(-rc, "joining the job: starting a thread");
		return -1;
	}
	pthread_detach(t);
	if (rps_py_wait_flag(&j->mu, &j->cv, &j->done) < 0) {
		pthread_mutex_lock(&j->mu);
		done = j->done;
		j->abandoned = !done;
		pthread_mutex_unlock(&j->mu);
		if (done) { /* it just finished: undo it here */
			if (!j->rc) {
				Py_BEGIN_ALLOW_THREADS
					rps_worker_destroy(j->w);
				Py_END_ALLOW_THREADS
			}
			join_free(j);
		}
		return -1;
	}
	/* done: the thread touches j no more */
	rc = j->rc;
	*w_p = j->w;
	join_free(j);
	return rc > 0 ? -rc : rc;
}
