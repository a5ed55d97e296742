/* Fuzz target: the handshake's decoders (docs/protocol.md "Handshake",
 * src/auth.h), one entry per decoder, each followed by what the handshake
 * does with what it decoded.
 *
 * Input: byte 0 picks the decoder (modulo the number of entries), byte 1 the
 * secret both sides hold ("" of an insecure job, short, exactly 32 bytes,
 * longer, the longest allowed); the rest is what the peer sent, handed over
 * in a buffer of exactly its size:
 *   0 hello (rps_proto_hello_decode; the listener). Accepted: the hello is
 *     the bytes as sent, and the challenge-response round trip over it must
 *     work: rps_auth_challenge_make, rps_auth_challenge_answer and
 *     rps_auth_proof_check accept the right secret; the answer refuses a
 *     challenge of another secret, the check refuses a proof of another
 *     secret, a reflected mac_s, and a proof made for another rank.
 *   1 challenge (rps_auth_challenge_decode; the client, whose hello is
 *     fuzz_auth_hello()). Accepted: rps_auth_challenge_answer accepts it if
 *     and only if its MAC is mac_s of the secret, and its proof is mac_c.
 *   2 proof (rps_auth_proof_decode; the listener, whose challenge is
 *     fuzz_auth_challenge()). Accepted: rps_auth_proof_check accepts it if
 *     and only if it is mac_c of the secret.
 * gen_corpus.c writes seeds for each, valid MACs included. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/auth.h"
#include "src/proto.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char longest[RPS_SECRET_MAX + 1];
static const char *secrets[] = {
    "", "s3cret", "0123456789abcdef0123456789abcdef",
    "a secret longer than thirty-two bytes, folded with SHA-256", longest};
#define NSECRETS (sizeof(secrets) / sizeof(secrets[0]))

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "fuzz_hello: %s:%d: %s\n", __FILE__, __LINE__, \
				#cond);                                                \
			abort();                                                       \
		}                                                                      \
	} while (0)

/* The input in a buffer of exactly its size (ASan sees any overread). */
static uint8_t *exact(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1);

	if (!p)
		abort();
	if (size)
		memcpy(p, data, size);
	return p;
}

/* A refusal says why, and is one of the documented answers. */
static void check_refusal(int rc, const char *why)
{
	CHECK(rc == 0 || rc == -EPROTO);
	CHECK(rc == 0 || why);
}

static void dec_hello(const uint8_t *data, size_t size, int si)
{
	const char *secret = secrets[si], *wrong = secrets[(si + 1) % NSECRETS];
	uint8_t *p = exact(data, size);
	struct rps_hello h, other;
	struct rps_auth_challenge ch, ch_wrong;
	struct rps_auth_proof proof, bad;
	const char *why = NULL;
	char text[96];
	int rc;

	rc = rps_proto_hello_decode(p, size, &h, &why);
	check_refusal(rc, why);
	if (rc) {
		free(p);
		return;
	}
	CHECK(size == sizeof(h) && !memcmp(&h, p, sizeof(h)));
	CHECK(h.magic == RPS_PROTO_MAGIC && h.version == RPS_PROTO_VERSION);
	CHECK(h.role <= RPS_ROLE_CTL && h.flags == 0);
	free(p);
	/* what the listener's log line says of the claim */
	rps_proto_claim_text(h.role, h.rank, text, sizeof(text));

	/* the round trip with the right secret */
	CHECK(rps_auth_challenge_make(secret, &h, &ch) == 0);
	CHECK(rps_auth_challenge_answer(secret, &h, &ch, &proof) == 0);
	CHECK(rps_auth_proof_check(secret, &h, &ch, &proof) == 0);
	/* a listener of another secret: the client refuses its challenge */
	CHECK(rps_auth_challenge_make(wrong, &h, &ch_wrong) == 0);
	CHECK(rps_auth_challenge_answer(secret, &h, &ch_wrong, &bad) == -EACCES);
	/* a client of another secret: the listener refuses its proof */
	rps_auth_mac(wrong, 'C', &h, ch.nonce, bad.mac);
	CHECK(rps_auth_proof_check(secret, &h, &ch, &bad) == -EACCES);
	/* the listener's own MAC reflected as the proof */
	memcpy(bad.mac, ch.mac, sizeof(bad.mac));
	CHECK(rps_auth_proof_check(secret, &h, &ch, &bad) == -EACCES);
	/* a proof made for another rank does not pass for this hello */
	other = h;
	other.rank ^= 1;
	rps_auth_mac(secret, 'C', &other, ch.nonce, bad.mac);
	CHECK(rps_auth_proof_check(secret, &h, &ch, &bad) == -EACCES);
	/* the right proof for another challenge (a replay) */
	CHECK(rps_auth_challenge_make(secret, &h, &ch_wrong) == 0);
	CHECK(rps_auth_proof_check(secret, &h, &ch_wrong, &proof) == -EACCES);
}

