/* The Worker type: create, close, what it is, and the blocking calls
 * (declare, clock, barrier, models, checkpoint). Every blocking call
 * releases the GIL. */
#include "core.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define W(self) ((struct pyworker *)(self))

int rps_py_enter(struct pyworker *pw)
{
	if (pw->closed || !pw->w) {
		PyErr_SetString(PyExc_ValueError, "the worker is closed");
		return -1;
	}
	rps_py_reap_orphans(pw);
	pw->active++;
	return 0;
}

void rps_py_leave(struct pyworker *pw)
{
	pw->active--;
}

Py_ssize_t rps_py_declared_len(struct pyworker *pw, rps_key_t key)
{
	PyObject *k = PyLong_FromUnsignedLongLong(key), *v;
	Py_ssize_t n;

	if (!k)
		return -1;
	v = PyDict_GetItemWithError(pw->declared, k);
	Py_DECREF(k);
	if (!v) {
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_ValueError,
				     "key %llu was not declared through this worker: call "
				     "declare([%llu], [length]) first",
				     (unsigned long long)key, (unsigned long long)key);
		return -1;
	}
	n = PyLong_AsSsize_t(v);
	return n;
}

static PyObject *worker_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	struct pyworker *pw = (struct pyworker *)type->tp_alloc(type, 0);

	if (!pw)
		return NULL;
	pthread_mutex_init(&pw->mu, NULL);
	pthread_cond_init(&pw->cv, NULL);
	pw->head.next = pw->head.prev = &pw->head;
	pw->closed = 1; /* until __init__ connected */
	pw->declared = PyDict_New();
	pw->regs = PyList_New(0);
	if (!pw->declared || !pw->regs) {
		Py_DECREF(pw);
		return NULL;
	}
	return (PyObject *)pw;
}

static int opt_str(PyObject *o, const char *name, const char **s_p)
{
	if (o == Py_None) {
		*s_p = NULL;
		return 0;
	}
	if (!PyUnicode_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s: a str or None, got %.100s", name,
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	*s_p = PyUnicode_AsUTF8(o);
	return *s_p ? 0 : -1;
}

static int worker_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"scheduler", "transport", "secret", "timeout", NULL};
	PyObject *sched = Py_None, *transport = Py_None, *secret = Py_None, *tobj = Py_None;
	struct pyworker *pw = W(self);
	struct rps_worker_opts o;
	struct rps_worker *w = NULL;
	const char *s;
	int rc;

	if (pw->w) {
		PyErr_SetString(PyExc_RuntimeError, "Worker.__init__ called twice");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOO:Worker", names, &sched, &transport,
					 &secret, &tobj))
		return -1;
	rps_worker_opts_init(&o);
	if (opt_str(sched, "scheduler", &s))
		return -1;
	o.scheduler = s;
	if (opt_str(transport, "transport", &s))
		return -1;
	if (s && strcmp(s, "tcp") != 0 && strcmp(s, "rdma") != 0) {
		PyErr_Format(PyExc_ValueError, "transport: 'tcp' or 'rdma', got '%s'", s);
		return -1;
	}
	o.transport = s;
	if (opt_str(secret, "secret", &s))
		return -1;
	o.secret = s;
	if (tobj != Py_None) {
		double t = PyFloat_AsDouble(tobj);

		if (t == -1 && PyErr_Occurred())
			return -1;
		if (!(t > 0) || t > 2e6) {
			PyErr_SetString(PyExc_ValueError,
					"timeout: seconds > 0 (connect, rendezvous and request "
					"timeout), or None for RDMAPS_TIMEOUT_MS");
			return -1;
		}
		o.timeout_ms = (int)ceil(t * 1000);
	}
	rc = rps_py_join(&o, &w);
	if (rc == -1 && PyErr_Occurred())
		return -1; /* KeyboardInterrupt */
	if (rc) {
		rps_py_raise(rc, "joining the job (scheduler %s)",
			     o.scheduler ? o.scheduler : "from RDMAPS_SCHEDULER");
		return -1;
	}
	pw->w = w;
	/* as the library: its waiters spin only where they can reap (RDMA);
	 * over TCP both sleep until the progress thread completes the request
	 * (a spin there measured slower: docs/python.md) */
	pw->spin_ns = strcmp(rps_worker_transport(w), "rdma") == 0 ? rps_py_wait_spin_ns() : 0;
	pw->closed = 0;
	return 0;
}

