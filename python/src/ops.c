/* push, pull, pushpull: Python keys and buffers -> library requests.
 *
 * Values come as one buffer per key (a list or tuple), or one buffer with
 * the keys back to back (as the C API takes them). Buffers that lie back to
 * back in memory (views of one flat array) are sent as one batched call;
 * otherwise each run of adjacent buffers is one call, and the Request waits
 * for all of them. Everything is checked before anything is sent. */
#include "core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Arguments by position or name (METH_FASTCALL | METH_KEYWORDS). */
static int fast_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
		     const char *const *names, int n, PyObject **out)
{
	if (nargs > n) {
		PyErr_Format(PyExc_TypeError, "%s() takes %d arguments (%zd given)", fname, n,
			     nargs);
		return -1;
	}
	for (int i = 0; i < n; i++)
		out[i] = i < nargs ? args[i] : NULL;
	if (kw) {
		for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(kw); j++) {
			PyObject *name = PyTuple_GET_ITEM(kw, j);
			int i;

			for (i = 0; i < n; i++)
				if (PyUnicode_CompareWithASCIIString(name, names[i]) == 0)
					break;
			if (i == n) {
				PyErr_Format(PyExc_TypeError,
					     "%s() got an unexpected keyword argument '%U'", fname,
					     name);
				return -1;
			}
			if (out[i]) {
				PyErr_Format(PyExc_TypeError,
					     "%s() got multiple values for argument '%s'", fname,
					     names[i]);
				return -1;
			}
			out[i] = args[nargs + j];
		}
	}
	for (int i = 0; i < n; i++) {
		if (!out[i]) {
			PyErr_Format(PyExc_TypeError, "%s() missing argument '%s'", fname,
				     names[i]);
			return -1;
		}
	}
	return 0;
}

/* One side (grads or out) of a request: its buffers in r->bufs[first ..]. */
struct side {
	int first, nbufs;
	int flat; /* one buffer for all keys */
};

int rps_py_nbufs(PyObject *vobj, size_t n, int single)
{
	if (single)
		return 1;
	if (PyList_Check(vobj) || PyTuple_Check(vobj)) {
		Py_ssize_t m = PySequence_Fast_GET_SIZE(vobj);

		if ((size_t)m != n) {
			PyErr_Format(PyExc_ValueError,
				     "%zu keys but %zd buffers: give one buffer per key, or one "
				     "buffer holding all the keys back to back",
				     n, m);
			return -1;
		}
		return (int)m;
	}
	return 1;
}

/* Acquire the buffers of one side and check them against the lengths. */
static int get_side(struct pyreq *r, PyObject *vobj, int single, int writable, struct side *sd)
{
	char desc[96];

	sd->flat = sd->nbufs == 1;
	if (sd->flat) {
		size_t total = 0;

		for (size_t i = 0; i < r->nkeys; i++)
			total += r->lens[i];
		if (single)
			snprintf(desc, sizeof(desc), "key %llu", (unsigned long long)r->keys[0]);
		else
			snprintf(desc, sizeof(desc), "keys %llu, ... (%zu keys in one buffer)",
				 (unsigned long long)r->keys[0], r->nkeys);
		if (rps_py_buf_get(vobj, writable, desc, &r->bufs[sd->first]))
			return -1;
		if (r->bufs[sd->first].nelem != total) {
			if (single)
				PyErr_Format(PyExc_ValueError,
					     "key %llu: %zu float32 elements given, the key was "
					     "declared with %zu",
					     (unsigned long long)r->keys[0],
					     r->bufs[sd->first].nelem, total);
			else
				PyErr_Format(PyExc_ValueError,
					     "%s: %zu float32 elements given, the keys were "
					     "declared with %zu in all",
					     desc, r->bufs[sd->first].nelem, total);
			return -1;
		}
		return 0;
	}
	for (int i = 0; i < sd->nbufs; i++) {
		struct pybuf *b = &r->bufs[sd->first + i];

		snprintf(desc, sizeof(desc), "key %llu", (unsigned long long)r->keys[i]);
		if (rps_py_buf_get(PySequence_Fast_GET_ITEM(vobj, i), writable, desc, b))
			return -1;
		if (b->nelem != r->lens[i]) {
			PyErr_Format(PyExc_ValueError,
				     "key %llu: %zu float32 elements given, the key was declared "
				     "with %zu",
				     (unsigned long long)r->keys[i], b->nelem, r->lens[i]);
			return -1;
		}
	}
	return 0;
}

