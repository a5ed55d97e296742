/* Sparse tables on the worker side: the tables declared through this worker
 * (table.c) and the batched row frames (table_rows.c). */
#ifndef RPS_WORKER_TABLE_H
#define RPS_WORKER_TABLE_H

#include <pthread.h>
#include <stdint.h>

#include <rdmaps/table.h>

#include "src/proto.h"
#include "transport/transport.h"

struct rps_worker;
struct rps_wconn;
struct rps_piece;

struct rps_wtable {
	rps_table_t table;
	struct rps_table_spec spec; /* resolved: every member set */
};

struct rps_wtables {
	pthread_mutex_t lock;
	struct rps_wtable *t;
	uint32_t n, cap;
	struct rps_wtread *rd; /* one-sided reads (table_read.c); NULL: none yet */
};

/* A batch's distinct ids as the frames take them: id j fills out rows
 * pos[ustart[j] .. uend[j]); push: ugrads[j * dim ...] is its summed gradient. */
struct rps_wtrows {
	const uint64_t *uid;
	const uint32_t *ustart, *uend;
	const uint32_t *pos;
	const float *ugrads;
	size_t nu;
};

/* Post the frames (ROWS_PULL / ROWS_PUSH) of b, cut per shard (table_rows.c).
 * flags: RPS_ROWS_FLAG_SLOTS asks for the rows' slots (cached). */
void rps_wtable_post_frames(struct rps_worker *w, struct rps_req *req, rps_table_t table,
			    uint32_t dim, const struct rps_wtrows *b, float *out, int push,
			    uint32_t clock, uint32_t flags);
/* server * RPS_MAX_SHARDS + shard of row id. */
uint32_t rps_wtable_group(struct rps_worker *w, rps_table_t table, uint64_t id);

/* ---- one-sided reads (table_read.c) ---- */
struct rps_wtshard;
#define RPS_WT_OP_READ 0xf0 /* piece op of a slot READ */
/* Are table pulls read one-sided (the read strategy, a READ transport)? */
int rps_wtable_reads_on(struct rps_worker *w);
/* A blocking pull: READs of cached slots, frames (with slots) for the rest. */
int rps_wtable_read_pull(struct rps_worker *w, rps_table_t table, uint32_t dim, uint32_t prec,
			 const struct rps_wtrows *b, float *out, uint32_t clock);
/* The cache of (table, server, shard), created if needed (NULL: no memory). */
struct rps_wtshard *rps_wtshard_get(struct rps_worker *w, rps_table_t table, uint32_t server,
				    uint32_t shard);
/* Under core.lock: remember the slots of n ids (u32 slots, unaligned). */
void rps_wtshard_learn(struct rps_wtshard *c, const uint64_t *ids, const void *slots, uint32_t n);
/* Progress thread: a READ_DONE of a RPS_PK_ROWS piece. 1 if it was one. */
int rps_wtable_read_done(struct rps_worker *w, const struct rps_tr_event *ev);
/* Drop every cached slot of server's shards (it restarted). */
void rps_wtable_forget(struct rps_worker *w, uint32_t server);
void rps_wtread_free(struct rps_worker *w);
/* Under core.lock: a TABLE_MAP_RESP for piece p. */
void rps_wtable_map_recv_locked(struct rps_worker *w, struct rps_piece *p,
				const struct rps_tr_event *ev);

/* The table's spec as declared through w, copied into *spec_p: 0 or -ENOENT. */
int rps_wtable_get(struct rps_worker *w, rps_table_t table, struct rps_table_spec *spec_p);
void rps_wtables_free(struct rps_worker *w);
/* Declare every table of w again on server (it restarted; reconnect.c). */
int rps_wtables_redeclare(struct rps_worker *w, uint32_t server);
/* Record table as declared through w (declare_table; unit tests). */
int rps_wtable_add(struct rps_worker *w, rps_table_t table, const struct rps_table_spec *spec);
/* A spec with its unset members defaulted, checked: 0 or -EINVAL / -ENOTSUP
 * with the reason logged. */
int rps_wtable_resolve(const struct rps_table_spec *in, struct rps_table_spec *out);

/* Progress thread, under core.lock: TABLE_DECLARE_ACK, ROWS_PULL_RESP,
 * ROWS_PUSH_ACK. */
void rps_wtable_recv_locked(struct rps_worker *w, struct rps_wconn *wc,
			    const struct rps_tr_event *ev);
/* Post a RPS_PK_ROWS piece (inside rps_wsubmit_enter); a failure fails it. */
void rps_wtable_post(struct rps_worker *w, struct rps_piece *p);

#endif
