#include "transport/transport.h"

#include <errno.h>
#include <string.h>

#include "src/log.h"

static const struct rps_transport_ops *const transports[] = {
	&rps_tcp_ops,
#ifdef RPS_WITH_RDMA
	&rps_rdma_ops,
#endif
};

static int ops_complete(const struct rps_transport_ops *o)
{
	return o->create && o->destroy && o->listen && o->connect && o->post_send && o->poll &&
	       o->release && o->reg_mem && o->dereg_mem && o->close && o->wake;
}

int rps_transport_create(const char *name, const struct rps_tr_params *p,
			 struct rps_transport **t_p)
{
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
		const struct rps_transport_ops *o = transports[i];
		int rc;

		if (strcmp(o->name, name) != 0)
			continue;
		if (!ops_complete(o)) {
			RPS_ERR("transport %s: ops table incomplete", name);
			return -ENOTSUP;
		}
		rc = o->create(p, t_p);
		if (rc)
			return rc;
		/* a capability promises its op */
		if (((*t_p)->caps & RPS_TR_CAP_READ && !o->read_remote) ||
		    ((*t_p)->caps & RPS_TR_CAP_PROGRESS && !o->progress) ||
		    ((*t_p)->caps & RPS_TR_CAP_READ_NOTIFY && !o->read_notify)) {
			RPS_ERR("transport %s: capabilities %#x without their ops", name,
				(*t_p)->caps);
			o->destroy(*t_p);
			*t_p = NULL;
			return -ENOTSUP;
		}
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
