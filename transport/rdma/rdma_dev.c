/* RDMA transport: device choice and checks (ports, GIDs, locked memory),
 * protection domain, completion queue, shared receive queues. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "transport/rdma/rdma_int.h"

#define RDMA_CQ_INIT 4096

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static const char *port_state_name(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	default:
		return "NOP";
	}
}

static int gid_is_zero(const union ibv_gid *g)
{
	static const union ibv_gid zero;

	return !memcmp(g, &zero, sizeof(zero));
}

/* Check that some port is ACTIVE and (RoCE) has a GID. */
static int dev_check_ports(struct ibv_context *ctx, const struct ibv_device_attr *attr)
{
	const char *name = ibv_get_device_name(ctx->device);
	int active = 0, first_state = -1, gid_ok = 0, roce = 0;

	for (int p = 1; p <= attr->phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		int rc = ibv_query_port(ctx, (uint8_t)p, &pa);

		if (rc) {
			RPS_ERR("rdma device %s: ibv_query_port %d: %s", name, p, strerror(rc));
			return -rc;
		}
		if (first_state < 0)
			first_state = pa.state;
		if (pa.state != IBV_PORT_ACTIVE)
			continue;
		active++;
		if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
			gid_ok = 1; /* InfiniBand: GID 0 from the subnet prefix */
			continue;
		}
		roce = 1;
		for (int i = 0; i < pa.gid_tbl_len && i < 32; i++) {
			union ibv_gid g;

			if (!ibv_query_gid(ctx, (uint8_t)p, i, &g) && !gid_is_zero(&g)) {
				gid_ok = 1;
				break;
			}
		}
	}
	if (!active) {
		RPS_ERR("rdma device %s: no port is ACTIVE (port 1 is %s): check the link with "
			"ibv_devinfo / rdma link (SoftRoCE: is its netdev up?)",
			name, port_state_name(first_state < 0 ? IBV_PORT_NOP : first_state));
		return -ENETDOWN;
	}
	if (!gid_ok) {
		RPS_ERR("rdma device %s: no usable GID on its active ports%s (see docs/rdma.md, "
			"'GIDs')",
			name, roce ? " (RoCE: give its netdev an IP address)" : "");
		return -EADDRNOTAVAIL;
	}
	return 0;
}

int rps_rdma_devices_probe(struct rps_rdma_transport *t)
{
	struct ibv_context **list;
	struct ibv_context *pick = NULL;
	int n = 0, rc = 0, max_sge = RDMA_MAX_SGE;
	char names[256] = "";

	list = rdma_get_devices(&n);
	if (!list || n <= 0) {
		RPS_ERR("no RDMA device (see docs/softroce.md)");
		if (list)
			rdma_free_devices(list);
		return -ENODEV;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_device_attr a;
		const char *nm = ibv_get_device_name(list[i]->device);
		size_t l = strlen(names);

		snprintf(names + l, sizeof(names) - l, "%s%s", l ? " " : "", nm);
		if (!ibv_query_device(list[i], &a)) {
			max_sge = RPS_MIN(max_sge, a.max_sge);
			if (a.max_sge_rd > 0)
				max_sge = RPS_MIN(max_sge, a.max_sge_rd);
		}
		if (t->device[0] && !strcmp(nm, t->device))
			pick = list[i];
	}
	t->base.max_read_sge = RPS_MAX(max_sge, 1);
	if (t->device[0] && !pick) {
		RPS_ERR("RDMA device %s not found (RDMAPS_DEVICE; devices here: %s)", t->device,
			names);
		rc = -ENODEV;
	} else if (!pick && n == 1) {
		pick = list[0];
	}
	if (pick)
		rc = rps_rdma_dev_ensure(t, pick, "create");
	rdma_free_devices(list);
	return rc;
}

