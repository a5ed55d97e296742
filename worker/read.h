/* The read strategy's internals (worker/read*.c): pulls by one-sided reads
 * of the servers' shard stores, for any transport with RPS_TR_CAP_READ.
 *
 * Per slice (one piece, kind RPS_PK_RPULL):
 * 1. CLOCK: unless the shard's clock words last seen already satisfy the
 *    consistency condition for min_clock, read the clock word (BSP/SSP: the
 *    shard clock at RPS_STORE_CLOCK_OFF; ASP: worker_clock[my rank]) and
 *    re-read it, with a growing delay (5 us .. 1 ms), until it holds.
 * 2. DATA: read the slice's chunks, up to RPS_RD_WINDOW reads in flight,
 *    each covering as many consecutive chunks as max_read_sge allows
 *    (worker/plan.h), laid out as the DECLARE_ACK said (64-byte lines, or
 *    one compact chunk with 8-byte words): version lines into registered
 *    scratch, data straight into the caller's buffer, padding after the
 *    last element into junk. Only the bytes the slice occupies are read.
 * 3. On each READ_DONE check every chunk's lines (rps_store_image_clean);
 *    re-read runs of torn chunks only, until all are clean.
 * All state changes happen under core.lock; reads are posted after it is
 * dropped (read_remote may take its time).
 *
 * Files: read.c (the ops table, completions, timers, store headers),
 * read_mem.c (registered scratch), read_post.c (the per-slice state
 * machine and posting), read_direct.c (one-key pulls).
 */
#ifndef RPS_WORKER_READ_H
#define RPS_WORKER_READ_H

#include "worker/worker_int.h"

#define RPS_RD_SUB_CLOCK 0xf0
#define RPS_RD_SUB_HDR	 0xf1
/* A direct pull of a chunk up to this long (lines included) reads it whole
 * into its scratch block with one sge and copies the data out. Blocks are at
 * least this long, so that they are pages (regions are page-aligned). */
#define RPS_RD_WHOLE_MAX 4096u
/* Scatter entries of one read (the RDMA transport offers at most 30). */
#define RPS_RD_MAX_SGE 32

struct rps_wread_region {
	char *mem;
	size_t len;
	struct rps_tr_mr mr;
	int registered;
};

struct rps_wread_blk {
	char *mem;
	uint32_t handle; /* 0: its region is not registered */
};

#define RPS_RD_REGIONS 64

/* Registered blocks of one size, grown by regions, never shrunk. */
struct rps_wread_pool {
	size_t blk;	   /* bytes of a block */
	size_t per_region; /* blocks per region */
	struct rps_wread_region reg[RPS_RD_REGIONS];
	int nreg;
	struct rps_wread_blk *free; /* free blocks, each with its region's handle */
	size_t nfree, cap;
};

/* Where the data sges of a read land: the registered pull buffer, or the
 * bounce block. */
struct rps_wdest {
	uintptr_t lo, hi;
	uint32_t handle; /* 0: not registered (the transport finds a registration) */
};

/* The strategy's state (w->read). Pools under core.lock. */
struct rps_wread {
	int direct;		       /* one-chunk pulls as direct requests (READ_NOTIFY) */
	int max_sge;		       /* sges of one read: min(max_read_sge, RPS_RD_MAX_SGE) */
	uint32_t per_read;	       /* chunks one read slot may cover */
	uint32_t bper;		       /* ... when it reads into a bounce block */
	struct rps_wread_pool scratch; /* lines: max(per_read * RPS_RPLAN_LINES, WHOLE_MAX) */
	struct rps_wread_pool bounce;  /* data of unregistered pulls: bper chunks */
	char *junk;
	size_t junk_len;
	struct rps_tr_mr junk_mr;
	int junk_registered;
	struct rps_piece *retry_head; /* clock re-reads waiting for their time */
};

/* A read to post once the lock is dropped. */
struct rps_rpost {
	struct rps_wconn *wc;
	uint64_t raddr;
	uint32_t remote_key;
	uint64_t ctx;
	int nsge;
	struct rps_tr_sge sge[RPS_RD_MAX_SGE];
};

