/* Transport lookup by name and the checks made once at create: mandatory
 * ops present, every capability backed by its op. Optional ops a transport
 * leaves NULL are filled with stubs returning -EOPNOTSUPP (as rdma-core's
 * dummy_ops), so no wrapper ever calls through NULL. */
#include "transport/transport.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "src/auth.h"
#include "src/log.h"

#define NTRANSPORTS (sizeof(transports) / sizeof(transports[0]))

static const struct rps_transport_ops *const transports[] = {
    &rps_tcp_ops,
#ifdef RPS_WITH_RDMA
    &rps_rdma_ops,
#endif
};

/* The tables handed out: transports[] with the optional ops filled in. */
static struct rps_transport_ops filled[NTRANSPORTS];
static pthread_once_t filled_once = PTHREAD_ONCE_INIT;

static int stub_read_remote(struct rps_conn *c, const struct rps_tr_sge *sge, int nsge,
			    uint64_t raddr, uint32_t rkey, uint64_t ctx)
{
	(void)c, (void)sge, (void)nsge, (void)raddr, (void)rkey, (void)ctx;
	return -EOPNOTSUPP;
}

static int stub_read_notify(struct rps_conn *c, const struct rps_tr_sge *sge, int nsge,
			    uint64_t raddr, uint32_t rkey, struct rps_tr_done *d)
{
	(void)c, (void)sge, (void)nsge, (void)raddr, (void)rkey, (void)d;
	return -EOPNOTSUPP;
}

static int stub_progress(struct rps_transport *t, struct rps_tr_event *ev, int max)
{
	(void)t, (void)ev, (void)max;
	return -EOPNOTSUPP;
}

/* No per-connection access: every peer reads under the registration's key. */
static int stub_grant(struct rps_conn *c, const struct rps_tr_mr *mr, uint32_t *rkey_p)
{
	(void)c;
	*rkey_p = mr->remote_key;
	return 0;
}

/* A capability and the op it promises. */
static const struct {
	uint32_t cap;
	size_t op; /* offsetof(struct rps_transport_ops, op) */
	const char *name;
} cap_ops[] = {
    {RPS_TR_CAP_READ, offsetof(struct rps_transport_ops, read_remote), "read_remote"},
    {RPS_TR_CAP_READ_NOTIFY, offsetof(struct rps_transport_ops, read_notify), "read_notify"},
    {RPS_TR_CAP_PROGRESS, offsetof(struct rps_transport_ops, progress), "progress"},
};

static int has_op(const struct rps_transport_ops *o, size_t off)
{
	void (*fn)(void);

	memcpy(&fn, (const char *)o + off, sizeof(fn));
	return fn != NULL;
}

static void fill_tables(void)
{
	for (size_t i = 0; i < NTRANSPORTS; i++) {
		filled[i] = *transports[i];
		if (!filled[i].read_remote)
			filled[i].read_remote = stub_read_remote;
		if (!filled[i].read_notify)
			filled[i].read_notify = stub_read_notify;
		if (!filled[i].progress)
			filled[i].progress = stub_progress;
		if (!filled[i].grant)
			filled[i].grant = stub_grant;
	}
}

static int ops_complete(const struct rps_transport_ops *o)
{
	return o->create && o->destroy && o->listen && o->connect && o->post_send && o->poll &&
	       o->release && o->reg_mem && o->dereg_mem && o->close && o->wake;
}

int rps_transport_create(const char *name, const struct rps_tr_params *p,
			 struct rps_transport **t_p)
{
	int arc = rps_auth_secret_ok(p->secret, p->insecure);

	if (arc)
		return arc;
	pthread_once(&filled_once, fill_tables);
	for (size_t i = 0; i < NTRANSPORTS; i++) {
		const struct rps_transport_ops *o = transports[i];
		struct rps_transport *t;
		int rc;

		if (strcmp(o->name, name) != 0)
			continue;
		if (!ops_complete(o)) {
			RPS_ERR("transport %s: ops table incomplete", name);
			return -ENOTSUP;
		}
		rc = o->create(p, &t);
		if (rc)
			return rc;
		for (size_t k = 0; k < sizeof(cap_ops) / sizeof(cap_ops[0]); k++) {
			if ((t->caps & cap_ops[k].cap) && !has_op(o, cap_ops[k].op)) {
				RPS_ERR("transport %s: capability %#x without its op %s", name,
					cap_ops[k].cap, cap_ops[k].name);
				o->destroy(t);
				return -ENOTSUP;
			}
		}
		t->ops = &filled[i];
		*t_p = t;
		return 0;
	}
#ifndef RPS_WITH_RDMA
	if (!strcmp(name, "rdma")) {
		RPS_ERR(
		    "transport rdma: not built (configure with -DRPS_WITH_RDMA=ON and rdma-core)");
		return -ENOTSUP;
	}
#endif
	RPS_ERR("transport %s: unknown (expected tcp or rdma)", name);
	return -ENOTSUP;
}
