/* Worker.report(name, value): rps_worker_report, a figure of the job for
 * the scheduler's dashboard (docs/dashboard.md).
 *
 * A metrics call: it never blocks on an answer, and a report over the
 * library's rate bound (RPS_WORKER_REPORT_RATE per second per worker,
 * -EAGAIN) is dropped and returns False rather than raising, so that a
 * training loop that reports too often loses points, not its run. Bad
 * names and values raise before anything is sent; a worker with no
 * scheduler connection raises rdmaps.ConnectionError. */
#include "core.h"

#include <errno.h>
#include <string.h>

#define NAME_MAX_CHARS 23 /* <rdmaps/worker.h>: 1 to 23 characters */

static int name_char_ok(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

/* The rule of <rdmaps/worker.h>, checked here so that the error is a
 * ValueError naming the name, not a line on stderr. */
static int check_name(PyObject *o, const char **name_p)
{
	Py_ssize_t n;
	const char *s;

	if (!PyUnicode_Check(o)) {
		PyErr_Format(PyExc_TypeError, "report: name is a str, got %.100s",
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	s = PyUnicode_AsUTF8AndSize(o, &n);
	if (!s)
		return -1;
	if (n < 1 || n > NAME_MAX_CHARS) {
		PyErr_Format(PyExc_ValueError,
			     "report: name %R has %zd characters; a name has 1 to %d characters "
			     "of [A-Za-z0-9_.-]",
			     o, n, NAME_MAX_CHARS);
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		if (!name_char_ok(s[i])) {
			PyErr_Format(PyExc_ValueError,
				     "report: name %R: a name has 1 to %d characters of "
				     "[A-Za-z0-9_.-] (e.g. \"loss\", \"test_accuracy\")",
				     o, NAME_MAX_CHARS);
			return -1;
		}
	}
	*name_p = s;
	return 0;
}

PyObject *rps_py_report(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"name", "value", NULL};
	struct pyworker *pw = (struct pyworker *)self;
	PyObject *vals[2];
	const char *name;
	PyThreadState *ts;
	double v;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:report", names, &vals[0], &vals[1]))
		return NULL;
	if (check_name(vals[0], &name))
		return NULL;
	/* floats, ints, numpy scalars, one-element tensors: anything with
	 * __float__ (or __index__) */
	v = PyFloat_AsDouble(vals[1]);
	if (v == -1.0 && PyErr_Occurred()) {
		PyErr_Format(PyExc_TypeError, "report %s: value is a number, got %.100s", name,
			     Py_TYPE(vals[1])->tp_name);
		return NULL;
	}
	if (rps_py_enter(pw))
		return NULL;
	ts = PyEval_SaveThread(); /* a control message: short, but a socket write */
	rc = rps_worker_report(pw->w, name, v);
	PyEval_RestoreThread(ts);
	rps_py_leave(pw);
	if (rc == -EAGAIN)
		Py_RETURN_FALSE; /* over the rate bound: dropped */
	if (rc == -ENOTCONN)
		return rps_py_raise(rc, "report %s: this worker has no scheduler connection", name);
	if (rc)
		return rps_py_raise(rc, "report %s", name);
	Py_RETURN_TRUE;
}
