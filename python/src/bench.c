/* Worker._c_bench: the same push or pull through the C API, timed in C, to
 * set the binding's cost beside (docs: "a pull through Python within 1.2x of
 * the same pull through the C API, measured side by side in one run").
 * Each iteration is rps_worker_pull/push + rps_req_wait(req, -1) of one key,
 * with the GIL released for the whole loop; out_ns receives each one's time. */
#include "core.h"

#include <string.h>
#include <time.h>

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

PyObject *rps_py_c_bench(PyObject *self, PyObject *args)
{
	struct pyworker *pw = (struct pyworker *)self;
	const char *kind;
	PyObject *kobj, *bobj, *oobj;
	struct pybuf b = {0};
	Py_buffer out = {0};
	rps_key_t key;
	size_t len;
	Py_ssize_t declared;
	int pull, rc = 0;
	int64_t *ns;
	Py_ssize_t iters;

	if (!PyArg_ParseTuple(args, "sOOO:_c_bench", &kind, &kobj, &bobj, &oobj))
		return NULL;
	pull = strcmp(kind, "pull") == 0;
	if (!pull && strcmp(kind, "push") != 0) {
		PyErr_SetString(PyExc_ValueError, "_c_bench: 'pull' or 'push'");
		return NULL;
	}
	if (rps_py_key(kobj, &key))
		return NULL;
	declared = rps_py_declared_len(pw, key);
	if (declared < 0)
		return NULL;
	len = (size_t)declared;
	if (rps_py_buf_get(bobj, pull, "_c_bench", &b))
		return NULL;
	if (b.nelem != len) {
		PyErr_Format(PyExc_ValueError, "key %llu: %zu float32 elements given, declared %zu",
			     (unsigned long long)key, b.nelem, len);
		goto err_buf;
	}
	if (PyObject_GetBuffer(oobj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT))
		goto err_buf;
	if (out.itemsize != 8 || !out.format ||
	    (strcmp(out.format, "q") && strcmp(out.format, "l") && strcmp(out.format, "<q") &&
	     strcmp(out.format, "<l"))) {
		PyErr_SetString(PyExc_TypeError, "_c_bench: out_ns must be an int64 array");
		goto err_out;
	}
	ns = out.buf;
	iters = out.len / 8;
	if (rps_py_enter(pw))
		goto err_out;
	Py_BEGIN_ALLOW_THREADS
		for (Py_ssize_t i = 0; i < iters && !rc; i++) {
			struct rps_req *req;
			int64_t t0 = now_ns();

			if (pull)
				rc = rps_worker_pull(pw->w, &key, b.data, &len, 1, &req);
			else
				rc = rps_worker_push(pw->w, &key, b.data, &len, 1, &req);
			if (!rc)
				rc = rps_req_wait(req, -1);
			ns[i] = now_ns() - t0;
		}
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	PyBuffer_Release(&out);
	rps_py_buf_release(&b);
	if (rc)
		return rps_py_raise(rc, "_c_bench %s of key %llu", kind, (unsigned long long)key);
	Py_RETURN_NONE;
err_out:
	PyBuffer_Release(&out);
err_buf:
	rps_py_buf_release(&b);
	return NULL;
}
