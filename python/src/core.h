/* rdmaps._core: the CPython binding of the worker API (<rdmaps/worker.h>).
 *
 * Written against the public API only. Shared declarations of the module's
 * files:
 *   module.c   module init, errors (rdmaps.errors), small helpers
 *   worker.c   the Worker type: create, close, properties, blocking calls
 *   ops.c      push / pull / pushpull: buffers in, one request out
 *   collective.c  allreduce, local_pushpull, set_compression, wire_stats
 *   request.c  the Request type and the C completion record (struct pyreq)
 *   bufs.c     Python buffers -> float32 memory, checked per key
 *   reg.c      the Registration type (rps_worker_register)
 *   barrier.c  barrier() run by a thread, so that Ctrl-C can interrupt the wait
 *   join.c     Worker(): rps_worker_create from a thread, so Ctrl-C interrupts it
 *   report.c   Worker.report: a figure for the dashboard (rps_worker_report)
 *   spec.c     initialiser and optimizer specs from Python values
 *   server.c   InProcessServer: an rdmaps server run by a thread of this process
 *
 * Requests use the completion-callback calls (rps_worker_push_cb /
 * pull_cb): a callback only touches a struct pyreq (no Python object, no
 * GIL), so a Request dropped before completion is safe: its buffers stay
 * held by the pyreq until the callback fired, then the worker releases them
 * (under the GIL) at its next call or at close.
 */
#ifndef RPS_PY_CORE_H
#define RPS_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <rdmaps/rdmaps.h>

/* One Python buffer held for the library. */
struct pybuf {
	Py_buffer view;
	float *data;
	size_t nelem;
};

struct pyworker;
struct pybarrier;

/* The C side of a request: one or more library requests (segments). */
struct pyreq {
	struct pyreq *prev, *next; /* in the worker's list, under the GIL */
	struct pyworker *pw;
	int remaining;	 /* callbacks to come (+1 while submitting); pw->mu */
	int status;	 /* first error; pw->mu */
	atomic_int done; /* set last by the completing callback */
	int orphan;	 /* its Request is gone: the worker frees it */
	int nbufs;
	struct pybuf *bufs;
	rps_key_t *keys; /* the segments' keys and lengths, back to back */
	size_t *lens;
	size_t nkeys;
	const char *what; /* "push", "pull", "pushpull" */
};

struct pyworker {
	PyObject_HEAD struct rps_worker *w;
	pthread_mutex_t mu; /* pyreq remaining/status */
	pthread_cond_t cv;  /* a pyreq completed */
	struct pyreq head;  /* every pyreq not freed yet (live and orphans) */
	int norphans;
	int active;		   /* calls using w without the GIL */
	int background;		   /* barrier threads still running (pw->mu) */
	struct pybarrier *barrier; /* a barrier left by Ctrl-C, still running */
	int closed;
	uint64_t spin_ns;   /* Request.wait spins this long before sleeping (RDMA) */
	PyObject *declared; /* dict: key -> declared length */
	PyObject *regs;	    /* list of Registration objects */
	PyObject *weakrefs;
};

extern PyTypeObject rps_py_worker_type;
extern PyTypeObject rps_py_request_type;
extern PyTypeObject rps_py_registration_type;
extern PyTypeObject rps_py_server_type;

/* module.c */
/* Raise the rdmaps.errors exception for status (negative errno), message
 * "what: text". Returns NULL. */
PyObject *rps_py_raise(int status, const char *fmt, ...);
/* Parse a key (int >= 0); -1 with an exception. */
int rps_py_key(PyObject *o, rps_key_t *key_p);
/* keys: an int or a sequence of ints -> new array (PyMem_Malloc) of *n_p;
 * *single_p = 1 for an int. -1 with an exception. */
int rps_py_keys(PyObject *o, rps_key_t **keys_p, size_t *n_p, int *single_p);
/* Sleep ms without the GIL. */
void rps_py_nap_ms(int ms);

/* worker.c */
/* Enter a call that uses pw->w without the GIL: -1 (exception) if closed. */
int rps_py_enter(struct pyworker *pw);
void rps_py_leave(struct pyworker *pw);
/* The declared length of key, or -1 with ValueError naming it. */
Py_ssize_t rps_py_declared_len(struct pyworker *pw, rps_key_t key);
/* keys (an int or a sequence of ints) -> a new array (PyMem_Malloc) of *n_p
 * keys and, if lens_p, of their declared lengths; -1 with ValueError naming
 * the first key not declared through this worker. */
int rps_py_keys_declared(struct pyworker *pw, PyObject *kobj, rps_key_t **keys_p, size_t **lens_p,
			 size_t *n_p);

