/* RDMA transport: memory registration, and the only registration cache.
 *
 * reg_mem registers with IBV_ACCESS_LOCAL_WRITE, plus REMOTE_READ when asked;
 * never REMOTE_WRITE. Its rps_tr_mr.handle is the MR's lkey and remote_key
 * its rkey; the region also enters the cache, so reads into it find it.
 * dereg_mem drops the region and every cached registration of its pages.
 *
 * read_remote's local sges carry a handle (the caller's own registration)
 * or 0. For 0 the cache registers the page-aligned span of the sge on its
 * first use and keeps it. Entries leave the cache only when dereg_mem is
 * called on a range that overlaps them (or at destroy). Consequence: memory
 * read into with handle 0 stays pinned and must not be unmapped and mapped
 * anew at the same address while the transport lives (the cached MR would
 * still point at the old pages). The worker therefore never passes 0 for
 * caller memory: it reads into buffers the application registered
 * (rps_worker_register, via reg_mem) or into its own registered bounce
 * memory. When all RDMA_MRC_SIZE entries are taken, reads register per call
 * (slow, logged once).
 *
 * Lookups take no lock: each entry is a seqlock (gen odd while it changes);
 * writers serialise on mrc_lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/rdma/rdma_int.h"

static uintptr_t page_size(void)
{
	static uintptr_t ps;

	if (!ps) {
		long v = sysconf(_SC_PAGESIZE);

		ps = v > 0 ? (uintptr_t)v : 4096;
	}
	return ps;
}

static int mrc_find(struct rps_rdma_transport *t, uintptr_t a, uintptr_t e, uint32_t *lkey_p)
{
	uint32_t n = atomic_load_explicit(&t->mrc_n, memory_order_acquire);

	for (uint32_t i = 0; i < n; i++) {
		struct rps_rdma_mrc_ent *m = &t->mrc[i];
		uint64_t g1 = atomic_load_explicit(&m->gen, memory_order_acquire);
		uintptr_t s, en;
		uint32_t k;

		if (g1 & 1)
			continue;
		s = m->start;
		en = m->end;
		k = m->lkey;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&m->gen, memory_order_relaxed) != g1)
			continue;
		if (a >= s && e <= en && s != en) {
			*lkey_p = k;
			return 1;
		}
	}
	return 0;
}

/* An empty entry (end == start) or a new one; mrc_lock held. */
static struct rps_rdma_mrc_ent *mrc_slot(struct rps_rdma_transport *t)
{
	uint32_t n = atomic_load(&t->mrc_n);

	for (uint32_t i = 0; i < n; i++)
		if (t->mrc[i].start == t->mrc[i].end && !(atomic_load(&t->mrc[i].gen) & 1))
			return &t->mrc[i];
	if (n < RDMA_MRC_SIZE) {
		atomic_store(&t->mrc[n].gen, 0);
		t->mrc[n].start = t->mrc[n].end = 0;
		atomic_store_explicit(&t->mrc_n, n + 1, memory_order_release);
		return &t->mrc[n];
	}
	return NULL;
}

static void mrc_set(struct rps_rdma_mrc_ent *m, uintptr_t s, uintptr_t e, struct ibv_mr *mr,
		    int owned)
{
	atomic_fetch_add_explicit(&m->gen, 1, memory_order_acq_rel);
	atomic_thread_fence(memory_order_release);
	m->start = s;
	m->end = e;
	m->lkey = mr ? mr->lkey : 0;
	m->mr = mr;
	m->owned = owned;
	atomic_fetch_add_explicit(&m->gen, 1, memory_order_release);
}

static int reg_errno(struct rps_rdma_transport *t, size_t len, const char *what)
{
	int rc = errno ? -errno : -ENOMEM;

	if (rc == -ENOMEM || rc == -EAGAIN) {
		if (!rps_rdma_memlock_check(t, (uint64_t)len, what))
			RPS_ERR("%s: ibv_reg_mr of %zu KiB: out of memory (locked memory limit?)",
				what, len >> 10);
		return -ENOMEM;
	}
	RPS_ERR("%s: ibv_reg_mr of %zu KiB: %s", what, len >> 10, strerror(-rc));
	return rc;
}

static struct rps_rdma_dev *need_dev(struct rps_rdma_transport *t, const char *what)
{
	struct rps_rdma_dev *d = atomic_load(&t->dev);

	if (!d)
		RPS_ERR("%s before the RDMA device is known: set RDMAPS_DEVICE, or listen/connect "
			"first (this host has several devices)",
			what);
	return d;
}

int rps_rdma_mrc_lkey(struct rps_rdma_transport *t, void *addr, uint32_t len, uint32_t *lkey_p,
		      struct ibv_mr **tmp_p)
{
	uintptr_t a = (uintptr_t)addr, e = a + (len ? len : 1);
	uintptr_t ps = page_size(), s, en;
	struct rps_rdma_dev *d;
	struct rps_rdma_mrc_ent *m;
	struct ibv_mr *mr;

