/* Registration: a buffer registered with rps_worker_register, held (so it
 * cannot be freed) until rps_worker_unregister. The worker lists its
 * registrations and forgets them at close (destroying the worker releases
 * the transport's registrations). */
#include "core.h"

#include <errno.h>

struct pyreg {
	PyObject_HEAD struct pyworker *pw; /* NULL once unregistered */
	struct pybuf buf;
};

static void reg_forget(struct pyreg *g)
{
	struct pyworker *pw = g->pw;
	Py_ssize_t i;

	rps_py_buf_release(&g->buf);
	g->pw = NULL;
	if (pw && pw->regs) {
		for (i = 0; i < PyList_GET_SIZE(pw->regs); i++) {
			if (PyList_GET_ITEM(pw->regs, i) == (PyObject *)g) {
				PySequence_DelItem(pw->regs, i); /* may drop the last ref to g */
				break;
			}
		}
	}
	Py_XDECREF(pw);
}

PyObject *rps_py_register(PyObject *self, PyObject *arg)
{
	struct pyworker *pw = (struct pyworker *)self;
	struct pyreg *g;
	int rc;

	if (pw->closed || !pw->w) {
		PyErr_SetString(PyExc_ValueError, "the worker is closed");
		return NULL;
	}
	g = PyObject_GC_New(struct pyreg, &rps_py_registration_type);
	if (!g)
		return NULL;
	g->pw = NULL;
	memset(&g->buf, 0, sizeof(g->buf));
	if (rps_py_buf_get(arg, 1, "register", &g->buf))
		goto err;
	if (g->buf.nelem == 0) {
		PyErr_SetString(PyExc_ValueError, "register: the buffer is empty");
		goto err;
	}
	if (rps_py_enter(pw))
		goto err;
	Py_BEGIN_ALLOW_THREADS
		rc = rps_worker_register(pw->w, g->buf.data, g->buf.nelem * sizeof(float));
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	if (rc) {
		rps_py_raise(rc, "register %zu bytes at %p%s", g->buf.nelem * sizeof(float),
			     (void *)g->buf.data,
			     rc == -EEXIST   ? " (it overlaps a registered buffer)"
			     : rc == -ENOSPC ? " (64 buffers registered already)"
			     : rc == -ENOMEM ? " (locked memory limit: ulimit -l, docs/rdma.md)"
					     : "");
		goto err;
	}
	Py_INCREF(pw);
	g->pw = pw;
	PyObject_GC_Track((PyObject *)g);
	if (PyList_Append(pw->regs, (PyObject *)g) < 0) {
		rps_worker_unregister(pw->w, g->buf.data);
		goto err;
	}
	return (PyObject *)g;
err:
	reg_forget(g);
	Py_DECREF(g);
	return NULL;
}

static PyObject *reg_unregister(PyObject *self, PyObject *unused)
{
	struct pyreg *g = (struct pyreg *)self;
	struct pyworker *pw = g->pw;
	int rc;

	if (!pw)
		Py_RETURN_NONE;
	if (pw->w) {
		if (rps_py_enter(pw))
			return NULL;
		Py_BEGIN_ALLOW_THREADS
			rc = rps_worker_unregister(pw->w, g->buf.data);
		Py_END_ALLOW_THREADS
		rps_py_leave(pw);
		if (rc)
			return rps_py_raise(rc, "unregister%s",
					    rc == -EBUSY ? " (a pull into the buffer is in flight: "
							   "wait for it first)"
							 : "");
	}
	Py_INCREF(self);
	reg_forget(g);
	Py_DECREF(self);
	Py_RETURN_NONE;
}

void rps_py_regs_closed(struct pyworker *pw)
{
	PyObject *regs = pw->regs;

	if (!regs)
		return;
	while (PyList_GET_SIZE(regs) > 0) {
		struct pyreg *g = (struct pyreg *)PyList_GET_ITEM(regs, 0);

		Py_INCREF(g);
		PySequence_DelItem(regs, 0);
		rps_py_buf_release(&g->buf);
		Py_CLEAR(g->pw);
		Py_DECREF(g);
	}
}

static PyObject *reg_enter(PyObject *self, PyObject *unused)
{
	Py_INCREF(self);
	return self;
}

static PyObject *reg_exit(PyObject *self, PyObject *args)
{
	PyObject *r = reg_unregister(self, NULL);

	if (!r)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;
}

static void reg_dealloc(PyObject *self)
{
	struct pyreg *g = (struct pyreg *)self;

	/* a registered one is listed by its worker: it is not freed while
	 * registered, unless the worker already closed (or both are garbage:
	 * the worker's close releases the registration) */
	PyObject_GC_UnTrack(self);
	rps_py_buf_release(&g->buf);
	Py_CLEAR(g->pw);
	PyObject_GC_Del(self);
}

/* worker -> its list -> registration -> worker: a cycle the collector sees */
static int reg_traverse(PyObject *self, visitproc visit, void *arg)
{
	Py_VISIT(((struct pyreg *)self)->pw);
	return 0;
}

static int reg_clear(PyObject *self)
{
	/* only when the worker is garbage too: its close forgets us */
	Py_CLEAR(((struct pyreg *)self)->pw);
	return 0;
}

static PyObject *reg_registered(PyObject *self, void *c)
{
	return PyBool_FromLong(((struct pyreg *)self)->pw != NULL);
}

static PyObject *reg_nbytes(PyObject *self, void *c)
{
	return PyLong_FromSize_t(((struct pyreg *)self)->buf.nelem * sizeof(float));
}

static PyMethodDef reg_methods[] = {
    {"unregister", reg_unregister, METH_NOARGS,
     "unregister() -> None\n\nUnregister and release the buffer (idempotent). "
     "rdmaps.Error EBUSY while a pull into it is in flight: wait for it first."},
    {"close", reg_unregister, METH_NOARGS, "The same as unregister()."},
    {"__enter__", reg_enter, METH_NOARGS, NULL},
    {"__exit__", reg_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef reg_getset[] = {
    {"registered", reg_registered, NULL, "True until unregistered.", NULL},
    {"nbytes", reg_nbytes, NULL, "Bytes registered.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject rps_py_registration_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rdmaps.Registration",
    .tp_basicsize = sizeof(struct pyreg),
    .tp_dealloc = reg_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = reg_traverse,
    .tp_clear = reg_clear,
    .tp_doc = "A buffer registered for direct RDMA pulls (Worker.register). A context "
	      "manager: unregisters on exit.",
    .tp_methods = reg_methods,
    .tp_getset = reg_getset,
};