/* bufs.c */
/* Acquire obj as a C-contiguous float32 buffer (writable for pulls).
 * key_desc names the key(s) in messages. -1 with TypeError. */
int rps_py_buf_get(PyObject *obj, int writable, const char *key_desc, struct pybuf *b);
void rps_py_buf_release(struct pybuf *b);

/* wait.c */
#define RPS_PY_WAIT_SLICE_MS 50 /* waits check signals (Ctrl-C) this often */
/* Wait until *flag (guarded by mu, signalled on cv) is set, in slices of
 * RPS_PY_WAIT_SLICE_MS with the GIL released, checking signals between
 * them. 0: set; -1: a signal handler raised (KeyboardInterrupt). */
int rps_py_wait_flag(pthread_mutex_t *mu, pthread_cond_t *cv, const int *flag);

/* request.c */
/* The spin of Request.wait: RDMAPS_WAIT_SPIN_US of the configuration (the
 * library's default 200 us when it cannot be read), at most one slice. */
uint64_t rps_py_wait_spin_ns(void);
struct pyreq *rps_py_pyreq_new(struct pyworker *pw, int nbufs, size_t nkeys, const char *what);
/* Free a pyreq that never went to the library (no sub-request). */
void rps_py_pyreq_discard(struct pyreq *r);
void rps_py_pyreq_link(struct pyreq *r);
/* The library's callback: arg is a struct pyreq. */
void rps_py_pyreq_cb(int status, void *arg);
/* Count n sub-requests that will never call back (submission failed or not
 * made) and drop the submitter's guard. */
void rps_py_pyreq_sealed(struct pyreq *r, int unsubmitted, int status);
/* A new Request object owning r. */
PyObject *rps_py_request_new(struct pyworker *pw, struct pyreq *r);
/* Under the GIL: free completed orphans. */
void rps_py_reap_orphans(struct pyworker *pw);
/* Under the GIL, after rps_worker_destroy: every pyreq completes
 * (-ECANCELED if the library never called back); orphans freed. */
void rps_py_requests_closed(struct pyworker *pw);
/* Wait (GIL released: first spinning for pw->spin_ns, then sleeping in
 * slices, signals checked) until r is done or the deadline passes. 0 done,
 * 1 deadline, -1 exception (KeyboardInterrupt). */
int rps_py_pyreq_wait(struct pyreq *r, double timeout_s);

/* ops.c */
PyObject *rps_py_push(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw);
PyObject *rps_py_pull(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw);
PyObject *rps_py_pushpull(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw);
PyObject *rps_py_assign(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw);

/* A list or tuple of one buffer: that buffer; anything else: o. */
PyObject *rps_py_one_of(PyObject *o);
/* How many buffers vobj gives for n keys: 1 (single key, or one flat
 * buffer), or n for a list/tuple of n; -1 with ValueError when a list or
 * tuple does not hold n. */
int rps_py_nbufs(PyObject *vobj, size_t n, int single);

/* collective.c */
PyObject *rps_py_allreduce(PyObject *self, PyObject *args, PyObject *kw);
PyObject *rps_py_local_pushpull(PyObject *self, PyObject *args, PyObject *kw);
PyObject *rps_py_set_compression(PyObject *self, PyObject *args, PyObject *kw);
/* pullprec.c */
PyObject *rps_py_set_pull_precision(PyObject *self, PyObject *args, PyObject *kw);
PyObject *rps_py_wire_stats(PyObject *self, PyObject *arg);

/* barrier.c */
PyObject *rps_py_barrier(PyObject *self, PyObject *unused);
/* Under the GIL, before rps_worker_destroy: wait for barrier threads. */
void rps_py_barriers_closed(struct pyworker *pw);

/* join.c */
/* rps_worker_create from a thread, waited for in slices: 0 or the
 * library's error (*w_p set on 0); -1 with an exception (KeyboardInterrupt:
 * the thread destroys the worker it gets). Called with the GIL. */
int rps_py_join(const struct rps_worker_opts *o, struct rps_worker **w_p);

/* report.c */
PyObject *rps_py_report(PyObject *self, PyObject *args, PyObject *kw);

/* reg.c */
PyObject *rps_py_register(PyObject *self, PyObject *arg);
/* At close: forget every registration (the worker is destroyed). */
void rps_py_regs_closed(struct pyworker *pw);

/* spec.c */
/* None or (kind, a, b, seed) -> *init; *use_p = 0 for None. */
int rps_py_init_spec(PyObject *o, struct rps_init *init, int *use_p);
/* None or a dict of rps_optim_opts fields -> *opts; *use_p. */
int rps_py_optim_spec(PyObject *o, struct rps_optim_opts *opts, int *use_p);

#endif
