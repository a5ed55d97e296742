#include "worker/req.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"

static _Atomic uint64_t core_ids; /* rps_wcore.id */

int rps_wcore_init(struct rps_wcore *core)
{
	pthread_condattr_t ca;

	memset(core, 0, sizeof(*core));
	core->id = atomic_fetch_add(&core_ids, 1) + 1;
	for (uint32_t i = 0; i < RPS_PIECE_MAX_BLOCKS; i++)
		atomic_init(&core->blocks[i], NULL);
	for (uint32_t i = 0; i < RPS_KEPT_SLOTS; i++)
		atomic_init(&core->kept[i], NULL);
	pthread_mutex_init(&core->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&core->cv, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

void rps_wcore_fini(struct rps_wcore *core)
{
	for (uint32_t i = 0; i < core->nblocks; i++)
		rps_free(atomic_load(&core->blocks[i]));
	for (uint32_t i = 0; i < core->nreq_blocks; i++)
		rps_free(core->req_blocks[i]);
	rps_free(core->req_blocks);
	pthread_cond_destroy(&core->cv);
	pthread_mutex_destroy(&core->lock);
	memset(core, 0, sizeof(*core));
}

static _Thread_local uint64_t progress_of; /* id of the core whose progress thread this is */

void rps_wcore_be_progress(struct rps_wcore *core)
{
	progress_of = core->id;
}

int rps_wcore_on_progress(const struct rps_wcore *core)
{
	return progress_of == core->id;
}

void rps_wcore_unlock(struct rps_wcore *core)
{
	int kick = (core->drain_head || core->abort_pending) && !rps_wcore_on_progress(core);

	pthread_mutex_unlock(&core->lock);
	if (kick && core->wake)
		core->wake(core->wake_arg);
}

/* ---- pieces ---- */

static int piece_grow_locked(struct rps_wcore *core)
{
	struct rps_piece *b;
	uint32_t bi = core->nblocks;

	if (bi >= RPS_PIECE_MAX_BLOCKS)
		return -ENOMEM;
	b = rps_calloc(RPS_PIECE_BLOCK, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (uint32_t i = RPS_PIECE_BLOCK; i-- > 0;) {
		b[i].slot = bi * RPS_PIECE_BLOCK + i;
		atomic_init(&b[i].gen, 0);
		b[i].next = core->free_pieces;
		core->free_pieces = &b[i];
	}
	atomic_store_explicit(&core->blocks[bi], b, memory_order_release);
	core->nblocks++;
	return 0;
}

static struct rps_piece *piece_at(struct rps_wcore *core, uint32_t slot)
{
	uint32_t bi = slot / RPS_PIECE_BLOCK;
	struct rps_piece *b;

	if (bi >= RPS_PIECE_MAX_BLOCKS)
		return NULL;
	b = atomic_load_explicit(&core->blocks[bi], memory_order_acquire);
	return b ? &b[slot % RPS_PIECE_BLOCK] : NULL;
}

struct rps_piece *rps_piece_by_reqid(struct rps_wcore *core, uint32_t req_id)
{
	struct rps_piece *p = piece_at(core, req_id & RPS_REQID_SLOT_MASK);
	uint32_t gen;

	if (!p)
		return NULL;
	gen = atomic_load_explicit(&p->gen, memory_order_acquire);
	if (((gen << RPS_REQID_SLOT_BITS) | p->slot) != req_id)
		return NULL;
	return p;
}

struct rps_piece *rps_piece_by_ctx(struct rps_wcore *core, uint64_t ctx)
{
	struct rps_piece *p;
	uint32_t gen;

	if (!(ctx >> 63))
		return NULL;
	p = piece_at(core, (uint32_t)(ctx & 0xffffffu));
	if (!p)
		return NULL;
	gen = atomic_load_explicit(&p->gen, memory_order_acquire);
	if ((gen & 0x7fffffffu) != (uint32_t)((ctx >> 32) & 0x7fffffffu))
		return NULL;
	return p;
}

struct rps_piece *rps_piece_alloc_locked(struct rps_wcore *core, struct rps_req *req,
					 uint8_t kind, uint8_t waits)
{
	struct rps_piece *p;

	if (!core->free_pieces && piece_grow_locked(core))
		return NULL;
	p = core->free_pieces;
	core->free_pieces = p->next;
	p->next = NULL;
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	p->kind = kind;
	p->waits = waits;
	p->resend = 0;
	p->status = 0;
	p->req = req;
	p->conn = NULL;
	p->server = p->shard = 0;
	if (req)
		req->remaining++;
	core->pieces_inuse++;
	core->pieces_total++;
	return p;
}

uint64_t rps_wcore_pieces_locked(struct rps_wcore *core)
{
	return core->pieces_inuse;
}

static void req_complete_locked(struct rps_req *req);

static void req_put_locked(struct rps_req *req)
{
	if (--req->remaining == 0)
		req_complete_locked(req);
}

static void req_abort_locked(struct rps_wcore *core, struct rps_req *req)
{
	if (req && !req->aborted) {
		req->aborted = 1;
		core->abort_pending = 1;
	}
}

void rps_piece_conn_lost_locked(struct rps_wcore *core, struct rps_piece *p, int status)
{
	if (!p->kind)
		return;
	if (!status)
		status = -ECONNRESET;
	if (!p->status) {
		p->status = status;
		if (p->req && !p->req->status)
			p->req->status = status;
	}
	req_abort_locked(core, p->req);
}

void rps_piece_clear_locked(struct rps_wcore *core, struct rps_piece *p, unsigned mask,
			    int status)
{
	struct rps_req *req;

	if (!p->kind)
		return; /* already finished */
	if (status && !p->status) {
		p->status = status;
		if (p->req && !p->req->status)
			p->req->status = status; /* the first error seen, not finished */
	}
	/* the piece's own status, whenever it was recorded (a READ_DONE or a
	 * failed post sets it before the piece finishes) */
	if (p->status && rps_status_is_conn(p->status))
		req_abort_locked(core, p->req);
	p->waits &= (uint8_t)~mask;
	if (p->waits)
		return;
	if (core->piece_fini)
		core->piece_fini(core->piece_fini_arg, p);
	req = p->req;
	if (req && p->status && !req->status)
		req->status = p->status;
	p->kind = 0;
	p->req = NULL;
	p->conn = NULL;
	/* a new generation at once, so late answers for this piece are stale */
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	p->next = core->free_pieces;
	core->free_pieces = p;
	core->pieces_inuse--;
	if (req)
		req_put_locked(req);
}

int rps_wcore_fail_conn_locked(struct rps_wcore *core, const struct rps_wconn *c, int status)
{
	int n = 0;

	for (uint32_t bi = 0; bi < core->nblocks; bi++) {
		struct rps_piece *b = atomic_load_explicit(&core->blocks[bi], memory_order_relaxed);

		for (uint32_t i = 0; i < RPS_PIECE_BLOCK; i++) {
			struct rps_piece *p = &b[i];

			if (p->kind && p->conn == c) {
				if ((p->kind == RPS_PK_PUSH || p->kind == RPS_PK_PULL) &&
				    core->keep_pushes) {
					/* sent again to the promoted backup
					 * (reconnect.c); the old SEND_DONE never comes */
					p->waits &= (uint8_t)~RPS_PW_SEND;
					if (p->kind == RPS_PK_PULL)
						p->u.pull.receiving = 0;
					p->resend = 1;
					continue;
				}
				if (p->kind == RPS_PK_RPULL || p->kind == RPS_PK_RHDR)
					p->u.rp.outstanding = 0;
				/* whatever the code (-ETIMEDOUT: RDMA retries exceeded) */
				rps_piece_conn_lost_locked(core, p, status);
				rps_piece_clear_locked(core, p, RPS_PW_ALL, status);
				n++;
			}
		}
	}
	return n;
}

int rps_piece_detach_locked(struct rps_wcore *core, struct rps_piece *p)
{
	struct rps_req *req = p->req;

	if (!p->kind || !req || !req->aborted)
		return 0;
	switch (p->kind) {
	case RPS_PK_PULL:
		if (p->u.pull.receiving)
			return 0; /* data is landing in the caller's buffer right now */
		p->u.pull.dest = NULL;
		break;
	case RPS_PK_PUSH:
		if (p->waits & RPS_PW_SEND)
			return 0; /* the transport still reads the caller's gradients */
		break;
	case RPS_PK_DECLARE:
		p->u.decl.out = NULL;
		break;
	case RPS_PK_RPULL:
	case RPS_PK_RHDR:
		if (!p->status)
			p->status = -ECANCELED; /* post no more READs */
		if (p->u.rp.outstanding)
			return 0; /* finishes at its last READ_DONE */
		rps_piece_clear_locked(core, p, RPS_PW_ALL, 0);
		return 1;
	default:
		return 0;
	}
	p->req = NULL;
	req_put_locked(req);
	return 1;
}

void rps_wcore_abort_scan_locked(struct rps_wcore *core)
{
	if (!core->abort_pending)
		return;
	core->abort_pending = 0;
	for (uint32_t bi = 0; bi < core->nblocks; bi++) {
		struct rps_piece *b = atomic_load_explicit(&core->blocks[bi], memory_order_relaxed);

		for (uint32_t i = 0; i < RPS_PIECE_BLOCK; i++)
			if (b[i].kind && b[i].req && b[i].req->aborted)
				rps_piece_detach_locked(core, &b[i]);
	}
}

/* ---- requests ---- */

static int req_grow_locked(struct rps_wcore *core)
{
	struct rps_req *b;

	if (core->nreq_blocks == core->req_blocks_cap) {
		uint32_t cap = core->req_blocks_cap ? core->req_blocks_cap * 2 : 16;
		void **nb = rps_realloc(core->req_blocks, cap * sizeof(*nb));

		if (!nb)
			return -ENOMEM;
		core->req_blocks = nb;
		core->req_blocks_cap = cap;
	}
	b = rps_calloc(RPS_REQ_BLOCK, sizeof(*b));
	if (!b)
		return -ENOMEM;
	core->req_blocks[core->nreq_blocks++] = b;
	for (uint32_t i = RPS_REQ_BLOCK; i-- > 0;) {
		b[i].next = core->free_reqs;
		core->free_reqs = &b[i];
	}
	return 0;
}

/* A request from the pool, its flags cleared (not dr: a direct request's,
 * which only its creator reads). NULL on -ENOMEM. */
static struct rps_req *req_pop_locked(struct rps_wcore *core)
{
	struct rps_req *r;

	if (!core->free_reqs && req_grow_locked(core))
		return NULL;
	r = core->free_reqs;
	core->free_reqs = r->next;
	memset(r, 0, offsetof(struct rps_req, dr));
	r->core = core;
	return r;
}

struct rps_req *rps_wreq_new_locked(struct rps_wcore *core, rps_done_cb cb, void *arg)
{
	struct rps_req *r = req_pop_locked(core);

	if (!r)
		return NULL;
	r->remaining = 1; /* the guard */
	r->cb = cb;
	r->arg = arg;
	core->reqs_inflight++;
	return r;
}

/* Each thread keeps the last direct request it finished, with its scratch,
 * in a slot of the core (its own, unless more threads than slots share
 * them) for its next one: a pull that takes no lock to start and none to
 * end. A request is the core's memory, freed with it. */
static _Atomic unsigned thread_slots;
static _Thread_local unsigned my_slot; /* 0: none yet; else slot index + 1 */

static unsigned kept_slot(void)
{
	if (!my_slot)
		my_slot = atomic_fetch_add(&thread_slots, 1) % RPS_KEPT_SLOTS + 1;
	return my_slot - 1;
}

struct rps_req *rps_wreq_new_direct(struct rps_wcore *core)
{
	struct rps_req *r =
	    atomic_exchange_explicit(&core->kept[kept_slot()], NULL, memory_order_acq_rel);

	if (r) {
		/* the flags; dr is the creator's to fill (dr.lines stays) */
		memset(r, 0, offsetof(struct rps_req, dr));
		r->core = core;
	} else {
		pthread_mutex_lock(&core->lock);
		r = req_pop_locked(core);
		pthread_mutex_unlock(&core->lock);
		if (!r)
			return NULL;
		r->dr.lines = NULL;
	}
	r->direct = 1;
	return r;
}

void rps_wreq_free_direct(struct rps_req *req)
{
	struct rps_wcore *core = req->core;

	if (req->dr.lines) {
		/* kept; one that another thread kept in the same slot goes back */
		req = atomic_exchange_explicit(&core->kept[kept_slot()], req, memory_order_acq_rel);
		if (!req)
			return;
	}
	pthread_mutex_lock(&core->lock);
	core->direct_fini_locked(core->direct_arg, req);
	rps_wreq_free_locked(req);
	pthread_mutex_unlock(&core->lock);
}

struct rps_req *rps_wreq_new(struct rps_wcore *core, rps_done_cb cb, void *arg)
{
	struct rps_req *r;

	pthread_mutex_lock(&core->lock);
	r = rps_wreq_new_locked(core, cb, arg);
	pthread_mutex_unlock(&core->lock);
	return r;
}

void rps_wreq_free_locked(struct rps_req *r)
{
	struct rps_wcore *core = r->core;

	r->core = NULL;
	r->next = core->free_reqs;
	core->free_reqs = r;
}

static void req_complete_locked(struct rps_req *req)
{
	struct rps_wcore *core = req->core;

	__atomic_store_n(&req->done, 1, __ATOMIC_RELEASE); /* spin_wait reads it unlocked */
	core->reqs_inflight--;
	if (req->cb || req->orphan) {
		req->queued = 1;
		req->next = NULL;
		if (core->drain_tail)
			core->drain_tail->next = req;
		else
			core->drain_head = req;
		core->drain_tail = req;
	}
	if (core->cv_waiters)
		pthread_cond_broadcast(&core->cv);
}

void rps_wreq_fail_locked(struct rps_req *req, int status)
{
	if (status && !req->status)
		req->status = status;
}

void rps_wreq_seal_locked(struct rps_req *req)
{
	req_put_locked(req);
}

/* A callback request has no waiter to reap its completions: if callers
 * spun lately, the progress thread may be sleeping without completion
 * events (see spin_wait); make it take over now. */
#define SPIN_RECENT_NS 20000000ull

void rps_wreq_seal(struct rps_req *req)
{
	struct rps_wcore *core = req->core;
	int kick = req->cb && core->spin && core->wake &&
		   rps_now_ns() - atomic_load_explicit(&core->spin_last_ns, memory_order_relaxed) <
		       SPIN_RECENT_NS;

	pthread_mutex_lock(&core->lock);
	req_put_locked(req);
	rps_wcore_unlock(core);
	if (kick)
		core->wake(core->wake_arg);
}

int rps_wcore_drain(struct rps_wcore *core)
{
	struct rps_req *list;
	int n = 0;

	pthread_mutex_lock(&core->lock);
	list = core->drain_head;
	core->drain_head = core->drain_tail = NULL;
	pthread_mutex_unlock(&core->lock);
	for (struct rps_req *r = list; r; r = r->next) {
		if (r->cb)
			r->cb(r->status, r->arg);
		n++;
	}
	if (!list)
		return 0;
	pthread_mutex_lock(&core->lock);
	while (list) {
		struct rps_req *r = list;

		list = r->next;
		rps_wreq_free_locked(r);
	}
	pthread_mutex_unlock(&core->lock);
	return n;
}
