/* An rdmaps server inside this Python process (<rdmaps/server.h>): created
 * with a configuration object (defaults, RDMAPS_* variables, then the
 * settings given), run by a thread of its own until stop() or the end of
 * the job. For notebooks and tests; rdmaps.Server runs the program instead. */
#include "core.h"

#include <errno.h>
#include <string.h>

struct pyserver {
	PyObject_HEAD struct rps_server *srv;
	pthread_t thread;
	int started; /* the thread exists and was not joined */
	atomic_int finished;
	int rc; /* rps_server_run's */
};

static void *run_thread(void *arg)
{
	struct pyserver *ps = arg;

	ps->rc = rps_server_run(ps->srv);
	atomic_store(&ps->finished, 1);
	return NULL;
}

static int set_settings(struct rps_config *cfg, PyObject *settings)
{
	PyObject *k, *v;
	Py_ssize_t pos = 0;

	if (settings == Py_None)
		return 0;
	if (!PyDict_Check(settings)) {
		PyErr_SetString(PyExc_TypeError, "settings: a dict of name -> value");
		return -1;
	}
	while (PyDict_Next(settings, &pos, &k, &v)) {
		PyObject *sv = PyObject_Str(v);
		const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
		const char *val = sv ? PyUnicode_AsUTF8(sv) : NULL;
		int rc;

		if (!name || !val) {
			Py_XDECREF(sv);
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "settings: names are str");
			return -1;
		}
		rc = rps_config_set(cfg, name, val);
		if (rc) {
			if (rc == -ENOENT)
				PyErr_Format(PyExc_ValueError,
					     "setting '%s': no such rdmaps setting (rdmaps-server "
					     "--config lists them)",
					     name);
			else
				PyErr_Format(PyExc_ValueError,
					     "setting %s=%s: not accepted (the reason is logged)",
					     name, val);
			Py_DECREF(sv);
			return -1;
		}
		Py_DECREF(sv);
	}
	return 0;
}

static int server_init(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *names[] = {"scheduler", "host", "transport", "secret", "settings", NULL};
	const char *sched = NULL, *host = NULL, *transport = NULL, *secret = NULL;
	struct pyserver *ps = (struct pyserver *)self;
	PyObject *settings = Py_None;
	struct rps_server_opts o;
	struct rps_config *cfg;
	struct rps_server *srv = NULL;
	int rc;

	if (ps->srv) {
		PyErr_SetString(PyExc_RuntimeError, "Server.__init__ called twice");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzzzO:InProcessServer", names, &sched, &host,
					 &transport, &secret, &settings))
		return -1;
	rc = rps_config_create(&cfg);
	if (rc) {
		rps_py_raise(rc, "the configuration (a bad RDMAPS_* variable? it is logged)");
		return -1;
	}
	if (set_settings(cfg, settings)) {
		rps_config_destroy(cfg);
		return -1;
	}
	memset(&o, 0, sizeof(o));
	o.field_mask = RPS_SERVER_OPT_CONFIG;
	o.config = cfg;
	if (sched) {
		o.field_mask |= RPS_SERVER_OPT_SCHEDULER;
		o.scheduler = sched;
	}
	if (host) {
		o.field_mask |= RPS_SERVER_OPT_HOST;
		o.host = host;
	}
	if (transport) {
		o.field_mask |= RPS_SERVER_OPT_TRANSPORT;
		o.transport = transport;
	}
	if (secret) {
		o.field_mask |= RPS_SERVER_OPT_SECRET;
		o.secret = secret;
	}
	Py_BEGIN_ALLOW_THREADS
		rc = rps_server_create(&o, &srv);
	Py_END_ALLOW_THREADS
	rps_config_destroy(cfg);
	if (rc) {
		rps_py_raise(rc, "creating the server");
		return -1;
	}
	ps->srv = srv;
	atomic_init(&ps->finished, 0);
	rc = pthread_create(&ps->thread, NULL, run_thread, ps);
	if (rc) {
		rps_server_destroy(srv);
		ps->srv = NULL;
		rps_py_raise(-rc, "starting the server's thread");
		return -1;
	}
	ps->started = 1;
	return 0;
}

/* Stop (if asked), join, destroy. */
static void server_end(struct pyserver *ps, int stop)
{
	if (!ps->srv)
		return;
	Py_BEGIN_ALLOW_THREADS
		if (stop)
			rps_server_stop(ps->srv);
		if (ps->started)
			pthread_join(ps->thread, NULL);
		rps_server_destroy(ps->srv);
	Py_END_ALLOW_THREADS
	ps->started = 0;
	ps->srv = NULL;
}

static PyObject *server_stop(PyObject *self, PyObject *unused)
{
	struct pyserver *ps = (struct pyserver *)self;

	server_end(ps, 1);
	if (ps->rc)
		return rps_py_raise(ps->rc, "the server ended with an error");
	Py_RETURN_NONE;
}

static PyObject *server_wait(PyObject *self, PyObject *args)
{
	struct pyserver *ps = (struct pyserver *)self;
	double timeout = -1;

	if (!PyArg_ParseTuple(args, "|d:wait", &timeout))
		return NULL;
	for (double waited = 0; ps->srv && !atomic_load(&ps->finished);) {
		if (timeout >= 0 && waited >= timeout)
			Py_RETURN_FALSE;
		rps_py_nap_ms(20);
		waited += 0.02;
		if (PyErr_CheckSignals() < 0)
			return NULL;
	}
	server_end(ps, 0);
	if (ps->rc)
		return rps_py_raise(ps->rc, "the server ended with an error");
	Py_RETURN_TRUE;
}

static PyObject *server_running(PyObject *self, void *c)
{
	struct pyserver *ps = (struct pyserver *)self;

	return PyBool_FromLong(ps->srv && !atomic_load(&ps->finished));
}

static void server_dealloc(PyObject *self)
{
	server_end((struct pyserver *)self, 1);
	Py_TYPE(self)->tp_free(self);
}

static PyMethodDef server_methods[] = {
    {"stop", server_stop, METH_NOARGS,
     "stop($self, /)\n--\n\nAsk the server to stop, wait for its thread, free it "
     "(idempotent). Raises the error it ended with, if any."},
    {"wait", server_wait, METH_VARARGS,
     "wait($self, timeout=-1, /)\n--\n\nWait until the server ends by itself (the job is "
     "over); True when it did, False after timeout seconds."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef server_getset[] = {
    {"running", server_running, NULL, "True while the server serves.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject rps_py_server_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rdmaps._core.InProcessServer",
    .tp_basicsize = sizeof(struct pyserver),
    .tp_dealloc = server_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "An rdmaps server in this process (use rdmaps.InProcessServer).",
    .tp_methods = server_methods,
    .tp_getset = server_getset,
    .tp_init = server_init,
    .tp_new = PyType_GenericNew,
};