/* Segments of a side: runs of keys whose buffers are adjacent in memory. */
static int count_segs(const struct pyreq *r, const struct side *sd)
{
	int nseg = 1;

	if (sd->flat)
		return 1;
	for (int i = 1; i < sd->nbufs; i++) {
		const struct pybuf *a = &r->bufs[sd->first + i - 1], *b = a + 1;

		if (b->data != a->data + a->nelem)
			nseg++;
	}
	return nseg;
}

/* Submit one side's segments; returns how many were submitted, *rc_p the
 * first error. Called without the GIL. */
static int submit_side(struct pyworker *pw, struct pyreq *r, const struct side *sd, int pull,
		       int *rc_p)
{
	int done = 0;
	size_t i = 0;

	while (i < r->nkeys) {
		size_t j = i + 1;
		float *base = sd->flat ? r->bufs[sd->first].data : r->bufs[sd->first + i].data;
		int rc;

		if (sd->flat) {
			j = r->nkeys;
		} else {
			while (j < r->nkeys &&
			       r->bufs[sd->first + j].data == r->bufs[sd->first + j - 1].data +
								  r->bufs[sd->first + j - 1].nelem)
				j++;
		}
		if (pull)
			rc = rps_worker_pull_cb(pw->w, r->keys + i, base, r->lens + i, j - i,
						rps_py_pyreq_cb, r);
		else
			rc = rps_worker_push_cb(pw->w, r->keys + i, base, r->lens + i, j - i,
						rps_py_pyreq_cb, r);
		if (rc) {
			*rc_p = rc;
			return done;
		}
		done++;
		i = j;
	}
	*rc_p = 0;
	return done;
}

PyObject *rps_py_one_of(PyObject *o)
{
	if ((PyList_Check(o) || PyTuple_Check(o)) && PySequence_Fast_GET_SIZE(o) == 1)
		return PySequence_Fast_GET_ITEM(o, 0);
	return o;
}

/* assign: each segment written to a temporary .npz (rps_model_save) and
 * assigned from it (rps_worker_load_model): the public API assigns from
 * files only. Synchronous; r is discarded. */
static PyObject *assign(struct pyworker *pw, struct pyreq *r, const struct side *sd)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	size_t i = 0;
	int rc = 0;
	PyThreadState *ts;

	if (!dir || !*dir)
		dir = "/tmp";
	if (rps_py_enter(pw)) {
		rps_py_pyreq_discard(r);
		return NULL;
	}
	ts = PyEval_SaveThread();
	while (!rc && i < r->nkeys) {
		size_t j = sd->flat ? r->nkeys : i + 1;
		float *base = sd->flat ? r->bufs[sd->first].data : r->bufs[sd->first + i].data;
		int fd;

		while (!sd->flat && j < r->nkeys &&
		       r->bufs[sd->first + j].data ==
			   r->bufs[sd->first + j - 1].data + r->bufs[sd->first + j - 1].nelem)
			j++;
		snprintf(path, sizeof(path), "%s/rdmaps-assign-XXXXXX.npz", dir);
		fd = mkstemps(path, 4);
		if (fd < 0) {
			rc = -errno;
			break;
		}
		close(fd);
		rc = rps_model_save(path, r->keys + i, r->lens + i, j - i, base);
		if (!rc)
			rc = rps_worker_load_model(pw->w, r->keys + i, r->lens + i, j - i, path);
		unlink(path);
		i = j;
	}
	PyEval_RestoreThread(ts);
	rps_py_leave(pw);
	if (rc) {
		rps_py_raise(rc, "assign of key %llu%s (through %s; the reason is logged)",
			     (unsigned long long)r->keys[i < r->nkeys ? i : 0],
			     r->nkeys > 1 ? ", ..." : "", path);
		rps_py_pyreq_discard(r);
		return NULL;
	}
	rps_py_pyreq_discard(r);
	Py_RETURN_NONE;
}