static void dec_challenge(const uint8_t *data, size_t size, int si)
{
	const char *secret = secrets[si];
	uint8_t *p = exact(data, size);
	struct rps_hello h;
	struct rps_auth_challenge ch;
	struct rps_auth_proof proof;
	uint8_t mac_s[RPS_MAC_LEN], mac_c[RPS_MAC_LEN];
	const char *why = NULL;
	int rc;

	rc = rps_auth_challenge_decode(p, size, &ch, &why);
	check_refusal(rc, why);
	if (rc) {
		free(p);
		return;
	}
	CHECK(size == sizeof(ch) && !memcmp(&ch, p, sizeof(ch)));
	free(p);
	fuzz_auth_hello(&h);
	rps_auth_mac(secret, 'S', &h, ch.nonce, mac_s);
	rps_auth_mac(secret, 'C', &h, ch.nonce, mac_c);
	rc = rps_auth_challenge_answer(secret, &h, &ch, &proof);
	CHECK(rc == 0 || rc == -EACCES);
	CHECK((rc == 0) == !memcmp(mac_s, ch.mac, sizeof(mac_s)));
	if (rc == 0)
		CHECK(!memcmp(proof.mac, mac_c, sizeof(mac_c)));
}

static void dec_proof(const uint8_t *data, size_t size, int si)
{
	const char *secret = secrets[si];
	uint8_t *p = exact(data, size);
	struct rps_hello h;
	struct rps_auth_challenge ch;
	struct rps_auth_proof proof;
	uint8_t mac_c[RPS_MAC_LEN];
	const char *why = NULL;
	int rc;

	rc = rps_auth_proof_decode(p, size, &proof, &why);
	check_refusal(rc, why);
	if (rc) {
		free(p);
		return;
	}
	CHECK(size == sizeof(proof) && !memcmp(&proof, p, sizeof(proof)));
	free(p);
	fuzz_auth_hello(&h);
	fuzz_auth_challenge(secret, &h, &ch);
	rps_auth_mac(secret, 'C', &h, ch.nonce, mac_c);
	rc = rps_auth_proof_check(secret, &h, &ch, &proof);
	CHECK(rc == 0 || rc == -EACCES);
	CHECK((rc == 0) == !memcmp(mac_c, proof.mac, sizeof(mac_c)));
}

static const struct {
	const char *name;
	void (*decode)(const uint8_t *data, size_t size, int secret_index);
} decoders[] = {
    {"hello (rps_proto_hello_decode)", dec_hello},
    {"challenge (rps_auth_challenge_decode)", dec_challenge},
    {"proof (rps_auth_proof_decode)", dec_proof},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	size_t n = sizeof(decoders) / sizeof(decoders[0]);

	if (!init) {
		fuzz_quiet();
		memset(longest, 'x', RPS_SECRET_MAX);
		CHECK(rps_auth_secret_ok(longest, 0) == 0);
		init = 1;
	}
	if (size < 2)
		return 0;
	decoders[data[0] % n].decode(data + 2, size - 2, (int)(data[1] % NSECRETS));
	return 0;
}
