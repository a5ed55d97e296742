/* RDMA transport: posting RDMA READs (read_remote, read_notify) into the
 * caller's memory; the MR cache (rdma_mr.c) registers a region once, on its
 * first read. Their completions: rdma_cq.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/rdma/rdma_int.h"

/* --------------------------------------------------------- RDMA READ */

/* A READ whose slot is of kind (WR_READ: ctx is the caller's; WR_RNOTIFY: ctx
 * is its struct rps_tr_done). */
static int post_read(struct rps_conn *conn, const struct rps_tr_sge *sge, int nsge, uint64_t raddr,
		     uint32_t rkey, int kind, uint64_t ctx)
{
	struct rps_rdma_conn *c = rps_rdma_c(conn);
	struct rps_rdma_transport *t = c->t;
	struct ibv_sge sg[RDMA_MAX_SGE];
	struct ibv_mr *tmp[RDMA_MAX_SGE], **tmp_copy = NULL;
	struct ibv_send_wr wr = {0}, *bad;
	uint64_t total = 0, deadline = 0;
	int ntmp = 0, rc;

	if (nsge < 1 || nsge > t->base.max_read_sge) {
		RPS_ERR("read from %s: %d sges (1..%d)", c->base.peer, nsge, t->base.max_read_sge);
		return -EINVAL;
	}
	if (atomic_load(&c->state) != C_UP)
		return -ECONNRESET;
	for (int i = 0; i < nsge; i++) {
		if (sge[i].handle) { /* the caller's own registration: its lkey */
			sg[i].lkey = sge[i].handle;
		} else {
			tmp[ntmp] = NULL;
			rc = rps_rdma_mrc_lkey(t, sge[i].addr, sge[i].len, &sg[i].lkey, &tmp[ntmp]);
			if (rc)
				goto err_tmp;
			if (tmp[ntmp])
				ntmp++;
		}
		sg[i].addr = (uintptr_t)sge[i].addr;
		sg[i].length = sge[i].len;
		total += sge[i].len;
	}
	if (total > (1ull << 31)) {
		RPS_ERR("read from %s: %llu bytes in one read (max 2 GiB)", c->base.peer,
			(unsigned long long)total);
		rc = -EMSGSIZE;
		goto err_tmp;
	}
	wr.opcode = IBV_WR_RDMA_READ;
	wr.sg_list = sg;
	wr.num_sge = nsge;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ntmp) { /* the completion deregisters them */
		tmp_copy = rps_malloc(ntmp * sizeof(*tmp_copy));
		if (!tmp_copy) {
			rc = -ENOMEM;
			goto err_tmp;
		}
		memcpy(tmp_copy, tmp, ntmp * sizeof(*tmp));
	}
	for (;;) {
		struct rps_rdma_slot *s;
		uint64_t gen = atomic_load(&t->res_gen);

		if (atomic_load(&c->state) != C_UP || atomic_load(&c->user_closed)) {
			rc = -ECONNRESET;
			goto err_tmp;
		}
		pthread_mutex_lock(&c->post_lock);
		pthread_spin_lock(&c->lock);
		if (atomic_load(&c->state) != C_UP) {
			pthread_spin_unlock(&c->lock);
			rps_rdma_post_unlock(c);
			rc = -ECONNRESET;
			goto err_tmp;
		}
		if (rps_rdma_sq_used(c) < c->nslots - 1) {
			s = rps_rdma_sq_next(c);
			s->kind = (uint8_t)kind;
			s->has_buf = 0;
			s->ctx = ctx;
			s->ntmp = ntmp;
			s->tmp_mr = tmp_copy;
			c->sq_head++;
			pthread_spin_unlock(&c->lock);
			/* the slot is ours; post_lock keeps later posts behind */
			wr.wr_id = (uintptr_t)s;
			rc = ibv_post_send(c->qp, &wr, &bad);
			if (rc) {
				s->tmp_mr = NULL;
				s->ntmp = 0;
				pthread_spin_lock(&c->lock); /* nobody posted after us: undo */
				c->sq_head--;
				pthread_spin_unlock(&c->lock);
			}
			rps_rdma_post_unlock(c);
			if (rc) {
				RPS_ERR("read from %s: ibv_post_send: %s", c->base.peer,
					strerror(rc));
				rc = atomic_load(&c->state) == C_DEAD ? -ECONNRESET : -rc;
				goto err_tmp;
			}
			atomic_fetch_add(&t->st_reads, 1);
			return 0;
		}
		pthread_spin_unlock(&c->lock);
		rps_rdma_post_unlock(c);
		if (!deadline)
			deadline = rps_now_ns() + (uint64_t)t->timeout_ms * 1000000ull;
		else if (rps_now_ns() > deadline) {
			RPS_ERR("read from %s: send queue full for %d ms", c->base.peer,
				t->timeout_ms);
			rc = -ETIMEDOUT;
			goto err_tmp;
		}
		rps_rdma_progress_or_wait(t, gen, deadline - (uint64_t)t->timeout_ms * 1000000ull);
	}

err_tmp:
	rps_free(tmp_copy);
	for (int i = 0; i < ntmp; i++)
		ibv_dereg_mr(tmp[i]);
	return rc;
}

int rps_rdma_read_remote(struct rps_conn *conn, const struct rps_tr_sge *sge, int nsge,
			 uint64_t raddr, uint32_t rkey, uint64_t ctx)
{
	return post_read(conn, sge, nsge, raddr, rkey, WR_READ, ctx);
}

int rps_rdma_read_notify(struct rps_conn *conn, const struct rps_tr_sge *sge, int nsge,
			 uint64_t raddr, uint32_t rkey, struct rps_tr_done *d)
{
	d->status = 0;
	atomic_store_explicit(&d->state, RPS_TR_PENDING, memory_order_relaxed);
	return post_read(conn, sge, nsge, raddr, rkey, WR_RNOTIFY, (uintptr_t)d);
}
