/* Authentication of a connection: a mutual challenge-response over the
 * job's secret (docs/protocol.md "Handshake", docs/security.md).
 *
 * The client's hello (src/proto.h, struct rps_hello) carries its claim
 * (role, rank, channel) and a fresh 32-byte nonce Nc. The listener answers
 * with its own fresh nonce Ns and a MAC proving it knows the secret; the
 * client checks it, then proves itself with a MAC of its own:
 *
 *   R     = HMAC-SHA256(secret, "rdmaps-role-v1" | role)   the role's key
 *   K     = HMAC-SHA256(R, "rdmaps-id-v2" | rank_le32)
 *           the identity's key: bound to one role and rank
 *   mac_s = HMAC-SHA256(K, "rdmaps-auth-v1" | 'S' | hello | Ns)
 *   mac_c = HMAC-SHA256(K, "rdmaps-auth-v1" | 'C' | hello | Ns)
 *
 * hello (48 bytes, as sent) holds magic, version, role, rank, channel and Nc,
 * so both MACs bind the claim and both nonces; the direction byte makes a
 * reflected MAC useless. The secret never travels; a replayed hello or proof
 * meets a new Ns and fails. HMAC and the random bytes are OpenSSL's
 * (libcrypto). Every function here is pure apart from rps_auth_nonce.
 *
 * The "secret" every function takes is a process's credential: either the
 * job's secret (it derives every K: the scheduler, rdmaps-ctl, and every
 * process in the all-trusted mode), or a node's token (RDMAPS_TOKEN, made by
 * rdmaps-launch or `rdmaps-ctl token`, src/auth_token.c):
 *
 *   rdmaps-token-v1:ROLE:RANK:hex(K)[:verify-worker:hex(R)][:ring:hex(Rr)]
 *
 * A worker's token holds only its own K; a server's also R of the worker
 * role, so that it can check any worker's proof (and, being symmetric, make
 * one) but never a server's, the scheduler's or rdmaps-ctl's. A worker's
 * token also holds Rr = HMAC(secret, "rdmaps-ring-v1"), the key of the
 * workers' ring all-reduce (worker/ring_net.c): ring connections between
 * workers authenticate with K' = HMAC(Rr, "rdmaps-id-v2" | rank), a key
 * domain of their own (rps_auth_ring_credential) that no server or scheduler
 * accepts. A K the token
 * does not cover is refused (rps_auth_key -EACCES, the key random bytes, so
 * every MAC made with it fails). docs/security.md "Tokens".
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

/* K for (role, rank) under secret ("" in an insecure job) or a token. 0, or
 * -EACCES: a token that does not cover (role, rank); key_p is then random. */
int rps_auth_key(const char *secret, uint8_t role, uint32_t rank, uint8_t key_p[RPS_AUTH_KEY_LEN]);
/* R of a role under the job's secret; K of a rank under R. */
void rps_auth_role_key(const char *secret, uint8_t role, uint8_t key_p[RPS_AUTH_KEY_LEN]);
void rps_auth_id_key(const uint8_t role_key[RPS_AUTH_KEY_LEN], uint32_t rank,
		     uint8_t key_p[RPS_AUTH_KEY_LEN]);

/* Tokens (src/auth_token.c). */
#define RPS_TOKEN_PREFIX "rdmaps-token-v1:"
#define RPS_TOKEN_MAX 255 /* characters, like the secret */
struct rps_auth_token {
	uint8_t role;
	uint32_t rank;
	uint8_t key[RPS_AUTH_KEY_LEN];	    /* K(role, rank) */
	uint32_t verify;		    /* bit r: vkey[r] is R of role r */
	uint8_t vkey[4][RPS_AUTH_KEY_LEN];
	int has_ring;
	uint8_t ring[RPS_AUTH_KEY_LEN]; /* Rr (workers) */
	int has_tls;
	uint8_t tls[RPS_AUTH_KEY_LEN]; /* the job's TLS key (transport/tcp/tcp_tls.c) */
};
/* Does s start with RPS_TOKEN_PREFIX? */
int rps_auth_is_token(const char *s);
/* Parse a token (pure: fuzzed). 0, or -EINVAL with a static reason. */
int rps_auth_token_parse(const char *s, struct rps_auth_token *t_p, const char **why_p);
/* K for (role, rank) from a token: its own, or one of a role it verifies.
 * 0 or -EACCES (key_p random). */
int rps_auth_token_key(const char *token, uint8_t role, uint32_t rank,
		       uint8_t key_p[RPS_AUTH_KEY_LEN]);
/* The token of (role, rank) under the job's secret into buf: a server's also
 * verifies workers. 0, -EINVAL (not a server or worker, an empty secret) or
 * -ENOSPC. */
int rps_auth_token_make(const char *secret, uint8_t role, uint32_t rank, char *buf, size_t len);
/* Why a proof for hello h failed a listener holding secret (a token that
 * does not cover the claim, or a wrong secret): a static text for the log. */
const char *rps_auth_refusal(const char *secret, const struct rps_hello *h);
/* 0 unless secret is a token of another role than role: then -EACCES and
 * an error naming both. */
int rps_auth_token_role_ok(const char *secret, uint8_t role);
/* The credential of the workers' ring all-reduce into buf: the secret itself,
 * or for a worker's token the token of the ring's key domain (own K' and
 * every worker's, nothing else). 0, or -EACCES (a token without a ring key)
 * or -ENOSPC. */
int rps_auth_ring_credential(const char *secret, char *buf, size_t len);
/* The job's TLS 1.3 pre-shared key (RDMAPS_TLS=1): HMAC-SHA256(secret,
 * RPS_AUTH_TLS_LABEL), or for a token the copy it carries (field "tls"), so
 * that a node holding only its token can open the tunnel. 0, or -EACCES (an
 * empty secret, or a token without a TLS key). */
#define RPS_AUTH_TLS_LABEL "rdmaps-tls-psk-v1"
int rps_auth_tls_psk(const char *secret, uint8_t psk_p[RPS_AUTH_KEY_LEN]);
/* "scheduler", "server", "worker", "ctl"; NULL for others. */
const char *rps_auth_role_word(uint8_t role);

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
