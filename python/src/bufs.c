/* Python objects -> C-contiguous float32 memory, used in place.
 *
 * Accepted: anything with the buffer protocol (NumPy arrays, memoryview,
 * array.array('f')), CPU torch tensors (through tensor.detach().numpy(), a
 * view of the same memory), and objects with __array_interface__ (through
 * numpy.asarray, which does not copy them). The view is held until the
 * request completes, which keeps the memory alive. */
#include "core.h"

#include <stdint.h>
#include <string.h>

static int format_is_f32(const Py_buffer *v)
{
	const char *f = v->format ? v->format : "B";

	if (v->itemsize != 4)
		return 0;
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	return f[0] == 'f' && f[1] == '\0';
}

/* A torch.Tensor (or a subclass, as nn.Parameter): a type in whose bases
 * one comes from the module torch._C. */
static int is_torch_tensor(PyObject *obj)
{
	for (PyTypeObject *t = Py_TYPE(obj); t; t = t->tp_base) {
		if (strncmp(t->tp_name, "torch._C.", 9) == 0)
			return 1;
	}
	return 0;
}

/* A CPU torch tensor as a NumPy array on the same memory (new reference). */
static PyObject *torch_view(PyObject *obj, const char *key_desc)
{
	PyObject *dev, *type, *det, *arr;
	int cpu;

	dev = PyObject_GetAttrString(obj, "device");
	if (!dev)
		return NULL;
	type = PyObject_GetAttrString(dev, "type");
	Py_DECREF(dev);
	if (!type)
		return NULL;
	cpu = PyUnicode_Check(type) && PyUnicode_CompareWithASCIIString(type, "cpu") == 0;
	if (!cpu) {
		PyErr_Format(PyExc_TypeError,
			     "%s: a torch tensor on device '%U': rdmaps reads and writes CPU "
			     "memory (move it with .cpu(), or keep a CPU copy of it)",
			     key_desc, type);
		Py_DECREF(type);
		return NULL;
	}
	Py_DECREF(type);
	det = PyObject_CallMethod(obj, "detach", NULL);
	if (!det)
		return NULL;
	arr = PyObject_CallMethod(det, "numpy", NULL);
	Py_DECREF(det);
	return arr;
}

static PyObject *asarray(PyObject *obj)
{
	PyObject *np, *arr;

	np = PyImport_ImportModule("numpy");
	if (!np)
		return NULL;
	arr = PyObject_CallMethod(np, "asarray", "O", obj);
	Py_DECREF(np);
	return arr;
}

static int get_view(PyObject *obj, const char *key_desc, Py_buffer *v)
{
	PyObject *alt = NULL;
	int rc;

	if (PyObject_CheckBuffer(obj))
		return PyObject_GetBuffer(obj, v, PyBUF_RECORDS_RO);
	if (is_torch_tensor(obj))
		alt = torch_view(obj, key_desc);
	else if (PyObject_HasAttrString(obj, "__array_interface__"))
		alt = asarray(obj);
	else {
		PyErr_Format(PyExc_TypeError,
			     "%s: expected a float32 buffer (a NumPy array, a CPU torch tensor, "
			     "a memoryview), got %.100s",
			     key_desc, Py_TYPE(obj)->tp_name);
		return -1;
	}
	if (!alt)
		return -1;
	rc = PyObject_GetBuffer(alt, v, PyBUF_RECORDS_RO);
	Py_DECREF(alt);
	return rc;
}

int rps_py_buf_get(PyObject *obj, int writable, const char *key_desc, struct pybuf *b)
{
	Py_buffer *v = &b->view;

	if (get_view(obj, key_desc, v) < 0) {
		if (PyErr_ExceptionMatches(PyExc_BufferError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError,
				     "%s: %.100s does not give its memory as a "
				     "strided buffer: pass a C-contiguous float32 array",
				     key_desc, Py_TYPE(obj)->tp_name);
		}
		return -1;
	}
	if (!format_is_f32(v)) {
		PyErr_Format(PyExc_TypeError,
			     "%s: dtype must be float32 (buffer format 'f', 4-byte items), got "
			     "format '%s' with %zd-byte items: convert with .astype(numpy.float32) "
			     "or .float()",
			     key_desc, v->format ? v->format : "B", v->itemsize);
		goto err_release;
	}
	if (!PyBuffer_IsContiguous(v, 'C')) {
		PyErr_Format(PyExc_TypeError,
			     "%s: the array is not C-contiguous (a slice with a step, a "
			     "transpose, ...): pass numpy.ascontiguousarray(a) or "
			     "tensor.contiguous(), and keep that object for the results",
			     key_desc);
		goto err_release;
	}
	if (writable && v->readonly) {
		PyErr_Format(PyExc_TypeError,
			     "%s: the buffer is read-only, and a pull writes into it: pass a "
			     "writable float32 array",
			     key_desc);
		goto err_release;
	}
	if ((uintptr_t)v->buf % sizeof(float)) {
		PyErr_Format(PyExc_TypeError,
			     "%s: the buffer is not aligned to 4 bytes (a view at an odd byte "
			     "offset): pass an aligned float32 array (numpy.ascontiguousarray)",
			     key_desc);
		goto err_release;
	}
	b->data = v->buf;
	b->nelem = (size_t)(v->len / 4);
	return 0;
err_release:
	PyBuffer_Release(v);
	return -1;
}

void rps_py_buf_release(struct pybuf *b)
{
	if (b->view.obj)
		PyBuffer_Release(&b->view);
	b->data = NULL;
}
