/* Requests: the C completion record (struct pyreq) and the Request type.
 *
 * A pyreq is made of one or more library requests submitted with a
 * completion callback (rps_worker_push_cb / pull_cb). The callback runs on
 * the worker's progress thread: it takes pw->mu, records the status, counts
 * down and broadcasts pw->cv; it touches no Python object. Everything else
 * runs under the GIL: the Request's wait/done, and freeing.
 *
 * Ownership: the Request object owns its pyreq. When the Request goes away
 * before the pyreq completed, the pyreq becomes an orphan: it stays in the
 * worker's list, holding its buffers, and the worker frees it once done
 * (rps_py_reap_orphans at its next call, or at close). */
#include "core.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

#define WAIT_SLICE_MS RPS_PY_WAIT_SLICE_MS
#define DEFAULT_SPIN_US 200 /* RDMAPS_WAIT_SPIN_US's default (docs/options.md) */

uint64_t rps_py_wait_spin_ns(void)
{
	struct rps_config *cfg = NULL;
	int us = DEFAULT_SPIN_US;

	/* the same settings the worker reads: defaults, then RDMAPS_* (a bad
	 * one failed the worker's own create already) */
	if (rps_config_create(&cfg) == 0 && rps_config_get_int(cfg, "wait_spin_us", &us) != 0)
		us = DEFAULT_SPIN_US;
	rps_config_destroy(cfg);
	if (us < 0)
		us = 0;
	if (us > WAIT_SLICE_MS * 1000)
		us = WAIT_SLICE_MS * 1000;
	return (uint64_t)us * 1000u;
}

struct pyrequest {
	PyObject_HEAD struct pyworker *pw; /* strong reference */
	struct pyreq *r;
	int finished; /* buffers released, status read */
	int status;
	int waiters;   /* threads in wait(): r is freed only when none is */
	char what[96]; /* "pull of key 7" */
};

struct pyreq *rps_py_pyreq_new(struct pyworker *pw, int nbufs, size_t nkeys, const char *what)
{
	struct pyreq *r;
	size_t sz = sizeof(*r) + (size_t)nbufs * sizeof(struct pybuf) +
		    nkeys * (sizeof(rps_key_t) + sizeof(size_t));

	r = PyMem_Calloc(1, sz);
	if (!r) {
		PyErr_NoMemory();
		return NULL;
	}
	r->pw = pw;
	r->nbufs = nbufs;
	r->bufs = (struct pybuf *)(r + 1);
	r->keys = (rps_key_t *)(r->bufs + nbufs);
	r->lens = (size_t *)(r->keys + nkeys);
	r->nkeys = nkeys;
	r->what = what;
	r->remaining = 1; /* the submitter's guard */
	atomic_init(&r->done, 0);
	return r;
}

static void pyreq_free(struct pyreq *r)
{
	for (int i = 0; i < r->nbufs; i++)
		rps_py_buf_release(&r->bufs[i]);
	PyMem_Free(r);
}

void rps_py_pyreq_discard(struct pyreq *r)
{
	pyreq_free(r);
}

void rps_py_pyreq_link(struct pyreq *r)
{
	struct pyreq *h = &r->pw->head;

	r->next = h->next;
	r->prev = h;
	h->next->prev = r;
	h->next = r;
}

static void pyreq_unlink(struct pyreq *r)
{
	if (!r->next)
		return;
	r->prev->next = r->next;
	r->next->prev = r->prev;
	r->next = r->prev = NULL;
}

/* pw->mu held: count one completion. */
static void count_down(struct pyreq *r, int n, int status)
{
	if (status && !r->status)
		r->status = status;
	r->remaining -= n;
	if (r->remaining == 0) {
		pthread_cond_broadcast(&r->pw->cv);
		atomic_store_explicit(&r->done, 1, memory_order_release); /* last touch */
	}
}

void rps_py_pyreq_cb(int status, void *arg)
{
	struct pyreq *r = arg;
	struct pyworker *pw = r->pw;

	pthread_mutex_lock(&pw->mu);
	count_down(r, 1, status);
	pthread_mutex_unlock(&pw->mu);
}

void rps_py_pyreq_sealed(struct pyreq *r, int unsubmitted, int status)
{
	struct pyworker *pw = r->pw;

	pthread_mutex_lock(&pw->mu);
	count_down(r, 1 + unsubmitted, status);
	pthread_mutex_unlock(&pw->mu);
}

static int is_done(const struct pyreq *r)
{
	return atomic_load_explicit(&r->done, memory_order_acquire);
}

