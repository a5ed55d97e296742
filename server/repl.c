/* Replicated shards, the server's part (server/repl.h): the primary's link
 * to its backup and the forwarding from its update threads, the pushes'
 * acknowledgements that wait for both, and the standby: its link to its
 * primary, the entries it receives, its promotion when the primary dies. */
#include "server/repl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "control/control.h"
#include "server/repl_copy.h"
#include "server/repl_log.h"
#include "server/server_int.h"
#include "src/auth.h"
#include "src/alloc.h"
#include "src/codec.h"
#include "src/log.h"
#include "src/util.h"

#define PEND_MAX 65536u

/* LINK_CLOSING: the head of a chain of 3 lost its first backup; it logs and
 * waits for the second to link (repl_log.h) */
enum { LINK_NONE = 0, LINK_WAIT, LINK_UP, LINK_LOST, LINK_CLOSING };

/* A worker's push forwarded: acknowledged when both are done. */
struct pend {
	struct rps_srv_conn *sc; /* a reference; NULL: free */
	uint32_t req_id;
	int32_t status;
	uint32_t left; /* 2: local and backup, 1, 0 */
	uint32_t next_free;
	uint32_t shard; /* with a log (repl_log.h): the entry's shard and number */
	uint64_t seq;
};

struct rps_repl {
	struct rps_server *srv;
	/* primary */
	pthread_mutex_t lock; /* pend, link */
	pthread_cond_t cond;  /* link state */
	atomic_int state;     /* LINK_* */
	struct rps_srv_conn *link;
	struct pend *pend;
	uint32_t free_head; /* index + 1, 0: none */
	uint32_t npend;
	int timeout_ms;
	struct rps_repl_addr b1; /* where the backup listens (port 0: not known yet) */
	/* the standbys this server hosts (a primary's struct): [0] the backup of
	 * server rank - 1, [1] (RDMAPS_REPLICAS=3) the second of rank - 2 */
	struct rps_server *sb[2];
	/* a standby's own (srv is the standby): the backup of server standby_of */
	uint32_t standby_of; /* UINT32_MAX: this is no standby */
	struct rps_server *host; /* the server whose process hosts it */
	uint32_t host_rank;
	uint32_t pos; /* 1: the primary's first backup, 2: the second (linked to the first) */
	char phost[64];
	uint16_t pport;
	struct rps_srv_conn *uplink;
	atomic_int uplink_lost, promoted, stop;
	pthread_t serve_thread, link_thread;
	int serve_ok, link_ok;
	/* the head of a chain of 3 (RDMAPS_REPLICAS=3): what it forwarded, kept
	 * until the last backup holds it (repl_log.h); closing_off: no more
	 * closing over a dead first backup (done once, or stopping) */
	struct rps_repl_log *log;
	atomic_int closing_off;
	pthread_t closer;
	int closer_ok;
	/* a second backup: the head's address, and the entries of each shard
	 * received from the first backup (its place in the head's log) */
	char hhost[64];
	uint16_t hport;
	uint64_t *rcvd;
	/* a replacement server joining as this server's backup (repl_join.c):
	 * shard_on[s] once shard s's state went to it (forwarded from then on;
	 * all 1 for a backup linked from the start); joinable: RDMAPS_REPLICAS=2
	 * and serving (a primary, or a promoted backup) */
	atomic_int *shard_on;
	int joinable;
	atomic_int ncopied;
	atomic_ullong copy_bytes;
	/* a joining standby's own: join_rc 0 while connecting, 1 linked, < 0
	 * refused; the shards' states coming in pieces; the shards loaded */
	int joining;
	atomic_int join_rc;
	struct copy_in *copy_in;
	atomic_int nloaded;
	atomic_ullong loaded_bytes;
	/* a replacement server's (the host without a rank): the map from the
	 * scheduler (repl_join.c) */
	struct rps_repl_mapper *mapper;
};

/* A shard's state arriving in REPL_COPY pieces (joining standby). */
struct copy_in {
	char *buf;
	uint64_t total, got;
};

/* The entry of a shard's state to load (RPS_ENT_REPL_LOAD). */
struct repl_load {
	struct rps_server *sb;
	struct rps_srv_conn *sc; /* a reference: REPL_COPIED goes there */
	char *buf;
	uint64_t len;
};

static void repl_free(struct rps_repl *r);

/* ---- pending acknowledgements (primary) ----------------------------------- */