static void do_close(struct pyworker *pw)
{
	struct rps_worker *w = pw->w;

	if (!w)
		return;
	pw->closed = 1;
	/* other threads still inside a call (a barrier, a submission) */
	while (pw->active > 0)
		rps_py_nap_ms(5);
	rps_py_barriers_closed(pw);
	Py_BEGIN_ALLOW_THREADS
		rps_worker_destroy(w); /* waits for requests in flight, then fails them */
	Py_END_ALLOW_THREADS
	pw->w = NULL;
	rps_py_requests_closed(pw);
	rps_py_regs_closed(pw);
}

static PyObject *worker_close(PyObject *self, PyObject *unused)
{
	do_close(W(self));
	Py_RETURN_NONE;
}

static PyObject *worker_enter(PyObject *self, PyObject *unused)
{
	if (rps_py_enter(W(self)))
		return NULL;
	rps_py_leave(W(self));
	Py_INCREF(self);
	return self;
}

static PyObject *worker_exit(PyObject *self, PyObject *args)
{
	do_close(W(self));
	Py_RETURN_FALSE;
}

static void worker_dealloc(PyObject *self)
{
	struct pyworker *pw = W(self);

	PyObject_GC_UnTrack(self);
	if (pw->weakrefs)
		PyObject_ClearWeakRefs(self);
	do_close(pw);
	Py_CLEAR(pw->declared);
	Py_CLEAR(pw->regs);
	pthread_cond_destroy(&pw->cv);
	pthread_mutex_destroy(&pw->mu);
	Py_TYPE(self)->tp_free(self);
}

static int worker_traverse(PyObject *self, visitproc visit, void *arg)
{
	Py_VISIT(W(self)->regs);
	Py_VISIT(Py_TYPE(self));
	return 0;
}

static int worker_clear(PyObject *self)
{
	/* registrations point back to the worker; close() forgets them */
	do_close(W(self));
	Py_CLEAR(W(self)->regs);
	return 0;
}

/* ---- blocking calls ---- */

/* Run expr (an int) with the GIL released, as a call that uses pw->w. */
#define CALL(pw, rc, expr)                                                                         \
	do {                                                                                       \
		PyThreadState *_ts;                                                                \
		if (rps_py_enter(pw))                                                              \
			return NULL;                                                               \
		_ts = PyEval_SaveThread();                                                         \
		(rc) = (expr);                                                                     \
		PyEval_RestoreThread(_ts);                                                         \
		rps_py_leave(pw);                                                                  \
	} while (0)

static PyObject *worker_clock(PyObject *self, PyObject *unused)
{
	struct pyworker *pw = W(self);
	int rc;

	CALL(pw, rc, rps_worker_clock(pw->w));
	if (rc)
		return rps_py_raise(rc, "clock");
	Py_RETURN_NONE;
}

/* keys and lengths: (sequence of ints, sequence of ints) of one length. */
static int keys_lens(PyObject *kobj, PyObject *lobj, rps_key_t **keys_p, size_t **lens_p,
		     size_t *n_p)
{
	PyObject *seq;
	size_t n, *lens;
	int single;

	if (rps_py_keys(kobj, keys_p, &n, &single))
		return -1;
	seq = PySequence_Fast(lobj, "sizes: a sequence of ints, one per key");
	if (!seq)
		goto err_keys;
	if ((size_t)PySequence_Fast_GET_SIZE(seq) != n) {
		PyErr_Format(PyExc_ValueError, "%zu keys but %zd sizes: give one size per key", n,
			     PySequence_Fast_GET_SIZE(seq));
		goto err_seq;
	}
	lens = PyMem_Malloc(n * sizeof(*lens));
	if (!lens) {
		PyErr_NoMemory();
		goto err_seq;
	}
	for (size_t i = 0; i < n; i++) {
		PyObject *it = PyNumber_Index(PySequence_Fast_GET_ITEM(seq, i));
		Py_ssize_t v = it ? PyLong_AsSsize_t(it) : -1;

		Py_XDECREF(it);
		if (v <= 0) {
			if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError) ||
			    PyErr_ExceptionMatches(PyExc_TypeError)) {
				PyErr_Clear();
				PyErr_Format(PyExc_ValueError,
					     "key %llu: size must be an int > 0 (float32 "
					     "elements), got %R",
					     (unsigned long long)(*keys_p)[i],
					     PySequence_Fast_GET_ITEM(seq, i));
			}
			PyMem_Free(lens);
			goto err_seq;
		}
		lens[i] = (size_t)v;
	}
	Py_DECREF(seq);
	*lens_p = lens;
	*n_p = n;
	return 0;
err_seq:
	Py_DECREF(seq);
