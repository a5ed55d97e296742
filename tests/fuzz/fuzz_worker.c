/* Fuzz target: what a worker makes of a server's answers (worker/frame.c:
 * DECLARE_ACK with its slice geometry and refusal reason, PUSH_ACK,
 * PULL_RESP into the caller's memory through recv_dest, ERROR).
 *
 * An offline worker (rps_worker_create_offline, as unit.worker_frame uses)
 * with one server. Per input: one request with three pieces waiting for an
 * answer on the server's connection: a DECLARE (key 5, 16 elements), a PULL
 * (key 5, elements [0, 4), into a buffer of exactly 4 floats) and a PUSH.
 * The input is a byte stream of frames as a server would send them; each is
 * checked as the transport checks it (rps_proto_hdr_check against 64 KiB,
 * the fixed part, rps_proto_payload_check; the stream ends at the first
 * refusal or an incomplete frame), its data put where rps_wrecv_dest says
 * (else in a buffer of exactly its size), then handed to rps_wrecv_locked.
 * The low 2 bits of a frame's req_id pick the piece it answers (0 DECLARE,
 * 1 PULL, 2 PUSH; 3: the req_id as it is). At the end the connection fails
 * what is left and the request must complete, with 0 or a negative errno. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/keymap.h"
#include "worker/worker_int.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSG (64u << 10)

static struct rps_worker *w;

static void start(void)
{
	struct rps_keymap km;

	fuzz_quiet();
	if (rps_keymap_init(&km, RPS_KEYMAP_HASH, 1, 1, 0, 1u << 20) ||
	    rps_worker_create_offline(&km, &w)) {
		fprintf(stderr, "fuzz_worker: cannot create an offline worker\n");
		abort();
	}
	w->servers[0].chunk_bytes = 4096;
}

static struct rps_piece *piece(struct rps_req *req, struct rps_wconn *wc, uint8_t kind)
{
	struct rps_piece *p = rps_piece_alloc_locked(&w->core, req, kind, RPS_PW_RESP);

	if (!p)
		abort();
	p->conn = wc;
	p->server = 0;
	p->shard = 0;
	return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct rps_wconn *wc;
	struct rps_wslice sl;
	struct rps_req *req;
	struct rps_piece *ps[3];
	uint32_t ids[3];
	float *dest;
	int done, status;

	pthread_once(&once, start);
	wc = &w->servers[0].conns[0];
	dest = malloc(4 * sizeof(float));
	req = rps_wreq_new(&w->core, NULL, NULL);
	if (!dest || !req)
		abort();
	memset(&sl, 0, sizeof(sl));
	pthread_mutex_lock(&w->core.lock);
	ps[0] = piece(req, wc, RPS_PK_DECLARE);
	memset(&ps[0]->u.decl, 0, sizeof(ps[0]->u.decl));
	ps[0]->u.decl.fixed.key = 5;
	ps[0]->u.decl.fixed.nelems = 16;
	ps[0]->u.decl.out = &sl;
	ps[1] = piece(req, wc, RPS_PK_PULL);
	memset(&ps[1]->u.pull, 0, sizeof(ps[1]->u.pull));
	ps[1]->u.pull.fixed.key = 5;
	ps[1]->u.pull.fixed.count = 4;
	ps[1]->u.pull.fixed.min_clock = 1;
	ps[1]->u.pull.dest = dest;
	ps[2] = piece(req, wc, RPS_PK_PUSH);
	memset(&ps[2]->u.push, 0, sizeof(ps[2]->u.push));
	ps[2]->u.push.fixed.key = 5;
	ps[2]->u.push.fixed.count = 4;
	for (int i = 0; i < 3; i++)
		ids[i] = rps_piece_reqid(ps[i]);
	rps_wcore_unlock(&w->core);

	while (size >= sizeof(struct rps_frame_hdr)) {
		struct rps_tr_event ev;
		const char *why = NULL;
		uint8_t *fixed = NULL, *body = NULL;
		void *to;
		size_t flen;

		memset(&ev, 0, sizeof(ev));
		ev.type = RPS_TR_EV_RECV;
		ev.conn = wc->c;
		memcpy(&ev.hdr, data, sizeof(ev.hdr));
		data += sizeof(ev.hdr);
		size -= sizeof(ev.hdr);
		if ((ev.hdr.req_id & 3) != 3)
			ev.hdr.req_id = ids[ev.hdr.req_id & 3];
		if (rps_proto_hdr_check(&ev.hdr, MAX_MSG, &why) || ev.hdr.len > size)
			break; /* the transport closes the connection / waits for the rest */
		flen = (size_t)rps_proto_fixed_len(ev.hdr.op);
		fixed = malloc(flen ? flen : 1);
		if (!fixed)
			abort();
		memcpy(fixed, data, flen);
		if (flen && rps_proto_payload_check(&ev.hdr, fixed, &why)) {
			free(fixed);
			break;
		}
		ev.fixed = flen ? fixed : NULL;
		ev.data_len = ev.hdr.len - flen;
		to = ev.data_len ? rps_wrecv_dest(w, wc->c, &ev.hdr, ev.fixed) : NULL;
		if (!to && ev.data_len) {
			body = malloc(ev.data_len);
			if (!body)
				abort();
			to = body;
		}
		if (ev.data_len) {
			memcpy(to, data + flen, ev.data_len);
			ev.data = to;
		}
		pthread_mutex_lock(&w->core.lock);
		rps_wrecv_locked(w, wc, &ev);
		rps_wcore_unlock(&w->core);
		free(body);
		free(fixed);
		data += ev.hdr.len;
		size -= ev.hdr.len;
	}
	/* the connection ends: whatever is left fails, and the request completes */
	pthread_mutex_lock(&w->core.lock);
	rps_wcore_fail_conn_locked(&w->core, wc, -ECONNRESET);
	rps_wcore_unlock(&w->core);
	rps_wreq_seal(req);
	/* no progress thread here: once sealed it is done, or never will be
	 * (its status may be any errno an ERROR frame carried, -ETIMEDOUT too) */
	pthread_mutex_lock(&w->core.lock);
	done = req->done;
	status = req->status;
	pthread_mutex_unlock(&w->core.lock);
	if (!done) {
		fprintf(stderr, "fuzz_worker: the request did not complete\n");
		abort();
	}
	if (status > 0) { /* the API's promise: 0 or a negative errno */
		fprintf(stderr, "fuzz_worker: the request ended with status %d\n", status);
		abort();
	}
	(void)rps_wreq_wait_internal(req, 0); /* frees it */
	free(dest);
	return 0;
}