	if (RPS_LIKELY(mrc_find(t, a, e, lkey_p))) {
		atomic_fetch_add_explicit(&t->st_mrc_hits, 1, memory_order_relaxed);
		return 0;
	}
	d = need_dev(t, "read_remote");
	if (!d)
		return -ENODEV;
	s = a & ~(ps - 1);
	en = (e + ps - 1) & ~(ps - 1);
	pthread_mutex_lock(&t->mrc_lock);
	if (mrc_find(t, a, e, lkey_p)) {
		pthread_mutex_unlock(&t->mrc_lock);
		return 0;
	}
	mr = ibv_reg_mr(d->pd, (void *)s, en - s, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		int rc = reg_errno(t, en - s, "read_remote destination");

		pthread_mutex_unlock(&t->mrc_lock);
		return rc;
	}
	m = mrc_slot(t);
	if (!m) {
		if (!t->mrc_full_warned) {
			t->mrc_full_warned = 1;
			RPS_WARN("rdma: MR cache full (%d regions): reads into new buffers now "
				 "register per read; reuse pull buffers or reg_mem them",
				 RDMA_MRC_SIZE);
		}
		pthread_mutex_unlock(&t->mrc_lock);
		atomic_fetch_add(&t->st_tmp_regs, 1);
		*lkey_p = mr->lkey;
		*tmp_p = mr;
		return 0;
	}
	mrc_set(m, s, en, mr, 1);
	rps_rdma_locked_add(t, (int64_t)(en - s));
	atomic_fetch_add(&t->st_mrc_regs, 1);
	pthread_mutex_unlock(&t->mrc_lock);
	*lkey_p = mr->lkey;
	return 0;
}

/* Drop cache entries overlapping [start, end); mrc_lock held. */
static void mrc_evict_locked(struct rps_rdma_transport *t, uintptr_t start, uintptr_t end,
			     struct ibv_mr *only)
{
	uint32_t n = atomic_load(&t->mrc_n);

	for (uint32_t i = 0; i < n; i++) {
		struct rps_rdma_mrc_ent *m = &t->mrc[i];
		struct ibv_mr *mr = m->mr;
		int owned = m->owned;
		uintptr_t len = m->end - m->start;

		if (m->start == m->end || m->end <= start || m->start >= end)
			continue;
		if (only && mr != only && !owned)
			continue;
		mrc_set(m, 0, 0, NULL, 0);
		if (owned && mr) {
			ibv_dereg_mr(mr);
			rps_rdma_locked_add(t, -(int64_t)len);
		}
	}
}

void rps_rdma_mrc_evict(struct rps_rdma_transport *t, uintptr_t start, uintptr_t end)
{
	pthread_mutex_lock(&t->mrc_lock);
	mrc_evict_locked(t, start, end, NULL);
	pthread_mutex_unlock(&t->mrc_lock);
}

void rps_rdma_mrc_destroy(struct rps_rdma_transport *t)
{
	rps_rdma_mrc_evict(t, 0, UINTPTR_MAX);
}

int rps_rdma_reg_mem(struct rps_transport *tr, void *addr, size_t len, unsigned access,
		     struct rps_tr_mr *mr_p)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);
	int acc = IBV_ACCESS_LOCAL_WRITE;
	struct rps_rdma_dev *d;
	struct rps_rdma_mrc_ent *m;
	struct ibv_mr *mr;
	int rc;

	if (!addr || !len) {
		RPS_ERR("reg_mem: empty region");
		return -EINVAL;
	}
	if (access & ~RPS_TR_ACCESS_REMOTE_READ) {
		RPS_ERR("reg_mem: unknown access bits 0x%x (remote write is never granted)",
			access);
		return -EINVAL;
	}
	d = need_dev(t, "reg_mem");
	if (!d)
		return -ENODEV;
	if (access & RPS_TR_ACCESS_REMOTE_READ) {
		/* per connection (rdma_mw.c): no remote access of its own, only
		 * through windows; else one read-only registration for all peers */
		rc = rps_rdma_mw_resolve(t, d);
		if (rc)
			return rc;
		acc |= rps_rdma_mw_active(t) ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_READ;
	}
	rc = rps_rdma_memlock_check(t, len, "reg_mem");
	if (rc)
		return rc;
	mr = ibv_reg_mr(d->pd, addr, len, acc);
	if (!mr)
		return reg_errno(t, len, "reg_mem");
	rps_rdma_locked_add(t, (int64_t)len);
	pthread_mutex_lock(&t->mrc_lock);
	m = mrc_slot(t);
	if (m)
		mrc_set(m, (uintptr_t)addr, (uintptr_t)addr + len, mr, 0);
	pthread_mutex_unlock(&t->mrc_lock);
	mr_p->addr = addr;
	mr_p->len = len;
	mr_p->remote_addr = (uint64_t)(uintptr_t)addr;
	mr_p->remote_key = mr->rkey;
	mr_p->handle = mr->lkey; /* rps_tr_sge.handle: the lkey */
	mr_p->priv = mr;
	return 0;
}

void rps_rdma_dereg_mem(struct rps_transport *tr, struct rps_tr_mr *mr)
{
	struct rps_rdma_transport *t = rps_rdma_t(tr);
	struct ibv_mr *imr = mr->priv;
	int rc;

	if (!imr)
		return;
	/* the region goes: so do cached registrations of its pages */
	pthread_mutex_lock(&t->mrc_lock);
	mrc_evict_locked(t, (uintptr_t)mr->addr, (uintptr_t)mr->addr + mr->len, imr);
	pthread_mutex_unlock(&t->mrc_lock);
	rps_rdma_mw_mr_gone(t, imr); /* a region with windows bound cannot go */
	rc = ibv_dereg_mr(imr);
	if (rc)
		RPS_ERR("dereg_mem %p: ibv_dereg_mr: %s", mr->addr, strerror(rc));
	else
		rps_rdma_locked_add(t, -(int64_t)mr->len);
	mr->priv = NULL;
	mr->remote_key = 0;
	mr->handle = 0;
}
