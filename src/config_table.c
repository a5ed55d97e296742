/* The configuration table (src/config.h) and the per-setting validation rules.
 * Keep docs/options.md in step with both. */
#include "src/config_int.h"

#include <assert.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "src/proto.h"
#include "src/util.h"

/* clang-format off */
#define FIELD(f) offsetof(struct rps_config, f), sizeof(((struct rps_config *)0)->f)
#define ENTRY(f, dflt, type, help) { #f, dflt, help, type, FIELD(f) }

/* Keep docs/options.md in step with this table. */
const struct rps_config_entry rps_config_table[] = {
	/* cluster */
	ENTRY(role, "", RPS_CFG_STRING, "node role: scheduler | server | worker"),
	ENTRY(scheduler, "127.0.0.1:9090", RPS_CFG_STRING, "host:port of rdmaps-sched"),
	ENTRY(num_servers, "1", RPS_CFG_INT, "number of servers in the job"),
	ENTRY(num_workers, "1", RPS_CFG_INT, "number of workers in the job"),
	ENTRY(rank, "-1", RPS_CFG_INT, "rank within the role to ask the scheduler for; -1 = any"),
	ENTRY(transport, "tcp", RPS_CFG_STRING, "data transport: tcp | rdma"),
	ENTRY(device, "", RPS_CFG_STRING, "RDMA device (rxe0, mlx5_0); empty = the one of --host"),
	ENTRY(host, "127.0.0.1", RPS_CFG_STRING, "address this node listens on and advertises"),
	ENTRY(port, "0", RPS_CFG_INT, "listen port; 0 = ephemeral"),
	ENTRY(secret, "", RPS_CFG_STRING, "the job's secret (up to 255 chars): key of every connection's challenge-response; required unless --insecure"),
	ENTRY(insecure, "0", RPS_CFG_BOOL, "run without a job secret: no authentication (a loud warning)"),
	ENTRY(timeout_ms, "30000", RPS_CFG_INT, "connect / rendezvous / request timeout (ms)"),
	ENTRY(log_level, "info", RPS_CFG_STRING, "error | warn | info | debug | trace"),
	/* server */
	ENTRY(shards, "2", RPS_CFG_INT, "shards (update threads) per server"),
	ENTRY(update_cores, "", RPS_CFG_STRING, "cores for update threads (\"0,2-3\"); empty = all"),
	ENTRY(shard_bytes, "64M", RPS_CFG_U64, "capacity of one shard's parameter store"),
	ENTRY(chunk_bytes, "16K", RPS_CFG_U64,
	      "largest seqlock chunk inside the store (multiple of 64); smaller slices get one compact chunk"),
	ENTRY(ring_size, "1024", RPS_CFG_U64, "entries of one shard's priority ring"),
	ENTRY(priority, "fifo", RPS_CFG_STRING, "push order: fifo | freshest | staleness | magnitude"),
	ENTRY(consistency, "asp", RPS_CFG_STRING, "asp | bsp | ssp"),
	ENTRY(staleness, "0", RPS_CFG_INT, "SSP staleness bound s (clocks)"),
	ENTRY(bsp_sum, "ordered", RPS_CFG_STRING,
	      "BSP: add a clock's pushes in worker-rank order (ordered) or as they arrive (arrival)"),
	ENTRY(init, "zeros", RPS_CFG_STRING,
	      "initial values: zeros | const:V | uniform:A,B | normal:MEAN,STD | push"),
	ENTRY(seed, "42", RPS_CFG_U64, "seed of the random initialisers"),
	/* optimizer */
	ENTRY(optimizer, "sgd", RPS_CFG_STRING, "sgd | momentum | nesterov | adagrad | adam | adamw"),
	ENTRY(lr, "0.01", RPS_CFG_DOUBLE, "learning rate"),
	ENTRY(momentum, "0.9", RPS_CFG_DOUBLE, "momentum (momentum, nesterov)"),
	ENTRY(beta1, "0.9", RPS_CFG_DOUBLE, "adam beta1"),
	ENTRY(beta2, "0.999", RPS_CFG_DOUBLE, "adam beta2"),
	ENTRY(eps, "1e-8", RPS_CFG_DOUBLE, "epsilon (adagrad, adam)"),
	ENTRY(weight_decay, "0", RPS_CFG_DOUBLE, "L2 weight decay; 0 = off"),
	ENTRY(clip_norm, "0", RPS_CFG_DOUBLE, "clip gradients to this L2 norm; 0 = off"),
	ENTRY(lr_schedule, "constant", RPS_CFG_STRING, "constant | step | exp | cosine | linear"),
	ENTRY(lr_step, "1000", RPS_CFG_U64, "step schedule: steps between decays"),
	ENTRY(lr_gamma, "0.1", RPS_CFG_DOUBLE, "step / exp schedule: decay factor"),
	ENTRY(lr_total, "10000", RPS_CFG_U64, "cosine / linear schedule: total steps (warm-up included)"),
	ENTRY(lr_min, "0", RPS_CFG_DOUBLE, "cosine / linear schedule: final learning rate"),
	ENTRY(lr_warmup, "0", RPS_CFG_U64, "linear warm-up steps before any schedule; 0 = none"),
	ENTRY(staleness_lr, "0", RPS_CFG_BOOL, "divide lr by 1 + staleness of the push"),
	/* keys and messages */
	ENTRY(key_map, "hash", RPS_CFG_STRING, "key -> server map: hash | range"),
	ENTRY(key_range, "65536", RPS_CFG_U64, "range map: keys [0, key_range) split evenly"),
	ENTRY(slice_bytes, "4M", RPS_CFG_U64, "tensors larger than this are split across servers"),
	ENTRY(max_msg, "64M", RPS_CFG_U64, "largest frame accepted (bytes)"),
	/* rdma */
	ENTRY(rdma_buf_bytes, "64K", RPS_CFG_U64, "payload bytes of one pre-posted receive / send buffer (+256 B for headers)"),
	ENTRY(rdma_recv_bufs, "256", RPS_CFG_INT, "receive buffers per shard SRQ"),
	ENTRY(rdma_credits, "64", RPS_CFG_INT, "sends in flight per connection"),
	ENTRY(rdma_max_rd, "16", RPS_CFG_INT, "outstanding RDMA READs (clamped to both ends)"),
	ENTRY(rdma_event_mode, "1", RPS_CFG_BOOL, "sleep on the completion channel when idle (0: spin always)"),
	ENTRY(rdma_poll_spin_us, "50", RPS_CFG_INT, "event mode: busy-poll this long after the last completion before sleeping"),
	ENTRY(wait_spin_us, "200", RPS_CFG_INT, "a waiting caller polls completions itself this long before sleeping; 0 = off"),
	/* control */
	ENTRY(heartbeat_ms, "1000", RPS_CFG_INT, "interval between heartbeats (ms)"),
	ENTRY(heartbeat_timeout_ms, "5000", RPS_CFG_INT, "silence after which a node is dead (ms)"),
	ENTRY(checkpoint_dir, "", RPS_CFG_STRING, "directory for server checkpoints; empty = none"),
	ENTRY(checkpoint_every, "0", RPS_CFG_INT, "clocks between checkpoints; 0 = off"),
	ENTRY(checkpoint_secs, "0", RPS_CFG_INT, "seconds between checkpoints; 0 = off"),
	ENTRY(metrics_port, "0", RPS_CFG_INT, "Prometheus /metrics port (servers: + 1 + rank); 0 = off"),
	ENTRY(http_host, "127.0.0.1", RPS_CFG_STRING,
	      "address of /metrics and the scheduler's dashboard; * = every interface"),
	ENTRY(fault, "", RPS_CFG_STRING, "fault injection (tests), see docs/operations.md"),
	/* limits */
	ENTRY(send_queue_bytes, "256M", RPS_CFG_U64,
	      "output queued for one peer that does not read; beyond it the peer is cut"),
	ENTRY(frame_timeout_ms, "30000", RPS_CFG_INT,
	      "a frame once started must arrive whole within this (plus its size / frame_min_rate); 0 = no deadline"),
	ENTRY(frame_min_rate, "1M", RPS_CFG_U64,
	      "bytes/s a big frame is granted on top of frame_timeout_ms"),
	ENTRY(idle_timeout_ms, "0", RPS_CFG_INT,
	      "close an established connection after this long without a byte; 0 = off (TCP keepalive finds dead peers)"),
	ENTRY(max_conns, "4096", RPS_CFG_INT, "connections one process accepts; more are closed at once"),
	ENTRY(max_conns_per_addr, "2048", RPS_CFG_INT,
	      "of them from one address (count every phase)"),
	ENTRY(max_parked_pulls, "16384", RPS_CFG_INT,
	      "pulls one connection may have waiting for a clock; more are refused (-EBUSY)"),
	ENTRY(accept_backoff_ms, "100", RPS_CFG_INT,
	      "out of descriptors (EMFILE/ENFILE): stop accepting this long"),
	ENTRY(register_timeout_ms, "30000", RPS_CFG_INT,
	      "scheduler: a node past its hello must REGISTER within this, an rdmaps-ctl ask something"),
	/* ring all-reduce (worker/ring*.c, docs/allreduce.md) */
	ENTRY(ring_transport, "tcp", RPS_CFG_STRING,
	      "workers' ring all-reduce: tcp | rdma (frames between workers; rdma needs a device on --host)"),
	/* aggregation on the host before the network (worker/local_agg.c) */
	ENTRY(local_agg, "auto", RPS_CFG_STRING,
	      "workers on one host sum their gradients in shared memory, one pushes (rps_worker_local_pushpull): auto | off"),
	/* replicated shards (docs/replication.md) */
	ENTRY(replicas, "1", RPS_CFG_INT,
	      "copies of every shard: 1 = none, 2 = a backup on the next server, 3 = backups on the next two (chain replication; TCP only)"),
	/* perf (issue 21): RDMA over lossy RoCE: retransmission and READ size */
	ENTRY(rdma_ack_timeout, "14", RPS_CFG_INT,
	      "RDMA local ACK timeout 4.096 us x 2^N before a lost packet is sent again (14: 67 ms, fits lossy RoCE); 0 = rdma_cm's (~2 s on RoCE)"),
	ENTRY(rdma_retry_count, "7", RPS_CFG_INT,
	      "RDMA retransmissions of an unacknowledged packet before the connection fails"),
	ENTRY(rdma_rnr_timer, "12", RPS_CFG_INT,
	      "RDMA receiver-not-ready NAK delay asked of peers, IB encoding (12: 0.64 ms; 0: 655 ms)"),
	ENTRY(rdma_rnr_retry, "7", RPS_CFG_INT,
	      "RDMA receiver-not-ready retries (7: forever)"),
	ENTRY(rdma_read_bytes, "256K", RPS_CFG_U64,
	      "largest RDMA READ a pull posts, in whole store chunks (a bigger chunk is one READ)"),
	/* TLS for TCP (issue 20, transport/tcp/tcp_tls.c, docs/security.md "TLS") */
	ENTRY(tls, "0", RPS_CFG_BOOL,
	      "TLS 1.3 on every TCP connection (data, control, rdmaps-ctl), key derived from the job secret; every process of the job must agree"),
	/* auth (issue 20): per-node tokens (src/auth_token.c, docs/security.md "Tokens") */
	ENTRY(token, "", RPS_CFG_STRING,
	      "this node's token (made by rdmaps-launch / rdmaps-ctl token) in place of the job's secret: proves only its own role and rank"),
	/* mw (issue 20): per-connection RDMA read access (memory windows, docs/rdma.md) */
	ENTRY(rdma_mw, "auto", RPS_CFG_STRING,
	      "RDMA read access per connection by memory windows bound to its QP: auto (where the device has type-2 windows) | on (required) | off (one read-only registration for all peers)"),
	/* sparse tables (issue 22): eviction of idle rows (server/table_evict.c, docs/tables.md "Eviction") */
	ENTRY(table_evict_clocks, "0", RPS_CFG_INT,
	      "servers: evict a table row neither pushed nor pulled by frame during this many clocks of its shard, unless it has updates not yet in a committed checkpoint; it comes back with its initial value; 0 = never"),
	/* growth (issue 24): workers joining a running job beyond num_workers (docs/scheduler.md "Growth") */
	ENTRY(max_workers, "0", RPS_CFG_INT,
	      "scheduler and servers: workers may join a running job beyond num_workers, up to this many (new ranks num_workers..); 0 = no growth (an extra worker is refused)"),
	/* sparse tables (issue 22): time-based eviction (server/table_evict.c, docs/tables.md "Eviction") */
	ENTRY(table_evict_seconds, "0", RPS_CFG_INT,
	      "servers: evict a table row neither pushed nor pulled by frame during this many seconds, unless it has updates not yet in a committed checkpoint; not with table_evict_clocks; 0 = never"),
	{ NULL, NULL, NULL, 0, 0, 0 },
};
/* clang-format on */

