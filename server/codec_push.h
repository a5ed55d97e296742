/* Compressed pushes on the server (src/codec.h, docs/protocol.md): the
 * network thread checks the data's exact size, the update thread widens it
 * to float32 before the BSP sum or the optimizer. */
#ifndef RPS_SERVER_CODEC_PUSH_H
#define RPS_SERVER_CODEC_PUSH_H

#include "src/codec.h"
#include "transport/transport.h"

struct rps_server;
struct rps_srv_conn;
struct rps_shard;
struct rps_srv_req;

/* Network thread, a PUSH with a codec in hdr.flags: 0 if its data is
 * exactly what the codec makes of its count (counted per codec for
 * /metrics); otherwise the connection fails with an ERROR naming the key,
 * the codec and both sizes, and -EPROTO (nothing is applied). */
int rps_srv_push_codec_check(struct rps_server *srv, struct rps_srv_conn *sc,
			     const struct rps_tr_event *ev, const void *data, size_t data_len);
/* Update thread: req->data (req->data_len bytes of codec req->codec)
 * widened into the shard's buffer, req->data pointed at it. 0 or -ENOMEM. */
int rps_srv_push_widen(struct rps_shard *sh, struct rps_srv_req *req);

#endif
