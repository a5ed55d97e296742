/* Replicated shards, the worker's part (docs/replication.md): what a worker
 * keeps of a server for its promoted backup — push and pull pieces not
 * answered, its last CLOCK frames — and sends again to the backup once it
 * took over. Nothing kept is failed or finished meanwhile: the caller's
 * request completes when the backup answers, and a push is applied once
 * (its sequence number). */
#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "worker/worker_int.h"

int rps_wrepl_lost(int rc)
{
	return rc == -ECONNRESET || rc == -EPIPE || rc == -EHOSTDOWN || rc == -ENOTCONN ||
	       rc == -ECONNABORTED || rc == -ETIMEDOUT;
}

void rps_wrepl_keep_clock(struct rps_wserver *s, const void *frame, uint32_t len)
{
	memcpy(s->clk_frames[s->clk_next], frame, len);
	s->clk_len = len;
	s->clk_next = (s->clk_next + 1) % RPS_WREPL_CLOCKS;
	if (s->clk_n < RPS_WREPL_CLOCKS)
		s->clk_n++;
}

int rps_wkept_send_done_locked(struct rps_worker *w, struct rps_piece *p,
			       const struct rps_tr_event *e)
{
	struct rps_wconn *wc = p->conn;

	(void)w;
	if (wc && wc->c != e->conn)
		return 1; /* sent on a connection since replaced: sent again on the new one */
	if (!e->status)
		return 0;
	/* the connection broke under it: it goes again to the promoted backup
	 * (its data is the caller's still: the request is not finished) */
	p->waits &= (uint8_t)~RPS_PW_SEND;
	p->resend = 1;
	return 1;
}

size_t rps_wrepl_kept_locked(struct rps_worker *w, struct rps_wserver *s, int fail,
			     struct rps_piece **out, size_t max)
{
	struct rps_wcore *core = &w->core;
	size_t n = 0;

	for (uint32_t bi = 0; bi < core->nblocks; bi++) {
		struct rps_piece *b = atomic_load_explicit(&core->blocks[bi], memory_order_relaxed);

		for (uint32_t i = 0; i < RPS_PIECE_BLOCK; i++) {
			struct rps_piece *p = &b[i];

			if ((p->kind != RPS_PK_PUSH && p->kind != RPS_PK_PULL) || !p->resend ||
			    !p->conn || p->conn->srv != s)
				continue;
			if (fail) {
				rps_piece_clear_locked(core, p, RPS_PW_ALL, fail);
				n++;
			} else if (n < max) {
				p->resend = 0;
				if (p->kind == RPS_PK_PUSH)
					p->waits |= RPS_PW_SEND; /* zero copy again */
				out[n++] = p;
			}
		}
	}
	return n;
}

/* The kept CLOCK frames, oldest first, each marked as sent again: the
 * backup ignores, silently, one for a clock it finished already. */
static int resend_clocks(struct rps_worker *w, struct rps_wserver *s)
{
	uint32_t first = (s->clk_next + RPS_WREPL_CLOCKS - s->clk_n) % RPS_WREPL_CLOCKS;
	int rc = 0;

	(void)w;
	for (uint32_t k = 0; k < s->clk_n && !rc; k++) {
		uint32_t *f = s->clk_frames[(first + k) % RPS_WREPL_CLOCKS];

		for (uint32_t j = 0; j < s->nconns && !rc; j++) {
			struct rps_frame_hdr h;
			struct iovec iov = {f, s->clk_len};

			rps_proto_hdr_init(&h, RPS_OP_CLOCK, s->clk_len, 0);
			h.flags = RPS_CLOCK_FLAG_RESENT;
			rc = rps_tr_post_send(s->conns[j].c, &h, &iov, 1, 0);
		}
	}
	return rc;
}

int rps_wrepl_resend(struct rps_worker *w, struct rps_wserver *s)
{
	struct rps_piece **ps;
	size_t n, total = 0, cap = 1024;
	int rc = resend_clocks(w, s);

	if (rc)
		return rc;
	rps_wsubmit_enter(w);
	for (;;) {
		ps = rps_malloc(cap * sizeof(*ps));
		if (!ps) {
			rps_wsubmit_leave(w);
			return -ENOMEM;
		}
		pthread_mutex_lock(&w->core.lock);
		n = rps_wrepl_kept_locked(w, s, 0, ps, cap);
		pthread_mutex_unlock(&w->core.lock);
		for (size_t i = 0; i < n; i++)
			rps_wpost_piece(w, ps[i]);
		rps_free(ps);
		total += n;
		if (n < cap)
			break;
	}
	rps_wsubmit_leave(w);
	RPS_WARN("server %u: its backup took over: %zu pushes and pulls not answered and the "
		 "last %u clocks sent to it again",
		 s->rank, total, s->clk_n);
	return 0;
}