static uint32_t pend_alloc(struct rps_repl *r, struct rps_srv_conn *sc, uint32_t req_id)
{
	uint32_t id;

	pthread_mutex_lock(&r->lock);
	while (!r->free_head && (atomic_load(&r->state) == LINK_UP ||
				 atomic_load(&r->state) == LINK_CLOSING)) {
		/* as many pushes wait for the backup as fit: wait for its acks */
		pthread_mutex_unlock(&r->lock);
		rps_sleep_ms(1);
		pthread_mutex_lock(&r->lock);
	}
	if (!r->free_head ||
	    (atomic_load(&r->state) != LINK_UP && atomic_load(&r->state) != LINK_CLOSING)) {
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	id = r->free_head;
	r->free_head = r->pend[id - 1].next_free;
	rps_srv_conn_get(sc);
	r->pend[id - 1] = (struct pend){.sc = sc, .req_id = req_id, .left = 2};
	pthread_mutex_unlock(&r->lock);
	return id;
}

/* Under lock: one of the two is done; the ack goes if both are. */
static void pend_done_locked(struct rps_repl *r, uint32_t id, int local, int status)
{
	struct pend *p = &r->pend[id - 1];

	if (local)
		p->status = status;
	if (--p->left)
		return;
	rps_srv_send_small(r->srv, p->sc, RPS_OP_PUSH_ACK, p->req_id, p->status, NULL, 0);
	rps_srv_conn_put(r->srv, p->sc);
	p->sc = NULL;
	p->next_free = r->free_head;
	r->free_head = id;
}

int rps_repl_local_done(struct rps_server *srv, uint32_t id, int status)
{
	struct rps_repl *r = srv->repl;
	struct pend *p;

	if (!r || !id || id > r->npend)
		return 1;
	pthread_mutex_lock(&r->lock);
	p = &r->pend[id - 1];
	if (p->left == 2) {
		p->status = status;
		p->left = 1; /* the backup's ack sends it */
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	/* the backup was first (or is gone): the caller acks now */
	rps_srv_conn_put(srv, p->sc);
	p->sc = NULL;
	p->left = 0;
	p->next_free = r->free_head;
	r->free_head = id;
	pthread_mutex_unlock(&r->lock);
	return 1;
}

static void backup_ack(struct rps_repl *r, uint32_t id, int status)
{
	uint32_t shard = 0;
	uint64_t seq = 0;

	if (!id || id > r->npend)
		return;
	pthread_mutex_lock(&r->lock);
	if (r->pend[id - 1].sc && r->pend[id - 1].left) {
		if (status)
			RPS_WARN("backup: a forwarded push failed there: %s", rps_strerror(status));
		shard = r->pend[id - 1].shard;
		seq = r->pend[id - 1].seq;
		pend_done_locked(r, id, 0, 0);
	}
	pthread_mutex_unlock(&r->lock);
	if (seq && r->log) /* the last backup holds it and everything before */
		rps_repl_log_trim(r->log, (int)shard, seq);
}

/* A chain of 3 whose first backup died: give up waiting for the second
 * after RDMAPS_TIMEOUT_MS (then unreplicated, as without a log). */
static void link_lost(struct rps_repl *r, const char *why);
static void *closer_main(void *arg)
{
	struct rps_repl *r = arg;
	uint64_t deadline = rps_now_ns() + (uint64_t)r->timeout_ms * 1000000ull;

	while (atomic_load(&r->state) == LINK_CLOSING && !atomic_load(&r->srv->stop) &&
	       !atomic_load(&r->closing_off) && rps_now_ns() < deadline)
		rps_sleep_ms(10);
	if (atomic_load(&r->state) == LINK_CLOSING) {
		atomic_store(&r->closing_off, 1);
		link_lost(r, atomic_load(&r->srv->stop)
				 ? "stopping"
				 : "the second backup did not link within RDMAPS_TIMEOUT_MS");
	}
	return NULL;
}

/* The backup is gone: every push waits for the primary only; or, the head
 * of a chain of 3 that lost its first backup, the second is waited for. */
static void link_lost(struct rps_repl *r, const char *why)
{
	int was;

	if (r->log && !atomic_load(&r->closing_off) && !atomic_load(&r->srv->stop) &&
	    !rps_repl_log_broken(r->log)) {
		pthread_mutex_lock(&r->lock);
		was = atomic_load(&r->state);
		if (was == LINK_UP) {
			atomic_store(&r->state, LINK_CLOSING);
			if (r->link) {
				rps_srv_conn_put(r->srv, r->link);
				r->link = NULL;
			}
			RPS_WARN("replication: the first backup of this server's shards is lost (%s): "
				 "waiting up to %d ms (RDMAPS_TIMEOUT_MS) for the second to link here "
				 "(the chain closes over the dead one); pushes wait meanwhile",
				 why, r->timeout_ms);
			if (!r->closer_ok && !pthread_create(&r->closer, NULL, closer_main, r))
				r->closer_ok = 1;
			pthread_cond_broadcast(&r->cond);
			pthread_mutex_unlock(&r->lock);
			return;
		}
		pthread_mutex_unlock(&r->lock);
		if (was == LINK_CLOSING)
			return; /* the closer decides */
	}
	was = atomic_exchange(&r->state, LINK_LOST);
	if (was != LINK_LOST && r->pos == 1 && r->uplink && !atomic_load(&r->uplink_lost) &&
	    !atomic_load(&r->stop)) {
		/* the first backup of a chain of 3 lost the second: the head
		 * has no chain to close if this one dies too */
		rps_srv_send_small(r->srv, r->uplink, RPS_OP_REPL_LAST, 0, 0, NULL, 0);
	}

	pthread_mutex_lock(&r->lock);
	if (was != LINK_LOST && !atomic_load(&r->srv->stop) && r->standby_of != UINT32_MAX &&
	    !atomic_load(&r->promoted))
		RPS_WARN("replication: the second backup of server %u's shards is lost (%s): "
			 "this first backup is the last",
			 r->standby_of, why);
	else if (was != LINK_LOST && !atomic_load(&r->srv->stop))
		RPS_WARN("replication: the backup of this server's shards is lost (%s): they are "
			 "no longer replicated",
			 why);
	for (uint32_t i = 0; i < r->npend; i++)
		if (r->pend[i].sc && r->pend[i].left)
			pend_done_locked(r, i + 1, 0, 0);
	if (r->link) {
		rps_srv_conn_put(r->srv, r->link);
		r->link = NULL;
	}
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* ---- forwarding (primary's update threads) ------------------------------- */

static int link_wait(struct rps_repl *r)
{
	int st = atomic_load(&r->state);

	if (st == LINK_WAIT) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += r->timeout_ms / 1000;
		ts.tv_nsec += (long)(r->timeout_ms % 1000) * 1000000l;
		if (ts.tv_nsec >= 1000000000l) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000l;
		}
		pthread_mutex_lock(&r->lock);
		while (atomic_load(&r->state) == LINK_WAIT &&
		       !atomic_load(&r->srv->stop))
			if (pthread_cond_timedwait(&r->cond, &r->lock, &ts))
				break;
		pthread_mutex_unlock(&r->lock);
		st = atomic_load(&r->state);
		if (st == LINK_WAIT && !atomic_load(&r->srv->stop)) {
			RPS_ERR("replication: no backup connected within %d ms (RDMAPS_TIMEOUT_MS): "
				"going on without one; check that every server of the job runs "
				"with RDMAPS_REPLICAS=%d",
				r->timeout_ms, r->srv->cfg->replicas);
			link_lost(r, "never connected");
		}
		st = atomic_load(&r->state);
	}
	return st == LINK_UP || st == LINK_CLOSING;
}

static void forward_ex(struct rps_repl *r, struct rps_shard *sh, const struct rps_ring_entry *e,
		       int noseq)
{
	struct rps_repl_fwd f;
	struct rps_frame_hdr h;
	struct iovec iov[4];
	struct rps_push pcopy;
	struct rps_optim_wire wire;
	struct rps_srv_req *req = NULL;
	struct rps_srv_conn *link;
	int n = 1, rc, logging, closing;
	uint32_t id = 0, type = e->type;
	uint64_t seq = 0;
	size_t len;

	/* a first backup of a chain (RDMAPS_REPLICAS=3) goes on down to the
	 * second: an RPS_ENT_REPL comes back here as the PUSH / ASSIGN /
	 * DECLARE it holds (rps_repl_apply), forwarded then */
	switch (type) {
	case RPS_ENT_PUSH:
	case RPS_ENT_ASSIGN:
	case RPS_ENT_DECLARE:
	case RPS_ENT_CLOCK:
	case RPS_ENT_DEAD:
	case RPS_ENT_REVIVE:
	case RPS_ENT_SYNC:
		break;
	default:
		return; /* checkpoints, restores, control requests: the primary's own */
	}
	if (r->shard_on && !atomic_load(&r->shard_on[sh->p.idx]))
		return; /* a joining backup gets this shard's state later (its copy) */
	if (!link_wait(r))
		return;
	memset(&f, 0, sizeof(f));
	f.type = type;
	f.shard = sh->p.idx;
	f.worker = e->info.worker;
	f.clock = (uint32_t)e->info.clock;
	f.u64 = e->u64;
	iov[0].iov_base = &f;
	iov[0].iov_len = sizeof(f);
	if (type == RPS_ENT_PUSH || type == RPS_ENT_ASSIGN) {
		req = e->ptr;
		f.status = req->status;
		f.worker = req->worker;
		pcopy = req->u.push;
		if (req->status || !req->data)
			pcopy.count = 0; /* refused: counted there, not applied */
		iov[n].iov_base = &pcopy;
		iov[n++].iov_len = sizeof(pcopy);
		if (req->has_seq && !noseq) {
			f.flags |= RPS_PUSH_FLAG_SEQ;
			iov[n].iov_base = &req->seq;
			iov[n++].iov_len = sizeof(req->seq);
		}
		if (pcopy.count) {
			iov[n].iov_base = req->data;
			iov[n++].iov_len = (size_t)pcopy.count * sizeof(float);
			if (req->codec) { /* still compressed: forwarded as it came */
				f.flags |= req->codec;
				iov[n - 1].iov_len = req->data_len;
			}
		}
	} else if (type == RPS_ENT_DECLARE) {
		req = e->ptr;
		f.worker = req->worker;
		iov[n].iov_base = &req->u.decl;
		iov[n++].iov_len = sizeof(req->u.decl);
		/* a pull precision (server/lowprec.h): the backup makes the copy too */
		f.flags = req->u.decl_flags & RPS_DECLARE_FLAG_LOWPREC;
		if (req->u.decl_optim) {
			f.flags |= RPS_DECLARE_FLAG_OPTIM;
			rps_optim_wire_encode(req->u.decl_optim, &wire);
			iov[n].iov_base = &wire;
			iov[n++].iov_len = sizeof(wire);
		}
		req = NULL;
	}
	len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (req && req->sc) {
		id = pend_alloc(r, req->sc, req->req_id);
		if (!id)
			return; /* the link went meanwhile */
	}
	rps_proto_hdr_init(&h, RPS_OP_REPL_FWD, (uint32_t)len, id);
	logging = r->log && !atomic_load(&r->closing_off);
	if (logging) { /* the head of a chain of 3: kept until the last backup has it */
		rps_repl_log_lock(r->log, (int)sh->p.idx);
		seq = rps_repl_log_add(r->log, (int)sh->p.idx, &h, iov, n);
	}
	pthread_mutex_lock(&r->lock);
	if (id && seq) {
		r->pend[id - 1].shard = sh->p.idx;
		r->pend[id - 1].seq = seq;
	}
	link = r->link;
	if (link)
		rps_srv_conn_get(link);
	closing = atomic_load(&r->state) == LINK_CLOSING;
	pthread_mutex_unlock(&r->lock);
	rc = 0;
	if (link) {
		rc = rps_tr_post_send(link->conn, &h, iov, n, 0);
		rps_srv_conn_put(r->srv, link);
	}
	if (logging)
		rps_repl_log_unlock(r->log, (int)sh->p.idx);
	if (seq && (link || closing)) {
		/* sent, or kept for the second backup when it links here */
		if (rc)
			link_lost(r, rps_strerror(rc));
		if (req)
			req->repl_id = id;
		return;
	}
	if (!link) {
		if (id)
			rps_repl_local_done(r->srv, id, 0); /* only the local ack then */
		return;
	}
	if (rc) {
		if (id)
			rps_repl_local_done(r->srv, id, 0);
		link_lost(r, rps_strerror(rc));
		return;
	}
	if (req)
		req->repl_id = id;
}

static void forward(void *arg, struct rps_shard *sh, const struct rps_ring_entry *e)
{
	forward_ex(arg, sh, e, 0);
}

/* ---- the standby's side: entries from the primary (network thread) ----- */

static int standby_frame(struct rps_server *sb, struct rps_srv_conn *sc,
			 const struct rps_tr_event *ev)
{
	const struct rps_repl_fwd *f = ev->fixed;
	const char *d = ev->data;
	size_t dl = ev->data_len;
	struct rps_ring_entry e;
	struct rps_srv_req *req;
	struct rps_shard *sh;
	char why[160];

	if (f->shard >= (uint32_t)sb->nshards) {
		snprintf(why, sizeof(why), "forwarded entry for shard %u of %d", f->shard,
			 sb->nshards);
		goto bad;
	}
	sh = &sb->shards[f->shard];
	switch (f->type) {
	case RPS_ENT_PUSH:
	case RPS_ENT_ASSIGN:
	case RPS_ENT_DECLARE: {
		size_t off;

		req = rps_srv_pool_get(&sb->reqs);
		if (!req) {
			snprintf(why, sizeof(why), "out of memory for a forwarded entry");
			goto bad;
		}
		memset(req, 0, sizeof(*req));
		req->worker = f->worker;
		req->status = f->status;
		if (f->type == RPS_ENT_DECLARE) {
			req->op = RPS_REQ_DECLARE;
			if (dl < sizeof(req->u.decl))
				goto bad_req;
			memcpy(&req->u.decl, d, sizeof(req->u.decl));
			req->u.decl_flags = f->flags;
			if (f->flags & RPS_DECLARE_FLAG_OPTIM) {
				struct rps_optim_wire w;
				struct rps_optim_opts o;

				if (dl != sizeof(req->u.decl) + sizeof(w))
					goto bad_req;
				memcpy(&w, d + sizeof(req->u.decl), sizeof(w));
				if (rps_optim_wire_decode(&w, &o, why, sizeof(why)))
					goto bad_req;
				req->u.decl_optim = rps_malloc(sizeof(o));
				if (!req->u.decl_optim)
					goto bad_req;
				*req->u.decl_optim = o;
			}
		} else {
			req->op = f->type == RPS_ENT_PUSH ? RPS_REQ_PUSH : RPS_REQ_ASSIGN;
			if (dl < sizeof(req->u.push))
				goto bad_req;
			memcpy(&req->u.push, d, sizeof(req->u.push));
			off = sizeof(req->u.push);
			if (f->flags & RPS_PUSH_FLAG_SEQ) {
				if (dl < off + sizeof(req->seq))
					goto bad_req;
				memcpy(&req->seq, d + off, sizeof(req->seq));
				req->has_seq = 1;
				off += sizeof(req->seq);
			}
			if (f->flags & RPS_CODEC_MASK) { /* a compressed push (src/codec.h) */
				req->codec = f->flags & RPS_CODEC_MASK;
				req->data_len = (uint32_t)(dl - off);
				if (f->type != RPS_ENT_PUSH ||
				    rps_codec_check(req->codec, d + off, dl - off, req->u.push.count,
						    why, sizeof(why)))
					goto bad_req;
			} else if (dl != off + (size_t)req->u.push.count * sizeof(float)) {
				goto bad_req;
			}
			if (req->u.push.count) {
				req->data = (float *)(void *)(d + off);
				req->token = ev->token;
			}
			/* acknowledged to the primary when applied */
			req->req_id = ev->hdr.req_id;
			if (ev->hdr.req_id) {
				req->sc = sc;
				rps_srv_conn_get(sc);
			}
		}
		rps_srv_ctl_entry(&e, RPS_ENT_REPL, f->shard, f->worker);
		e.ptr = req;
		if (sb->repl->rcvd)
			sb->repl->rcvd[f->shard]++; /* its place in the head's log */
		if (rps_srv_enqueue(sb, sh, &e)) {
			if (req->op == RPS_REQ_DECLARE)
				rps_srv_declare_done(sb, sh, req, -ECANCELED, NULL, NULL);
			else
				rps_srv_push_done(sb, sh, req, -ECANCELED);
		}
		return req->token != NULL;
	bad_req:
		rps_free(req->u.decl_optim);
		rps_srv_pool_put(req);
		if (!why[0] || f->type != RPS_ENT_DECLARE)
			snprintf(why, sizeof(why), "forwarded entry of type %u: bad length %zu",
				 f->type, dl);
		goto bad;
	}
	case RPS_ENT_CLOCK:
	case RPS_ENT_DEAD:
	case RPS_ENT_REVIVE:
	case RPS_ENT_SYNC:
		rps_srv_ctl_entry(&e, f->type, f->shard, f->worker);
		e.info.clock = f->clock;
		e.u64 = f->u64;
		if (sb->repl->rcvd)
			sb->repl->rcvd[f->shard]++;
		rps_srv_enqueue(sb, sh, &e);
		return 0;
	default:
		snprintf(why, sizeof(why), "forwarded entry of unknown type %u", f->type);
		goto bad;
	}
bad:
	RPS_ERR("replication link from the primary: %s: closing it", why);
	rps_srv_conn_fail(sb, sc, -EPROTO, why);
	return 0;
}

/* ---- a replacement server joining as the backup (docs/replication.md) --- */

/* Primary, update thread (RPS_ENT_REPL_COPY): the shard's state at this
 * entry goes to the joining backup, then every entry after it (the
 * deferred pushes of a later BSP clock first, as forwarded pushes: they
 * are not in the state). */
void rps_repl_copy_take(struct rps_shard *sh)
{
	struct rps_repl *r = sh->fwd_arg;
	struct rps_srv_conn *link = NULL;
	struct rps_repl_copy_piece pc;
	struct rps_frame_hdr h;
	struct iovec v[2];
	uint64_t piece, off = 0;
	void *buf = NULL;
	size_t len = 0;
	char why[200];
	int rc;

	if (!r || !r->shard_on)
		return;
	pthread_mutex_lock(&r->lock);
	if (atomic_load(&r->state) == LINK_UP && r->link) {
		link = r->link;
		rps_srv_conn_get(link);
	}
	pthread_mutex_unlock(&r->lock);
	if (!link)
		return; /* the joining backup went meanwhile */
	why[0] = 0;
	rc = rps_repl_copy_save(sh, &buf, &len, why, sizeof(why));
	if (!rc && len + (64u << 10) > r->srv->cfg->send_queue_bytes) {
		snprintf(why, sizeof(why), "shard %u's state is %zu bytes, more than "
					   "RDMAPS_SEND_QUEUE_BYTES (%llu) allows to queue: raise it",
			 sh->p.idx, len, (unsigned long long)r->srv->cfg->send_queue_bytes);
		rc = -EMSGSIZE;
	}
	piece = r->srv->max_msg > sizeof(pc) + 4096 ? r->srv->max_msg - sizeof(pc) : 4096;
	if (piece > (4u << 20))
		piece = 4u << 20;
	while (!rc && off < len) {
		uint64_t n = RPS_MIN(piece, len - off);

		pc = (struct rps_repl_copy_piece){.shard = sh->p.idx, .total = len, .off = off};
		v[0].iov_base = &pc;
		v[0].iov_len = sizeof(pc);
		v[1].iov_base = (char *)buf + off;
		v[1].iov_len = n;
		rps_proto_hdr_init(&h, RPS_OP_REPL_COPY, (uint32_t)(sizeof(pc) + n), 0);
		rc = rps_tr_post_send(link->conn, &h, v, 2, 0);
		if (rc)
			snprintf(why, sizeof(why), "sending shard %u's state: %s", sh->p.idx,
				 rps_strerror(rc));
		off += n;
	}
	rps_free(buf);
	if (rc) /* the joining server says so and gives up this link */
		rps_srv_send_small(r->srv, link, RPS_OP_ERROR, 0, rc, why, strlen(why));
	rps_srv_conn_put(r->srv, link);
	if (rc) {
		RPS_ERR("replication: the joining backup cannot get its copy: %s", why);
		link_lost(r, why);
		return;
	}
	atomic_store(&r->shard_on[sh->p.idx], 1);
	atomic_fetch_add(&r->copy_bytes, len);
	for (struct rps_srv_req *q = sh->deferred; q; q = q->next) {
		struct rps_ring_entry e;

		memset(&e, 0, sizeof(e));
		e.type = RPS_ENT_PUSH;
		e.ptr = q;
		forward_ex(r, sh, &e, 1);
	}
	RPS_WARN("replication: server %u shard %u: its state at clock %llu (%zu bytes) queued for "
		 "the joining backup; forwarding from here",
		 atomic_load(&r->srv->rank), sh->p.idx, (unsigned long long)sh->clock, len);
}

/* REPL_JOIN from a replacement server: it becomes this server's backup. */
static void join_begin(struct rps_repl *r, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	struct rps_server *srv = r->srv;
	struct rps_ring_entry e;
	int ok = 0;

	pthread_mutex_lock(&r->lock);
	if (r->joinable && r->shard_on && atomic_load(&r->state) == LINK_LOST && !r->link &&
	    (r->standby_of == UINT32_MAX || atomic_load(&r->promoted))) {
		for (int s = 0; s < srv->nshards; s++)
			atomic_store(&r->shard_on[s], 0);
		atomic_store(&r->ncopied, 0);
		atomic_store(&r->copy_bytes, 0);
		rps_srv_conn_get(sc);
		r->link = sc;
		memcpy(&r->b1, ev->fixed, sizeof(r->b1));
		r->b1.host[sizeof(r->b1.host) - 1] = 0;
		atomic_store(&r->state, LINK_UP);
		ok = 1;
	}
	pthread_mutex_unlock(&r->lock);
	if (!ok) {
		rps_srv_conn_fail(srv, sc, -EADDRINUSE,
				  "this server has a backup already (or does not take one)");
		return;
	}
	RPS_WARN("replication: server %u: a replacement server (%s, listening on %s:%u) joins as "
		 "the backup of its shards: copying their state while pushes go on",
		 atomic_load(&srv->rank), sc->conn->peer, r->b1.host, r->b1.port);
	for (int s = 0; s < srv->nshards; s++) {
		rps_srv_ctl_entry(&e, RPS_ENT_REPL_COPY, (uint32_t)s, 0);
		if (rps_srv_enqueue(srv, &srv->shards[s], &e)) {
			link_lost(r, "stopping");
			return;
		}
	}
}

/* REPL_COPIED from the joining backup: shard req_id loaded there. */
static void join_copied(struct rps_repl *r, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	if (sc != r->link)
		return;
	if (ev->hdr.status) {
		RPS_ERR("replication: the joining backup could not load shard %u: %s",
			ev->hdr.req_id, rps_strerror(ev->hdr.status));
		link_lost(r, "the joining backup could not load a shard");
		return;
	}
	if (atomic_fetch_add(&r->ncopied, 1) + 1 == r->srv->nshards)
		RPS_WARN("replication: server %u: chain whole again: the joining backup at %s:%u "
			 "holds all %d shards (%llu bytes copied); every push completes once it "
			 "holds it",
			 atomic_load(&r->srv->rank), r->b1.host, r->b1.port, r->srv->nshards,
			 (unsigned long long)atomic_load(&r->copy_bytes));
}

/* Joining standby, network thread: a piece of a shard's state. */
static void copy_piece(struct rps_server *sb, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	struct rps_repl *r = sb->repl;
	const struct rps_repl_copy_piece *pc = ev->fixed;
	struct copy_in *ci;
	struct repl_load *ld;
	struct rps_ring_entry e;
	const char *why = NULL;

	if (!r->copy_in || pc->shard >= (uint32_t)sb->nshards) {
		why = "state of a shard this server does not have";
		goto bad;
	}
	ci = &r->copy_in[pc->shard];
	if (pc->off == 0 && !ci->buf) {
		if (!pc->total || pc->total > (1ull << 40)) {
			why = "state of a bad size";
			goto bad;
		}
		ci->buf = rps_malloc(pc->total);
		if (!ci->buf) {
			why = "out of memory for a shard's state";
			goto bad;
		}
		ci->total = pc->total;
		ci->got = 0;
	}
	if (!ci->buf || pc->total != ci->total || pc->off != ci->got ||
	    ev->data_len > ci->total - ci->got) {
		why = "a piece of a shard's state out of order";
		goto bad;
	}
	memcpy(ci->buf + ci->got, ev->data, ev->data_len);
	ci->got += ev->data_len;
	if (ci->got < ci->total)
		return;
	ld = rps_calloc(1, sizeof(*ld));
	if (!ld) {
		why = "out of memory";
		goto bad;
	}
	ld->sb = sb;
	ld->sc = sc;
	rps_srv_conn_get(sc);
	ld->buf = ci->buf;
	ld->len = ci->total;
	ci->buf = NULL;
	rps_srv_ctl_entry(&e, RPS_ENT_REPL_LOAD, pc->shard, 0);
	e.ptr = ld;
	if (rps_srv_enqueue(sb, &sb->shards[pc->shard], &e)) {
		rps_srv_conn_put(sb, ld->sc);
		rps_free(ld->buf);
		rps_free(ld);
	}
	return;
bad:
	RPS_ERR("replication link from the primary: %s: closing it", why);
	rps_srv_conn_fail(sb, sc, -EPROTO, why);
}

/* Joining standby, update thread (RPS_ENT_REPL_LOAD). */
void rps_repl_load_run(struct rps_shard *sh, void *arg)
{
	struct repl_load *ld = arg;
	struct rps_server *sb = ld->sb;
	struct rps_repl *r = sb->repl;
	char why[240];
	int rc = rps_repl_copy_load(sh, ld->buf, ld->len, why, sizeof(why));

	if (rc) {
		RPS_ERR("replication: loading shard %u's state from its primary: %s", sh->p.idx,
			why);
	} else {
		atomic_fetch_add(&r->loaded_bytes, ld->len);
		if (atomic_fetch_add(&r->nloaded, 1) + 1 == sb->nshards)
			RPS_WARN("replication: server %u's backup here holds all %d shards (%llu "
				 "bytes copied, the pushes since forwarded): chain whole again",
				 r->standby_of, sb->nshards,
				 (unsigned long long)atomic_load(&r->loaded_bytes));
	}
	rps_srv_send_small(sb, ld->sc, RPS_OP_REPL_COPIED, sh->p.idx, rc, NULL, 0);
	rps_srv_conn_put(sb, ld->sc);
	rps_free(ld->buf);
	rps_free(ld);
}

/* ---- closing a chain of 3 over its dead first backup (head) ------------- */

struct resend {
	struct rps_repl *r;
	struct rps_conn *c;
	uint32_t shard;
	uint64_t have; /* entries of the shard the second backup holds */
	uint64_t sent, held, done; /* entries sent, held there, pushes acknowledged so */
	int rc;
};

static int resend_one(void *arg, uint64_t seq, const struct rps_frame_hdr *h, const void *payload)
{
	struct resend *x = arg;
	struct rps_repl *r = x->r;
	struct rps_frame_hdr h2 = *h;
	struct iovec v = {.iov_base = (void *)payload, .iov_len = h->len};
	uint32_t id = h->req_id;
	int mine;

	pthread_mutex_lock(&r->lock);
	mine = id && id <= r->npend && r->pend[id - 1].sc && r->pend[id - 1].left &&
	       r->pend[id - 1].shard == x->shard && r->pend[id - 1].seq == seq;
	if (seq <= x->have) {
		/* the second backup holds it: its ack died with the first */
		if (mine) {
			pend_done_locked(r, id, 0, 0);
			x->done++;
		}
		x->held++;
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	pthread_mutex_unlock(&r->lock);
	if (!mine)
		h2.req_id = 0; /* acknowledged already */
	x->rc = rps_tr_post_send(x->c, &h2, &v, 1, 0);
	x->sent++;
	return x->rc;
}

/* REPL_READY from the second backup while the first is dead: it holds the
 * entries counted in its payload; it gets the rest from the log, then the
 * head forwards to it (a chain of 2 from now on). Network thread. */
static void relink(struct rps_repl *r, struct rps_srv_conn *sc, const struct rps_tr_event *ev)
{
	struct rps_server *srv = r->srv;
	const uint64_t *have = NULL;
	uint64_t nheld = 0;
	int ns = srv->nshards, ok = 0;

	if (ev->data_len == sizeof(struct rps_repl_addr) + (size_t)ns * sizeof(uint64_t))
		have = (const uint64_t *)(const void *)((const char *)ev->data +
							sizeof(struct rps_repl_addr));
	for (int s = 0; s < ns; s++)
		rps_repl_log_lock(r->log, s);
	pthread_mutex_lock(&r->lock);
	if (have && atomic_load(&r->state) == LINK_CLOSING && !r->link) {
		rps_srv_conn_get(sc);
		r->link = sc;
		memcpy(&r->b1, ev->data, sizeof(r->b1));
		r->b1.host[sizeof(r->b1.host) - 1] = 0;
		atomic_store(&r->state, LINK_UP);
		atomic_store(&r->closing_off, 1); /* a chain of 2 now */
		ok = 1;
	}
	pthread_mutex_unlock(&r->lock);
	for (int s = 0; ok && s < ns; s++) {
		struct resend x = {.r = r, .c = sc->conn, .shard = (uint32_t)s, .have = have[s]};

		rps_repl_log_each(r->log, s, resend_one, &x);
		RPS_INFO("replication: shard %d: the second backup holds %llu entries of %llu (%llu of "
			 "them still in the log, %llu pushes acknowledged so); %llu sent from the log",
			 s, (unsigned long long)have[s],
			 (unsigned long long)rps_repl_log_last(r->log, s), (unsigned long long)x.held,
			 (unsigned long long)x.done, (unsigned long long)x.sent);
		if (x.rc) {
			RPS_ERR("replication: sending the log to the second backup: %s",
				rps_strerror(x.rc));
			break;
		}
	}
	for (int s = ns - 1; s >= 0; s--)
		rps_repl_log_unlock(r->log, s);
	if (!ok) {
		rps_srv_conn_fail(srv, sc, -EPROTO,
				  have ? "this server has its backup already"
				       : "REPL_READY without the entries held");
		return;
	}
	for (int s = 0; s < ns; s++) {
		nheld += have[s];
		rps_repl_log_trim(r->log, s, UINT64_MAX);
	}
	RPS_WARN("replication: the second backup linked here from %s: the chain is closed over "
		 "the dead first backup (it held %llu entries; the rest sent from the log)",
		 sc->conn->peer, (unsigned long long)nheld);
}

/* ---- network thread hooks ---------------------------------------------- */

int rps_repl_on_hello(struct rps_server *srv, const struct rps_hello *h, void *ack,
		      size_t *ack_len_p, const char **why_p)
{
	struct rps_repl *r = srv->repl;
	struct rps_hello_ack *a = ack;

	if (!r || !r->pend) {
		*why_p = "only workers connect to a server (RDMAPS_REPLICAS is 1 here, or this "
			 "is the last backup of a chain: every server of the job needs the same "
			 "RDMAPS_REPLICAS)";
		return -EPROTO;
	}
	if (h->channel == RPS_REPL_HELLO_WHERE) {
		/* a second backup asks where the first listens (chain.c) */
		struct rps_repl_addr where;

		pthread_mutex_lock(&r->lock);
		where = r->b1;
		pthread_mutex_unlock(&r->lock);
		if (atomic_load(&r->state) != LINK_UP)
			where.port = 0; /* not linked yet: port 0, asked again */
		memset(a, 0, sizeof(*a));
		a->server_rank = atomic_load(&srv->rank);
		memcpy(a + 1, &where, sizeof(where));
		*ack_len_p = sizeof(*a) + sizeof(where);
		return 0;
	}
	if (h->channel == RPS_REPL_HELLO_JOIN) {
		/* a replacement server: only a serving server without a backup */
		if (!r->joinable || atomic_load(&r->state) != LINK_LOST ||
		    (r->standby_of != UINT32_MAX && !atomic_load(&r->promoted))) {
			*why_p = "this server has its backup already (or does not take one)";
			return -EADDRINUSE;
		}
	} else if (atomic_load(&r->state) != LINK_WAIT && atomic_load(&r->state) != LINK_CLOSING) {
		*why_p = "this server has its backup already";
		return -EADDRINUSE;
	}
	memset(a, 0, sizeof(*a));
	a->server_rank = atomic_load(&srv->rank);
	a->num_shards = (uint32_t)srv->nshards;
	a->consistency = srv->opts.consistency;
	a->staleness = srv->opts.staleness;
	a->chunk_bytes = srv->chunk_bytes;
	a->max_msg = srv->max_msg;
	*ack_len_p = sizeof(*a);
	return 0;
}

int rps_repl_on_frame(struct rps_server *srv, struct rps_srv_conn *sc,
		      const struct rps_tr_event *ev)
{
	struct rps_repl *r = srv->repl;

	if (!r) {
		rps_srv_conn_fail(srv, sc, -EPROTO, "replication is off here");
		return 0;
	}
	switch (ev->hdr.op) {
	case RPS_OP_REPL_READY:
		if (atomic_load(&r->state) == LINK_CLOSING) {
			relink(r, sc, ev);
			return 0;
		}
		pthread_mutex_lock(&r->lock);
		if (atomic_load(&r->state) == LINK_WAIT && !r->link) {
			rps_srv_conn_get(sc);
			r->link = sc;
			memset(&r->b1, 0, sizeof(r->b1));
			if (ev->data_len >= sizeof(r->b1)) {
				memcpy(&r->b1, ev->data, sizeof(r->b1));
				r->b1.host[sizeof(r->b1.host) - 1] = 0;
			}
			atomic_store(&r->state, LINK_UP);
			RPS_INFO("replication: backup connected from %s", sc->conn->peer);
		}
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		return 0;
	case RPS_OP_PUSH_ACK:
		if (sc == r->link)
			backup_ack(r, ev->hdr.req_id, ev->hdr.status);
		return 0;
	case RPS_OP_REPL_JOIN:
		if (r->standby_of == UINT32_MAX || atomic_load(&r->promoted)) {
			join_begin(r, sc, ev);
			return 0;
		}
		break;
	case RPS_OP_REPL_COPIED:
		join_copied(r, sc, ev);
		return 0;
	case RPS_OP_REPL_COPY:
		if (r->standby_of != UINT32_MAX && r->joining && sc == r->uplink) {
			copy_piece(srv, sc, ev);
			return 0;
		}
		break;
	case RPS_OP_REPL_LAST:
		if (sc == r->link && r->log && !atomic_exchange(&r->closing_off, 1))
			RPS_WARN("replication: the second backup of this server's shards is lost: "
				 "they have one backup left");
		return 0;
	case RPS_OP_REPL_FWD:
		if (r->standby_of != UINT32_MAX && sc == r->uplink)
			return standby_frame(srv, sc, ev);
		break;
	case RPS_OP_ERROR:
		RPS_WARN("replication link %s: error %s", sc->conn->peer,
			 rps_strerror(ev->hdr.status));
		rps_srv_conn_drop(srv, sc);
		return 0;
	default:
		break;
	}
	{
		char why[96];

		snprintf(why, sizeof(why), "unexpected %s frame on a replication link",
			 rps_proto_op_name(ev->hdr.op));
		rps_srv_conn_fail(srv, sc, -EPROTO, why);
	}
	return 0;
}

void rps_repl_conn_closed(struct rps_server *srv, struct rps_srv_conn *sc)
{
	struct rps_repl *r = srv->repl;

	if (!r)
		return;
	if (r->standby_of != UINT32_MAX && sc == r->uplink) {
		if (!atomic_load(&r->stop))
			RPS_WARN("replication: link to %s server %u lost: taking over its "
				 "shards once the scheduler says it is dead",
				 r->pos == 2 ? "the first backup of" : "primary", r->standby_of);
		atomic_store(&r->uplink_lost, 1);
		r->uplink = NULL; /* dropped by the caller, freed by the close drain */
		return;
	}
	if (sc == r->link)
		link_lost(r, "its connection closed");
}

int rps_repl_refuses_workers(const struct rps_server *srv, const char **why_p)
{
	const struct rps_repl *r = srv->repl;

	if (r && r->standby_of != UINT32_MAX && !atomic_load(&r->promoted)) {
		*why_p = "this is a backup: it serves workers once its primary died";
		return -EAGAIN;
	}
	return 0;
}

/* ---- set-up ------------------------------------------------------------- */

static struct rps_repl *repl_new(struct rps_server *srv)
{
	struct rps_repl *r = rps_calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->srv = srv;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	atomic_init(&r->state, LINK_NONE);
	r->standby_of = UINT32_MAX;
	r->timeout_ms = srv->opts.timeout_ms > 0 ? srv->opts.timeout_ms : srv->cfg->timeout_ms;
	return r;
}

/* r's server forwards every shard's entries to a backup (a primary, or the
 * first backup of a chain). 0 or -ENOMEM. */
static int forwarding_init(struct rps_repl *r)
{
	struct rps_server *srv = r->srv;

	r->npend = PEND_MAX;
	r->pend = rps_calloc(r->npend, sizeof(*r->pend));
	if (!r->pend)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->npend; i++)
		r->pend[i].next_free = i + 2 <= r->npend ? i + 2 : 0;
	r->free_head = 1;
	r->shard_on = rps_calloc((size_t)srv->nshards, sizeof(*r->shard_on));
	if (!r->shard_on)
		return -ENOMEM;
	for (int s = 0; s < srv->nshards; s++)
		atomic_init(&r->shard_on[s], 1);
	atomic_store(&r->state, LINK_WAIT);
	for (int s = 0; s < srv->nshards; s++) {
		srv->shards[s].fwd_arg = r;
		srv->shards[s].fwd = forward;
	}
	return 0;
}

int rps_repl_init(struct rps_server *srv)
{
	struct rps_repl *r;

	if (srv->cfg->replicas <= 1)
		return 0;
	if (strcmp(srv->transport, "tcp")) {
		/* the standby's own RDMA transport in this process, and workers
		 * failing over their one-sided READs, are not done (issue 24) */
		RPS_ERR("RDMAPS_REPLICAS=%d works over TCP only so far (RDMAPS_TRANSPORT=tcp); "
			"this server uses %s: run without replicas, or over TCP",
			srv->cfg->replicas, srv->transport);
		return -ENOTSUP;
	}
	if (rps_auth_is_token(srv->secret)) {
		RPS_ERR("RDMAPS_REPLICAS=%d needs the job secret (RDMAPS_SECRET) on every server, "
			"not a token: a backup takes over its primary's identity, which a token "
			"does not allow (rdmaps-launch gives the secret when replicas > 1)",
			srv->cfg->replicas);
		return -EACCES;
	}
	r = repl_new(srv);
	if (!r)
		return -ENOMEM;
	if (forwarding_init(r)) {
		repl_free(r);
		return -ENOMEM;
	}
	/* a replacement server may join as its backup once the first is lost */
	r->joinable = srv->cfg->replicas == 2;
	if (srv->cfg->replicas > 2) { /* the head of a chain of 3 (repl_log.h) */
		r->log = rps_repl_log_new(srv->nshards);
		if (!r->log) {
			repl_free(r);
			return -ENOMEM;
		}
	}
	srv->repl = r;
	return 0;
}

/* The standby's network loop. */
static void *serve_main(void *arg)
{
	struct rps_repl *r = arg;

	rps_server_serve(r->srv);
	return NULL;
}

/* A second backup (RDMAPS_REPLICAS=3): ask the primary where its first
 * backup listens, and link there instead (the chain). 0 or -errno. */
static int ask_first_backup(struct rps_repl *r, char *ack, uint64_t deadline)
{
	struct rps_hello hello;
	struct rps_repl_addr where;
	struct rps_conn *c = NULL;
	size_t ack_len = 0;
	int rc;

	rps_proto_hello_init(&hello, RPS_ROLE_SERVER, r->host_rank);
	hello.channel = RPS_REPL_HELLO_WHERE;
	for (;;) {
		rc = rps_tr_connect(r->srv->tr, r->phost, r->pport, &hello, ack, RPS_TR_ACK_MAX,
				    &ack_len, r->timeout_ms, &c);
		if (!rc) {
			rps_tr_close(c);
			if (ack_len != sizeof(struct rps_hello_ack) + sizeof(where))
				rc = -EPROTO;
			else
				memcpy(&where, ack + sizeof(struct rps_hello_ack), sizeof(where));
			if (!rc && where.port)
				break;
			if (!rc)
				rc = -EAGAIN; /* the first backup is not linked yet */
		}
		if (rps_now_ns() >= deadline || atomic_load(&r->stop) || rc == -EACCES ||
		    rc == -EPROTO) {
			RPS_ERR("replication: cannot learn from primary server %u (%s:%u) where "
				"its first backup is: %s",
				r->standby_of, r->phost, r->pport, rps_strerror(rc));
			return rc;
		}
		rps_sleep_ms(100);
	}
	where.host[sizeof(where.host) - 1] = 0;
	snprintf(r->phost, sizeof(r->phost), "%.63s", where.host);
	r->pport = (uint16_t)where.port;
	return 0;
}

static int uplink_connect(struct rps_repl *r)
{
	struct rps_server *sb = r->srv;
	uint64_t deadline = rps_now_ns() + (uint64_t)r->timeout_ms * 1000000ull;
	char *ack = rps_malloc(RPS_TR_ACK_MAX);
	struct rps_srv_conn *sc;
	struct rps_conn *c = NULL;
	struct rps_frame_hdr h;
	struct rps_hello hello;
	struct rps_repl_addr me;
	uint64_t have[RPS_MAX_SHARDS];
	struct iovec v[2];
	size_t ack_len = 0;
	int rc = 0;

	if (!ack)
		return -ENOMEM;
	if (r->pos == 2)
		rc = ask_first_backup(r, ack, deadline);
	rps_proto_hello_init(&hello, RPS_ROLE_SERVER, r->host_rank);
	if (r->joining) /* a replacement server: as the backup of one without */
		hello.channel = RPS_REPL_HELLO_JOIN;
	while (!rc) { /* (ask_first_backup failed: rc set, no connect) */
		rc = rps_tr_connect(sb->tr, r->phost, r->pport, &hello, ack, RPS_TR_ACK_MAX,
				    &ack_len, r->timeout_ms, &c);
		if (!rc || rps_now_ns() >= deadline || atomic_load(&r->stop) ||
		    rc == -EACCES || rc == -EPROTO || rc == -EADDRINUSE || r->joining)
			break;
		rps_sleep_ms(100);
		rc = 0; /* again */
	}
	rps_free(ack);
	if (rc && r->joining) { /* asked again when the map changes (repl_join.c) */
		RPS_INFO("replication: server %u at %s:%u does not take this server as its backup: "
			 "%s",
			 r->standby_of, r->phost, r->pport,
			 rc == -EADDRINUSE ? "it has one" : rps_strerror(rc));
		return rc;
	}
	if (rc) {
		RPS_ERR("replication: cannot connect to %s of server %u at %s:%u: %s",
			r->pos == 2 ? "the first backup" : "primary", r->standby_of, r->phost,
			r->pport, rps_strerror(rc));
		return rc;
	}
	sc = rps_calloc(1, sizeof(*sc));
	if (!sc) {
		rps_tr_close(c);
		return -ENOMEM;
	}
	sc->conn = c;
	sc->owner = sb;
	sc->rank = UINT32_MAX;
	sc->repl = 1;
	atomic_init(&sc->refs, 1);
	atomic_init(&sc->closed, 0);
	atomic_init(&sc->nparked, 0);
	sc->net_ref = 1;
	r->uplink = sc;
	c->user = sc;
	/* where this backup listens: a second backup links there (chain); and
	 * the entries of each shard held (a second backup linking to the head
	 * over a dead first: the head sends the rest) */
	memset(&me, 0, sizeof(me));
	me.port = sb->port;
	snprintf(me.host, sizeof(me.host), "%.63s", rps_srv_advertised_host(sb));
	memset(have, 0, sizeof(have));
	for (int s = 0; r->rcvd && s < sb->nshards; s++)
		have[s] = r->rcvd[s];
	v[0].iov_base = &me;
	v[0].iov_len = sizeof(me);
	v[1].iov_base = have;
	v[1].iov_len = (size_t)sb->nshards * sizeof(have[0]);
	rps_proto_hdr_init(&h, RPS_OP_REPL_READY, (uint32_t)(v[0].iov_len + v[1].iov_len), 0);
	if (r->joining) /* where it listens; the state of every shard, please */
		rps_proto_hdr_init(&h, RPS_OP_REPL_JOIN, (uint32_t)v[0].iov_len, 0);
	rc = rps_tr_post_send(c, &h, v, r->joining ? 1 : 2, 0);
	if (rc)
		RPS_ERR("replication: REPL_READY to %s:%u: %s", r->phost, r->pport,
			rps_strerror(rc));
	else
		RPS_INFO("replication: backup %u of server %u (linked to %s:%u) here, listening "
			 "on port %u",
			 r->pos, r->standby_of, r->phost, r->pport, sb->port);
	return rc;
}

/* Join the scheduler in the dead primary's rank: the workers find us in
 * the map as its replacement. */
static int promote(struct rps_repl *r)
{
	struct rps_server *sb = r->srv;
	struct rps_ctl_join_opts jo;
	struct rps_ctl *ctl = NULL;
	struct rps_map map;
	uint64_t deadline = rps_now_ns() + (uint64_t)r->timeout_ms * 1000000ull;
	int rc;

	rps_ctl_join_opts_init(&jo, sb->cfg, RPS_ROLE_SERVER);
	jo.scheduler = sb->scheduler;
	jo.secret = sb->secret;
	jo.transport = sb->remote_read ? 1 : 0;
	jo.host = rps_srv_advertised_host(sb);
	jo.port = sb->port;
	jo.want_rank = r->standby_of;
	jo.timeout_ms = r->timeout_ms;
	jo.heartbeat_ms = sb->heartbeat_ms;
	jo.events = &rps_srv_ctl_events;
	jo.arg = sb;
	for (;;) {
		rc = rps_ctl_join(&jo, &ctl);
		if (!rc && rps_ctl_rank(ctl) != r->standby_of) {
			RPS_ERR("replication: asked the scheduler for rank %u, got %u",
				r->standby_of, rps_ctl_rank(ctl));
			rps_ctl_leave(ctl);
			ctl = NULL;
			rc = -EBUSY;
		}
		if (!rc || rps_now_ns() >= deadline || atomic_load(&r->stop) || rc == -ECANCELED)
			break; /* -ECANCELED: the job is ending */
		rps_sleep_ms(200);
	}
	if (rc) {
		RPS_ERR("replication: cannot take over server %u's rank: %s", r->standby_of,
			rps_strerror(rc));
		return rc;
	}
	memset(&map, 0, sizeof(map));
	rps_ctl_map(ctl, &map, NULL, 0);
	if (map.num_workers)
		atomic_store(&sb->map_workers, map.num_workers);
	atomic_store(&sb->rank, r->standby_of);
	atomic_store(&r->promoted, 1);
	sb->ctl = ctl;
	RPS_WARN("replication: server %u's backup promoted: serving its shards at %s:%u",
		 r->standby_of, rps_srv_advertised_host(sb), sb->port);
	return 0;
}

/* The map of the host's scheduler connection, or of a replacement
 * server's (repl_join.c): the nodes, or 0. */
static int host_map(struct rps_repl *r, struct rps_node *nodes)
{
	struct rps_repl *hr = r->host->repl;
	int n;

	if (r->host->ctl)
		return rps_ctl_map(r->host->ctl, NULL, nodes, RPS_MAX_NODES);
	if (!hr || !hr->mapper)
		return 0;
	n = rps_repl_join_map(hr->mapper, NULL, nodes, RPS_MAX_NODES);
	return n > 0 ? n : 0;
}

/* The link closed: 1 once the scheduler's map says the primary is dead, 0
 * if it stays alive (its link was cut: this copy is out of date). */
static int primary_dead(struct rps_repl *r)
{
	uint64_t deadline = rps_now_ns() + (uint64_t)r->timeout_ms * 1000000ull;
	struct rps_node *nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes));
	int dead = 0;

	if (!nodes)
		return 0;
	while (!dead && !atomic_load(&r->stop) && rps_now_ns() < deadline) {
		int n = host_map(r, nodes);

		if (n <= 0) { /* no map (yet): not known to be dead */
			rps_sleep_ms(50);
			continue;
		}
		dead = 1;
		for (int i = 0; i < n; i++)
			if (nodes[i].role == RPS_ROLE_SERVER && nodes[i].rank == r->standby_of &&
			    nodes[i].alive)
				dead = 0;
		if (!dead)
			rps_sleep_ms(50);
	}
	rps_free(nodes);
	return dead;
}