/* clang-format off */
#define IRANGE(lo, hi) .imin = (lo), .imax = (hi)
#define URANGE(lo, hi) .umin = (lo), .umax = (hi)
#define DRANGE(lo, hi) .dmin = (lo), .dmax = (hi)

static const struct rps_cfg_rule cfg_rules[] = {
	{ "role", .choices = "|scheduler|server|worker" },
	{ "scheduler", .check = rps_cfg_check_hostport },
	{ "num_servers", IRANGE(1, RPS_MAX_NODES) },
	{ "num_workers", IRANGE(1, RPS_MAX_WORKERS) },
	{ "rank", IRANGE(-1, RPS_MAX_NODES - 1) },
	{ "transport", .choices = "tcp|rdma" },
	{ "ring_transport", .choices = "tcp|rdma" },
	{ "port", IRANGE(0, 65535) },
	{ "secret", .check = rps_cfg_check_secret },
	{ "timeout_ms", IRANGE(1, INT_MAX) },
	{ "log_level", .choices = "error|warn|info|debug|trace" },
	{ "shards", IRANGE(1, RPS_MAX_SHARDS) },
	{ "update_cores", .check = rps_cfg_check_cores },
	{ "shard_bytes", URANGE(4096, UINT64_MAX) },
	/* a slice's chunk size travels in 31 bits of the DECLARE_ACK (src/store.h) */
	{ "chunk_bytes", URANGE(64, 0x7fffffc0ull), .umul = 64 },
	{ "ring_size", URANGE(1, 1ull << 30) },
	{ "priority", .choices = "fifo|freshest|staleness|magnitude" },
	{ "consistency", .choices = "asp|bsp|ssp" },
	{ "bsp_sum", .choices = "ordered|arrival" },
	{ "init", .check = rps_cfg_check_init },
	{ "optimizer", .choices = "sgd|momentum|nesterov|adagrad|adam|adamw" },
	{ "momentum", DRANGE(0, 1), .dmax_open = 1 },
	{ "beta1", DRANGE(0, 1), .dmax_open = 1 },
	{ "beta2", DRANGE(0, 1), .dmax_open = 1 },
	{ "eps", DRANGE(0, HUGE_VAL), .dmin_open = 1 },
	{ "lr_schedule", .choices = "constant|step|exp|cosine|linear" },
	{ "lr_step", URANGE(1, UINT64_MAX) },
	{ "lr_gamma", DRANGE(0, HUGE_VAL), .dmin_open = 1 },
	{ "lr_total", URANGE(1, UINT64_MAX) },
	{ "key_map", .choices = "hash|range" },
	{ "key_range", URANGE(1, UINT64_MAX) },
	{ "slice_bytes", URANGE(4, UINT64_MAX), .umul = 4 },
	{ "max_msg", URANGE(1024, UINT32_MAX) },
	{ "rdma_buf_bytes", URANGE(1024, 1ull << 30) },
	{ "rdma_recv_bufs", IRANGE(1, 65536) },
	{ "rdma_credits", IRANGE(1, 65536) },
	{ "rdma_max_rd", IRANGE(1, 256) },
	{ "rdma_poll_spin_us", IRANGE(0, 1000000) },
	{ "wait_spin_us", IRANGE(0, 1000000) },
	{ "heartbeat_ms", IRANGE(1, INT_MAX) },
	{ "heartbeat_timeout_ms", IRANGE(1, INT_MAX) },
	{ "metrics_port", IRANGE(0, 65535) },
	{ "send_queue_bytes", URANGE(64 << 10, UINT64_MAX) },
	{ "frame_timeout_ms", IRANGE(0, INT_MAX) },
	{ "idle_timeout_ms", IRANGE(0, INT_MAX) },
	{ "max_conns", IRANGE(1, 1 << 20) },
	{ "max_conns_per_addr", IRANGE(1, 1 << 20) },
	{ "max_parked_pulls", IRANGE(1, 1 << 24) },
	{ "accept_backoff_ms", IRANGE(1, 60000) },
	{ "register_timeout_ms", IRANGE(1, INT_MAX) },
	{ "local_agg", .choices = "auto|off" },
	{ "max_workers", IRANGE(0, RPS_MAX_WORKERS) }, /* growth (issue 24) */
	{ "replicas", IRANGE(1, 3) }, /* replicated shards: 3 = a chain of two backups */
	/* perf (issue 21) */
	{ "rdma_ack_timeout", IRANGE(0, 31) },
	{ "rdma_retry_count", IRANGE(0, 7) },
	{ "rdma_rnr_timer", IRANGE(0, 31) },
	{ "rdma_rnr_retry", IRANGE(0, 7) },
	{ "rdma_read_bytes", URANGE(4096, 1ull << 30) },
	/* auth (issue 20) */
	{ "token", .check = rps_cfg_check_token },
	/* mw (issue 20) */
	{ "rdma_mw", .choices = "auto|on|off" },
	/* sparse tables (issue 22): idle time in ms fits 31 bits */
	{ "table_evict_seconds", IRANGE(0, 2000000) },
};

