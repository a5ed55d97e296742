/* Worker.allreduce, Worker.local_pushpull (blocking collectives of the
 * job's workers), Worker.set_compression and Worker.wire_stats.
 *
 * Buffers come as for push: one buffer for one key, a list/tuple with one
 * buffer per key, or one buffer holding the keys back to back. The library
 * takes the keys' values back to back in one array: buffers that already
 * lie so (views of one flat array) are used in place; otherwise they are
 * copied into one array for the call and the results copied back. Each call
 * blocks with the GIL released. */
#include "core.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The buffers of one side of a call. */
struct vec {
	struct pybuf *bufs;
	int nbufs;
	float *base; /* the keys back to back: bufs[0].data, or tmp */
	float *tmp;  /* PyMem_RawMalloc'd when the buffers are not adjacent */
	size_t total;
};

static void vec_release(struct vec *v)
{
	for (int i = 0; i < v->nbufs; i++)
		rps_py_buf_release(&v->bufs[i]);
	PyMem_Free(v->bufs);
	PyMem_RawFree(v->tmp);
	memset(v, 0, sizeof(*v));
}

/* The declared length of key, 0 when it was not declared through pw. */
static size_t declared_or_0(struct pyworker *pw, rps_key_t key)
{
	PyObject *k = PyLong_FromUnsignedLongLong(key), *v;

	if (!k)
		return 0;
	v = PyDict_GetItemWithError(pw->declared, k);
	Py_DECREF(k);
	if (!v) {
		PyErr_Clear();
		return 0;
	}
	return (size_t)PyLong_AsSsize_t(v);
}

static int check_len(rps_key_t key, size_t got, size_t want)
{
	if (got == 0) {
		PyErr_Format(PyExc_ValueError, "key %llu: an empty buffer (give at least one "
			     "float32 element)", (unsigned long long)key);
		return -1;
	}
	if (want && got != want) {
		PyErr_Format(PyExc_ValueError,
			     "key %llu: %zu float32 elements given, the key was declared with %zu",
			     (unsigned long long)key, got, want);
		return -1;
	}
	return 0;
}

/* Acquire obj as the keys' values. lens[i]: the key's length when known
 * (declared), else 0; filled in from the buffers. -1 with an exception. */
static int vec_get(PyObject *obj, int writable, const rps_key_t *keys, size_t n, int single,
		   size_t *lens, struct vec *v)
{
	char desc[96];
	int per_key = 0;

	memset(v, 0, sizeof(*v));
	if (single)
		obj = rps_py_one_of(obj);
	if (rps_py_nbufs(obj, n, single) < 0)
		return -1;
	per_key = !single && (PyList_Check(obj) || PyTuple_Check(obj));
	v->nbufs = per_key ? (int)n : 1;
	v->bufs = PyMem_Calloc((size_t)v->nbufs, sizeof(*v->bufs));
	if (!v->bufs) {
		PyErr_NoMemory();
		return -1;
	}
	if (per_key) {
		for (size_t i = 0; i < n; i++) {
			snprintf(desc, sizeof(desc), "key %llu", (unsigned long long)keys[i]);
			if (rps_py_buf_get(PySequence_Fast_GET_ITEM(obj, (Py_ssize_t)i), writable,
					   desc, &v->bufs[i])) {
				v->nbufs = (int)i;
				goto err;
			}
			if (check_len(keys[i], v->bufs[i].nelem, lens[i])) {
				v->nbufs = (int)i + 1;
				goto err;
			}
			lens[i] = v->bufs[i].nelem;
			v->total += lens[i];
		}
	} else {
		if (single)
			snprintf(desc, sizeof(desc), "key %llu", (unsigned long long)keys[0]);
		else
			snprintf(desc, sizeof(desc), "keys %llu, ... (%zu keys in one buffer)",
				 (unsigned long long)keys[0], n);
		if (rps_py_buf_get(obj, writable, desc, &v->bufs[0])) {
			v->nbufs = 0;
			goto err;
		}
		if (single) {
			if (check_len(keys[0], v->bufs[0].nelem, lens[0]))
				goto err;
			lens[0] = v->bufs[0].nelem;
		} else {
			size_t want = 0;

			for (size_t i = 0; i < n; i++) {
				if (!lens[i]) {
					PyErr_Format(PyExc_ValueError,
						     "key %llu is not declared through this worker, so "
						     "its part of the one buffer is unknown: give one "
						     "buffer per key",
						     (unsigned long long)keys[i]);
					goto err;
				}
				want += lens[i];
			}
			if (v->bufs[0].nelem != want) {
				PyErr_Format(PyExc_ValueError,
					     "%s: %zu float32 elements given, the keys were declared "
					     "with %zu in all",
					     desc, v->bufs[0].nelem, want);
				goto err;
			}
		}
		v->total = v->bufs[0].nelem;
	}
	v->base = v->bufs[0].data;
	for (int i = 1; i < v->nbufs; i++) {
		if (v->bufs[i].data != v->bufs[i - 1].data + v->bufs[i - 1].nelem) {
			v->tmp = PyMem_RawMalloc(v->total * sizeof(float));
			if (!v->tmp) {
				PyErr_NoMemory();
				goto err;
			}
			v->base = v->tmp;
			break;
		}
	}
	return 0;
err:
	vec_release(v);
	return -1;
}