/* A second backup lost its link to the first: 1 if the head (the primary)
 * lives on at its address (link there: the chain closes over the dead
 * first), 0 if the rank is dead (the first had taken over and died: take
 * over), -1 on stop or after RDMAPS_TIMEOUT_MS. */
static int head_lives(struct rps_repl *r)
{
	uint64_t deadline = rps_now_ns() + (uint64_t)r->timeout_ms * 1000000ull;
	struct rps_node *nodes = rps_calloc(RPS_MAX_NODES, sizeof(*nodes));
	int res = -1;

	if (!nodes)
		return -1;
	while (res < 0 && !atomic_load(&r->stop) && rps_now_ns() < deadline) {
		int n = host_map(r, nodes);
		int alive = 0, head = 0;

		for (int i = 0; i < n; i++)
			if (nodes[i].role == RPS_ROLE_SERVER && nodes[i].rank == r->standby_of &&
			    nodes[i].alive) {
				alive = 1;
				head = nodes[i].port == r->hport && !strcmp(nodes[i].host, r->hhost);
			}
		if (n > 0 && !alive)
			res = 0;
		else if (head)
			res = 1;
		else
			rps_sleep_ms(50);
	}
	rps_free(nodes);
	return res;
}

static void *link_main(void *arg)
{
	struct rps_repl *r = arg;

	int rc;

again:
	rc = uplink_connect(r);
	if (r->joining && !atomic_load(&r->join_rc))
		atomic_store(&r->join_rc, rc ? (rc < 0 ? rc : -EPROTO) : 1);
	if (rc)
		return NULL;
	while (!atomic_load(&r->stop) && !atomic_load(&r->uplink_lost))
		rps_sleep_ms(20);
	if (atomic_load(&r->stop))
		return NULL;

	if (r->pos == 2) {
		int h = head_lives(r);

		if (h == 1) {
			RPS_WARN("replication: the first backup of server %u is lost, the server "
				 "lives: this second backup links to it (the chain closes over the "
				 "dead one)",
				 r->standby_of);
			snprintf(r->phost, sizeof(r->phost), "%s", r->hhost);
			r->pport = r->hport;
			r->pos = 1;
			atomic_store(&r->uplink_lost, 0);
			goto again;
		}
		if (h < 0) {
			if (!atomic_load(&r->stop))
				RPS_ERR("replication: the first backup of server %u is lost and the "
					"scheduler's map says neither that the server lives nor that "
					"it died: this backup will not take over",
					r->standby_of);
			return NULL;
		}
		promote(r);
		return NULL;
	}
	if (!primary_dead(r)) {
		if (!atomic_load(&r->stop))
			RPS_ERR("replication: the link to %s server %u closed but it lives on: "
				"this backup of its shards is out of date and will not take over",
				r->pos == 2 ? "the first backup of" : "primary", r->standby_of);
		return NULL;
	}
	if (r->joining && atomic_load(&r->nloaded) < r->srv->nshards) {
		RPS_ERR("replication: server %u died before this joining backup held all its "
			"shards (%d of %d loaded): it cannot take over",
			r->standby_of, atomic_load(&r->nloaded), r->srv->nshards);
		return NULL;
	}
	promote(r);
	return NULL;
}

