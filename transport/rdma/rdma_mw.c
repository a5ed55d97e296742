/* RDMA transport: read access per connection with memory windows
 * (RDMAPS_RDMA_MW, docs/rdma.md "Read access per connection").
 *
 * With windows, reg_mem(REMOTE_READ) registers the region with
 * IBV_ACCESS_MW_BIND and no remote access at all: its own rkey reads
 * nothing. grant(c, mr) gives connection c a type-2 window over the whole
 * region, bound to c's queue pair (IBV_WR_BIND_MW on that QP), and returns the
 * window's rkey: the device serves a READ under it only when it arrives on
 * that QP (IBTA type 2: the window belongs to the QP), so a key learnt on
 * another connection, or kept after this one closed, is refused with a
 * remote access error. The window goes when c is closed (free_res), when
 * the region is deregistered, or when the transport is destroyed; once c's
 * QP is in the error state (the peer left or died) nothing is served under
 * it either.
 *
 * Windows are listed in t->mws under mw_lock (the list only: binds are
 * posted outside it). A window made in on_hello (QP not yet ready) is bound
 * in accept_up, before the HELLO_ACK that carries its key; one made later is
 * bound at once, before any frame its caller posts next.
 *
 * Without windows (RDMAPS_RDMA_MW=off, or auto on a device without type-2
 * windows: logged once) regions are registered with IBV_ACCESS_REMOTE_READ
 * and every peer gets the region's own rkey, as before. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/rdma/rdma_int.h"

struct rps_rdma_mw {
	struct rps_rdma_mw *next;
	struct rps_rdma_conn *c;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	uint32_t rkey;	/* after the bind */
	int bound;	/* bind posted */
};

static const char *mw_mode_name(int m)
{
	return m == RPS_RDMA_MW_ON ? "on" : m == RPS_RDMA_MW_OFF ? "off" : "auto";
}

/* Can d give type-2 windows? NULL, or why not. */
static const char *mw_unsupported(struct rps_rdma_dev *d)
{
	struct ibv_mw *mw;

	if (!(d->attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B))
		return "the device has no type-2B memory windows (device_cap_flags)";
	if (!d->attr.max_mw)
		return "the device reports max_mw 0";
	mw = ibv_alloc_mw(d->pd, IBV_MW_TYPE_2);
	if (!mw)
		return "ibv_alloc_mw(IBV_MW_TYPE_2) failed (driver or kernel without windows)";
	ibv_dealloc_mw(mw);
	return NULL;
}

int rps_rdma_mw_resolve(struct rps_rdma_transport *t, struct rps_rdma_dev *d)
{
	const char *why;
	int rc = 0;

	pthread_mutex_lock(&t->mw_lock);
	if (t->mw_state) {
		rc = t->mw_state < 0 ? -EOPNOTSUPP : 0;
		goto out;
	}
	if (t->mw_mode == RPS_RDMA_MW_OFF) {
		t->mw_state = 2;
		RPS_INFO("rdma: read access for every peer (RDMAPS_RDMA_MW=off): regions are "
			 "registered for remote read and each peer past the handshake gets their "
			 "rkey");
		goto out;
	}
	why = mw_unsupported(d);
	if (!why) {
		t->mw_state = 1;
		RPS_INFO("rdma: read access per connection: memory windows bound to each peer's "
			 "queue pair on %s (up to %d windows; RDMAPS_RDMA_MW=%s)",
			 d->name, d->attr.max_mw, mw_mode_name(t->mw_mode));
	} else if (t->mw_mode == RPS_RDMA_MW_ON) {
		t->mw_state = -1;
		RPS_ERR("rdma: RDMAPS_RDMA_MW=on but %s cannot give read access per connection: "
			"%s; use a device with memory windows or set RDMAPS_RDMA_MW=auto",
			d->name, why);
	} else {
		t->mw_state = 2;
		RPS_WARN("rdma: no memory windows on %s (%s): every peer past the handshake can "
			 "read the registered regions (read-only); RDMAPS_RDMA_MW=on refuses to "
			 "run like this",
			 d->name, why);
	}
	rc = t->mw_state < 0 ? -EOPNOTSUPP : 0;
out:
	pthread_mutex_unlock(&t->mw_lock);
	return rc;
}

