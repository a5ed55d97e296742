/* The configuration table: one declarative list of every setting, read from
 * built-in defaults, then RDMAPS_* environment variables, then --flags.
 *
 * A setting named "shard_bytes" is the variable RDMAPS_SHARD_BYTES and the flag
 * --shard-bytes (also --shard-bytes=VALUE). Sizes accept K/M/G suffixes (1024-based).
 * Unknown RDMAPS_* variables are warned about (a typo must not pass silently);
 * unknown --flags are an error. `--config` prints every setting with its value,
 * where it came from (default/env/flag) and its help, like `ucx_info -c`.
 *
 * The public API (include/rdmaps/config.h) sees struct rps_config as opaque;
 * inside the library it is this struct, read directly. rps_config_set,
 * rps_config_parse_args, rps_config_dump and rps_config_usage are declared
 * there. The table (src/config_table.c) is the one place for defaults: code
 * that has no configuration fills one with rps_config_init, never hard-codes.
 */
#ifndef RPS_CONFIG_H
#define RPS_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rdmaps/config.h>

#define RPS_STR_MAX 256

struct rps_config {
	/* cluster */
	char role[16];             /* scheduler | server | worker */
	char scheduler[RPS_STR_MAX]; /* host:port of rdmaps-sched */
	int num_servers;
	int num_workers;
	int rank;                  /* rank to ask the scheduler for; -1 = any */
	char transport[16];        /* tcp | rdma */
	char device[64];           /* RDMA device (rxe0, mlx5_0); empty = by local IP */
	char host[RPS_STR_MAX];    /* address this node listens on / advertises */
	int port;                  /* listen port; 0 = ephemeral */
	char secret[256];          /* the job's secret: the handshake's key (src/auth.h) */
	int insecure;              /* 1: run without a secret (loud warning) */
	int timeout_ms;            /* connect / rendezvous / request timeout */
	char log_level[16];
	/* server */
	int shards;                /* shards per server */
	char update_cores[RPS_STR_MAX]; /* "0,1" or "0-3"; empty = all online cores */
	uint64_t shard_bytes;      /* capacity of one shard's readable store */
	uint64_t chunk_bytes;      /* seqlock granularity inside the store */
	uint64_t ring_size;        /* entries of one shard's priority ring */
	char priority[16];         /* fifo | freshest | staleness | magnitude */
	char consistency[8];       /* asp | bsp | ssp */
	int staleness;             /* SSP bound s */
	char bsp_sum[16];          /* ordered | arrival: order of a BSP clock's sum */
	char init[64];             /* zeros | const:V | uniform:A,B | normal:MEAN,STD | push */
	uint64_t seed;
	/* optimizer */
	char optimizer[16];        /* sgd | momentum | nesterov | adagrad | adam */
	double lr;
	double momentum;
	double beta1;
	double beta2;
	double eps;
	double weight_decay;
	double clip_norm;
	char lr_schedule[16];      /* constant | step | exp | cosine */
	uint64_t lr_step;
	double lr_gamma;
	uint64_t lr_total;
	double lr_min;
	uint64_t lr_warmup;
	int staleness_lr;
	/* keys and messages */
	char key_map[8];           /* hash | range */
	uint64_t key_range;        /* range map: keys [0, key_range) split evenly */
	uint64_t slice_bytes;      /* tensors larger than this are split across servers */
	uint64_t max_msg;          /* largest frame accepted (bytes) */
	/* rdma */
	uint64_t rdma_buf_bytes;   /* payload of one receive / send buffer (+256 B headers) */
	int rdma_recv_bufs;        /* receive buffers per shard SRQ */
	int rdma_credits;          /* sends in flight per connection */
	int rdma_max_rd;           /* outstanding RDMA READs (clamped to both ends) */
	int rdma_event_mode;       /* 1: sleep on the completion channel when idle */
	int rdma_poll_spin_us;     /* event mode: spin this long after the last completion */
	int wait_spin_us;          /* a waiting caller polls completions itself this long */
	/* control */
	int heartbeat_ms;
	int heartbeat_timeout_ms;
	char checkpoint_dir[RPS_STR_MAX];
	int checkpoint_every;      /* clocks between checkpoints; 0 = off */
	int checkpoint_secs;       /* seconds between checkpoints; 0 = off */
	int metrics_port;          /* Prometheus /metrics; 0 = off */
	char http_host[RPS_STR_MAX]; /* where /metrics and the dashboard listen; "*": every interface */
	char fault[RPS_STR_MAX];   /* fault injection, see docs/options.md */
	/* limits: what one peer may hold (docs/options.md, "Limits") */
	uint64_t send_queue_bytes; /* output queued for one peer before it is cut */
	int frame_timeout_ms;      /* a started frame must end within this (+ size / rate) */
	uint64_t frame_min_rate;   /* bytes/s a big frame is granted on top; 0 = none */
	int idle_timeout_ms;       /* close an established connection idle this long; 0 = off */
	int max_conns;             /* connections one process accepts */
	int max_conns_per_addr;    /* of them from one address */
	int max_parked_pulls;      /* pulls one connection may have waiting for a clock */
	int accept_backoff_ms;     /* stop accepting this long when out of descriptors */
	int register_timeout_ms;   /* scheduler: REGISTER (nodes) or a request (ctl) within this */
	/* ring all-reduce */
	char ring_transport[16];   /* tcp | rdma: frames between workers */
	/* aggregation on the host (worker/local_agg.c) */
	char local_agg[8];         /* auto | off */
	int replicas;              /* copies of every shard (docs/replication.md); 1 = none */
	/* perf (issue 21): RDMA over lossy RoCE (docs/rdma.md, "Retransmission") */
	int rdma_ack_timeout;      /* local ACK timeout exponent (4.096 us x 2^N); 0: rdma_cm's */
	int rdma_retry_count;      /* retransmissions before a connection fails, 0..7 */
	int rdma_rnr_timer;        /* RNR NAK delay asked of peers (IB encoding) */
	int rdma_rnr_retry;        /* RNR retries, 0..7 (7: forever) */
	uint64_t rdma_read_bytes;  /* largest READ a pull posts (whole chunks) */
	/* TLS for TCP (issue 20, transport/tcp/tcp_tls.c, docs/security.md "TLS") */
	int tls;                   /* 1: TLS 1.3 on every TCP connection, PSK from the secret */
	/* auth (issue 20): a node's token in place of the job's secret (src/auth.h) */
	char token[256];           /* RDMAPS_TOKEN; applied into secret/rank by rps_cfg_token_apply */
	/* mw (issue 20): per-connection RDMA read access (docs/rdma.md) */
	char rdma_mw[8];           /* auto | on | off */
	/* sparse tables (issue 22): rows idle this many shard clocks are evicted; 0 = never */
	int table_evict_clocks;
	/* growth (issue 24): workers may join beyond num_workers up to this; 0 = no growth */
	int max_workers;
	/* sparse tables (issue 22): rows idle this many seconds are evicted; 0 = never */
	int table_evict_seconds;
};