err_keys:
	PyMem_Free(*keys_p);
	return -1;
}

static PyObject *worker_declare(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"keys", "sizes", "init", "optimizer", NULL};
	PyObject *kobj, *lobj, *iobj = Py_None, *oobj = Py_None;
	struct pyworker *pw = W(self);
	struct rps_optim_opts opts;
	struct rps_init init;
	rps_key_t *keys;
	size_t *lens, n;
	int use_init, use_opt, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO:_declare", names, &kobj, &lobj, &iobj,
					 &oobj))
		return NULL;
	if (rps_py_init_spec(iobj, &init, &use_init) || rps_py_optim_spec(oobj, &opts, &use_opt))
		return NULL;
	if (keys_lens(kobj, lobj, &keys, &lens, &n))
		return NULL;
	if (rps_py_enter(pw))
		goto out_free;
	Py_BEGIN_ALLOW_THREADS
		rc = rps_worker_declare_opt(pw->w, keys, lens, n, use_init ? &init : NULL,
					    use_opt ? &opts : NULL);
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	if (rc) {
		if (rc == -EEXIST)
			rps_py_raise(rc,
				     "declare: a key exists with another length (key %llu "
				     "of %zu elements, or one of the %zu keys)",
				     (unsigned long long)keys[0], lens[0], n);
		else if (rc == -EINVAL && use_opt)
			rps_py_raise(rc,
				     "declare: the optimizer spec was refused (the reason "
				     "is logged on stderr: another spec for a key that has one, "
				     "or a key already trained with the default)");
		else
			rps_py_raise(rc, "declare of %zu key(s) (%llu, ...)", n,
				     (unsigned long long)keys[0]);
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		PyObject *k = PyLong_FromUnsignedLongLong(keys[i]);
		PyObject *v = PyLong_FromSize_t(lens[i]);

		if (!k || !v || PyDict_SetItem(pw->declared, k, v) < 0) {
			Py_XDECREF(k);
			Py_XDECREF(v);
			goto out_free;
		}
		Py_DECREF(k);
		Py_DECREF(v);
	}
	PyMem_Free(keys);
	PyMem_Free(lens);
	Py_RETURN_NONE;
out_free:
	PyMem_Free(keys);
	PyMem_Free(lens);
	return NULL;
}

