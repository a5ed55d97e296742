/* rps_worker_allreduce: a chunked ring reduce-scatter + all-gather among the
 * job's workers (docs/allreduce.md; the network side: worker/ring_net.c).
 *
 * The n tensors are one flattened vector of N elements, cut into W segments
 * (segment i: [N*i/W, N*(i+1)/W)), each sent in pieces of at most
 * RING_PIECE_ELEMS. Reduce-scatter step s: rank r sends segment r-s and
 * adds segment r-s-1 from its left neighbour into its own; after W-1 steps
 * it holds segment r+1 summed over every rank. All-gather step s: it sends
 * segment r+1-s and copies segment r-s as received. Pipelined per piece: a
 * piece received at step s is forwarded at step s+1 at once. Every rank ends
 * with the owner's bits of each segment (copied, never added again), so the
 * result is the same on every rank. */
#include <rdmaps/worker.h>

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/ring.h"
#include "worker/worker_int.h"

#define RING_PIECE_ELEMS (256u * 1024u) /* 1 MiB of float32 per frame at most */

struct ar_call {
	struct rps_wring *r;
	float *vals;
	uint64_t total, keysum, seq;
	uint32_t nkeys, W, rank, piece;
	int timeout_ms;
	/* the fixed parts of the frames sent zero-copy: valid until they went */
	struct rps_ring_data *fx;
	size_t nfx, fx_cap;
	struct rps_ring_data abort_fx;
	char abort_why[256];
};