/* Reads to post once the lock is dropped. About 10 KB: start one by setting
 * n = 0, never by zeroing it (= { 0 }), which clears all of it on every pull
 * and completion. Only p[0..n) is ever read, each written whole. */
struct rps_rposts {
	int n;
	struct rps_rpost p[RPS_RD_WINDOW + 1];
};


/* The connection died under a read (its CLOSED event may still be queued).
 * -ETIMEDOUT from a READ is RDMA's "retries exceeded": the peer stopped
 * answering (killed, unreachable) and the queue pair is in error. */
static inline int rps_wread_conn_lost(int rc)
{
	return rc == -ECONNRESET || rc == -EHOSTDOWN || rc == -ETIMEDOUT;
}

/* ---- read_mem.c ---- */
int rps_wread_mem_init(struct rps_worker *w);
void rps_wread_mem_fini(struct rps_worker *w);
/* A block of pl and its region's handle (0 if not registered); NULL if out. */
char *rps_wread_blk_get_locked(struct rps_worker *w, struct rps_wread_pool *pl, uint32_t *mrh_p);
void rps_wread_blk_put_locked(struct rps_wread_pool *pl, char *b, uint32_t handle);
static inline char *rps_wread_scratch_get_locked(struct rps_worker *w, uint32_t *mrh_p)
{
	return rps_wread_blk_get_locked(w, &w->read->scratch, mrh_p);
}
static inline void rps_wread_scratch_put_locked(struct rps_worker *w, char *b, uint32_t handle)
{
	rps_wread_blk_put_locked(&w->read->scratch, b, handle);
}
/* The handles of the worker's own registrations that each sge lies in. */
void rps_wread_set_handles(const struct rps_wread *rs, const struct rps_wdest *dest,
			   const char *lines, uint32_t lines_mrh, struct rps_tr_sge *sge, int nsge);

/* ---- read_post.c ---- */
int rps_wread_clock_ok(struct rps_worker *w, struct rps_wshard *sh, uint32_t min_clock);
int rps_wread_slice_plan(struct rps_worker *w, const struct rps_wslice *sl, struct rps_rplan *plan);
/* Post out's reads (lock not held); failures finish their pieces. */
void rps_wread_post_all(struct rps_worker *w, struct rps_rposts *out);
/* Advance p's state machine, collecting reads into out. Under core.lock. */
void rps_wread_step_locked(struct rps_worker *w, struct rps_piece *p, struct rps_rposts *out);
/* The next read of slot i; a plan that cannot be built fails p. 0 or -errno. */
int rps_wread_slot_step_or_fail(struct rps_worker *w, struct rps_piece *p, int i,
				struct rps_rposts *out);
/* A new RPULL piece of req for a slice (sl NULL, dest NULL: a clock wait).
 * reg: the registered buffer dest lies in (the piece takes a reference), or
 * NULL: the data goes through bounce blocks. Under core.lock; NULL when out
 * of pieces (req failed). */
struct rps_piece *rps_wread_rpull_new_locked(struct rps_worker *w, struct rps_req *req,
					     uint32_t server, uint32_t shard,
					     const struct rps_wslice *sl, float *dest,
					     struct rps_wreg *reg, uint32_t min_clock);
/* rpull_new, first step, post. */
int rps_wread_submit_slice(struct rps_worker *w, struct rps_req *req, uint32_t server,
			   uint32_t shard, const struct rps_wslice *sl, float *dest,
			   struct rps_wreg *reg, uint32_t min_clock);
/* A slot's read into its bounce block came back clean: copy it out. */
void rps_wread_bounce_out(struct rps_rpull *rp, const struct rps_rd *rd);
void rps_wread_piece_fini_locked(struct rps_worker *w, struct rps_piece *p);

/* ---- read_direct.c ---- */
int rps_wread_pull1(struct rps_worker *w, const struct rps_wkey *k, float *vals, uint32_t min_clock,
		    struct rps_req **req_p);
int rps_wread_direct_step(void *arg, struct rps_req *req, int arm);
void rps_wread_direct_fini_locked(void *arg, struct rps_req *req);

#endif