static PyObject *worker_set_optimizer(PyObject *self, PyObject *args)
{
	PyObject *kobj, *oobj;
	struct pyworker *pw = W(self);
	struct rps_optim_opts opts;
	rps_key_t *keys;
	size_t n;
	int single, use, rc;

	if (!PyArg_ParseTuple(args, "OO:_set_optimizer", &kobj, &oobj))
		return NULL;
	if (rps_py_optim_spec(oobj, &opts, &use))
		return NULL;
	if (!use) {
		PyErr_SetString(PyExc_ValueError, "set_optimizer: give an optimizer spec");
		return NULL;
	}
	if (rps_py_keys(kobj, &keys, &n, &single))
		return NULL;
	if (rps_py_enter(pw)) {
		PyMem_Free(keys);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
		rc = rps_worker_set_optimizer(pw->w, keys, n, &opts);
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	if (rc) {
		rps_py_raise(rc, "set_optimizer of %zu key(s) (%llu, ...)%s", n,
			     (unsigned long long)keys[0],
			     rc == -ENOENT ? ": a key not declared through this worker" : "");
		PyMem_Free(keys);
		return NULL;
	}
	PyMem_Free(keys);
	Py_RETURN_NONE;
}

int rps_py_keys_declared(struct pyworker *pw, PyObject *kobj, rps_key_t **keys_p, size_t **lens_p,
			 size_t *n_p)
{
	size_t n, *lens = NULL;
	int single;

	if (rps_py_keys(kobj, keys_p, &n, &single))
		return -1;
	if (lens_p) {
		lens = PyMem_Malloc(n * sizeof(*lens));
		if (!lens) {
			PyMem_Free(*keys_p);
			PyErr_NoMemory();
			return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		Py_ssize_t l = rps_py_declared_len(pw, (*keys_p)[i]);

		if (l < 0) {
			PyMem_Free(lens);
			PyMem_Free(*keys_p);
			return -1;
		}
		if (lens)
			lens[i] = (size_t)l;
	}
	if (lens_p)
		*lens_p = lens;
	*n_p = n;
	return 0;
}

static PyObject *model_call(PyObject *self, PyObject *args, int load)
{
	PyObject *kobj, *path;
	struct pyworker *pw = W(self);
	rps_key_t *keys;
	size_t *lens, n;
	int rc;

	if (!PyArg_ParseTuple(args, load ? "OO&:load_model" : "OO&:save_model", &kobj,
			      PyUnicode_FSConverter, &path))
		return NULL;
	if (rps_py_keys_declared(pw, kobj, &keys, &lens, &n))
		goto out_path;
	if (rps_py_enter(pw))
		goto out_free;
	Py_BEGIN_ALLOW_THREADS
		if (load)
			rc = rps_worker_load_model(pw->w, keys, lens, n, PyBytes_AS_STRING(path));
		else
			rc = rps_worker_save_model(pw->w, keys, lens, n, PyBytes_AS_STRING(path));
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	if (rc) {
		rps_py_raise(rc, "%s %s (the reason is logged on stderr)",
			     load ? "load_model" : "save_model", PyBytes_AS_STRING(path));
		goto out_free;
	}
	PyMem_Free(keys);
	PyMem_Free(lens);
	Py_DECREF(path);
	Py_RETURN_NONE;
out_free:
	PyMem_Free(keys);
	PyMem_Free(lens);
out_path:
	Py_DECREF(path);
	return NULL;
}

static PyObject *worker_save_model(PyObject *self, PyObject *args)
{
	return model_call(self, args, 0);
}

static PyObject *worker_load_model(PyObject *self, PyObject *args)
{
	return model_call(self, args, 1);
}

static PyObject *worker_checkpoint(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"clock", "timeout", NULL};
	PyObject *cobj = Py_None, *tobj = Py_None;
	struct pyworker *pw = W(self);
	uint32_t clock = UINT32_MAX;
	int timeout_ms = 0, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:checkpoint", names, &cobj, &tobj))
		return NULL;
	if (cobj != Py_None) {
		unsigned long c = PyLong_AsUnsignedLong(cobj);

		if (PyErr_Occurred() || c > UINT32_MAX) {
			PyErr_Clear();
			PyErr_SetString(PyExc_ValueError, "clock: an int in [0, 2**32), or None "
							  "for at once");
			return NULL;
		}
		clock = (uint32_t)c;
	}
	if (tobj != Py_None) {
		double t = PyFloat_AsDouble(tobj);

		if (t == -1 && PyErr_Occurred())
			return NULL;
		if (!(t > 0) || t > 2e6) {
			PyErr_SetString(PyExc_ValueError, "timeout: seconds > 0, or None");
			return NULL;
		}
		timeout_ms = (int)ceil(t * 1000);
	}
	CALL(pw, rc, rps_worker_checkpoint(pw->w, clock, timeout_ms));
	if (rc)
		return rps_py_raise(rc, "checkpoint");
	Py_RETURN_NONE;
}

static PyObject *worker_stats(PyObject *self, PyObject *unused)
{
	struct pyworker *pw = W(self);
	struct rps_worker_stats st = {.field_mask = RPS_WORKER_STAT_ALL};
	int rc;

	if (rps_py_enter(pw))
		return NULL;
	rc = rps_worker_stats(pw->w, &st);
	rps_py_leave(pw);
	if (rc)
		return rps_py_raise(rc, "stats");
	return Py_BuildValue("{sKsKsKsKsKsKsKsK}", "pulls", st.pulls, "pushes", st.pushes,
			     "bytes_out", st.bytes_out, "bytes_in", st.bytes_in, "torn_retries",
			     st.torn_retries, "direct_pulls", st.direct_pulls, "direct_sleeps",
			     st.direct_sleeps, "direct_naps", st.direct_naps);
}

static PyObject *worker_declared_len(PyObject *self, PyObject *arg)
{
	rps_key_t key;
	Py_ssize_t n;

	if (rps_py_key(arg, &key))
		return NULL;
	n = rps_py_declared_len(W(self), key);
	return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

/* ---- properties ---- */

static int open_or_raise(struct pyworker *pw)
{
	if (!pw->w) {
		PyErr_SetString(PyExc_ValueError, "the worker is closed");
		return -1;
	}
	return 0;
}

#define INT_GETTER(name, expr)                                                                     \
	static PyObject *get_##name(PyObject *self, void *c)                                       \
	{                                                                                          \
		struct rps_worker *w = W(self)->w;                                                 \
		if (open_or_raise(W(self)))                                                        \
			return NULL;                                                               \
		return PyLong_FromLongLong((long long)(expr));                                     \
	}

INT_GETTER(rank, rps_worker_rank(w))
INT_GETTER(num_workers, rps_worker_num_workers(w))
INT_GETTER(num_workers_gen, rps_worker_num_workers_gen(w))
INT_GETTER(num_servers, rps_worker_num_servers(w))
INT_GETTER(clock_value, rps_worker_clock_value(w))
INT_GETTER(staleness_bound, rps_worker_staleness_bound(w))
INT_GETTER(max_staleness, rps_worker_max_staleness(w))
INT_GETTER(local_size, rps_worker_local_size(w))
INT_GETTER(local_leader, rps_worker_local_leader(w))

static PyObject *get_transport(PyObject *self, void *c)
{
	if (open_or_raise(W(self)))
		return NULL;
	return PyUnicode_FromString(rps_worker_transport(W(self)->w));
}

/* For tests: the spin of Request.wait (RDMAPS_WAIT_SPIN_US over RDMA, 0
 * over TCP), settable to exercise it on any transport. */
static PyObject *get_wait_spin_us(PyObject *self, void *c)
{
	return PyLong_FromUnsignedLongLong(W(self)->spin_ns / 1000u);
}

static int set_wait_spin_us(PyObject *self, PyObject *v, void *c)
{
	long us = v ? PyLong_AsLong(v) : -1;

	if (us == -1 && PyErr_Occurred())
		return -1;
	if (us < 0 || us > RPS_PY_WAIT_SLICE_MS * 1000L) {
		PyErr_Format(PyExc_ValueError, "_wait_spin_us: 0 .. %d microseconds",
			     RPS_PY_WAIT_SLICE_MS * 1000);
		return -1;
	}
	W(self)->spin_ns = (uint64_t)us * 1000u;
	return 0;
}

static PyObject *get_consistency(PyObject *self, void *c)
{
	if (open_or_raise(W(self)))
		return NULL;
	switch (rps_worker_consistency(W(self)->w)) {
	case RPS_BSP:
		return PyUnicode_FromString("bsp");
	case RPS_SSP:
		return PyUnicode_FromString("ssp");
	default:
		return PyUnicode_FromString("asp");
	}
}

static PyObject *get_closed(PyObject *self, void *c)
{
	return PyBool_FromLong(W(self)->w == NULL);
}

static PyObject *get_declared(PyObject *self, void *c)
{
	return PyDictProxy_New(W(self)->declared);
}

static PyGetSetDef worker_getset[] = {
    {"rank", get_rank, NULL, "This worker's rank, 0 .. num_workers - 1.", NULL},
    {"num_workers", get_num_workers, NULL,
     "Workers in the job now (grows when workers join a running job: RDMAPS_MAX_WORKERS).",
     NULL},
    {"num_workers_gen", get_num_workers_gen, NULL,
     "How many times num_workers grew since this worker joined (0 at first): split the data "
     "again when it changed.",
     NULL},
    {"num_servers", get_num_servers, NULL, "Servers in the job.", NULL},
    {"transport", get_transport, NULL, "'tcp' or 'rdma'.", NULL},
    {"_wait_spin_us", get_wait_spin_us, set_wait_spin_us,
     "For tests: how long Request.wait spins before it sleeps (microseconds).", NULL},
    {"clock_value", get_clock_value, NULL, "The current clock (iteration): clock() calls so far.",
     NULL},
    {"consistency", get_consistency, NULL,
     "The servers' consistency model: 'bsp', 'ssp' or 'asp' (RDMAPS_CONSISTENCY "
     "of the servers).",
     NULL},
    {"staleness_bound", get_staleness_bound, NULL,
     "The SSP bound s (RDMAPS_STALENESS of the servers); 0 under BSP and ASP.", NULL},
    {"max_staleness", get_max_staleness, NULL,
     "The largest staleness (clock lag) any pull of this worker saw so far: 0 under "
     "BSP, at most staleness_bound under SSP.",
     NULL},
    {"local_size", get_local_size, NULL,
     "After the first local_pushpull(): the job's workers on this host that\n"
     "aggregate together (1: alone, or RDMAPS_LOCAL_AGG=off). Before it: 1.",
     NULL},
    {"local_leader", get_local_leader, NULL,
     "After the first local_pushpull(): the rank that pushes and pulls for this\n"
     "host's workers (the lowest); this worker's rank when alone or before it.",
     NULL},
    {"closed", get_closed, NULL, "True after close().", NULL},
    {"declared", get_declared, NULL,
     "Read-only mapping key -> length (float32 elements) of the keys declared "
     "through this worker.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef worker_methods[] = {
    {"close", worker_close, METH_NOARGS,
     "close($self, /)\n--\n\n"
     "Leave the job: wait (up to the timeout) for requests in flight, fail the\n"
     "rest with ECANCELED, release every buffer and registration. Idempotent;\n"
     "also what leaving a `with` block and garbage collection do. A barrier\n"
     "left by Ctrl-C is waited for first (it uses the worker)."},
    {"__enter__", worker_enter, METH_NOARGS, NULL},
    {"__exit__", worker_exit, METH_VARARGS, NULL},
    {"_declare", (PyCFunction)(void (*)(void))worker_declare, METH_VARARGS | METH_KEYWORDS,
     "_declare(keys, sizes, init=None, optimizer=None): the C call; use declare()."},
    {"_set_optimizer", worker_set_optimizer, METH_VARARGS,
     "_set_optimizer(keys, spec_dict): the C call; use set_optimizer()."},
    {"push", (PyCFunction)(void (*)(void))rps_py_push, METH_FASTCALL | METH_KEYWORDS,
     "push($self, /, keys, grads)\n--\n\n-> Request. "
     "Send gradients for declared keys (asynchronous; wait() on the result).\n"
     "The servers add them into the keys' values with the keys' optimizer.\n\n"
     "keys: an int (one key) or a sequence of ints.\n"
     "grads: for one key, one buffer; for several keys, either a list/tuple\n"
     "  of buffers (one per key, in the keys' order) or ONE buffer holding\n"
     "  the keys back to back (like the C API).\n"
     "A buffer is any C-contiguous float32 array: numpy.ndarray, CPU\n"
     "torch.Tensor, memoryview, array.array('f'). It is read in place (no\n"
     "copy) until the request completes: do not change it before wait().\n"
     "Its number of elements must be the key's declared size (any shape).\n\n"
     "Raises (before anything is sent): ValueError naming the key and the\n"
     "declared size for a wrong length or an undeclared key; TypeError naming\n"
     "the key for another dtype, a non-contiguous array or a non-buffer.\n"
     "The returned Request's wait() raises transport errors (rdmaps.Error:\n"
     "ConnectionError, TimeoutError, ...). The push belongs to the current\n"
     "clock; clock() ends it."},
    {"pull", (PyCFunction)(void (*)(void))rps_py_pull, METH_FASTCALL | METH_KEYWORDS,
     "pull($self, /, keys, out)\n--\n\n-> Request. "
     "Fetch the keys' values into out (asynchronous; wait() on the result).\n"
     "Under BSP a pull at clock c sees exactly every worker's pushes of\n"
     "clocks < c; SSP at least those of clocks < c - s; ASP at least this\n"
     "worker's own.\n\n"
     "keys: an int or a sequence of ints.\n"
     "out: writable C-contiguous float32 buffer(s), as for push: one per key\n"
     "  (a list/tuple) or one holding the keys back to back. Written in place\n"
     "  (no copy); read it after wait(). Lengths must be the declared sizes.\n\n"
     "Raises ValueError / TypeError naming the key (see push); TypeError for\n"
     "a read-only buffer."},
    {"pushpull", (PyCFunction)(void (*)(void))rps_py_pushpull, METH_FASTCALL | METH_KEYWORDS,
     "pushpull($self, /, keys, grads, out)\n--\n\n-> Request. "
     "One training step: push grads at clock c, end clock c (clock()), then\n"
     "pull the values of clock c + 1 into out. grads and out as for push and\n"
     "pull (out must not overlap grads). The clock has ended when this call\n"
     "returns; wait() on the Request for the values."},
    {"assign", (PyCFunction)(void (*)(void))rps_py_assign, METH_FASTCALL | METH_KEYWORDS,
     "assign($self, /, keys, values)\n--\n\n"
     "Make values the keys' parameters on the servers (blocking; the GIL is\n"
     "released): every slice is ASSIGNED, its optimizer state starts afresh.\n"
     "An assignment belongs to no clock. values as for push (one buffer per\n"
     "key, or one holding the keys back to back). The rule (as load_model,\n"
     "which it uses through a temporary .npz in $TMPDIR): call it on ONE\n"
     "worker after declare and before any push; every worker then calls\n"
     "barrier() before its first pull, which sees these values. Typical:\n"
     "rank 0 assigns its initial model so that every worker starts from it."},
    {"allreduce", (PyCFunction)(void (*)(void))rps_py_allreduce, METH_VARARGS | METH_KEYWORDS,
     "allreduce($self, /, keys, bufs)\n--\n\n"
     "Ring all-reduce among the job's workers, beside the servers (no server\n"
     "takes part; keys need not be declared): every worker calls it with the\n"
     "same keys and lengths; on return bufs hold, in place, the element-wise\n"
     "SUM over all workers (divide by num_workers for the mean), the same bits\n"
     "on every worker. Blocking; releases the GIL; one call at a time per\n"
     "worker. With one worker: bufs unchanged.\n\n"
     "keys: an int or a sequence of ints (they name the tensors for the\n"
     "  check that every worker passed the same).\n"
     "bufs: writable C-contiguous float32 buffer(s) as for push: one per key\n"
     "  (a list/tuple; their lengths are the keys' lengths) or one holding\n"
     "  the keys back to back (then the keys must be declared, for their\n"
     "  lengths). A declared key's buffer must have its declared length.\n\n"
     "Raises TypeError / ValueError naming the key (dtype, contiguity, length)\n"
     "before anything is sent; rdmaps.InvalidArgumentError (a ValueError) on\n"
     "EVERY worker when the workers passed different keys or lengths;\n"
     "rdmaps.ConnectionError naming the rank when a worker died (the others\n"
     "get it too, not a hang); rdmaps.TimeoutError when nothing came from the\n"
     "left neighbour for the worker's timeout. After a failure the ring is not\n"
     "used again: later calls raise the same error (docs/allreduce.md)."},
    {"local_pushpull", (PyCFunction)(void (*)(void))rps_py_local_pushpull,
     METH_VARARGS | METH_KEYWORDS,
     "local_pushpull($self, /, keys, grads, outs)\n--\n\n"
     "One synchronous training step with aggregation on the host: the\n"
     "gradients of this host's workers are summed in shared memory, the host's\n"
     "leader (its lowest rank) pushes the sum, ends the clock and pulls the\n"
     "values of the next clock, which every worker of the host copies into\n"
     "outs. Under BSP outs are exactly what pushpull() would give. A\n"
     "collective: every worker of the job calls it, step after step, with the\n"
     "same declared keys; the first call is a barrier of all workers.\n"
     "Blocking; releases the GIL. RDMAPS_LOCAL_AGG=off: a plain pushpull.\n\n"
     "grads, outs: as for pushpull (one buffer per key, or one holding the\n"
     "keys back to back; the declared lengths; outs writable).\n"
     "Raises TypeError / ValueError naming the key; rdmaps.ConnectionError\n"
     "when a worker of this host died; rdmaps.TimeoutError when one did not\n"
     "contribute in time (docs/local-aggregation.md)."},
    {"set_pull_precision", (PyCFunction)(void (*)(void))rps_py_set_pull_precision,
     METH_VARARGS | METH_KEYWORDS,
     "set_pull_precision($self, /, keys, precision)\n--\n\n"
     "Pull the declared keys in 'fp32' (the default), 'fp16' or 'bf16' from now\n"
     "on: the servers keep a 2-byte copy rounded to nearest even from the\n"
     "float32 master, pulls read it (half the bytes) and widen it into the\n"
     "float32 buffers; the optimizer stays float32 (docs/compression.md\n"
     "\"Low-precision pulls\"). Blocking. Raises ValueError for another name\n"
     "or an undeclared key, rdmaps errors for a refusal (reason logged)."},
    {"set_compression", (PyCFunction)(void (*)(void))rps_py_set_compression,
     METH_VARARGS | METH_KEYWORDS,
     "set_compression($self, /, keys, codec, error_feedback=None)\n--\n\n"
     "Push the declared keys compressed from the next push on (local: nothing\n"
     "is sent). codec: 'none', 'fp16', 'bf16', 'sign', 'sign:BLOCK', 'topk:RATIO'\n"
     "or 'randk:RATIO' (RATIO a fraction in (0, 1], e.g. 'topk:0.01'), with\n"
     "',momentum=M' (momentum correction; the servers then run sgd) and, for\n"
     "topk/randk, ',warmup=STEPS,from=R0' (docs/compression.md): the names\n"
     "fmnist-train --compress takes. The servers widen to float32 before the\n"
     "sum or the optimizer; pulls stay float32. error_feedback: None (the\n"
     "codec's default: on for topk, randk, sign) or a bool. Setting a key again\n"
     "starts its residual afresh. Call it between pushes of those keys.\n"
     "Raises ValueError for an unknown codec or an undeclared key\n"
     "(docs/compression.md)."},
    {"wire_stats", rps_py_wire_stats, METH_O,
     "wire_stats($self, key, /)\n--\n\n-> dict. "
     "What the key's pushes put on the wire since it was declared: pushes\n"
     "(PUSH frames), raw_bytes (their elements as float32), data_bytes (their\n"
     "data as sent, compressed) and wire_bytes (whole frames)."},
    {"clock", worker_clock, METH_NOARGS,
     "clock($self, /)\n--\n\n"
     "End the current clock (iteration): every push made before belongs to it.\n"
     "Releases the GIL."},
    {"barrier", rps_py_barrier, METH_NOARGS,
     "barrier($self, /)\n--\n\n"
     "Wait until every live worker reached the barrier (releases the GIL).\n"
     "Ctrl-C raises KeyboardInterrupt at once; the barrier goes on, and the\n"
     "next barrier() call waits for that same barrier."},
    {"register", rps_py_register, METH_O,
     "register($self, buf, /)\n--\n\n-> Registration. "
     "Register a writable float32 buffer you pull into again and again (a\n"
     "model's parameters): over RDMA, pulls whose destination lies wholly in\n"
     "it are read straight into it instead of through a bounce buffer and a\n"
     "copy. Over TCP it changes nothing. The Registration holds the buffer\n"
     "(it cannot be freed while registered) until unregister() / close(),\n"
     "the end of a `with` block, or the worker's close(). Optional: every\n"
     "buffer can be pulled into without it. At most 64 per worker;\n"
     "rdmaps.Error EEXIST if it overlaps a registered one."},
    {"save_model", worker_save_model, METH_VARARGS,
     "save_model($self, keys, path, /)\n--\n\n"
     "Pull the declared keys at the current clock and write them to the .npz\n"
     "file path (one float32 array per key, named by the key in decimal)."},
    {"load_model", worker_load_model, METH_VARARGS,
     "load_model($self, keys, path, /)\n--\n\n"
     "Read the .npz file (checked first: every key present, float32, the\n"
     "declared size) and assign its values on the servers. Call it on ONE\n"
     "worker after declare and before any push; every worker then calls\n"
     "barrier() before its first pull."},
    {"checkpoint", (PyCFunction)(void (*)(void))worker_checkpoint, METH_VARARGS | METH_KEYWORDS,
     "checkpoint($self, /, clock=None, timeout=None)\n--\n\n"
     "Every shard of every live server writes a checkpoint (needs\n"
     "RDMAPS_CHECKPOINT_DIR on the servers). Under BSP with clock=c the files\n"
     "hold exactly the parameters after clocks < c."},
    {"report", (PyCFunction)(void (*)(void))rps_py_report, METH_VARARGS | METH_KEYWORDS,
     "report($self, /, name, value)\n--\n\n-> bool. "
     "Report a figure of the job (loss, test accuracy, samples/s, ...) to\n"
     "the scheduler, which keeps it as a curve of the dashboard (one curve\n"
     "per name and worker, points tagged with this worker's clock; the page\n"
     "of RDMAPS_METRICS_PORT, /api/state; docs/dashboard.md). One small\n"
     "message, no answer awaited: it does not wait for the scheduler.\n\n"
     "name: 1 to 23 characters of [A-Za-z0-9_.-] (\"loss\", \"test_accuracy\").\n"
     "value: a number (float, int, numpy scalar, one-element tensor); a\n"
     "  value that is not finite shows as a gap.\n\n"
     "Returns True when sent, False when dropped: at most 100 reports per\n"
     "second per worker are sent (RPS_WORKER_REPORT_RATE), further ones in\n"
     "the same second are dropped (report a few figures every ~0.25 s, as\n"
     "fmnist-train does). Raises ValueError for a bad name, TypeError for a\n"
     "value that is not a number, rdmaps.ConnectionError when the worker\n"
     "has no scheduler connection."},
    {"stats", worker_stats, METH_NOARGS,
     "stats($self, /)\n--\n\nThis worker's counters (pulls, pushes, bytes_out, bytes_in, ...)."},
    {"declared_size", worker_declared_len, METH_O,
     "declared_size($self, key, /)\n--\n\nThe declared length of key (float32 elements); "
     "ValueError if it was not declared through this worker."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject rps_py_worker_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rdmaps._core.Worker",
    .tp_basicsize = sizeof(struct pyworker),
    .tp_dealloc = worker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C core of rdmaps.Worker (use rdmaps.Worker).",
    .tp_traverse = worker_traverse,
    .tp_clear = worker_clear,
    .tp_weaklistoffset = offsetof(struct pyworker, weakrefs),
    .tp_methods = worker_methods,
    .tp_getset = worker_getset,
    .tp_init = worker_init,
    .tp_new = worker_new,
};
