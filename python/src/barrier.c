/* barrier(): rps_worker_barrier run by a thread of its own while the caller
 * waits in slices with the GIL released, checking signals, so that Ctrl-C
 * raises KeyboardInterrupt at once. The barrier itself cannot be cancelled:
 * it goes on, the worker remembers it, and the next barrier() waits for
 * that one (a second rps_worker_barrier meanwhile would be -EBUSY). close()
 * waits for it before destroying the worker. */
#include "core.h"

#include <errno.h>
#include <time.h>

struct pybarrier {
	struct pyworker *pw;
	pthread_t thread;
	int rc;
	int done;    /* pw->mu */
	int waiting; /* a Python thread waits for it (GIL) */
};

static void *barrier_thread(void *arg)
{
	struct pybarrier *b = arg;
	struct pyworker *pw = b->pw;
	int rc = rps_worker_barrier(pw->w);

	pthread_mutex_lock(&pw->mu);
	b->rc = rc;
	b->done = 1;
	pthread_cond_broadcast(&pw->cv);
	pthread_mutex_unlock(&pw->mu);
	return NULL;
}

/* b is done: join its thread and free it. */
static int reap(struct pyworker *pw, struct pybarrier *b)
{
	int rc = b->rc;

	Py_BEGIN_ALLOW_THREADS
		pthread_join(b->thread, NULL);
	Py_END_ALLOW_THREADS
	if (pw->barrier == b)
		pw->barrier = NULL;
	pw->background--;
	PyMem_RawFree(b);
	return rc;
}

PyObject *rps_py_barrier(PyObject *self, PyObject *unused)
{
	struct pyworker *pw = (struct pyworker *)self;
	struct pybarrier *b = pw->barrier;
	int rc;

	if (b && b->waiting) {
		PyErr_SetString(PyExc_RuntimeError, "barrier: another thread of this process "
						    "already waits in barrier() of this worker");
		return NULL;
	}
	/* counted as a call in progress: close() waits for it */
	if (rps_py_enter(pw))
		return NULL;
	if (!b) {
		b = PyMem_RawCalloc(1, sizeof(*b));
		if (!b) {
			rps_py_leave(pw);
			return PyErr_NoMemory();
		}
		b->pw = pw;
		rc = pthread_create(&b->thread, NULL, barrier_thread, b);
		if (rc) {
			PyMem_RawFree(b);
			rps_py_leave(pw);
			return rps_py_raise(-rc, "barrier: starting its thread");
		}
		pw->barrier = b;
		pw->background++;
	}
	b->waiting = 1;
	rc = rps_py_wait_flag(&pw->mu, &pw->cv, &b->done);
	b->waiting = 0;
	if (rc < 0) {
		rps_py_leave(pw);
		return NULL; /* KeyboardInterrupt: the barrier goes on */
	}
	rc = reap(pw, b);
	rps_py_leave(pw);
	if (rc)
		return rps_py_raise(rc, "barrier");
	Py_RETURN_NONE;
}

void rps_py_barriers_closed(struct pyworker *pw)
{
	struct pybarrier *b = pw->barrier;

	if (!b)
		return;
	/* left by Ctrl-C (close() first waited for every call in progress, so
	 * nobody waits for it), but it uses the worker: let it end (a barrier
	 * ends within the job's timeout) */
	Py_BEGIN_ALLOW_THREADS
		pthread_mutex_lock(&pw->mu);
		while (!b->done)
			pthread_cond_wait(&pw->cv, &pw->mu);
		pthread_mutex_unlock(&pw->mu);
	Py_END_ALLOW_THREADS
	reap(pw, b);
}