/* kind: 0 push, 1 pull, 2 pushpull, 3 assign */
static PyObject *op(PyObject *self, PyObject *kobj, PyObject *gobj, PyObject *oobj, int kind)
{
	static const char *what[] = {"push", "pull", "pushpull", "assign"};
	struct pyworker *pw = (struct pyworker *)self;
	struct side gs = {0}, os = {0};
	struct pyreq *r;
	rps_key_t *keys;
	size_t n;
	int single, ng = 0, no = 0, nseg = 0, sent = 0, rc = 0, stage = 0;
	PyThreadState *ts;
	PyObject *req;

	if (pw->closed || !pw->w) {
		PyErr_SetString(PyExc_ValueError, "the worker is closed");
		return NULL;
	}
	if (rps_py_keys(kobj, &keys, &n, &single))
		return NULL;
	if (single) { /* one key: [buf] is taken as buf */
		gobj = gobj ? rps_py_one_of(gobj) : NULL;
		oobj = oobj ? rps_py_one_of(oobj) : NULL;
	}
	if (gobj && (ng = rps_py_nbufs(gobj, n, single)) < 0)
		goto err_keys;
	if (oobj && (no = rps_py_nbufs(oobj, n, single)) < 0)
		goto err_keys;
	r = rps_py_pyreq_new(pw, ng + no, n, what[kind]);
	if (!r)
		goto err_keys;
	memcpy(r->keys, keys, n * sizeof(*keys));
	PyMem_Free(keys);
	for (size_t i = 0; i < n; i++) {
		Py_ssize_t l = rps_py_declared_len(pw, r->keys[i]);

		if (l < 0)
			goto err_discard;
		r->lens[i] = (size_t)l;
	}
	gs.first = 0;
	gs.nbufs = ng;
	os.first = ng;
	os.nbufs = no;
	if (gobj && get_side(r, gobj, single, 0, &gs))
		goto err_discard;
	if (oobj && get_side(r, oobj, single, 1, &os))
		goto err_discard;
	if (gobj)
		nseg += count_segs(r, &gs);
	if (oobj)
		nseg += count_segs(r, &os);

	if (kind == 3)
		return assign(pw, r, &gs);
	if (rps_py_enter(pw))
		goto err_discard;
	rps_py_pyreq_link(r);
	r->remaining += nseg; /* before the first callback can come */
	ts = PyEval_SaveThread();
	if (gobj) {
		sent += submit_side(pw, r, &gs, 0, &rc);
		stage = 1;
	}
	if (!rc && kind == 2) {
		rc = rps_worker_clock(pw->w);
		stage = 2;
	}
	if (!rc && oobj) {
		sent += submit_side(pw, r, &os, 1, &rc);
		stage = 3;
	}
	PyEval_RestoreThread(ts);
	rps_py_leave(pw);
	rps_py_pyreq_sealed(r, nseg - sent, 0);
	req = rps_py_request_new(pw, r);
	if (!req || rc) {
		if (rc)
			rps_py_raise(rc, "%s of key %llu%s (%s)", what[kind],
				     (unsigned long long)r->keys[0], n > 1 ? ", ..." : "",
				     stage == 2 ? "ending the clock" : "submitting");
		Py_XDECREF(req); /* orphans r if pieces are in flight, else frees it */
		if (!req) {
			r->orphan = 1;
			pw->norphans++;
		}
		return NULL;
	}
	return req;

err_discard:
	rps_py_pyreq_discard(r);
	return NULL;
err_keys:
	PyMem_Free(keys);
	return NULL;
}

PyObject *rps_py_push(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw)
{
	static const char *const names[] = {"keys", "grads"};
	PyObject *a[2];

	if (fast_args("push", args, nargs, kw, names, 2, a))
		return NULL;
	return op(self, a[0], a[1], NULL, 0);
}

PyObject *rps_py_pull(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw)
{
	static const char *const names[] = {"keys", "out"};
	PyObject *a[2];

	if (fast_args("pull", args, nargs, kw, names, 2, a))
		return NULL;
	return op(self, a[0], NULL, a[1], 1);
}

PyObject *rps_py_pushpull(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw)
{
	static const char *const names[] = {"keys", "grads", "out"};
	PyObject *a[3];

	if (fast_args("pushpull", args, nargs, kw, names, 3, a))
		return NULL;
	return op(self, a[0], a[1], a[2], 2);
}

PyObject *rps_py_assign(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw)
{
	static const char *const names[] = {"keys", "values"};
	PyObject *a[2];

	if (fast_args("assign", args, nargs, kw, names, 2, a))
		return NULL;
	return op(self, a[0], a[1], NULL, 3);
}
