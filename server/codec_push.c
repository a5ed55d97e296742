/* Compressed pushes on the server: the exact check (network thread) and the
 * widening to float32 (update thread), src/codec.h. */
#include "server/codec_push.h"

#include <errno.h>
#include <stdio.h>

#include "server/server_int.h"
#include "src/alloc.h"
#include "src/log.h"

int rps_srv_push_codec_check(struct rps_server *srv, struct rps_srv_conn *sc,
			     const struct rps_tr_event *ev, const void *data, size_t data_len)
{
	const struct rps_push *p = ev->fixed;
	unsigned id = ev->hdr.flags & RPS_CODEC_MASK;
	char why[200], msg[300];

	if (rps_codec_check(id, data, data_len, p->count, why, sizeof(why))) {
		snprintf(msg, sizeof(msg), "push of key %llu slice %u [%llu, +%u) refused: %s",
			 (unsigned long long)p->key, p->slice, (unsigned long long)p->offset,
			 p->count, why);
		rps_srv_conn_fail(srv, sc, -EPROTO, msg);
		return -EPROTO;
	}
	atomic_fetch_add_explicit(&srv->codec_frames[id], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&srv->codec_bytes[id], data_len, memory_order_relaxed);
	atomic_fetch_add_explicit(&srv->codec_raw[id], (uint64_t)p->count * 4,
				  memory_order_relaxed);
	return 0;
}

int rps_srv_push_widen(struct rps_shard *sh, struct rps_srv_req *req)
{
	uint32_t n = req->u.push.count;

	if (sh->codec_cap < n) {
		float *b = rps_realloc(sh->codec_buf, (size_t)n * sizeof(float));

		if (!b) {
			RPS_ERR("shard %u: no memory to widen a %s push of %u elements",
				sh->p.idx, rps_codec_name(req->codec), n);
			return -ENOMEM;
		}
		sh->codec_buf = b;
		sh->codec_cap = n;
	}
	rps_codec_decode(req->codec, req->data, req->data_len, n, sh->codec_buf);
	req->data = sh->codec_buf;
	req->codec = 0; /* float32 from here on */
	return 0;
}
