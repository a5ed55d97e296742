/* Helpers for the server unit tests: a shard driven in-process, without a
 * network, through a recording struct rps_shard_io. */
#ifndef TEST_SERVER_UTIL_H
#define TEST_SERVER_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/server_int.h"
#include "src/optim.h"

#define T_MAX_EVENTS 256
#define T_FN	     static __attribute__((unused))

struct t_ack {
	uint32_t req_id;
	int status;
	struct rps_declare_ack dack;
};

struct t_io {
	atomic_int npush;
	struct t_ack push[T_MAX_EVENTS];
	int ndecl;
	struct t_ack decl[T_MAX_EVENTS];
	char why[RPS_DECLARE_REASON_MAX + 1]; /* the last refusal's reason, "" if none */
	atomic_int npull;
	uint32_t pull_ids[T_MAX_EVENTS];
	uint32_t pull_clock[T_MAX_EVENTS]; /* shard clock when answered */
};

T_FN void t_push_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status)
{
	struct t_io *io = arg;
	int i = atomic_load(&io->npush);

	(void)sh;
	if (i < T_MAX_EVENTS) {
		io->push[i].req_id = req->req_id;
		io->push[i].status = status;
	}
	free(req->data);
	free(req);
	atomic_store(&io->npush, i + 1);
}

T_FN void t_declare_done(void *arg, struct rps_shard *sh, struct rps_srv_req *req, int status,
			 const struct rps_declare_ack *ack, const char *why)
{
	struct t_io *io = arg;

	(void)sh;
	snprintf(io->why, sizeof(io->why), "%s", why ? why : "");
	free(req->u.decl_optim);
	if (io->ndecl < T_MAX_EVENTS) {
		io->decl[io->ndecl].req_id = req->req_id;
		io->decl[io->ndecl].status = status;
		if (ack)
			io->decl[io->ndecl].dack = *ack;
	}
	io->ndecl++;
	free(req);
}

T_FN void t_pull_answer(void *arg, struct rps_shard *sh, struct rps_srv_req *req)
{
	struct t_io *io = arg;
	int i = atomic_load(&io->npull);

	if (i < T_MAX_EVENTS) {
		io->pull_ids[i] = req->req_id;
		io->pull_clock[i] = (uint32_t)rps_store_clock(&sh->store);
	}
	free(req);
	atomic_store(&io->npull, i + 1);
}

static const struct rps_shard_io t_io_ops = {
    .push_done = t_push_done,
    .declare_done = t_declare_done,
    .pull_answer = t_pull_answer,
};

/* 2 workers, 64 KiB store in chunks of 256 B (64 floats), sgd lr 0.5. */
T_FN void t_params(struct rps_shard_params *p, enum rps_consistency c)
{
	memset(p, 0, sizeof(*p));
	p->idx = 0;
	p->nworkers = 2;
	p->shard_bytes = 64 * 1024;
	p->chunk_bytes = 256;
	p->ring_size = 64;
	p->priority = RPS_PRIO_FIFO;
	p->consistency = c;
	p->staleness = 1;
	rps_optim_opts_default(&p->optim);
	p->optim.kind = RPS_OPT_SGD;
	p->optim.lr = 0.5f;
	p->init.kind = RPS_INIT_ZEROS;
	p->max_msg = 64 * 1024;
}

/* A DECLARE with the job's optimizer spec (optim NULL: none). */
T_FN int t_declare_opt(struct rps_shard *sh, uint64_t key, uint32_t slice, uint64_t nelems,
		       uint32_t init_kind, float a, float b, const struct rps_optim_opts *optim,
		       struct rps_declare_ack *ack_p)
{
	struct t_io *io = sh->io_arg;
	struct rps_srv_req *req = calloc(1, sizeof(*req));
	struct rps_ring_entry e;
	int n = io->ndecl;

