/* rdmaps-ctl export: the tables' rows as they arrive (RPS_CTLREQ_ROWS
 * frames, src/proto.h) and as .npz arrays (control/ctl_rows.c). */
#ifndef RPS_CONTROL_CTL_ROWS_H
#define RPS_CONTROL_CTL_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "src/npz.h"

/* One table's rows from one shard, growing as its pieces come. */
struct ctl_xrows {
	uint32_t table, server, shard, dim;
	uint64_t total, filled, cap, clock;
	uint64_t *ids;
	float *rows;
};

struct ctl_rows {
	struct ctl_xrows *x;
	size_t n, cap;
	uint64_t nrows;	  /* rows received */
	uint32_t ntables; /* after rps_ctl_rows_entries */
};

/* A ROWS frame: 0, or -EPROTO / -ENOMEM with why (a malformed or
 * out-of-order piece). */
int rps_ctl_rows_add(struct ctl_rows *c, const void *data, size_t len, char *why, size_t wlen);
/* Every table's rows, complete (each shard's `total` came), as two entries
 * per table appended to *e_p (n_p entries, grown): "tableT.ids",
 * "tableT.rows", sorted by id. want: the rows the servers' results announced.
 * 0, or -EPROTO (reported on stderr: what is missing), -ENOMEM. */
int rps_ctl_rows_entries(struct ctl_rows *c, uint64_t want, struct rps_npz_entry **e_p,
			 size_t *n_p);
void rps_ctl_rows_free(struct ctl_rows *c);

#endif