static const struct rps_cfg_rule cfg_rule_default = {
	NULL, IRANGE(0, INT_MAX), URANGE(0, UINT64_MAX), DRANGE(0, HUGE_VAL),
};
/* clang-format on */

const struct rps_cfg_rule *rps_cfg_rule_for(const char *name)
{
	for (size_t i = 0; i < RPS_ARRAY_SIZE(cfg_rules); i++)
		if (!strcmp(cfg_rules[i].name, name))
			return &cfg_rules[i];
	return &cfg_rule_default;
}

const struct rps_config_entry *rps_cfg_entry_find(const char *name)
{
	for (const struct rps_config_entry *e = rps_config_table; e->name; e++)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

/* "shard-bytes" or "shard_bytes" -> the entry; NULL if unknown. */
const struct rps_config_entry *rps_cfg_entry_find_loose(const char *name, size_t len)
{
	char buf[64];

	if (len >= sizeof(buf))
		return NULL;
	for (size_t i = 0; i < len; i++)
		buf[i] = name[i] == '-' ? '_' : (char)tolower((unsigned char)name[i]);
	buf[len] = '\0';
	return rps_cfg_entry_find(buf);
}

/* Never echo the shared secret into logs or dumps. */
int rps_cfg_is_secret(const struct rps_config_entry *e)
{
	return !strcmp(e->name, "secret") || !strcmp(e->name, "token");
}

int rps_cfg_is_size(const struct rps_config_entry *e)
{
	size_t n = strlen(e->name);

	return (n > 6 && !strcmp(e->name + n - 6, "_bytes")) || !strcmp(e->name, "max_msg");
}

/* Levenshtein distance, for "did you mean" (names are short). */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];

	if (lb >= RPS_ARRAY_SIZE(row) || la >= 64)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t cost = tolower((unsigned char)a[i - 1]) != b[j - 1];

			row[j] = RPS_MIN(RPS_MIN(row[j] + 1, row[j - 1] + 1), diag + cost);
			diag = up;
		}
	}
	return row[lb];
}

/* The closest known name, if close enough to be a typo; else NULL. */
const char *rps_cfg_closest_name(const char *name)
{
	const char *best = NULL;
	size_t best_d = (size_t)-1;
	size_t limit = RPS_MAX((size_t)2, strlen(name) / 4);

	for (const struct rps_config_entry *e = rps_config_table; e->name; e++) {
		size_t d = edit_distance(name, e->name);

		if (d < best_d) {
			best_d = d;
			best = e->name;
		}
	}
	return best_d <= limit ? best : NULL;
}

void rps_cfg_rules_check(void)
{
#ifndef NDEBUG
	for (size_t i = 0; i < RPS_ARRAY_SIZE(cfg_rules); i++)
		assert(rps_cfg_entry_find(cfg_rules[i].name)); /* a rule for a setting that exists */
#endif
}
