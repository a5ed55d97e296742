/* Server options: defaults from the configuration, checks, update-thread
 * cores, the address advertised to workers. */
#include "server/server_int.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "src/alloc.h"
#include "src/config.h"
#include "src/init.h"
#include "src/log.h"

/* ---- options ------------------------------------------------------------------ */

/* Every member from cfg (strings point into *cfg); config NULL. */
void rps_srv_opts_from_config(struct rps_server_opts *o, const struct rps_config *cfg)
{
	const char *why = "";
	int v;

	memset(o, 0, sizeof(*o));
	o->field_mask = RPS_SERVER_OPT_ALL;
	o->scheduler = cfg->scheduler;
	o->transport = cfg->transport;
	o->host = cfg->host;
	o->port = (uint16_t)cfg->port;
	o->secret = cfg->secret;
	o->shards = cfg->shards;
	if (cfg->update_cores[0]) {
		v = rps_config_parse_cores(cfg->update_cores, o->cores, RPS_MAX_CORES);
		if (v < 0) {
			RPS_WARN("update_cores \"%s\": not a core list, using all online cores",
				 cfg->update_cores);
			v = 0;
		}
		o->ncores = v;
	}
	o->shard_bytes = cfg->shard_bytes;
	o->ring_size = cfg->ring_size;

	rps_optim_opts_default(&o->optim);
	v = rps_optim_kind_parse(cfg->optimizer);
	if (v < 0)
		RPS_ERR(
		    "optimizer \"%s\": expected sgd, momentum, nesterov, adagrad, adam or adamw",
		    cfg->optimizer);
	o->optim.kind = (enum rps_optim_kind)v;
	o->optim.lr = (float)cfg->lr;
	o->optim.momentum = (float)cfg->momentum;
	o->optim.beta1 = (float)cfg->beta1;
	o->optim.beta2 = (float)cfg->beta2;
	o->optim.eps = (float)cfg->eps;
	o->optim.weight_decay = (float)cfg->weight_decay;
	o->optim.clip_norm = (float)cfg->clip_norm;
	v = rps_optim_schedule_parse(cfg->lr_schedule);
	if (v < 0)
		RPS_ERR("lr_schedule \"%s\": expected constant, step, exp, cosine or linear",
			cfg->lr_schedule);
	o->optim.schedule = (enum rps_lr_schedule)v;
	o->optim.step_size = cfg->lr_step;
	o->optim.gamma = (float)cfg->lr_gamma;
	o->optim.total_steps = cfg->lr_total;
	o->optim.lr_min = (float)cfg->lr_min;
	o->optim.staleness_lr = cfg->staleness_lr;
	o->optim.warmup_steps = cfg->lr_warmup;

	v = rps_ring_policy_parse(cfg->priority);
	if (v < 0)
		RPS_ERR("priority \"%s\": expected fifo, freshest, staleness or magnitude",
			cfg->priority);
	o->priority = (enum rps_priority_policy)v;
	v = rps_server_consistency_parse(cfg->consistency);
	if (v < 0)
		RPS_ERR("consistency \"%s\": expected asp, bsp or ssp", cfg->consistency);
	o->consistency = (enum rps_consistency)v;
	o->staleness = cfg->staleness > 0 ? (uint32_t)cfg->staleness : 0;
	o->init.seed = cfg->seed;
	if (rps_init_parse(cfg->init, &o->init, &why) < 0) {
		RPS_ERR("init \"%s\": %s (expected zeros, const:V, uniform:A,B, normal:MEAN,STD or "
			"push)",
			cfg->init, why);
		o->init.kind = (enum rps_init_kind)(-1);
	}
	o->timeout_ms = cfg->timeout_ms;
}

void rps_server_opts_init(struct rps_server_opts *o)
{
	struct rps_config cfg;

	rps_config_init(&cfg); /* a bad RDMAPS_* variable is reported there */
	rps_srv_opts_from_config(o, &cfg);
	/* not pointers into our local copy: create takes them from its configuration */
	o->scheduler = o->transport = o->host = o->secret = NULL;
}

#define OPT(bit, member)                                                                           \
	do {                                                                                       \
		if (from->field_mask & (bit))                                                      \
			o->member = from->member;                                                  \
	} while (0)

/* The members of from that its field_mask says are set; NULL strings keep
 * o's (the configuration's). */
void rps_srv_opts_merge(struct rps_server_opts *o, const struct rps_server_opts *from)
{
	if (from->field_mask & RPS_SERVER_OPT_SCHEDULER && from->scheduler)
		o->scheduler = from->scheduler;
	if (from->field_mask & RPS_SERVER_OPT_TRANSPORT && from->transport && from->transport[0])
		o->transport = from->transport;
	if (from->field_mask & RPS_SERVER_OPT_HOST && from->host)
		o->host = from->host;
	if (from->field_mask & RPS_SERVER_OPT_SECRET && from->secret)
		o->secret = from->secret;
	OPT(RPS_SERVER_OPT_PORT, port);
	OPT(RPS_SERVER_OPT_SHARDS, shards);
	OPT(RPS_SERVER_OPT_NCORES, ncores);
	if (from->field_mask & RPS_SERVER_OPT_CORES)
		memcpy(o->cores, from->cores, sizeof(o->cores));
	OPT(RPS_SERVER_OPT_SHARD_BYTES, shard_bytes);
	OPT(RPS_SERVER_OPT_RING_SIZE, ring_size);
	OPT(RPS_SERVER_OPT_OPTIM, optim);
	OPT(RPS_SERVER_OPT_PRIORITY, priority);
	OPT(RPS_SERVER_OPT_PRIORITY_FN, priority_fn);
	OPT(RPS_SERVER_OPT_PRIORITY_ARG, priority_arg);
	OPT(RPS_SERVER_OPT_CONSISTENCY, consistency);
	OPT(RPS_SERVER_OPT_STALENESS, staleness);
	OPT(RPS_SERVER_OPT_INIT, init);
	OPT(RPS_SERVER_OPT_TIMEOUT_MS, timeout_ms);
	o->field_mask = RPS_SERVER_OPT_ALL;
	o->config = NULL;
}