enum rps_config_type {
	RPS_CFG_INT,
	RPS_CFG_U64,    /* sizes and counts, K/M/G suffixes */
	RPS_CFG_DOUBLE,
	RPS_CFG_STRING, /* char[] in the struct; size is the field size */
	RPS_CFG_BOOL,   /* int: 1/0, yes/no, on/off, true/false */
};

struct rps_config_entry {
	const char *name;     /* lowercase, '_' separated */
	const char *dflt;     /* default as text */
	const char *help;
	enum rps_config_type type;
	size_t offset;        /* offsetof(struct rps_config, field) */
	size_t size;          /* sizeof the field (strings) */
};

/* The table, terminated by an entry with name == NULL. */
extern const struct rps_config_entry rps_config_table[];

/* Defaults, then RDMAPS_* variables. An unknown RDMAPS_* variable is warned
 * about, a bad value is logged (its default kept, -EINVAL returned): each once
 * per process, however many configurations are filled. */
int rps_config_init(struct rps_config *cfg);

/* 1 if argv[1..argc) asks for help (--help or -h before any "--"), else 0:
 * the programs print their usage before reading any configuration. */
int rps_config_wants_help(int argc, char *const *argv);
/* Parse "0,2-3" into cores[]; returns count or -EINVAL. */
int rps_config_parse_cores(const char *s, int *cores, int max);
/* Split "host:port"; -EINVAL if malformed. */
int rps_config_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port_p);

#endif