int rps_rdma_dev_ensure(struct rps_rdma_transport *t, struct ibv_context *ctx, const char *why)
{
	struct rps_rdma_dev *d;
	int rc;

	pthread_mutex_lock(&t->setup_lock);
	d = atomic_load(&t->dev);
	if (d) {
		rc = 0;
		if (d->ctx != ctx) {
			RPS_ERR("%s: address belongs to RDMA device %s but this transport uses %s "
				"(set RDMAPS_DEVICE, or use one transport per device)",
				why, ibv_get_device_name(ctx->device), d->name);
			rc = -EXDEV;
		}
		pthread_mutex_unlock(&t->setup_lock);
		return rc;
	}
	d = rps_calloc(1, sizeof(*d));
	if (!d) {
		rc = -ENOMEM;
		goto err_unlock;
	}
	d->ctx = ctx;
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(ctx->device));
	rc = ibv_query_device(ctx, &d->attr);
	if (rc) {
		RPS_ERR("rdma device %s: ibv_query_device: %s", d->name, strerror(rc));
		rc = -rc;
		goto err_free;
	}
	rc = dev_check_ports(ctx, &d->attr);
	if (rc)
		goto err_free;
	d->max_sge = RPS_MIN(d->attr.max_sge, RDMA_MAX_SGE);
	if (d->attr.max_sge_rd > 0)
		d->max_sge = RPS_MIN(d->max_sge, d->attr.max_sge_rd);
	if (d->attr.max_srq_wr <= 0) {
		RPS_ERR("rdma device %s: no shared receive queue support", d->name);
		rc = -EOPNOTSUPP;
		goto err_free;
	}
	d->pd = ibv_alloc_pd(ctx);
	if (!d->pd) {
		rc = errno ? -errno : -ENOMEM;
		RPS_ERR("rdma device %s: ibv_alloc_pd: %s", d->name, strerror(-rc));
		goto err_free;
	}
	d->cch = ibv_create_comp_channel(ctx);
	if (!d->cch) {
		rc = errno ? -errno : -ENOMEM;
		RPS_ERR("rdma device %s: ibv_create_comp_channel: %s", d->name, strerror(-rc));
		goto err_pd;
	}
	rc = set_nonblock(d->cch->fd);
	if (!rc)
		rc = set_nonblock(ctx->async_fd);
	if (rc) {
		RPS_ERR("rdma device %s: O_NONBLOCK: %s", d->name, strerror(-rc));
		goto err_cch;
	}
	d->cq_size = RPS_MIN(d->attr.max_cqe, RDMA_CQ_INIT);
	d->cq = ibv_create_cq(ctx, d->cq_size, NULL, d->cch, 0);
	if (!d->cq) {
		rc = errno ? -errno : -ENOMEM;
		RPS_ERR("rdma device %s: ibv_create_cq(%d): %s", d->name, d->cq_size,
			strerror(-rc));
		goto err_cch;
	}
	d->cq_size = d->cq->cqe;
	if (t->epfd >= 0) {
		struct epoll_event ee = {.events = EPOLLIN};

		ee.data.u32 = 2;
		epoll_ctl(t->epfd, EPOLL_CTL_ADD, d->cch->fd, &ee);
		ee.data.u32 = 3;
		epoll_ctl(t->epfd, EPOLL_CTL_ADD, ctx->async_fd, &ee);
	}
	t->base.max_read_sge = RPS_MAX(d->max_sge, 1);
	RPS_INFO("rdma: using device %s (%s, max_qp_rd_atom %d, max_sge %d)", d->name, why,
		 d->attr.max_qp_rd_atom, d->max_sge);
	atomic_store(&t->dev, d);
	pthread_mutex_unlock(&t->setup_lock);
	return 0;

err_cch:
	ibv_destroy_comp_channel(d->cch);
err_pd:
	ibv_dealloc_pd(d->pd);
err_free:
	rps_free(d);
err_unlock:
	pthread_mutex_unlock(&t->setup_lock);
	return rc;
}

void rps_rdma_dev_destroy(struct rps_rdma_transport *t)
{
	struct rps_rdma_dev *d = atomic_load(&t->dev);

	if (!d)
		return;
	ibv_destroy_cq(d->cq);
	ibv_destroy_comp_channel(d->cch);
	ibv_dealloc_pd(d->pd);
	rps_free(d);
	atomic_store(&t->dev, NULL);
}

/* CAP_IPC_LOCK lifts RLIMIT_MEMLOCK for registrations. */
static int has_cap_ipc_lock(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long eff = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff >> 14) & 1;
}

int rps_rdma_memlock_check(struct rps_rdma_transport *t, uint64_t bytes, const char *what)
{
	struct rlimit rl;
	uint64_t have = (uint64_t)atomic_load(&t->locked_bytes);

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	if (have + bytes <= rl.rlim_cur || has_cap_ipc_lock())
		return 0;
	RPS_ERR("RLIMIT_MEMLOCK is %" PRIu64 " KiB, too low for %s (%" PRIu64
		" KiB more locked memory; %" PRIu64
		" KiB registered already): raise it (ulimit -l unlimited; "
		"/etc/security/limits.conf '* - memlock unlimited'; systemd LimitMEMLOCK=infinity; "
		"docker run --ulimit memlock=-1) or lower RDMAPS_RDMA_RECV_BUFS / "
		"RDMAPS_RDMA_BUF_BYTES",
		(uint64_t)rl.rlim_cur >> 10, what, bytes >> 10, have >> 10);
	return -ENOMEM;
}

