/* Authentication of a connection: a mutual challenge-response over the
 * job's secret (docs/protocol.md "Handshake", docs/security.md).
 *
 * The client's hello (src/proto.h, struct rps_hello) carries its claim
 * (role, rank, channel) and a fresh 32-byte nonce Nc. The listener answers
 * with its own fresh nonce Ns and a MAC proving it knows the secret; the
 * client checks it, then proves itself with a MAC of its own:
 *
 *   K     = HMAC-SHA256(secret, "rdmaps-id-v1" | role | rank_le32)
 *           the identity's key (its "token"): bound to one role and rank
 *   mac_s = HMAC-SHA256(K, "rdmaps-auth-v1" | 'S' | hello | Ns)
 *   mac_c = HMAC-SHA256(K, "rdmaps-auth-v1" | 'C' | hello | Ns)
 *
 * hello (48 bytes, as sent) holds magic, version, role, rank, channel and Nc,
 * so both MACs bind the claim and both nonces; the direction byte makes a
 * reflected MAC useless. The secret never travels; a replayed hello or proof
 * meets a new Ns and fails. HMAC and the random bytes are OpenSSL's
 * (libcrypto). Every function here is pure apart from rps_auth_nonce.
 */
#ifndef RPS_AUTH_H
#define RPS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "src/proto.h"

#define RPS_AUTH_KEY_LEN 32
#define RPS_SECRET_MAX 255 /* characters of RDMAPS_SECRET */

/* CHALLENGE payload (listener -> client). */
struct rps_auth_challenge {
	uint8_t nonce[RPS_NONCE_LEN]; /* Ns */
	uint8_t mac[RPS_MAC_LEN];     /* mac_s */
};
_Static_assert(sizeof(struct rps_auth_challenge) == 64, "rps_auth_challenge is 64 bytes");

/* PROOF payload (client -> listener). */
struct rps_auth_proof {
	uint8_t mac[RPS_MAC_LEN]; /* mac_c */
};
_Static_assert(sizeof(struct rps_auth_proof) == 32, "rps_auth_proof is 32 bytes");

/* n fresh random bytes (RAND_bytes). 0 or -EIO, logged. */
int rps_auth_random(void *buf, size_t n);
/* A fresh nonce into h->nonce. 0 or -EIO. */
int rps_auth_nonce(struct rps_hello *h);

/* K for (role, rank) under secret ("" in an insecure job). */
void rps_auth_key(const char *secret, uint8_t role, uint32_t rank, uint8_t key_p[RPS_AUTH_KEY_LEN]);

/* mac_s ('S') or mac_c ('C') of hello and Ns under the hello's identity. */
void rps_auth_mac(const char *secret, char dir, const struct rps_hello *h,
		  const uint8_t nonce_s[RPS_NONCE_LEN], uint8_t mac_p[RPS_MAC_LEN]);

/* Listener: a fresh challenge for hello h. 0 or -EIO. */
int rps_auth_challenge_make(const char *secret, const struct rps_hello *h,
			    struct rps_auth_challenge *ch_p);
/* Client: is ch a challenge made with our secret for our hello h? Then fill
 * *proof_p. 0, or -EACCES (the listener does not know the secret). */
int rps_auth_challenge_answer(const char *secret, const struct rps_hello *h,
			      const struct rps_auth_challenge *ch, struct rps_auth_proof *proof_p);
/* Listener: does proof answer the challenge ch (our Ns) for hello h?
 * 0 or -EACCES. Constant time. */
int rps_auth_proof_check(const char *secret, const struct rps_hello *h,
			 const struct rps_auth_challenge *ch, const struct rps_auth_proof *proof);

/* Decoders of the handshake's payloads as they come off the wire (pure:
 * fuzzed). 0, or -EPROTO with a static reason in *why_p. */
int rps_auth_challenge_decode(const void *buf, size_t len, struct rps_auth_challenge *ch_p,
			      const char **why_p);
int rps_auth_proof_decode(const void *buf, size_t len, struct rps_auth_proof *proof_p,
			  const char **why_p);

/* May a program run with this secret? Empty and not insecure: -EACCES with an
 * error saying what to do; empty and insecure: 0 and a loud warning (once
 * per process); too long: -EINVAL. */
int rps_auth_secret_ok(const char *secret, int insecure);

#endif