/* Create and start the standby `pos` (1 or 2) this server hosts: the backup
 * of server prev, whose node is nodes[found]. joining: 0, or a replacement
 * server's standby (repl_join.c) in slot joining - 1. */
static int start_standby(struct rps_server *srv, uint32_t rank, uint32_t pos, uint32_t prev,
			 const struct rps_node *node, int joining)
{
	struct rps_server_opts o;
	struct rps_config cfg;
	struct rps_repl *r = srv->repl;
	struct rps_repl *sr;
	struct rps_server *sb;
	int rc;

	/* the standby: this server's settings, no replication or checkpoints of
	 * its own, entries taken in the order they come (fifo) */
	cfg = *srv->cfg;
	cfg.replicas = 1;
	cfg.checkpoint_dir[0] = 0;
	cfg.checkpoint_every = 0;
	cfg.checkpoint_secs = 0;
	cfg.metrics_port = 0;
	o = srv->opts;
	o.field_mask = RPS_SERVER_OPT_ALL;
	o.scheduler = srv->scheduler;
	o.transport = srv->transport;
	o.host = srv->host;
	o.secret = srv->secret;
	o.port = 0;
	o.priority = RPS_PRIO_FIFO;
	o.priority_fn = NULL;
	o.ncores = 0;
	o.config = &cfg;
	rc = rps_server_create(&o, &sb);
	if (rc) {
		RPS_ERR("replication: cannot create the backup of server %u: %s", prev,
			rps_strerror(rc));
		return rc;
	}
	sr = repl_new(sb);
	if (!sr) {
		rps_server_destroy(sb);
		return -ENOMEM;
	}
	sr->standby_of = prev;
	sr->host_rank = rank;
	sr->host = srv;
	sr->pos = pos;
	/* the first backup of a chain of 3 forwards to the second (before any
	 * entry can come: the link to the primary is not up yet) */
	sr->timeout_ms = r->timeout_ms;
	if (pos == 1 && srv->cfg->replicas >= 2 && forwarding_init(sr)) {
		repl_free(sr);
		rps_server_destroy(sb);
		return -ENOMEM;
	}
	if (pos == 1 && srv->cfg->replicas == 2) {
		/* no backup of its own; once promoted, a replacement server may
		 * join as one (repl_join.c) */
		atomic_store(&sr->state, LINK_LOST);
		sr->joinable = 1;
	}
	if (joining) {
		sr->joining = 1;
		sr->copy_in = rps_calloc((size_t)sb->nshards, sizeof(*sr->copy_in));
		if (!sr->copy_in) {
			repl_free(sr);
			rps_server_destroy(sb);
			return -ENOMEM;
		}
	}
	snprintf(sr->phost, sizeof(sr->phost), "%.63s", node->host);
	sr->pport = node->port;
	snprintf(sr->hhost, sizeof(sr->hhost), "%.63s", node->host);
	sr->hport = node->port;
	if (pos == 2) {
		sr->rcvd = rps_calloc((size_t)sb->nshards, sizeof(*sr->rcvd));
		if (!sr->rcvd) {
			repl_free(sr);
			rps_server_destroy(sb);
			return -ENOMEM;
		}
	}
	sb->repl = sr;
	r->sb[joining ? (uint32_t)joining - 1 : pos - 1] = sb;
	rc = pthread_create(&sr->serve_thread, NULL, serve_main, sr);
	if (rc)
		return -rc;
	sr->serve_ok = 1;
	rc = pthread_create(&sr->link_thread, NULL, link_main, sr);
	if (rc)
		return -rc;
	sr->link_ok = 1;
	return 0;
}