void rps_rdma_locked_add(struct rps_rdma_transport *t, int64_t bytes)
{
	atomic_fetch_add(&t->locked_bytes, bytes);
}

int rps_rdma_srq_post(struct rps_rdma_srq *s, struct rps_rdma_rbuf *b)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)b->buf,
	    .length = s->t->buf_bytes,
	    .lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = {
	    .wr_id = (uintptr_t)b | RDMA_WRID_RECV, .sg_list = &sge, .num_sge = 1};
	struct ibv_recv_wr *bad;
	int rc;

	/* count first: a receive may complete before post returns */
	atomic_fetch_add(&s->posted, 1);
	rc = ibv_post_srq_recv(s->srq, &wr, &bad);
	if (rc) {
		atomic_fetch_sub(&s->posted, 1);
		RPS_ERR("ibv_post_srq_recv: %s", strerror(rc));
		return -rc;
	}
	return 0;
}

/* Caller holds prog_lock (CQ reservation). */
int rps_rdma_srq_create(struct rps_rdma_transport *t, int channel, struct rps_rdma_srq **srq_p)
{
	struct rps_rdma_dev *d = atomic_load(&t->dev);
	struct ibv_srq_init_attr sa = {0};
	struct rps_rdma_srq *s;
	uint64_t bytes;
	char what[64];
	int rc;

	s = rps_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->t = t;
	s->channel = channel;
	s->nbufs = RPS_MIN(t->recv_bufs, (uint32_t)d->attr.max_srq_wr);
	bytes = (uint64_t)s->nbufs * t->buf_bytes;
	if (channel >= 0)
		snprintf(what, sizeof(what), "receive buffers of shard %d", channel);
	else
		snprintf(what, sizeof(what), "receive buffers of outgoing connections");
	rc = rps_rdma_memlock_check(t, bytes, what);
	if (rc)
		goto err_free;
	s->mem = rps_aligned_alloc(4096, bytes);
	s->bufs = rps_calloc(s->nbufs, sizeof(*s->bufs));
	if (!s->mem || !s->bufs) {
		rc = -ENOMEM;
		goto err_mem;
	}
	s->mr = ibv_reg_mr(d->pd, s->mem, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr) {
		rc = errno ? -errno : -ENOMEM;
		if (rc == -ENOMEM || rc == -EAGAIN)
			rps_rdma_memlock_check(t, UINT64_MAX / 2, what);
		RPS_ERR("%s: ibv_reg_mr of %" PRIu64 " KiB: %s", what, bytes >> 10, strerror(-rc));
		goto err_mem;
	}
	rps_rdma_locked_add(t, (int64_t)bytes);
	sa.attr.max_wr = s->nbufs;
	sa.attr.max_sge = 1;
	s->srq = ibv_create_srq(d->pd, &sa);
	if (!s->srq) {
		rc = errno ? -errno : -ENOMEM;
		RPS_ERR("%s: ibv_create_srq(%u): %s", what, s->nbufs, strerror(-rc));
		goto err_mr;
	}
	rc = rps_rdma_cq_reserve(d, (int)s->nbufs);
	if (rc)
		goto err_srq;
	for (uint32_t i = 0; i < s->nbufs; i++) {
		s->bufs[i].kind = WR_RECV;
		s->bufs[i].srq = s;
		s->bufs[i].buf = s->mem + (size_t)i * t->buf_bytes;
		rc = rps_rdma_srq_post(s, &s->bufs[i]);
		if (rc)
			goto err_cq;
	}
	*srq_p = s;
	return 0;

err_cq:
	/* posted WQEs go with the SRQ */
	rps_rdma_cq_unreserve(d, (int)s->nbufs);
err_srq:
	ibv_destroy_srq(s->srq);
err_mr:
	ibv_dereg_mr(s->mr);
	rps_rdma_locked_add(t, -(int64_t)bytes);
err_mem:
	rps_free(s->bufs);
	rps_free(s->mem);
err_free:
	rps_free(s);
	return rc;
}

void rps_rdma_srq_destroy(struct rps_rdma_srq *s)
{
	struct rps_rdma_dev *d;

	if (!s)
		return;
	d = atomic_load(&s->t->dev);
	ibv_destroy_srq(s->srq);
	ibv_dereg_mr(s->mr);
	rps_rdma_locked_add(s->t, -(int64_t)((uint64_t)s->nbufs * s->t->buf_bytes));
	rps_rdma_cq_unreserve(d, (int)s->nbufs);
	rps_free(s->bufs);
	rps_free(s->mem);
	rps_free(s);
}

