/* Initialiser and optimizer specs from the values rdmaps/specs.py makes:
 *   init: None or (kind, a, b, seed), kind an enum rps_init_kind value;
 *   optimizer: None or a dict of struct rps_optim_opts fields (kind and
 *   schedule as enum values). */
#include "core.h"

#include <string.h>

int rps_py_init_spec(PyObject *o, struct rps_init *init, int *use_p)
{
	int kind;
	unsigned long long seed;

	*use_p = 0;
	if (o == Py_None)
		return 0;
	if (!PyArg_ParseTuple(o, "iffK;init: (kind, a, b, seed)", &kind, &init->a, &init->b, &seed))
		return -1;
	if (kind < RPS_INIT_DEFAULT || kind > RPS_INIT_PUSH) {
		PyErr_Format(PyExc_ValueError, "init: unknown kind %d", kind);
		return -1;
	}
	init->kind = (enum rps_init_kind)kind;
	init->seed = seed;
	*use_p = 1;
	return 0;
}

enum ftype { F_FLOAT, F_U64, F_INT };

static const struct field {
	const char *name;
	enum ftype type;
	size_t off;
} fields[] = {
#define FLD(n, t)                                                                                  \
	{                                                                                          \
#n, t, offsetof(struct rps_optim_opts, n)                                          \
	}
    FLD(lr, F_FLOAT),	      FLD(momentum, F_FLOAT), FLD(beta1, F_FLOAT),
    FLD(beta2, F_FLOAT),      FLD(eps, F_FLOAT),      FLD(weight_decay, F_FLOAT),
    FLD(clip_norm, F_FLOAT),  FLD(step_size, F_U64),  FLD(gamma, F_FLOAT),
    FLD(total_steps, F_U64),  FLD(lr_min, F_FLOAT),   FLD(staleness_lr, F_INT),
    FLD(warmup_steps, F_U64),
#undef FLD
};

static int set_field(struct rps_optim_opts *opts, const char *name, PyObject *v)
{
	if (strcmp(name, "kind") == 0 || strcmp(name, "schedule") == 0) {
		long e = PyLong_AsLong(v);

		if (e == -1 && PyErr_Occurred())
			return -1;
		if (name[0] == 'k')
			opts->kind = (enum rps_optim_kind)e;
		else
			opts->schedule = (enum rps_lr_schedule)e;
		return 0;
	}
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const struct field *f = &fields[i];
		char *p = (char *)opts + f->off;

		if (strcmp(name, f->name) != 0)
			continue;
		if (f->type == F_FLOAT) {
			double d = PyFloat_AsDouble(v);

			if (d == -1 && PyErr_Occurred())
				return -1;
			*(float *)p = (float)d;
		} else if (f->type == F_U64) {
			unsigned long long u = PyLong_AsUnsignedLongLong(v);

			if (u == (unsigned long long)-1 && PyErr_Occurred())
				return -1;
			*(uint64_t *)p = u;
		} else {
			int b = PyObject_IsTrue(v);

			if (b < 0)
				return -1;
			*(int *)p = b;
		}
		return 0;
	}
	PyErr_Format(PyExc_ValueError, "optimizer: no field '%s'", name);
	return -1;
}

int rps_py_optim_spec(PyObject *o, struct rps_optim_opts *opts, int *use_p)
{
	PyObject *k, *v;
	Py_ssize_t pos = 0;

	*use_p = 0;
	if (o == Py_None)
		return 0;
	if (!PyDict_Check(o)) {
		PyErr_SetString(PyExc_TypeError, "optimizer: a dict of fields");
		return -1;
	}
	rps_optim_opts_init(opts);
	while (PyDict_Next(o, &pos, &k, &v)) {
		const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;

		if (!name) {
			PyErr_SetString(PyExc_TypeError, "optimizer: field names are str");
			return -1;
		}
		if (set_field(opts, name, v))
			return -1;
	}
	*use_p = 1;
	return 0;
}
