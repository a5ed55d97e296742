/* The connection handshake's cryptography (src/auth.h): HMAC-SHA256 and
 * random bytes from OpenSSL's libcrypto. */
#include "src/auth.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "src/log.h"

static const char role_label[] = "rdmaps-role-v1";
static const char id_label[] = "rdmaps-id-v2";
static const char auth_label[] = "rdmaps-auth-v1";

int rps_auth_random(void *buf, size_t n)
{
	if (RAND_bytes(buf, (int)n) != 1) {
		RPS_ERR("auth: RAND_bytes failed: no random bytes for a nonce");
		return -EIO;
	}
	return 0;
}

int rps_auth_nonce(struct rps_hello *h)
{
	return rps_auth_random(h->nonce, sizeof(h->nonce));
}

void rps_auth_role_key(const char *secret, uint8_t role, uint8_t key_p[RPS_AUTH_KEY_LEN])
{
	uint8_t msg[sizeof(role_label) - 1 + 1];
	unsigned int len = RPS_AUTH_KEY_LEN;

	if (!secret)
		secret = "";
	memcpy(msg, role_label, sizeof(role_label) - 1);
	msg[sizeof(role_label) - 1] = role;
	HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, sizeof(msg), key_p, &len);
}

void rps_auth_id_key(const uint8_t role_key[RPS_AUTH_KEY_LEN], uint32_t rank,
		     uint8_t key_p[RPS_AUTH_KEY_LEN])
{
	uint8_t msg[sizeof(id_label) - 1 + 4];
	unsigned int len = RPS_AUTH_KEY_LEN;

	memcpy(msg, id_label, sizeof(id_label) - 1);
	for (int i = 0; i < 4; i++)
		msg[sizeof(id_label) - 1 + i] = (uint8_t)(rank >> (8 * i));
	HMAC(EVP_sha256(), role_key, RPS_AUTH_KEY_LEN, msg, sizeof(msg), key_p, &len);
}

int rps_auth_key(const char *secret, uint8_t role, uint32_t rank, uint8_t key_p[RPS_AUTH_KEY_LEN])
{
	uint8_t rk[RPS_AUTH_KEY_LEN];

	if (rps_auth_is_token(secret))
		return rps_auth_token_key(secret, role, rank, key_p);
	rps_auth_role_key(secret, role, rk);
	rps_auth_id_key(rk, rank, key_p);
	OPENSSL_cleanse(rk, sizeof(rk));
	return 0;
}

void rps_auth_mac(const char *secret, char dir, const struct rps_hello *h,
		  const uint8_t nonce_s[RPS_NONCE_LEN], uint8_t mac_p[RPS_MAC_LEN])
{
	uint8_t key[RPS_AUTH_KEY_LEN];
	uint8_t msg[sizeof(auth_label) - 1 + 1 + sizeof(*h) + RPS_NONCE_LEN];
	unsigned int len = RPS_MAC_LEN;
	size_t o = 0;

	rps_auth_key(secret, h->role, h->rank, key);
	memcpy(msg, auth_label, sizeof(auth_label) - 1);
	o += sizeof(auth_label) - 1;
	msg[o++] = (uint8_t)dir;
	memcpy(msg + o, h, sizeof(*h));
	o += sizeof(*h);
	memcpy(msg + o, nonce_s, RPS_NONCE_LEN);
	HMAC(EVP_sha256(), key, sizeof(key), msg, sizeof(msg), mac_p, &len);
	OPENSSL_cleanse(key, sizeof(key));
}

int rps_auth_challenge_make(const char *secret, const struct rps_hello *h,
			    struct rps_auth_challenge *ch_p)
{
	int rc = rps_auth_random(ch_p->nonce, sizeof(ch_p->nonce));

	if (rc)
		return rc;
	rps_auth_mac(secret, 'S', h, ch_p->nonce, ch_p->mac);
	return 0;
}

int rps_auth_challenge_answer(const char *secret, const struct rps_hello *h,
			      const struct rps_auth_challenge *ch, struct rps_auth_proof *proof_p)
{
	uint8_t want[RPS_MAC_LEN];
	int bad;

	rps_auth_mac(secret, 'S', h, ch->nonce, want);
	bad = CRYPTO_memcmp(want, ch->mac, sizeof(want));
	OPENSSL_cleanse(want, sizeof(want));
	if (bad)
		return -EACCES;
	rps_auth_mac(secret, 'C', h, ch->nonce, proof_p->mac);
	return 0;
}

int rps_auth_proof_check(const char *secret, const struct rps_hello *h,
			 const struct rps_auth_challenge *ch, const struct rps_auth_proof *proof)
{
	uint8_t want[RPS_MAC_LEN];
	int bad;

	rps_auth_mac(secret, 'C', h, ch->nonce, want);
	bad = CRYPTO_memcmp(want, proof->mac, sizeof(want));
	OPENSSL_cleanse(want, sizeof(want));
	return bad ? -EACCES : 0;
}

int rps_auth_challenge_decode(const void *buf, size_t len, struct rps_auth_challenge *ch_p,
			      const char **why_p)
{
	if (!buf || len != sizeof(*ch_p)) {
		*why_p = "challenge: wrong length";
		return -EPROTO;
	}
	memcpy(ch_p, buf, sizeof(*ch_p));
	return 0;
}

int rps_auth_proof_decode(const void *buf, size_t len, struct rps_auth_proof *proof_p,
			  const char **why_p)
{
	if (!buf || len != sizeof(*proof_p)) {
		*why_p = "proof: wrong length";
		return -EPROTO;
	}
	memcpy(proof_p, buf, sizeof(*proof_p));
	return 0;
}

int rps_auth_secret_ok(const char *secret, int insecure)
{
	static atomic_int warned;

	if (secret && strlen(secret) > RPS_SECRET_MAX) {
		RPS_ERR("the job secret (RDMAPS_SECRET) is longer than %d characters",
			RPS_SECRET_MAX);
		return -EINVAL;
	}
	if (rps_auth_is_token(secret)) {
		struct rps_auth_token t;
		const char *why;
		int rc = rps_auth_token_parse(secret, &t, &why);

		OPENSSL_cleanse(&t, sizeof(t));
		if (rc)
			RPS_ERR("RDMAPS_TOKEN is not a token: %s; give this process the token "
				"rdmaps-launch (or `rdmaps-ctl token ROLE RANK`) made for it",
				why);
		return rc;
	}
	if (secret && secret[0])
		return 0;
	if (!insecure) {
		RPS_ERR("no job secret: set RDMAPS_SECRET (or --secret) to the same value on every "
			"process of the job, e.g. export RDMAPS_SECRET=$(openssl rand -hex 16); "
			"rdmaps-launch makes one itself. To run without authentication, pass "
			"--insecure or set RDMAPS_INSECURE=1");
		return -EACCES;
	}
	if (!atomic_exchange(&warned, 1))
		RPS_WARN("*** INSECURE: no job secret (--insecure / RDMAPS_INSECURE=1): any "
			 "process that reaches this job's ports can join it, push gradients, "
			 "overwrite parameters and stop it. Use only on a machine you trust "
			 "alone. ***");
	return 0;
}