int rps_rdma_srq_reserve(struct rps_rdma_srq *s, uint32_t want, uint32_t min, uint32_t *got_p)
{
	uint32_t cur = atomic_load(&s->reserved);

	for (;;) {
		uint32_t avail = s->nbufs > cur ? s->nbufs - cur : 0;
		uint32_t got = RPS_MIN(want, avail);

		if (got < min)
			return -ENOBUFS;
		if (atomic_compare_exchange_weak(&s->reserved, &cur, cur + got)) {
			*got_p = got;
			return 0;
		}
	}
}

void rps_rdma_srq_unreserve(struct rps_rdma_srq *s, uint32_t n)
{
	atomic_fetch_sub(&s->reserved, n);
}

/* Caller holds prog_lock (the CQ may be resized). */
int rps_rdma_cq_reserve(struct rps_rdma_dev *d, int n)
{
	int used = atomic_load(&d->cq_used);

	if (used + n > d->cq_size) {
		int want = RPS_MIN(d->attr.max_cqe, RPS_MAX(2 * d->cq_size, used + n + 1024));
		int rc = want >= used + n ? ibv_resize_cq(d->cq, want) : ENOSPC;

		if (rc) {
			RPS_ERR("rdma device %s: completion queue full (%d of %d entries, max %d): "
				"too many connections or buffers (%s)",
				d->name, used, d->cq_size, d->attr.max_cqe, strerror(rc));
			return -ENOBUFS;
		}
		d->cq_size = d->cq->cqe;
	}
	atomic_fetch_add(&d->cq_used, n);
	return 0;
}

void rps_rdma_cq_unreserve(struct rps_rdma_dev *d, int n)
{
	if (d)
		atomic_fetch_sub(&d->cq_used, n);
}

int rps_rdma_gid_ipv4(struct rps_rdma_dev *d, uint8_t port, struct sockaddr_in *sin_p)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(d->ctx, port, &pa))
		return -ENOENT;
	for (int i = 0; i < pa.gid_tbl_len && i < 64; i++) {
		union ibv_gid g;
		static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		if (ibv_query_gid(d->ctx, port, i, &g) || memcmp(g.raw, v4mapped, 12))
			continue;
		memset(sin_p, 0, sizeof(*sin_p));
		sin_p->sin_family = AF_INET;
		memcpy(&sin_p->sin_addr, g.raw + 12, 4);
		return 0;
	}
	return -ENOENT;
}

const char *rps_rdma_wc_reason(enum ibv_wc_status st, int *err_p)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		*err_p = 0;
		return "success";
	case IBV_WC_WR_FLUSH_ERR:
		*err_p = -ECONNRESET;
		return "flushed: connection closed";
	case IBV_WC_REM_ACCESS_ERR:
		*err_p = -EACCES;
		return "remote access error (read outside a registered region, or under a key not granted to this connection?)";
	case IBV_WC_RETRY_EXC_ERR:
		*err_p = -ETIMEDOUT;
		return "retry exceeded: peer gone?";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		*err_p = -ENOBUFS;
		return "receiver not ready, retries exceeded (peer has no receive buffer posted)";
	case IBV_WC_LOC_LEN_ERR:
		*err_p = -EMSGSIZE;
		return "local length error (frame larger than the receive buffer? "
		       "RDMAPS_RDMA_BUF_BYTES must match on both ends)";
	case IBV_WC_LOC_PROT_ERR:
		*err_p = -EFAULT;
		return "local protection error (buffer not registered)";
	case IBV_WC_LOC_QP_OP_ERR:
		*err_p = -EIO;
		return "local QP operation error";
	case IBV_WC_REM_INV_REQ_ERR:
		*err_p = -EPROTO;
		return "remote invalid request (too many reads in flight, or bad length)";
	case IBV_WC_REM_OP_ERR:
		*err_p = -EREMOTEIO;
		return "remote operation error (peer's receive queue in error?)";
	case IBV_WC_REM_ABORT_ERR:
		*err_p = -ECONNABORTED;
		return "remote aborted";
	case IBV_WC_BAD_RESP_ERR:
		*err_p = -EPROTO;
		return "bad response from peer";
	case IBV_WC_MW_BIND_ERR:
	case IBV_WC_LOC_EEC_OP_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
		*err_p = -EFAULT;
		return "local access error";
	default:
		*err_p = -EIO;
		return ibv_wc_status_str(st);
	}
}