/* Without the GIL: the buffers into tmp (in) or tmp into the buffers. */
static void vec_copy(struct vec *v, int in)
{
	float *p = v->tmp;

	if (!p)
		return;
	for (int i = 0; i < v->nbufs; i++) {
		if (in)
			memcpy(p, v->bufs[i].data, v->bufs[i].nelem * sizeof(float));
		else
			memcpy(v->bufs[i].data, p, v->bufs[i].nelem * sizeof(float));
		p += v->bufs[i].nelem;
	}
}

static int open_or_raise(struct pyworker *pw)
{
	if (pw->closed || !pw->w) {
		PyErr_SetString(PyExc_ValueError, "the worker is closed");
		return -1;
	}
	return 0;
}

PyObject *rps_py_allreduce(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"keys", "bufs", NULL};
	struct pyworker *pw = (struct pyworker *)self;
	PyObject *kobj, *bobj;
	rps_key_t *keys;
	size_t *lens = NULL, n;
	struct vec v;
	int single, rc;
	char why[400];

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:allreduce", names, &kobj, &bobj))
		return NULL;
	if (open_or_raise(pw))
		return NULL;
	if (rps_py_keys(kobj, &keys, &n, &single))
		return NULL;
	lens = PyMem_Calloc(n, sizeof(*lens));
	if (!lens) {
		PyErr_NoMemory();
		goto err_keys;
	}
	for (size_t i = 0; i < n; i++)
		lens[i] = declared_or_0(pw, keys[i]);
	if (vec_get(bobj, 1, keys, n, single, lens, &v))
		goto err_keys;
	if (rps_py_enter(pw))
		goto err_vec;
	Py_BEGIN_ALLOW_THREADS
		vec_copy(&v, 1);
		rc = rps_worker_allreduce(pw->w, keys, v.base, lens, n);
		if (!rc)
			vec_copy(&v, 0);
		else if (rps_worker_allreduce_error(pw->w, why, sizeof(why)) == 0 || !why[0])
			snprintf(why, sizeof(why), "the reason is logged on stderr");
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	if (rc) {
		rps_py_raise(rc, "allreduce of key %llu%s (%zu elements): %s",
			     (unsigned long long)keys[0], n > 1 ? ", ..." : "", v.total, why);
		goto err_vec;
	}
	vec_release(&v);
	PyMem_Free(lens);
	PyMem_Free(keys);
	Py_RETURN_NONE;
err_vec:
	vec_release(&v);
err_keys:
	PyMem_Free(lens);
	PyMem_Free(keys);
	return NULL;
}