int rps_rdma_mw_active(struct rps_rdma_transport *t)
{
	int on;

	pthread_mutex_lock(&t->mw_lock);
	on = t->mw_state == 1;
	pthread_mutex_unlock(&t->mw_lock);
	return on;
}

/* Post the bind of w on its connection's QP (state C_UP). Takes a
 * send-queue slot like a READ; the slot's completion is matched as any
 * other (a failed bind fails the connection). */
static int mw_post_bind(struct rps_rdma_mw *w, int may_wait)
{
	struct rps_rdma_conn *c = w->c;
	struct rps_rdma_transport *t = c->t;
	struct ibv_send_wr wr = {0}, *bad;
	uint64_t deadline = 0;
	int rc;

	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = w->mw;
	wr.bind_mw.rkey = w->rkey;
	wr.bind_mw.bind_info.mr = w->mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)w->mr->addr;
	wr.bind_mw.bind_info.length = w->mr->length;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	for (;;) {
		uint64_t gen = atomic_load(&t->res_gen);

		if (atomic_load(&c->state) != C_UP)
			return -ECONNRESET;
		pthread_mutex_lock(&c->post_lock);
		pthread_spin_lock(&c->lock);
		if (atomic_load(&c->state) != C_UP) {
			pthread_spin_unlock(&c->lock);
			rps_rdma_post_unlock(c);
			return -ECONNRESET;
		}
		if (rps_rdma_sq_used(c) < c->nslots - 1) {
			struct rps_rdma_slot *s = rps_rdma_sq_next(c);

			s->kind = WR_BIND;
			s->has_buf = 0;
			s->ctx = 0;
			s->ntmp = 0;
			s->tmp_mr = NULL;
			c->sq_head++;
			pthread_spin_unlock(&c->lock);
			wr.wr_id = (uintptr_t)s;
			rc = ibv_post_send(c->qp, &wr, &bad);
			if (rc) {
				pthread_spin_lock(&c->lock);
				c->sq_head--;
				pthread_spin_unlock(&c->lock);
			}
			rps_rdma_post_unlock(c);
			if (rc) {
				RPS_ERR("connection to %s: binding a memory window: ibv_post_send: %s",
					c->base.peer, strerror(rc));
				return -rc;
			}
			pthread_mutex_lock(&t->mw_lock);
			w->bound = 1;
			pthread_mutex_unlock(&t->mw_lock);
			return 0;
		}
		pthread_spin_unlock(&c->lock);
		rps_rdma_post_unlock(c);
		if (!may_wait)
			return -EAGAIN;
		if (!deadline)
			deadline = rps_now_ns() + (uint64_t)t->timeout_ms * 1000000ull;
		else if (rps_now_ns() > deadline)
			return -ETIMEDOUT;
		rps_rdma_progress_or_wait(t, gen, deadline - (uint64_t)t->timeout_ms * 1000000ull);
	}
}