void rps_py_reap_orphans(struct pyworker *pw)
{
	struct pyreq *r, *next;

	if (!pw->norphans)
		return;
	for (r = pw->head.next; r != &pw->head; r = next) {
		next = r->next;
		if (r->orphan && is_done(r)) {
			pyreq_unlink(r);
			pw->norphans--;
			pyreq_free(r);
		}
	}
}

void rps_py_requests_closed(struct pyworker *pw)
{
	struct pyreq *r, *next;

	for (r = pw->head.next; r != &pw->head; r = next) {
		next = r->next;
		if (!is_done(r)) {
			/* the library is gone: it will never call back (other
			 * threads may wait on r: under pw->mu, and woken) */
			pthread_mutex_lock(&pw->mu);
			r->status = r->status ? r->status : -ECANCELED;
			r->remaining = 0;
			atomic_store(&r->done, 1);
			pthread_cond_broadcast(&pw->cv);
			pthread_mutex_unlock(&pw->mu);
		}
		if (r->orphan) {
			pyreq_unlink(r);
			pw->norphans--;
			pyreq_free(r);
		}
	}
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Without the GIL: watch r->done for up to limit_ns (the completion
 * callback sets it last). A short request then costs no condition-variable
 * wake-up of this thread, as rps_req_wait's spin saves the C caller one. */
static void spin(struct pyreq *r, uint64_t limit_ns)
{
	uint64_t start = mono_ns();

	do {
		for (int i = 0; i < 32; i++) {
			if (is_done(r))
				return;
			cpu_relax();
		}
	} while (mono_ns() - start < limit_ns);
}

int rps_py_pyreq_wait(struct pyreq *r, double timeout_s)
{
	struct pyworker *pw = r->pw;
	double deadline = timeout_s >= 0 ? mono_s() + timeout_s : 0;
	uint64_t spin_ns = pw->spin_ns;

	if (spin_ns && !is_done(r)) {
		/* spin first (GIL released, so other threads run), then sleep in
		 * slices; spin_ns is at most one slice: Ctrl-C stays prompt */
		if (timeout_s >= 0 && timeout_s * 1e9 < (double)spin_ns)
			spin_ns = (uint64_t)(timeout_s * 1e9);
		Py_BEGIN_ALLOW_THREADS
			spin(r, spin_ns);
		Py_END_ALLOW_THREADS
	}
	while (!is_done(r)) {
		double slice = WAIT_SLICE_MS * 1e-3;
		struct timespec ts;

		if (timeout_s >= 0) {
			double left = deadline - mono_s();

			if (left <= 0)
				return 1;
			if (left < slice)
				slice = left;
		}
		Py_BEGIN_ALLOW_THREADS
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)slice;
			ts.tv_nsec += (long)((slice - floor(slice)) * 1e9);
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_mutex_lock(&pw->mu);
			while (r->remaining > 0) {
				if (pthread_cond_timedwait(&pw->cv, &pw->mu, &ts) == ETIMEDOUT)
					break;
			}
			pthread_mutex_unlock(&pw->mu);
		Py_END_ALLOW_THREADS
		if (is_done(r))
			break;
		if (PyErr_CheckSignals() < 0)
			return -1;
	}
	return 0;
}

/* ---- the Request type ---- */

static void describe(char *buf, size_t len, const struct pyreq *r)
{
	if (r->nkeys == 1)
		snprintf(buf, len, "%s of key %llu", r->what, (unsigned long long)r->keys[0]);
	else
		snprintf(buf, len, "%s of %zu keys (%llu, ...)", r->what, r->nkeys,
			 (unsigned long long)r->keys[0]);
}

PyObject *rps_py_request_new(struct pyworker *pw, struct pyreq *r)
{
	struct pyrequest *q = PyObject_New(struct pyrequest, &rps_py_request_type);

	if (!q)
		return NULL;
	Py_INCREF(pw);
	q->pw = pw;
	q->r = r;
	q->finished = 0;
	q->status = 0;
	q->waiters = 0;
	describe(q->what, sizeof(q->what), r);
	return (PyObject *)q;
}

/* r is done: release its buffers, keep the status. Not while another
 * thread waits on r (it still reads it; the last waiter finishes). */
static void finish(struct pyrequest *q)
{
	if (q->finished || q->waiters > 0)
		return;
	q->status = q->r->status;
	pyreq_unlink(q->r);
	pyreq_free(q->r);
	q->r = NULL;
	q->finished = 1;
}

static int status_of(const struct pyrequest *q)
{
	return q->finished ? q->status : q->r->status;
}

static PyObject *result(struct pyrequest *q)
{
	int status = status_of(q);

	if (status)
		return rps_py_raise(status, "%s", q->what);
	Py_RETURN_NONE;
}

