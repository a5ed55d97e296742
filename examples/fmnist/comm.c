#include "comm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 32
#define QUEUE 128

enum { OP_PUSH, OP_END_STEP, OP_STOP };

struct op {
	int type, t, buf;
};

struct comm {
	struct rps_worker *w;
	int n;
	const rps_key_t *keys;
	const size_t *lens, *off;
	float *params;
	float *grad[2];
	int order[MAX_TENSORS];
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct op q[QUEUE];
	unsigned head, tail;
	int err;
	/* per tensor: a pull expected by the compute thread / posted by us */
	int pull_expected[MAX_TENSORS], pull_posted[MAX_TENSORS];
	struct rps_req *pull_req[MAX_TENSORS];
	int push_expected[2][MAX_TENSORS], push_posted[2][MAX_TENSORS];
	struct rps_req *push_req[2][MAX_TENSORS];
};

/* A server went away (killed, restarted from its checkpoint): requests that
 * were in flight on it fail with these; the library reconnects on the next
 * call. A lost pull is issued again; a lost push is an update the restarted
 * server does not have anyway (it went back to its checkpoint). */
static int lost(int rc)
{
	return rc == -ECONNRESET || rc == -EHOSTDOWN;
}

static void set_err(struct comm *c, int rc, const char *what, int t)
{
	pthread_mutex_lock(&c->lock);
	if (!c->err) {
		c->err = rc;
		fprintf(stderr, "fmnist-train: %s of tensor %d: %s\n", what, t, rps_strerror(rc));
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void post_push(struct comm *c, int t, int buf)
{
	struct rps_req *req = NULL;
	int rc = rps_worker_push(c->w, &c->keys[t], c->grad[buf] + c->off[t], &c->lens[t], 1, &req);

	if (rc) {
		set_err(c, rc, "push", t);
		return;
	}
	pthread_mutex_lock(&c->lock);
	c->push_req[buf][t] = req;
	c->push_posted[buf][t] = 1;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void post_end_step(struct comm *c)
{
	int rc = rps_worker_clock(c->w);

	if (rc && !lost(rc)) { /* the clock moved on even so */
		set_err(c, rc, "clock after", -1);
		return;
	}
	for (int i = 0; i < c->n; i++) {
		int t = c->order[i];
		struct rps_req *req = NULL;

		rc = rps_worker_pull(c->w, &c->keys[t], c->params + c->off[t], &c->lens[t], 1, &req);
		if (rc) {
			set_err(c, rc, "pull", t);
			return;
		}
		pthread_mutex_lock(&c->lock);
		c->pull_req[t] = req;
		c->pull_posted[t] = 1;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
	}
}

static void *comm_thread(void *arg)
{
	struct comm *c = arg;

	for (;;) {
		struct op op;

		pthread_mutex_lock(&c->lock);
		while (c->head == c->tail)
			pthread_cond_wait(&c->cond, &c->lock);
		op = c->q[c->head % QUEUE];
		c->head++;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		if (op.type == OP_STOP)
			return NULL;
		if (op.type == OP_PUSH)
			post_push(c, op.t, op.buf);
		else
			post_end_step(c);
	}
}

static int enqueue(struct comm *c, int type, int t, int buf)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	while (c->tail - c->head >= QUEUE && !c->err)
		pthread_cond_wait(&c->cond, &c->lock);
	rc = c->err;
	if (!rc || type == OP_STOP) {
		c->q[c->tail % QUEUE] = (struct op){ .type = type, .t = t, .buf = buf };
		c->tail++;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	return type == OP_STOP ? 0 : rc;
}

int comm_start(struct rps_worker *w, int ntensors, const rps_key_t *keys, const size_t *lens,
	       const size_t *off, float *params, float *const grad[2], const int *order,
	       struct comm **c_p)
{
	struct comm *c;

	if (ntensors < 1 || ntensors > MAX_TENSORS)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct comm){ .w = w, .n = ntensors, .keys = keys, .lens = lens, .off = off,
			    .params = params, .grad = { grad[0], grad[1] } };
	memcpy(c->order, order, (size_t)ntensors * sizeof(int));
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	if (pthread_create(&c->thread, NULL, comm_thread, c) != 0) {
		free(c);
		return -EAGAIN;
	}
	*c_p = c;
	return 0;
}

int comm_push(struct comm *c, int t, int buf)
{
	pthread_mutex_lock(&c->lock);
	c->push_expected[buf][t] = 1;
	pthread_mutex_unlock(&c->lock);
	return enqueue(c, OP_PUSH, t, buf);
}

int comm_end_step(struct comm *c)
{
	pthread_mutex_lock(&c->lock);
	for (int t = 0; t < c->n; t++)
		c->pull_expected[t] = 1;
	pthread_mutex_unlock(&c->lock);
	return enqueue(c, OP_END_STEP, 0, 0);
}

/* Take the request behind a posted flag once it is posted (or an error). */
static int take(struct comm *c, int *expected, int *posted, struct rps_req **slot,
		struct rps_req **req_p)
{
	int rc = 0;

	*req_p = NULL;
	pthread_mutex_lock(&c->lock);
	if (*expected) {
		while (!*posted && !c->err)
			pthread_cond_wait(&c->cond, &c->lock);
		if (*posted) {
			*req_p = *slot;
			*slot = NULL;
			*posted = 0;
			*expected = 0;
		} else {
			rc = c->err;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int comm_wait_param(struct comm *c, int t)
{
	struct rps_req *req;
	int rc = take(c, &c->pull_expected[t], &c->pull_posted[t], &c->pull_req[t], &req);

	if (!rc && req)
		rc = rps_req_wait(req, -1);
	for (int tries = 0; lost(rc) && tries < 3; tries++) {
		fprintf(stderr, "fmnist-train: pull of tensor %d: %s: pulling again\n", t,
			rps_strerror(rc));
		rc = rps_worker_pull(c->w, &c->keys[t], c->params + c->off[t], &c->lens[t], 1, &req);
		if (!rc)
			rc = rps_req_wait(req, -1);
	}
	if (rc)
		set_err(c, rc, "pull", t);
	return rc;
}

int comm_wait_pushes(struct comm *c, int buf)
{
	int rc = 0;

	for (int t = 0; t < c->n; t++) {
		struct rps_req *req;
		int r = take(c, &c->push_expected[buf][t], &c->push_posted[buf][t],
			     &c->push_req[buf][t], &req);

		if (!r && req && (r = rps_req_wait(req, -1)) && lost(r)) {
			fprintf(stderr, "fmnist-train: push of tensor %d: %s: update lost\n", t,
				rps_strerror(r));
			r = 0;
		}
		if (r)
			set_err(c, r, "push", t);
		rc = rc ? rc : r;
	}
	return rc;
}

int comm_stop(struct comm *c)
{
	int rc = 0, r;

	for (int t = 0; t < c->n; t++)
		if ((r = comm_wait_param(c, t)) && !rc)
			rc = r;
	for (int b = 0; b < 2; b++)
		if ((r = comm_wait_pushes(c, b)) && !rc)
			rc = r;
	enqueue(c, OP_STOP, 0, 0);
	pthread_join(c->thread, NULL);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
	return rc;
}