int rps_rdma_grant(struct rps_conn *conn, const struct rps_tr_mr *mr, uint32_t *rkey_p)
{
	struct rps_rdma_conn *c = rps_rdma_c(conn);
	struct rps_rdma_transport *t = c->t;
	struct ibv_mr *imr = mr->priv;
	struct rps_rdma_mw *w;
	struct rps_rdma_dev *d = atomic_load(&t->dev);
	int rc, st;

	if (!imr || !d)
		return -EINVAL;
	pthread_mutex_lock(&t->mw_lock);
	if (t->mw_state != 1) {
		pthread_mutex_unlock(&t->mw_lock);
		*rkey_p = mr->remote_key;
		return 0;
	}
	for (w = t->mws; w; w = w->next)
		if (w->c == c && w->mr == imr)
			break;
	if (w && w->bound) {
		*rkey_p = w->rkey;
		pthread_mutex_unlock(&t->mw_lock);
		return 0;
	}
	if (!w) {
		w = rps_calloc(1, sizeof(*w));
		if (!w) {
			pthread_mutex_unlock(&t->mw_lock);
			return -ENOMEM;
		}
		w->mw = ibv_alloc_mw(d->pd, IBV_MW_TYPE_2);
		if (!w->mw) {
			rc = errno ? -errno : -ENOMEM;
			pthread_mutex_unlock(&t->mw_lock);
			RPS_ERR("connection to %s: ibv_alloc_mw: %s (device limit max_mw %d)",
				c->base.peer, strerror(-rc), d->attr.max_mw);
			rps_free(w);
			return rc;
		}
		w->c = c;
		w->mr = imr;
		w->rkey = ibv_inc_rkey(w->mw->rkey);
		w->next = t->mws;
		t->mws = w;
	}
	*rkey_p = w->rkey;
	pthread_mutex_unlock(&t->mw_lock);
	st = atomic_load(&c->state);
	if (st == C_ACCEPTING || st == C_PROVING)
		return 0; /* bound in accept_up, before the HELLO_ACK */
	/* Only the owner of c grants on it once it is up, never two threads for
	 * one (c, mr): no lock needed around the bind. */
	rc = mw_post_bind(w, 1);
	if (rc)
		RPS_ERR("connection to %s: cannot bind a memory window: %s", c->base.peer,
			strerror(-rc));
	return rc;
}

int rps_rdma_mw_bind_pending(struct rps_rdma_conn *c)
{
	struct rps_rdma_transport *t = c->t;
	struct rps_rdma_mw *todo[64];
	int n, rc = 0;

	do {
		n = 0;
		pthread_mutex_lock(&t->mw_lock);
		for (struct rps_rdma_mw *w = t->mws; w && n < 64; w = w->next)
			if (w->c == c && !w->bound)
				todo[n++] = w;
		pthread_mutex_unlock(&t->mw_lock);
		/* the poll thread, prog_lock held: a fresh send queue has room, and
		 * it must not wait for completions it would reap itself */
		for (int i = 0; i < n && !rc; i++)
			rc = mw_post_bind(todo[i], 0);
	} while (n == 64 && !rc);
	if (rc)
		RPS_ERR("connection to %s: cannot bind its memory windows: %s", c->base.peer,
			strerror(-rc));
	return rc;
}

/* Deallocate (invalidate) every window matching c or mr (NULL: any). */
static void mw_drop(struct rps_rdma_transport *t, struct rps_rdma_conn *c, struct ibv_mr *mr)
{
	struct rps_rdma_mw **pp, *w;

	pthread_mutex_lock(&t->mw_lock);
	pp = &t->mws;
	while ((w = *pp)) {
		if ((c && w->c != c) || (mr && w->mr != mr)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		if (ibv_dealloc_mw(w->mw))
			RPS_ERR("rdma: ibv_dealloc_mw: %m");
		rps_free(w);
	}
	pthread_mutex_unlock(&t->mw_lock);
}

void rps_rdma_mw_conn_gone(struct rps_rdma_conn *c)
{
	mw_drop(c->t, c, NULL);
}

void rps_rdma_mw_mr_gone(struct rps_rdma_transport *t, struct ibv_mr *mr)
{
	mw_drop(t, NULL, mr);
}

void rps_rdma_mw_destroy(struct rps_rdma_transport *t)
{
	mw_drop(t, NULL, NULL);
}

unsigned rps_rdma_mw_count(struct rps_rdma_transport *t, struct rps_rdma_conn *c)
{
	unsigned n = 0;

	pthread_mutex_lock(&t->mw_lock);
	for (struct rps_rdma_mw *w = t->mws; w; w = w->next)
		n += !c || w->c == c;
	pthread_mutex_unlock(&t->mw_lock);
	return n;
}