static PyObject *req_wait(struct pyrequest *q, PyObject *args, PyObject *kw)
{
	static char *names[] = {"timeout", NULL};
	PyObject *tobj = Py_None;
	double timeout = -1;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", names, &tobj))
		return NULL;
	if (tobj != Py_None) {
		timeout = PyFloat_AsDouble(tobj);
		if (timeout == -1 && PyErr_Occurred())
			return NULL;
		if (timeout < 0 || isnan(timeout)) {
			PyErr_SetString(PyExc_ValueError, "timeout: seconds >= 0, or None to wait "
							  "until the request completes");
			return NULL;
		}
	}
	if (!q->finished) {
		q->waiters++;
		rc = rps_py_pyreq_wait(q->r, timeout);
		q->waiters--;
		if (rc < 0)
			return NULL;
		if (rc > 0)
			return rps_py_raise(-ETIMEDOUT,
					    "%s not complete after %g s (it goes on: "
					    "wait again, or drop the request)",
					    q->what, timeout);
		finish(q);
	}
	return result(q);
}

static PyObject *req_done(struct pyrequest *q, PyObject *unused)
{
	if (!q->finished) {
		if (!is_done(q->r))
			Py_RETURN_FALSE;
		finish(q); /* unless another thread waits: it finishes */
	}
	Py_RETURN_TRUE;
}

static PyObject *req_exception(struct pyrequest *q, PyObject *unused)
{
	PyObject *exc, *type, *tb;

	if (!q->finished) {
		if (!is_done(q->r)) {
			PyErr_Format(PyExc_ValueError, "%s is still in flight: wait() first",
				     q->what);
			return NULL;
		}
		finish(q);
	}
	if (!status_of(q))
		Py_RETURN_NONE;
	result(q);
	PyErr_Fetch(&type, &exc, &tb);
	PyErr_NormalizeException(&type, &exc, &tb);
	Py_XDECREF(type);
	Py_XDECREF(tb);
	return exc;
}

static void req_dealloc(struct pyrequest *q)
{
	if (!q->finished) {
		if (is_done(q->r)) {
			finish(q);
		} else {
			/* still in flight: the worker keeps its buffers until the
			 * library called back, then frees it */
			q->r->orphan = 1;
			q->pw->norphans++;
		}
	}
	Py_DECREF(q->pw);
	PyObject_Free(q);
}

static PyObject *req_repr(struct pyrequest *q)
{
	const char *state;

	if (q->finished)
		state = q->status ? rps_strerror(q->status) : "done";
	else
		state = is_done(q->r) ? "complete, not waited for" : "in flight";
	return PyUnicode_FromFormat("<rdmaps.Request %s: %s>", q->what, state);
}

static PyMethodDef req_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))req_wait, METH_VARARGS | METH_KEYWORDS,
     "wait($self, /, timeout=None)\n--\n\n"
     "Wait until the request completed. Releases the GIL while waiting (over\n"
     "RDMA it first spins RDMAPS_WAIT_SPIN_US, 200 us, as rps_req_wait does;\n"
     "then it sleeps), and checks for signals every 50 ms, so Ctrl-C raises\n"
     "KeyboardInterrupt at once (the request stays in flight; wait again, or\n"
     "drop it: its buffers are kept until the library is done with them).\n\n"
     "timeout: seconds, None = until complete. Raises rdmaps.TimeoutError\n"
     "when it passes (the request goes on: wait again). Raises the request's\n"
     "error when it failed: rdmaps.ConnectionError (a server connection broke\n"
     "or the server died), rdmaps.TimeoutError, or another rdmaps.Error with\n"
     "the errno and the library's words. Waiting again on a completed\n"
     "request returns (or raises) the same at once."},
    {"done", (PyCFunction)req_done, METH_NOARGS,
     "done($self, /)\n--\n\n"
     "True when the request completed (successfully or not); never blocks.\n"
     "Once True, the buffers are released; wait() gives the outcome."},
    {"exception", (PyCFunction)req_exception, METH_NOARGS,
     "exception($self, /)\n--\n\n"
     "The error of a completed request (None if it succeeded). ValueError\n"
     "while it is still in flight."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject rps_py_request_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rdmaps.Request",
    .tp_basicsize = sizeof(struct pyrequest),
    .tp_dealloc = (destructor)req_dealloc,
    .tp_repr = (reprfunc)req_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An asynchronous push, pull or pushpull in flight.\n\n"
	      "Made by Worker.push/pull/pushpull, never directly. It holds the\n"
	      "buffers it was given until it completes, so dropping the arrays (or\n"
	      "the request itself) early is safe: the memory is released only when\n"
	      "the library is done with it. Methods: wait(timeout=None), done(),\n"
	      "exception().",
    .tp_methods = req_methods,
};
