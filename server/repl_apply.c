/* Replicated shards, the update threads' part: the sequence numbers of
 * pushes seen (exactly once), and a backup applying what its primary took
 * (server/repl.h). */
#include "server/repl.h"

#include <string.h>

#include "server/update.h"
#include "src/alloc.h"
#include "src/log.h"

int rps_repl_seen_check(struct rps_shard *sh, uint32_t w, uint64_t seq)
{
	struct rps_repl_seen *s;
	uint64_t bit;

	if (w >= sh->p.nworkers)
		return 0;
	if (!sh->seen) {
		sh->seen = rps_calloc(sh->p.nworkers, sizeof(*sh->seen));
		if (!sh->seen) {
			RPS_ERR("shard %u: no memory for push sequence numbers: a resent push "
				"may be applied twice",
				sh->p.idx);
			return 0;
		}
	}
	s = &sh->seen[w];
	if (seq < s->lo)
		return 1;
	if (seq >= s->lo + RPS_REPL_SEEN_WIN) {
		/* slide the window up to seq: numbers left below it count as seen
		 * (a worker has fewer pushes in flight to one shard) */
		uint64_t nlo = seq - RPS_REPL_SEEN_WIN + 1;

		if (nlo - s->lo >= RPS_REPL_SEEN_WIN)
			memset(s->bits, 0, sizeof(s->bits));
		else
			for (uint64_t q = s->lo; q < nlo; q++)
				s->bits[(q % RPS_REPL_SEEN_WIN) / 64] &= ~(1ull << (q % 64));
		s->lo = nlo;
	}
	bit = 1ull << (seq % 64);
	if (s->bits[(seq % RPS_REPL_SEEN_WIN) / 64] & bit)
		return 1;
	s->bits[(seq % RPS_REPL_SEEN_WIN) / 64] |= bit;
	return 0;
}

void rps_repl_apply(struct rps_shard *sh, const struct rps_ring_entry *e)
{
	struct rps_srv_req *req = e->ptr;
	struct rps_ring_entry e2;

	if (req->op == RPS_REQ_PUSH || req->op == RPS_REQ_ASSIGN) {
		/* validated here, in the order the primary took them: its
		 * DECLAREs came first */
		if (!req->status) {
			req->status = rps_shard_push_check(sh, &req->u.push, &req->meta);
			if (req->status)
				RPS_WARN("backup shard %u: forwarded push of key %llu slice %u: %s "
					 "(the primary applied it)",
					 sh->p.idx, (unsigned long long)req->u.push.key,
					 req->u.push.slice, rps_strerror(req->status));
		}
	}
	rps_shard_push_entry(sh, req, &e2);
	rps_shard_handle(sh, &e2);
}
