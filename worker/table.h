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
};

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