int rps_repl_start(struct rps_server *srv, uint32_t rank, const struct rps_node *nodes, int nnodes,
		   uint32_t nservers)
{
	struct rps_repl *r = srv->repl;
	uint32_t want;
	int rc;

	if (!r)
		return 0;
	want = (uint32_t)srv->cfg->replicas;
	if (nservers < want) {
		RPS_ERR("RDMAPS_REPLICAS=%u needs at least %u servers (the job has %u): every "
			"copy of a shard lives on another server",
			want, want, nservers);
		return -EINVAL;
	}
	r->standby_of = UINT32_MAX; /* the primary's fields stay ours */
	for (uint32_t pos = 1; pos < want; pos++) {
		uint32_t prev = (rank + nservers - pos) % nservers;
		int found = -1;

		for (int i = 0; i < nnodes; i++)
			if (nodes[i].role == RPS_ROLE_SERVER && nodes[i].rank == prev &&
			    nodes[i].alive)
				found = i;
		if (found < 0) {
			RPS_ERR("replication: server %u (whose backup this server keeps) is not in "
				"the map",
				prev);
			return -ENOENT;
		}
		rc = start_standby(srv, rank, pos, prev, &nodes[found], 0);
		if (rc)
			return rc;
	}
	return 0;
}

/* Stop standby slot k and free it. */
static void standby_drop(struct rps_repl *r, int k)
{
	struct rps_server *sb = r->sb[k];
	struct rps_repl *sr;

	if (!sb)
		return;
	sr = sb->repl;
	atomic_store(&sr->stop, 1);
	rps_server_stop(sb);
	if (sr->link_ok)
		pthread_join(sr->link_thread, NULL);
	if (sr->serve_ok)
		pthread_join(sr->serve_thread, NULL);
	rps_server_destroy(sb); /* frees sr (rps_repl_free of sb) */
	r->sb[k] = NULL;
}

