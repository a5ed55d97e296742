/* Read access per connection for what the update thread hands out (table
 * chunks in TABLE_MAP): the asking connection's own key (rps_tr_grant). */
#include "server/server_int.h"
#include "server/table.h"

int rps_srv_req_grant(struct rps_srv_req *req, const struct rps_tr_mr *mr, uint32_t *rkey_p)
{
	struct rps_srv_conn *sc = req->sc;

	if (!sc || !sc->conn || atomic_load(&sc->closed)) {
		*rkey_p = mr->remote_key;
		return 0;
	}
	return rps_tr_grant(sc->conn, mr, rkey_p);
}