PyObject *rps_py_local_pushpull(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"keys", "grads", "outs", NULL};
	struct pyworker *pw = (struct pyworker *)self;
	PyObject *kobj, *gobj, *oobj;
	rps_key_t *keys;
	size_t *lens = NULL, *olens = NULL, n;
	struct vec g, o;
	int single, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:local_pushpull", names, &kobj, &gobj,
					 &oobj))
		return NULL;
	if (open_or_raise(pw))
		return NULL;
	if (rps_py_keys(kobj, &keys, &n, &single))
		return NULL;
	lens = PyMem_Calloc(n, sizeof(*lens));
	olens = PyMem_Calloc(n, sizeof(*olens));
	if (!lens || !olens) {
		PyErr_NoMemory();
		goto err_keys;
	}
	for (size_t i = 0; i < n; i++) {
		Py_ssize_t l = rps_py_declared_len(pw, keys[i]);

		if (l < 0)
			goto err_keys;
		lens[i] = olens[i] = (size_t)l;
	}
	if (vec_get(gobj, 0, keys, n, single, lens, &g))
		goto err_keys;
	if (vec_get(oobj, 1, keys, n, single, olens, &o))
		goto err_g;
	if (rps_py_enter(pw))
		goto err_o;
	Py_BEGIN_ALLOW_THREADS
		vec_copy(&g, 1);
		rc = rps_worker_local_pushpull(pw->w, keys, g.base, o.base, lens, n);
		if (!rc)
			vec_copy(&o, 0);
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	if (rc) {
		rps_py_raise(rc, "local_pushpull of key %llu%s (the reason is logged on stderr)",
			     (unsigned long long)keys[0], n > 1 ? ", ..." : "");
		goto err_o;
	}
	vec_release(&o);
	vec_release(&g);
	PyMem_Free(olens);
	PyMem_Free(lens);
	PyMem_Free(keys);
	Py_RETURN_NONE;
err_o:
	vec_release(&o);
err_g:
	vec_release(&g);
err_keys:
	PyMem_Free(olens);
	PyMem_Free(lens);
	PyMem_Free(keys);
	return NULL;
}

PyObject *rps_py_set_compression(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"keys", "codec", "error_feedback", NULL};
	struct pyworker *pw = (struct pyworker *)self;
	PyObject *kobj, *efobj = Py_None;
	const char *codec;
	struct rps_compress_opts opts;
	rps_key_t *keys;
	size_t n;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|O:set_compression", names, &kobj, &codec,
					 &efobj))
		return NULL;
	if (open_or_raise(pw))
		return NULL;
	if (rps_compress_parse(codec, &opts)) {
		PyErr_Format(PyExc_ValueError,
			     "codec '%s': expected none, fp16, bf16, sign, sign:BLOCK, topk:RATIO "
			     "or randk:RATIO (RATIO a fraction in (0, 1], e.g. topk:0.01), "
			     "optionally followed by ,momentum=M or (topk, randk) "
			     ",warmup=STEPS,from=R0 (docs/compression.md)",
			     codec);
		return NULL;
	}
	if (efobj != Py_None) {
		int ef = PyObject_IsTrue(efobj);

		if (ef < 0)
			return NULL;
		opts.error_feedback = ef;
	}
	if (rps_py_keys_declared(pw, kobj, &keys, NULL, &n))
		return NULL;
	if (rps_py_enter(pw)) {
		PyMem_Free(keys);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
		rc = rps_worker_set_compression(pw->w, keys, n, &opts);
	Py_END_ALLOW_THREADS
	rps_py_leave(pw);
	if (rc) {
		rps_py_raise(rc, "set_compression of key %llu%s to %s (the reason is logged)",
			     (unsigned long long)keys[0], n > 1 ? ", ..." : "", codec);
		PyMem_Free(keys);
		return NULL;
	}
	PyMem_Free(keys);
	Py_RETURN_NONE;
}

PyObject *rps_py_wire_stats(PyObject *self, PyObject *arg)
{
	struct pyworker *pw = (struct pyworker *)self;
	struct rps_key_wire_stats st;
	rps_key_t key;
	int rc;

	if (open_or_raise(pw) || rps_py_key(arg, &key))
		return NULL;
	if (rps_py_declared_len(pw, key) < 0)
		return NULL;
	rc = rps_worker_key_wire_stats(pw->w, key, &st);
	if (rc)
		return rps_py_raise(rc, "wire_stats of key %llu", (unsigned long long)key);
	return Py_BuildValue("{sKsKsKsK}", "pushes", (unsigned long long)st.pushes, "raw_bytes",
			     (unsigned long long)st.raw_bytes, "data_bytes",
			     (unsigned long long)st.data_bytes, "wire_bytes",
			     (unsigned long long)st.wire_bytes);
}