int rps_repl_join_standby(struct rps_server *srv, int k, uint32_t prev, const struct rps_node *node)
{
	struct rps_repl *r = srv->repl;
	struct rps_repl *sr;
	int rc;

	if (!r)
		return -EINVAL;
	for (k = 0; k < 2 && r->sb[k]; k++)
		;
	if (k >= 2)
		return -ENOSPC;
	rc = start_standby(srv, prev, 1, prev, node, k + 1);
	if (rc) {
		standby_drop(r, k);
		return rc;
	}
	sr = r->sb[k]->repl;
	while (!atomic_load(&sr->join_rc) && !atomic_load(&srv->stop))
		rps_sleep_ms(10);
	rc = atomic_load(&sr->join_rc);
	if (rc == 1)
		return 1;
	standby_drop(r, k);
	return rc == -EADDRINUSE ? 0 : rc ? rc : -ECANCELED;
}

int rps_repl_join_set_mapper(struct rps_server *srv, struct rps_repl_mapper *m)
{
	if (!srv->repl)
		return -EINVAL;
	srv->repl->mapper = m;
	return 0;
}

int rps_repl_join_backs(const struct rps_server *srv, uint32_t rank)
{
	const struct rps_repl *r = srv->repl;

	for (int k = 0; r && k < 2; k++)
		if (r->sb[k] && r->sb[k]->repl->standby_of == rank)
			return 1;
	return 0;
}