#undef OPT

int rps_srv_opts_check(const struct rps_server_opts *o, const struct rps_config *cfg)
{
	if (o->shards < 1 || o->shards > RPS_MAX_SHARDS) {
		RPS_ERR("shards %d: must be 1..%d", o->shards, RPS_MAX_SHARDS);
		return -EINVAL;
	}
	if ((int)o->consistency < RPS_ASP || o->consistency > RPS_SSP) {
		RPS_ERR("bad consistency model");
		return -EINVAL;
	}
	if ((int)o->priority < RPS_PRIO_FIFO || o->priority > RPS_PRIO_CALLBACK ||
	    (o->priority == RPS_PRIO_CALLBACK && !o->priority_fn)) {
		RPS_ERR("bad priority policy");
		return -EINVAL;
	}
	if ((int)o->init.kind < RPS_INIT_DEFAULT || o->init.kind > RPS_INIT_PUSH) {
		RPS_ERR("bad initialiser");
		return -EINVAL;
	}
	if (o->init.kind == RPS_INIT_DEFAULT) {
		RPS_ERR("the server's initialiser cannot be 'default'");
		return -EINVAL;
	}
	if ((int)o->optim.kind < RPS_OPT_SGD || o->optim.kind > RPS_OPT_ADAMW ||
	    (int)o->optim.schedule < RPS_LR_CONSTANT || o->optim.schedule > RPS_LR_LINEAR ||
	    rps_optim_opts_check(&o->optim)) {
		RPS_ERR("bad optimizer settings (optimizer %d, lr %g, schedule %d)",
			(int)o->optim.kind, o->optim.lr, (int)o->optim.schedule);
		return -EINVAL;
	}
	if (!o->shard_bytes || !o->ring_size) {
		RPS_ERR("shard_bytes and ring_size must be > 0");
		return -EINVAL;
	}
	if (o->ncores < 0 || o->ncores > RPS_MAX_CORES) {
		RPS_ERR("ncores %d: must be 0..%d", o->ncores, RPS_MAX_CORES);
		return -EINVAL;
	}
	if (cfg->num_workers < 1 || cfg->num_workers > RPS_MAX_WORKERS) {
		RPS_ERR("num_workers %d: must be 1..%d", cfg->num_workers, RPS_MAX_WORKERS);
		return -EINVAL;
	}
	if (cfg->max_workers && cfg->max_workers < cfg->num_workers) {
		RPS_ERR("RDMAPS_MAX_WORKERS %d is below RDMAPS_NUM_WORKERS %d: set it to 0 (no "
			"growth) or to at least %d",
			cfg->max_workers, cfg->num_workers, cfg->num_workers);
		return -EINVAL;
	}
	if (!cfg->chunk_bytes || cfg->chunk_bytes % 64 || cfg->chunk_bytes > UINT32_MAX) {
		RPS_ERR("chunk_bytes %llu: must be a multiple of 64",
			(unsigned long long)cfg->chunk_bytes);
		return -EINVAL;
	}
	if (cfg->max_msg < sizeof(struct rps_push) + sizeof(float)) {
		RPS_ERR("max_msg %llu: too small", (unsigned long long)cfg->max_msg);
		return -EINVAL;
	}
	return 0;
}

/* ---- update-thread cores ------------------------------------------------------ */

int rps_srv_cores_setup(struct rps_server *srv)
{
	const struct rps_server_opts *o = &srv->opts;

	if (o->ncores > 0) {
		srv->cores = rps_calloc((size_t)o->ncores, sizeof(int));
		if (!srv->cores)
			return -ENOMEM;
		memcpy(srv->cores, o->cores, (size_t)o->ncores * sizeof(int));
		srv->ncores = o->ncores;
		return 0;
	}
	/* every core this process may run on */
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set)) {
		RPS_WARN("sched_getaffinity: %m: update threads left unpinned");
		srv->ncores = 0;
		return 0;
	}
	srv->cores = rps_calloc(CPU_SETSIZE, sizeof(int));
	if (!srv->cores)
		return -ENOMEM;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			srv->cores[n++] = c;
	srv->ncores = n;
	return 0;
}

void rps_srv_cores_desc(const struct rps_server *srv, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	if (!srv->ncores) {
		snprintf(buf, len, "unpinned");
		return;
	}
	for (int s = 0; s < srv->nshards && off < len; s++) {
		int c = srv->shards[s].core;

		off += (size_t)snprintf(buf + off, len - off, "%s%d", s ? "," : "", c);
	}
}

/* The address workers are told to connect to. */
const char *rps_srv_advertised_host(const struct rps_server *srv)
{
	if (!strcmp(srv->host, "0.0.0.0") || !strcmp(srv->host, "::"))
		return "127.0.0.1";
	return srv->host;
}
