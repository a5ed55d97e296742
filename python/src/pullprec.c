/* Worker.set_pull_precision (<rdmaps/pullprec.h>, docs/compression.md
 * "Low-precision pulls"). */
#include "core.h"

#include <rdmaps/pullprec.h>

PyObject *rps_py_set_pull_precision(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"keys", "precision", NULL};
	struct pyworker *pw = (struct pyworker *)self;
	enum rps_pull_precision prec;
	PyObject *kobj;
	const char *name;
	rps_key_t *keys;
	size_t n;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "Os:set_pull_precision", names, &kobj, &name))
		return NULL;
	if (pw->closed || !pw->w) {
		PyErr_SetString(PyExc_ValueError, "the worker is closed");
		return NULL;
	}
	if (rps_pull_precision_parse(name, &prec)) {
		PyErr_Format(PyExc_ValueError,
			     "pull precision '%s': expected 'fp32', 'fp16' or 'bf16' "
			     "(docs/compression.md)",
			     name);
		return NULL;
	}
	if (rps_py_keys_declared(pw, kobj, &keys, NULL, &n))
		return NULL;
	if (rps_py_enter(pw)) {
		PyMem_Free(keys);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
		rc = rps_worker_set_pull_precision(pw->w, keys, n, prec);
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	if (rc) {
		rps_py_raise(rc, "set_pull_precision of key %llu%s to %s (the reason is logged)",
			     (unsigned long long)keys[0], n > 1 ? ", ..." : "", name);
		PyMem_Free(keys);
		return NULL;
	}
	PyMem_Free(keys);
	Py_RETURN_NONE;
}