	assert_non_null(req);
	if (optim) {
		req->u.decl_optim = malloc(sizeof(*optim));
		assert_non_null(req->u.decl_optim);
		*req->u.decl_optim = *optim;
		req->u.decl_flags = RPS_DECLARE_FLAG_OPTIM;
	}
	req->op = RPS_REQ_DECLARE;
	req->req_id = 1000 + (uint32_t)n;
	req->u.decl.key = key;
	req->u.decl.slice = slice;
	req->u.decl.shard = sh->p.idx;
	req->u.decl.nelems = nelems;
	req->u.decl.init_kind = init_kind;
	req->u.decl.init_a = a;
	req->u.decl.init_b = b;
	req->u.decl.seed = 7;
	rps_shard_push_entry(sh, req, &e);
	assert_int_equal(e.type, RPS_ENT_DECLARE);
	rps_shard_handle(sh, &e);
	assert_int_equal(io->ndecl, n + 1);
	if (ack_p)
		*ack_p = io->decl[n].dack;
	return io->decl[n].status;
}

T_FN int t_declare(struct rps_shard *sh, uint64_t key, uint32_t slice, uint64_t nelems,
		   uint32_t init_kind, float a, float b, struct rps_declare_ack *ack_p)
{
	return t_declare_opt(sh, key, slice, nelems, init_kind, a, b, NULL, ack_p);
}

/* Build a push entry the way the network thread does (validation included). */
T_FN void t_push_entry(struct rps_shard *sh, uint32_t worker, uint64_t key, uint32_t slice,
		       uint64_t off, uint32_t count, uint32_t clock, const float *g,
		       uint32_t req_id, struct rps_ring_entry *e)
{
	struct rps_srv_req *req = calloc(1, sizeof(*req));

	assert_non_null(req);
	req->op = RPS_REQ_PUSH;
	req->req_id = req_id;
	req->worker = worker;
	req->u.push.key = key;
	req->u.push.slice = slice;
	req->u.push.shard = sh->p.idx;
	req->u.push.offset = off;
	req->u.push.count = count;
	req->u.push.clock = clock;
	req->status = rps_shard_push_check(sh, &req->u.push, &req->meta);
	if (!req->status && count) {
		req->data = malloc(count * sizeof(float));
		assert_non_null(req->data);
		memcpy(req->data, g, count * sizeof(float));
	}
	rps_shard_push_entry(sh, req, e);
}

T_FN void t_push(struct rps_shard *sh, uint32_t worker, uint64_t key, uint32_t slice, uint64_t off,
		 uint32_t count, uint32_t clock, const float *g, uint32_t req_id)
{
	struct rps_ring_entry e;

	t_push_entry(sh, worker, key, slice, off, count, clock, g, req_id, &e);
	assert_int_equal(e.type, RPS_ENT_PUSH);
	rps_shard_handle(sh, &e);
}

T_FN void t_clock_entry(uint32_t worker, uint32_t clock, uint32_t pushes, struct rps_ring_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->type = RPS_ENT_CLOCK;
	e->info.worker = worker;
	e->info.clock = clock;
	e->u64 = pushes;
}

T_FN void t_clock(struct rps_shard *sh, uint32_t worker, uint32_t clock, uint32_t pushes)
{
	struct rps_ring_entry e;

	t_clock_entry(worker, clock, pushes, &e);
	rps_shard_handle(sh, &e);
}

T_FN void t_dead(struct rps_shard *sh, uint32_t worker)
{
	struct rps_ring_entry e;

	memset(&e, 0, sizeof(e));
	e.type = RPS_ENT_DEAD;
	e.info.worker = worker;
	rps_shard_handle(sh, &e);
}

T_FN void t_revive(struct rps_shard *sh, uint32_t worker)
{
	struct rps_ring_entry e;

	memset(&e, 0, sizeof(e));
	e.type = RPS_ENT_REVIVE;
	e.info.worker = worker;
	rps_shard_handle(sh, &e);
}

T_FN void t_read(struct rps_shard *sh, uint64_t key, uint32_t slice, uint64_t off, uint64_t n,
		 float *dst)
{
	struct rps_slice_meta *m = rps_srv_keytab_lookup(&sh->tab, key, slice);

	assert_non_null(m);
	rps_shard_read(sh, m, off, n, dst);
}

#endif
