/* Fuzz target: the handshake decoders, one entry per decoder.
 *
 * Input: byte 0 picks the decoder (modulo the number of entries) and the
 * secret the receiving side holds (byte 1: none, short, exactly 32 bytes,
 * longer than 32: hashed); the rest is what the peer sent. Today there is
 * one decoder, rps_proto_hello_check (src/proto.c). A new handshake (issue
 * 20: challenge-response) adds its pure decoding function as one more
 * entry of `decoders` below and a seed directory entry in gen_corpus.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/proto.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const secrets[] = {
    NULL, "s3cret", "0123456789abcdef0123456789abcdef",
    "a secret longer than thirty-two bytes, folded with SHA-256"};

/* The fixed-size hello of protocol version 1: the checker gets a copy of
 * exactly its size; a shorter input is what the transport refuses itself. */
static void dec_hello_v1(const uint8_t *data, size_t size, const char *secret)
{
	struct rps_hello *h;
	const char *why = NULL;
	char text[96];
	int rc;

	if (size < sizeof(*h))
		return;
	h = malloc(sizeof(*h));
	if (!h)
		return;
	memcpy(h, data, sizeof(*h));
	rc = rps_proto_hello_check(h, secret, &why);
	if (rc && !why)
		abort(); /* a refusal always says why */
	if (rc != 0 && rc != -EPROTO && rc != -EACCES)
		abort(); /* the documented answers only */
	if (rc == 0) {
		struct rps_hello mine;

		/* accepted: it must carry the secret's bytes exactly */
		rps_proto_hello_init(&mine, h->role, h->rank, secret);
		if (memcmp(mine.secret, h->secret, sizeof(mine.secret)))
			abort();
	}
	/* what the refusal message says of the claim */
	rps_proto_claim_text(h->role, h->rank, text, sizeof(text));
	free(h);
}

static const struct {
	const char *name;
	void (*decode)(const uint8_t *data, size_t size, const char *secret);
} decoders[] = {
    {"hello v1 (rps_proto_hello_check)", dec_hello_v1},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	size_t n = sizeof(decoders) / sizeof(decoders[0]);

	if (!init) {
		fuzz_quiet();
		init = 1;
	}
	if (size < 2)
		return 0;
	decoders[data[0] % n].decode(data + 2, size - 2,
				     secrets[data[1] % (sizeof(secrets) / sizeof(secrets[0]))]);
	return 0;
}
