/* rdmaps._core: module init, errors, key parsing. */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static PyObject *error_for; /* rdmaps.errors.error_for(errno, message) */

PyObject *rps_py_raise(int status, const char *fmt, ...)
{
	char what[512], msg[768];
	PyObject *exc;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (status > 0)
		status = -status;
	snprintf(msg, sizeof(msg), "%s: %s", what, rps_strerror(status));
	exc = PyObject_CallFunction(error_for, "is", -status, msg);
	if (!exc)
		return NULL;
	PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
	Py_DECREF(exc);
	return NULL;
}

static PyObject *zero_obj(void)
{
	static PyObject *zero;

	if (!zero)
		zero = PyLong_FromLong(0);
	return zero;
}

int rps_py_key(PyObject *o, rps_key_t *key_p)
{
	PyObject *i = PyNumber_Index(o);
	unsigned long long k;

	if (!i) {
		PyErr_Format(PyExc_TypeError, "keys are ints, got %.100s", Py_TYPE(o)->tp_name);
		return -1;
	}
	if (PyObject_RichCompareBool(i, zero_obj(), Py_LT) == 1) {
		PyErr_Format(PyExc_ValueError, "key %R: keys are ints in [0, 2**64)", i);
		Py_DECREF(i);
		return -1;
	}
	k = PyLong_AsUnsignedLongLong(i);
	if (k == (unsigned long long)-1 && PyErr_Occurred()) {
		PyErr_Format(PyExc_ValueError, "key %R: keys are ints in [0, 2**64)", i);
		Py_DECREF(i);
		return -1;
	}
	Py_DECREF(i);
	*key_p = k;
	return 0;
}

int rps_py_keys(PyObject *o, rps_key_t **keys_p, size_t *n_p, int *single_p)
{
	PyObject *seq;
	rps_key_t *keys;
	Py_ssize_t n;

	if (PyLong_Check(o) || (!PySequence_Check(o) && PyIndex_Check(o))) {
		keys = PyMem_Malloc(sizeof(*keys));
		if (!keys) {
			PyErr_NoMemory();
			return -1;
		}
		if (rps_py_key(o, keys)) {
			PyMem_Free(keys);
			return -1;
		}
		*keys_p = keys;
		*n_p = 1;
		*single_p = 1;
		return 0;
	}
	seq = PySequence_Fast(o, "keys: an int or a sequence of ints");
	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n == 0) {
		Py_DECREF(seq);
		PyErr_SetString(PyExc_ValueError, "keys: empty sequence (give at least one key)");
		return -1;
	}
	keys = PyMem_Malloc((size_t)n * sizeof(*keys));
	if (!keys) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		if (rps_py_key(PySequence_Fast_GET_ITEM(seq, i), &keys[i])) {
			PyMem_Free(keys);
			Py_DECREF(seq);
			return -1;
		}
	}
	Py_DECREF(seq);
	*keys_p = keys;
	*n_p = (size_t)n;
	*single_p = 0;
	return 0;
}

void rps_py_nap_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	Py_BEGIN_ALLOW_THREADS
		nanosleep(&ts, NULL);
	Py_END_ALLOW_THREADS
}

static PyObject *py_strerror(PyObject *mod, PyObject *arg)
{
	long v = PyLong_AsLong(arg);

	if (v == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(rps_strerror((int)(v > 0 ? -v : v)));
}

static PyObject *py_version(PyObject *mod, PyObject *unused)
{
	return PyUnicode_FromString(rps_version());
}

static PyMethodDef module_methods[] = {
    {"strerror", py_strerror, METH_O,
     "strerror(errno) -> str\n\nrdmaps' words for an errno (rps_strerror)."},
    {"library_version", py_version, METH_NOARGS,
     "library_version() -> str\n\nThe version of librdmaps this module runs on."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "rdmaps._core",
    .m_doc = "The C core of rdmaps: Worker, Request, Registration (see the rdmaps package).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__core(void)
{
	PyObject *m, *errors;

	errors = PyImport_ImportModule("rdmaps.errors");
	if (!errors)
		return NULL;
	error_for = PyObject_GetAttrString(errors, "error_for");
	Py_DECREF(errors);
	if (!error_for)
		return NULL;
	if (PyType_Ready(&rps_py_worker_type) < 0 || PyType_Ready(&rps_py_request_type) < 0 ||
	    PyType_Ready(&rps_py_registration_type) < 0 || PyType_Ready(&rps_py_server_type) < 0)
		return NULL;
	m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	if (PyModule_AddObjectRef(m, "Worker", (PyObject *)&rps_py_worker_type) < 0 ||
	    PyModule_AddObjectRef(m, "Request", (PyObject *)&rps_py_request_type) < 0 ||
	    PyModule_AddObjectRef(m, "Registration", (PyObject *)&rps_py_registration_type) < 0 ||
	    PyModule_AddObjectRef(m, "InProcessServer", (PyObject *)&rps_py_server_type) < 0 ||
	    PyModule_AddStringConstant(m, "HEADER_VERSION", RPS_VERSION_STRING) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