static uint64_t fnv1a(uint64_t h, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

static uint64_t seg_lo(const struct ar_call *a, uint32_t seg)
{
	return (uint64_t)((unsigned __int128)a->total * seg / a->W);
}

static uint32_t seg_of(const struct ar_call *a, int64_t i)
{
	int64_t w = a->W;

	return (uint32_t)(((i % w) + w) % w);
}

static void data_init(const struct ar_call *a, struct rps_ring_data *d, int phase, uint32_t step,
		      uint64_t off, uint32_t count)
{
	memset(d, 0, sizeof(*d));
	d->seq = a->seq;
	d->total = a->total;
	d->offset = off;
	d->keysum = a->keysum;
	d->count = count;
	d->phase = (uint16_t)phase;
	d->step = (uint16_t)step;
	d->nkeys = a->nkeys;
	d->origin = a->rank;
}

static int send_piece(struct ar_call *a, int phase, uint32_t step, uint64_t off,
		      uint32_t count)
{
	struct rps_ring_data *d;
	struct rps_frame_hdr h;
	struct iovec iov[2];
	int rc;

	if (a->nfx == a->fx_cap) {
		RPS_ERR("allreduce: more pieces than planned (%zu)", a->fx_cap);
		return -EPROTO;
	}
	d = &a->fx[a->nfx++];
	data_init(a, d, phase, step, off, count);
	rps_proto_hdr_init(&h, RPS_OP_RING_DATA,
			   (uint32_t)(sizeof(*d) + (uint64_t)count * sizeof(float)), 0);
	iov[0].iov_base = d;
	iov[0].iov_len = sizeof(*d);
	iov[1].iov_base = a->vals + off;
	iov[1].iov_len = (size_t)count * sizeof(float);
	/* zero copy (ctx 1): a piece's elements do not change until the
	 * right neighbour has them (the ring's data dependencies), and the
	 * call waits for every SEND_DONE before it returns */
	a->r->sends_posted++;
	rc = rps_tr_post_send(a->r->right, &h, iov, count ? 2 : 1, 1);
	if (rc)
		a->r->sends_posted--;
	if (rc)
		RPS_ERR("allreduce: send to worker rank %u (right ring neighbour, %s): %s",
			a->r->right_rank, a->r->right_peer, rps_strerror(rc));
	return rc;
}

/* Best effort: tell the ring this call failed (status, why), so that every
 * rank stops with the first failure instead of a lost connection or its
 * timeout; waits (2 s at most) until it went. */
static void send_abort(struct ar_call *a, uint32_t origin, int status, const char *why)
{
	struct rps_frame_hdr h;
	struct iovec iov[2];
	size_t wl = strnlen(why, sizeof(a->abort_why));

	if (!a->r->right || rps_wring_right_status(a->r) || origin == a->r->right_rank)
		return;
	data_init(a, &a->abort_fx, 0, 0, 0, 0);
	a->abort_fx.origin = origin;
	memcpy(a->abort_why, why, wl);
	rps_proto_hdr_init(&h, RPS_OP_RING_ABORT, (uint32_t)(sizeof(a->abort_fx) + wl), 0);
	h.status = status;
	iov[0].iov_base = &a->abort_fx;
	iov[0].iov_len = sizeof(a->abort_fx);
	iov[1].iov_base = a->abort_why;
	iov[1].iov_len = wl;
	a->r->sends_posted++;
	if (rps_tr_post_send(a->r->right, &h, iov, wl ? 2 : 1, 1)) {
		a->r->sends_posted--;
		return;
	}
	(void)rps_wring_flush(a->r, rps_now_ns() + RPS_MIN((uint64_t)a->timeout_ms, 2000u) * 1000000ull);
}

/* The next piece from the left neighbour, which must be (phase, step, off,
 * count); added into vals (phase 0) or copied (phase 1). */
static int recv_piece(const struct ar_call *a, int phase, uint32_t step, uint64_t off,
		      uint32_t count, char *why, size_t wcap, uint32_t *origin_p)
{
	struct rps_wring_frame *f;
	const struct rps_ring_data *d;
	uint64_t deadline = rps_now_ns() + (uint64_t)a->timeout_ms * 1000000ull;
	int rc;

	*origin_p = a->rank;
	for (;;) {
		rc = rps_wring_next(a->r, deadline, &f);
		if (rc == -ETIMEDOUT) {
			snprintf(why, wcap,
				 "no data from worker rank %u (left ring neighbour) for %d ms",
				 a->r->left_rank, a->timeout_ms);
			return rc;
		}
		if (rc) {
			int right = rps_wring_right_status(a->r);

			if (right)
				snprintf(why, wcap,
					 "lost worker rank %u (right ring neighbour, %s): %s",
					 a->r->right_rank, a->r->right_peer, rps_strerror(right));
			else
				snprintf(why, wcap, "lost worker rank %u (left ring neighbour): %s",
					 a->r->left_rank, rps_strerror(rc));
			return -EHOSTDOWN;
		}
		if (f->d.seq < a->seq) { /* what is left of a failed call */
			rps_wring_frame_done(a->r, f);
			continue;
		}
		break;
	}
	d = &f->d;
	if (f->hdr.op == RPS_OP_RING_ABORT) {
		rc = f->hdr.status < 0 ? f->hdr.status : -ECANCELED;
		*origin_p = d->origin;
		snprintf(why, wcap, "%.*s", (int)f->data_len, (const char *)f->data);
		rps_wring_frame_done(a->r, f);
		return rc;
	}
	if (d->total != a->total || d->nkeys != a->nkeys || d->keysum != a->keysum) {
		snprintf(why, wcap,
			 "worker rank %u passes %" PRIu64 " elements in %u keys (keys and lengths "
			 "hash %016" PRIx64 "), worker rank %u %" PRIu64 " in %u (%016" PRIx64
			 "): every worker must pass the same keys and lengths",
			 a->r->left_rank, d->total, d->nkeys, d->keysum, a->rank, a->total,
			 a->nkeys, a->keysum);
		rps_wring_frame_done(a->r, f);
		return -EINVAL;
	}
	if (d->seq != a->seq || d->phase != phase || d->step != step || d->offset != off ||
	    d->count != count) {
		snprintf(why, wcap,
			 "worker rank %u sent call %" PRIu64 " phase %u step %u [%" PRIu64
			 ", +%u), expected call %" PRIu64 " phase %d step %u [%" PRIu64 ", +%u]",
			 a->r->left_rank, d->seq, d->phase, d->step, d->offset, d->count, a->seq,
			 phase, step, off, count);
		rps_wring_frame_done(a->r, f);
		return -EPROTO;
	}
	if (phase == 0) {
		float *dst = a->vals + off;
		const float *src = f->data;

		for (uint32_t i = 0; i < count; i++)
			dst[i] = src[i] + dst[i];
	} else {
		memcpy(a->vals + off, f->data, (size_t)count * sizeof(float));
	}
	rps_wring_frame_done(a->r, f);
	return 0;
}

/* A send failed: the right neighbour left or died. When it left because the
 * call failed elsewhere (a length mismatch, a death further on), that rank's
 * RING_ABORT comes round from the left: take its reason, waiting up to 1 s.
 * 0 when none came (the caller reports the lost neighbour). */
static int abort_from_left(struct ar_call *a, char *why, size_t wcap, uint32_t *origin_p)
{
	uint64_t deadline =
	    rps_now_ns() + RPS_MIN((uint64_t)a->timeout_ms, 1000u) * 1000000ull;
	struct rps_wring_frame *f;

	while (rps_wring_next(a->r, deadline, &f) == 0) {
		if (f->hdr.op == RPS_OP_RING_ABORT && f->d.seq == a->seq) {
			int rc = f->hdr.status < 0 ? f->hdr.status : -ECANCELED;

			*origin_p = f->d.origin;
			snprintf(why, wcap, "%.*s", (int)f->data_len, (const char *)f->data);
			rps_wring_frame_done(a->r, f);
			return rc;
		}
		rps_wring_frame_done(a->r, f); /* data of the failed call */
	}
	return 0;
}

/* Every piece of segment seg: (offset, count) in order. */
#define FOR_PIECES(a, seg, off, cnt)                                                        \
	for (uint64_t off = seg_lo(a, seg), end_ = seg_lo(a, (seg) + 1), cnt = 0;           \
	     off < end_ && ((cnt = RPS_MIN(end_ - off, (uint64_t)(a)->piece)), 1); off += cnt)

/* The call: 0, 1 (complete, but the right neighbour left before it took every
 * send back: the ring is not used again), or -errno with why and the origin. */
static int ring_run(struct ar_call *a, char *why, size_t wcap, uint32_t *origin_p)
{
	const uint32_t W = a->W, last = W - 2;
	const int64_t r = a->rank;
	int rc;

	/* reduce-scatter step 0: our own segment r */
	FOR_PIECES(a, seg_of(a, r), off, cnt)
	{
		rc = send_piece(a, 0, 0, off, (uint32_t)cnt);
		if (rc)
			goto sent_failed;
	}
	for (uint32_t s = 0; s <= last; s++) {
		uint32_t seg = seg_of(a, r - s - 1);

		FOR_PIECES(a, seg, off, cnt)
		{
			rc = recv_piece(a, 0, s, off, (uint32_t)cnt, why, wcap, origin_p);
			if (rc)
				return rc;
			/* forward: the next reduce-scatter step, or, once it is
			 * complete (our segment r+1), the first all-gather step */
			rc = s < last ? send_piece(a, 0, s + 1, off, (uint32_t)cnt)
				      : send_piece(a, 1, 0, off, (uint32_t)cnt);
			if (rc)
				goto sent_failed;
		}
	}
	for (uint32_t s = 0; s <= last; s++) {
		uint32_t seg = seg_of(a, r - s);

		FOR_PIECES(a, seg, off, cnt)
		{
			rc = recv_piece(a, 1, s, off, (uint32_t)cnt, why, wcap, origin_p);
			if (rc)
				return rc;
			if (s < last) {
				rc = send_piece(a, 1, s + 1, off, (uint32_t)cnt);
				if (rc)
					goto sent_failed;
			}
		}
	}
	rc = rps_wring_flush(a->r, rps_now_ns() + (uint64_t)a->timeout_ms * 1000000ull);
	if (rc == -ETIMEDOUT)
		goto sent_failed;
	/* the right neighbour left (or died) once it had what it needed or
	 * not: our result is complete either way, the next call will tell */
	return rc ? 1 : 0;

sent_failed:
	{
		int arc = abort_from_left(a, why, wcap, origin_p);

		if (arc)
			return arc;
	}
	*origin_p = a->rank;
	snprintf(why, wcap, "lost worker rank %u (right ring neighbour, %s): %s", a->r->right_rank,
		 a->r->right_peer, rps_strerror(rc));
	return -EHOSTDOWN;
}

int rps_worker_allreduce(struct rps_worker *w, const rps_key_t *keys, float *vals,
			 const size_t *lens, size_t n)
{
	struct ar_call a;
	struct rps_wring *r;
	char why[512];
	uint32_t origin;
	uint64_t total = 0;
	int rc;

	if (!w || !keys || !vals || !lens || !n) {
		RPS_ERR("allreduce: %s", !w ? "no worker" : !n ? "no keys (n = 0)"
						 : "NULL keys, vals or lens");
		return -EINVAL;
	}
	if (n > UINT32_MAX) {
		RPS_ERR("allreduce: %zu keys: at most %u in one call", n, UINT32_MAX);
		return -EINVAL;
	}
	memset(&a, 0, sizeof(a));
	a.keysum = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		uint64_t kl[2] = { keys[i], lens[i] };

		if (!lens[i]) {
			RPS_ERR("allreduce: key %" PRIu64 " has length 0", (uint64_t)keys[i]);
			return -EINVAL;
		}
		total += lens[i];
		a.keysum = fnv1a(a.keysum, kl, sizeof(kl));
	}
	r = w->ring;
	if (!r) {
		RPS_ERR("allreduce: this worker has no ring (an offline worker)");
		return -ENOTCONN;
	}
	if (r->nworkers <= 1)
		return 0; /* the sum over one worker */

	pthread_mutex_lock(&r->call_lock);
	if (r->broken) {
		rc = r->broken;
		RPS_ERR("allreduce: the ring failed in an earlier call (%s); it is not used again",
			rps_strerror(rc));
		goto out;
	}
	a.r = r;
	a.vals = vals;
	a.total = total;
	a.nkeys = (uint32_t)n;
	a.W = r->nworkers;
	a.rank = r->rank;
	a.seq = ++r->seq;
	a.timeout_ms = w->timeout_ms;
	a.piece = RING_PIECE_ELEMS;
	if (r->tr->max_frame &&
	    r->tr->max_frame < sizeof(struct rps_frame_hdr) + sizeof(struct rps_ring_data) +
				       (uint64_t)a.piece * sizeof(float))
		a.piece = (uint32_t)((r->tr->max_frame - sizeof(struct rps_frame_hdr) -
				      sizeof(struct rps_ring_data)) / sizeof(float));
	if (!r->right) {
		rc = rps_wring_connect_right(r, rps_now_ns() + (uint64_t)a.timeout_ms * 1000000ull);
		if (rc) {
			r->broken = -EHOSTDOWN;
			snprintf(r->broken_why, sizeof(r->broken_why),
				 "could not connect to worker rank %u (right ring neighbour): %s",
				 r->right_rank, rps_strerror(rc));
			rc = -EHOSTDOWN;
			goto out;
		}
	}
	/* pieces sent: 2 (W - 1) segments of at most ceil(N / W) elements */
	a.fx_cap = 2 * (size_t)(a.W - 1) * (size_t)((total / a.W + 1) / a.piece + 2);
	a.fx = rps_calloc(a.fx_cap, sizeof(*a.fx));
	if (!a.fx) {
		rc = -ENOMEM;
		goto out;
	}
	why[0] = '\0';
	rc = ring_run(&a, why, sizeof(why), &origin);
	if (rc == -EHOSTDOWN && origin == a.rank) {
		char dead[160];

		rps_wring_dead_text(r, dead, sizeof(dead));
		strncat(why, dead, sizeof(why) - strlen(why) - 1);
	}
	if (rc == 1) {
		struct rps_conn *c = r->right;

		RPS_WARN("allreduce: worker rank %u (right ring neighbour, %s) left at the end of "
			 "call %" PRIu64 "; this call is complete, the ring is not used again",
			 r->right_rank, r->right_peer, a.seq);
		pthread_mutex_lock(&r->lock);
		r->right = NULL;
		pthread_mutex_unlock(&r->lock);
		rps_tr_close(c); /* nothing reads vals or a.fx any more */
		r->broken = -EHOSTDOWN;
		snprintf(r->broken_why, sizeof(r->broken_why),
			 "worker rank %u (right ring neighbour) left at the end of call %" PRIu64,
			 r->right_rank, a.seq);
		rc = 0;
	}
	if (rc) {
		if (origin != a.rank)
			RPS_ERR("allreduce (call %" PRIu64 ", %" PRIu64
				" elements in %zu keys): worker rank %u failed: %s",
				a.seq, total, n, origin, why);
		else
			RPS_ERR("allreduce (call %" PRIu64 ", %" PRIu64 " elements in %zu keys): %s",
				a.seq, total, n, why);
		send_abort(&a, origin, rc, why);
		r->broken = rc;
		if (origin != a.rank)
			snprintf(r->broken_why, sizeof(r->broken_why),
				 "worker rank %u failed: %.360s", origin, why); /* cut to fit */
		else
			snprintf(r->broken_why, sizeof(r->broken_why), "%.399s", why);
		/* nothing may read vals or a.fx once we return: drop what is
		 * still queued (the ring is not used again) */
		if (r->right) {
			struct rps_conn *c = r->right;

			pthread_mutex_lock(&r->lock);
			r->right = NULL;
			pthread_mutex_unlock(&r->lock);
			rps_tr_close(c);
		}
	}
	rps_free(a.fx);
out:
	pthread_mutex_unlock(&r->call_lock);
	return rc;
}

int rps_worker_allreduce_error(struct rps_worker *w, char *buf, size_t cap)
{
	struct rps_wring *r;
	int rc;

	if (!w || !buf || !cap)
		return -EINVAL;
	buf[0] = '\0';
	r = w->ring;
	if (!r)
		return 0;
	pthread_mutex_lock(&r->call_lock);
	rc = r->broken;
	if (rc)
		snprintf(buf, cap, "%s", r->broken_why[0] ? r->broken_why : rps_strerror(rc));
	pthread_mutex_unlock(&r->call_lock);
	return rc;
}
