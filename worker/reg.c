/* Registered pull buffers (rps_worker_register / rps_worker_unregister).
 *
 * A registered buffer is registered with the transport once, for as long as
 * the application says; the read strategy reads into it directly (its
 * handle in the scatter list). An unregistered buffer is never registered:
 * the read strategy reads through its own registered bounce blocks and
 * copies out, so a buffer freed and reallocated at the same address can
 * never be written through a stale registration.
 *
 * Lookups take no lock (one per pull request): each entry is published by
 * an odd generation; a lookup takes a reference (inflight) and then checks
 * that the generation did not move. Unregister makes the generation even
 * and then looks at inflight (both seq_cst): either it sees the reference
 * (-EBUSY, the entry is published again) or the lookup sees the change and
 * lets go. Writers serialise on lock.
 */
#include <errno.h>
#include <string.h>

#include "src/log.h"
#include "worker/worker_int.h"

void rps_wregs_init(struct rps_wregs *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
}

void rps_wregs_fini(struct rps_worker *w)
{
	struct rps_wregs *r = &w->regs;

	for (int i = 0; i < atomic_load(&r->n); i++) {
		struct rps_wreg *e = &r->e[i];

		if (e->has_mr && w->tr)
			rps_tr_dereg_mem(w->tr, &e->mr);
		e->has_mr = 0;
	}
}

struct rps_wreg *rps_wreg_get(struct rps_worker *w, const void *addr, size_t len)
{
	struct rps_wregs *r = &w->regs;
	uintptr_t a = (uintptr_t)addr, e = a + len;
	int n = atomic_load_explicit(&r->n, memory_order_acquire);

	for (int i = 0; i < n; i++) {
		struct rps_wreg *g = &r->e[i];
		uint32_t gen = atomic_load_explicit(&g->gen, memory_order_acquire);

		if (!(gen & 1))
			continue;
		if (a < atomic_load_explicit(&g->lo, memory_order_relaxed) ||
		    e > atomic_load_explicit(&g->hi, memory_order_relaxed))
			continue;
		atomic_fetch_add(&g->inflight, 1);
		if (atomic_load(&g->gen) == gen)
			return g;
		atomic_fetch_sub(&g->inflight, 1);
	}
	return NULL;
}

static struct rps_wreg *find_locked(struct rps_wregs *r, uintptr_t lo, uintptr_t hi, int exact)
{
	for (int i = 0; i < atomic_load(&r->n); i++) {
		struct rps_wreg *g = &r->e[i];

		if (!(atomic_load(&g->gen) & 1))
			continue;
		if (exact ? atomic_load(&g->lo) == lo
			  : lo < atomic_load(&g->hi) && hi > atomic_load(&g->lo))
			return g;
	}
	return NULL;
}

int rps_worker_register(struct rps_worker *w, void *buf, size_t len)
{
	struct rps_wregs *r;
	struct rps_wreg *g = NULL;
	uintptr_t lo = (uintptr_t)buf;
	int rc = 0;

	if (!w || !buf || !len || lo + len < lo)
		return -EINVAL;
	r = &w->regs;
	pthread_mutex_lock(&r->lock);
	if (find_locked(r, lo, lo + len, 0)) {
		rc = -EEXIST;
		goto out;
	}
	for (int i = 0; i < atomic_load(&r->n) && !g; i++)
		if (!(atomic_load(&r->e[i].gen) & 1))
			g = &r->e[i];
	if (!g && atomic_load(&r->n) == RPS_WREG_MAX) {
		rc = -ENOSPC;
		goto out;
	}
	if (!g)
		g = &r->e[atomic_load(&r->n)];
	g->has_mr = 0;
	if (w->tr) {
		rc = rps_tr_reg_mem(w->tr, buf, len, RPS_TR_ACCESS_LOCAL, &g->mr);
		if (rc)
			goto out;
		g->has_mr = 1;
	}
	atomic_store_explicit(&g->lo, lo, memory_order_relaxed);
	atomic_store_explicit(&g->hi, lo + len, memory_order_relaxed);
	g->handle = g->has_mr ? g->mr.handle : 0;
	atomic_fetch_add_explicit(&g->gen, 1, memory_order_release); /* odd: live */
	if (g == &r->e[atomic_load(&r->n)])
		atomic_store_explicit(&r->n, atomic_load(&r->n) + 1, memory_order_release);
out:
	pthread_mutex_unlock(&r->lock);
	return rc;
}

int rps_worker_unregister(struct rps_worker *w, void *buf)
{
	struct rps_wregs *r;
	struct rps_wreg *g;
	int rc = 0;

	if (!w || !buf)
		return -EINVAL;
	r = &w->regs;
	pthread_mutex_lock(&r->lock);
	g = find_locked(r, (uintptr_t)buf, 0, 1);
	if (!g) {
		rc = -ENOENT;
		goto out;
	}
	atomic_fetch_add(&g->gen, 1); /* even: new lookups pass it by */
	if (atomic_load(&g->inflight)) {
		atomic_fetch_add(&g->gen, 1); /* live again */
		rc = -EBUSY;
		goto out;
	}
	if (g->has_mr)
		rps_tr_dereg_mem(w->tr, &g->mr);
	g->has_mr = 0;
	atomic_store_explicit(&g->lo, 0, memory_order_relaxed);
	atomic_store_explicit(&g->hi, 0, memory_order_relaxed);
out:
	pthread_mutex_unlock(&r->lock);
	return rc;
}
