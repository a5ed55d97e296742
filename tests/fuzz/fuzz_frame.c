/* Fuzz target: the frame checks every receiver runs (src/proto.c).
 *
 * Input: a struct rps_frame_hdr (24 bytes), then its payload. The header is
 * checked against a limit (rps_proto_hdr_check), then, as a transport does,
 * the payload (exactly hdr.len bytes, or what the input holds) is handed to
 * rps_proto_payload_check in a buffer of its own size, so that ASan sees
 * any read past it; an optimizer spec after a DECLARE goes through
 * rps_optim_wire_decode. The names and claim texts of whatever came are
 * formatted too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/optim.h"
#include "src/proto.h"
#include "tests/fuzz/fuzz_util.h"

#define LIMIT (64u << 20) /* RDMAPS_MAX_MSG's default order */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	struct rps_frame_hdr h;
	const char *why = NULL;
	char text[128];
	uint8_t *payload;
	size_t plen;
	int rc;

	if (!init) {
		fuzz_quiet();
		init = 1;
	}
	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	data += sizeof(h);
	size -= sizeof(h);
	(void)rps_proto_op_name(h.op);
	rps_proto_claim_text(h.flags & 0xff, h.aux, text, sizeof(text));
	rc = rps_proto_hdr_check(&h, LIMIT, &why);
	if (rc) {
		if (!why)
			abort(); /* a refusal always says why */
		return 0;
	}
	/* a receiver reads the fixed part before it checks the payload, and
	 * the whole payload before it uses the data */
	plen = h.len <= size ? h.len : size;
	if (plen < (size_t)rps_proto_fixed_len(h.op))
		return 0;
	payload = malloc(plen ? plen : 1);
	if (!payload)
		return 0;
	memcpy(payload, data, plen);
	/* the check sees the header's len: a short input models a frame
	 * whose data has not arrived, which the check must not read */
	why = NULL;
	rc = rps_proto_payload_check(&h, payload, &why);
	if (rc && !why)
		abort();
	if (!rc && h.op == RPS_OP_DECLARE && (h.flags & RPS_DECLARE_FLAG_OPTIM) &&
	    plen >= sizeof(struct rps_declare) + sizeof(struct rps_optim_wire)) {
		struct rps_optim_wire w;
		struct rps_optim_opts o;

		memcpy(&w, payload + sizeof(struct rps_declare), sizeof(w));
		if (rps_optim_wire_decode(&w, &o, text, sizeof(text)) == 0) {
			struct rps_optim_wire again;

			/* what was accepted encodes back to a spec that decodes */
			rps_optim_wire_encode(&o, &again);
			if (rps_optim_wire_decode(&again, &o, text, sizeof(text)))
				abort();
		}
	}
	if (!rc && h.op == RPS_OP_REGISTER) {
		const struct rps_register *r = (const void *)payload;

		rps_proto_claim_text(r->role, r->want_rank, text, sizeof(text));
	}
	free(payload);
	return 0;
}