int rps_repl_join_busy(const struct rps_server *srv)
{
	const struct rps_repl *r = srv->repl;
	int n = 0;

	for (int k = 0; r && k < 2; k++)
		if (r->sb[k] && !atomic_load(&r->sb[k]->stop))
			n++;
	return n;
}

void rps_repl_stop_standby(struct rps_server *srv)
{
	struct rps_repl *r = srv->repl;

	if (!r)
		return;
	for (int k = 0; k < 2; k++) {
		struct rps_repl *sr;

		if (!r->sb[k])
			continue;
		sr = r->sb[k]->repl;
		atomic_store(&sr->stop, 1);
		if (sr->link_ok)
			pthread_join(sr->link_thread, NULL);
		sr->link_ok = 0;
	}
}

static void repl_free(struct rps_repl *r)
{
	for (int s = 0; r->copy_in && s < r->srv->nshards; s++)
		rps_free(r->copy_in[s].buf);
	rps_free(r->copy_in);
	rps_free(r->shard_on);
	rps_repl_join_mapper_free(r->mapper);
	rps_repl_log_free(r->log);
	rps_free(r->rcvd);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	rps_free(r->pend);
	rps_free(r);
}

void rps_repl_fini(struct rps_server *srv)
{
	struct rps_repl *r = srv->repl;

	if (!r)
		return;
	if (r->standby_of != UINT32_MAX && r->uplink) {
		/* a standby's link that never closed (its network thread is gone):
		 * dropped here, freed by the server's close drain */
		rps_srv_conn_drop(srv, r->uplink);
		r->uplink = NULL;
	}
	for (int k = 0; k < 2; k++)
		standby_drop(r, k);
	atomic_store(&r->closing_off, 1);
	if (r->closer_ok)
		pthread_join(r->closer, NULL);
	r->closer_ok = 0;
	if (r->pend)
		link_lost(r, "stopping");
}

void rps_repl_free(struct rps_server *srv)
{
	if (!srv->repl)
		return;
	repl_free(srv->repl);
	srv->repl = NULL;
}
