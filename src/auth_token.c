/* Per-node tokens (src/auth.h "Tokens", docs/security.md): a node holds the
 * key of its own identity (and a server the key of the worker role, to check
 * workers), never the job's secret. */
#include "src/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "src/log.h"

static const char *const role_words[] = { "scheduler", "server", "worker", "ctl" };

const char *rps_auth_role_word(uint8_t role)
{
	return role < 4 ? role_words[role] : NULL;
}

static int role_of(const char *s, size_t n)
{
	for (int r = 0; r < 4; r++)
		if (strlen(role_words[r]) == n && !memcmp(role_words[r], s, n))
			return r;
	return -1;
}

int rps_auth_is_token(const char *s)
{
	return s && !strncmp(s, RPS_TOKEN_PREFIX, sizeof(RPS_TOKEN_PREFIX) - 1);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly 64 hex digits at s[0..n) into key. */
static int unhex(const char *s, size_t n, uint8_t key[RPS_AUTH_KEY_LEN])
{
	if (n != 2 * RPS_AUTH_KEY_LEN)
		return -1;
	for (size_t i = 0; i < RPS_AUTH_KEY_LEN; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* The next ':'-separated field of *s (NUL-terminated); its length in *n. */
static const char *field(const char **s, size_t *n)
{
	const char *f = *s, *e = strchr(f, ':');

	*n = e ? (size_t)(e - f) : strlen(f);
	*s = e ? e + 1 : NULL;
	return f;
}

int rps_auth_token_parse(const char *s, struct rps_auth_token *t_p, const char **why_p)
{
	const char *f;
	size_t n;
	int role;
	uint32_t rank = 0;
	uint64_t rank64 = 0;

	memset(t_p, 0, sizeof(*t_p));
	if (!rps_auth_is_token(s)) {
		*why_p = "does not start with " RPS_TOKEN_PREFIX;
		return -EINVAL;
	}
	if (strlen(s) > RPS_TOKEN_MAX) {
		*why_p = "longer than 255 characters";
		return -EINVAL;
	}
	s += sizeof(RPS_TOKEN_PREFIX) - 1;
	f = field(&s, &n);
	role = role_of(f, n);
	if (role != 1 && role != 2) {
		*why_p = "the role is not server or worker";
		return -EINVAL;
	}
	t_p->role = (uint8_t)role;
	if (!s) {
		*why_p = "no rank";
		return -EINVAL;
	}
	f = field(&s, &n);
	if (n == 0 || n > 10) {
		*why_p = "the rank is not a number";
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (f[i] < '0' || f[i] > '9' || rank64 * 10 + (uint64_t)(f[i] - '0') >= UINT32_MAX) {
			*why_p = "the rank is not a number below 4294967295";
			return -EINVAL;
		}
		rank64 = rank64 * 10 + (uint64_t)(f[i] - '0');
	}
	rank = (uint32_t)rank64;
	if (rank == UINT32_MAX) {
		*why_p = "the rank is not a number below 4294967295";
		return -EINVAL;
	}
	t_p->rank = rank;
	if (!s) {
		*why_p = "no key";
		return -EINVAL;
	}
	f = field(&s, &n);
	if (unhex(f, n, t_p->key)) {
		*why_p = "the key is not 64 hex digits";
		return -EINVAL;
	}
	while (s) {
		f = field(&s, &n);
		if (n == 4 && !memcmp(f, "ring", 4) && !t_p->has_ring) {
			f = s ? field(&s, &n) : "";
			if (!f[0] || unhex(f, n, t_p->ring)) {
				*why_p = "the ring key is not 64 hex digits";
				goto bad;
			}
			t_p->has_ring = 1;
			continue;
		}
		if (n == 3 && !memcmp(f, "tls", 3) && !t_p->has_tls) {
			f = s ? field(&s, &n) : "";
			if (!f[0] || unhex(f, n, t_p->tls)) {
				*why_p = "the tls key is not 64 hex digits";
				goto bad;
			}
			t_p->has_tls = 1;
			continue;
		}
		if (n < 7 || memcmp(f, "verify-", 7) || (role = role_of(f + 7, n - 7)) != 2 ||
		    (t_p->verify & (1u << role))) {
			*why_p = "an extra field other than verify-worker, ring or tls";
			goto bad;
		}
		if (!s) {
			*why_p = "verify-worker without a key";
			goto bad;
		}
		f = field(&s, &n);
		if (unhex(f, n, t_p->vkey[role])) {
			*why_p = "the verify-worker key is not 64 hex digits";
			goto bad;
		}
		t_p->verify |= 1u << role;
	}
	return 0;
bad:
	OPENSSL_cleanse(t_p, sizeof(*t_p));
	return -EINVAL;
}

int rps_auth_token_key(const char *token, uint8_t role, uint32_t rank,
		       uint8_t key_p[RPS_AUTH_KEY_LEN])
{
	struct rps_auth_token t;
	const char *why;
	int rc = -EACCES;

	if (!rps_auth_token_parse(token, &t, &why)) {
		if (role == t.role && rank == t.rank) {
			memcpy(key_p, t.key, RPS_AUTH_KEY_LEN);
			rc = 0;
		} else if (role < 4 && (t.verify & (1u << role))) {
			rps_auth_id_key(t.vkey[role], rank, key_p);
			rc = 0;
		}
	}
	OPENSSL_cleanse(&t, sizeof(t));
	if (rc && rps_auth_random(key_p, RPS_AUTH_KEY_LEN))
		memset(key_p, 0xa5, RPS_AUTH_KEY_LEN); /* still useless: nobody has it */
	return rc;
}

static void hex(char *out, const uint8_t key[RPS_AUTH_KEY_LEN])
{
	for (size_t i = 0; i < RPS_AUTH_KEY_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", key[i]);
}

int rps_auth_token_make(const char *secret, uint8_t role, uint32_t rank, char *buf, size_t len)
{
	uint8_t rk[RPS_AUTH_KEY_LEN], k[RPS_AUTH_KEY_LEN];
	char kh[2 * RPS_AUTH_KEY_LEN + 1], vh[2 * RPS_AUTH_KEY_LEN + 1] = "";
	char th[2 * RPS_AUTH_KEY_LEN + 1];
	static const char ring_label[] = "rdmaps-ring-v1";
	int n;

	if (!secret || !secret[0] || rps_auth_is_token(secret) || (role != 1 && role != 2) ||
	    rank == UINT32_MAX)
		return -EINVAL;
	rps_auth_role_key(secret, role, rk);
	rps_auth_id_key(rk, rank, k);
	hex(kh, k);
	if (role == 1) {
		rps_auth_role_key(secret, 2, rk);
	} else {
		unsigned int l = RPS_AUTH_KEY_LEN;

		HMAC(EVP_sha256(), secret, (int)strlen(secret), (const uint8_t *)ring_label,
		     sizeof(ring_label) - 1, rk, &l);
	}
	hex(vh, rk);
	rps_auth_tls_psk(secret, k);
	hex(th, k);
	n = snprintf(buf, len, RPS_TOKEN_PREFIX "%s:%u:%s%s%s:tls:%s", role_words[role], rank, kh,
		     role == 1 ? ":verify-worker:" : ":ring:", vh, th);
	OPENSSL_cleanse(rk, sizeof(rk));
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(kh, sizeof(kh));
	OPENSSL_cleanse(vh, sizeof(vh));
	OPENSSL_cleanse(th, sizeof(th));
	if (n < 0 || (size_t)n >= len) {
		OPENSSL_cleanse(buf, len);
		return -ENOSPC;
	}
	return 0;
}

int rps_auth_tls_psk(const char *secret, uint8_t psk_p[RPS_AUTH_KEY_LEN])
{
	struct rps_auth_token t;
	const char *why;
	unsigned int l = RPS_AUTH_KEY_LEN;
	int rc = -EACCES;

	if (!secret || !secret[0])
		return -EACCES;
	if (!rps_auth_is_token(secret)) {
		HMAC(EVP_sha256(), secret, (int)strlen(secret), (const uint8_t *)RPS_AUTH_TLS_LABEL,
		     sizeof(RPS_AUTH_TLS_LABEL) - 1, psk_p, &l);
		return 0;
	}
	if (!rps_auth_token_parse(secret, &t, &why) && t.has_tls) {
		memcpy(psk_p, t.tls, RPS_AUTH_KEY_LEN);
		rc = 0;
	}
	OPENSSL_cleanse(&t, sizeof(t));
	return rc;
}

const char *rps_auth_refusal(const char *secret, const struct rps_hello *h)
{
	uint8_t k[RPS_AUTH_KEY_LEN];
	int rc = rps_auth_key(secret, h->role, h->rank, k);

	OPENSSL_cleanse(k, sizeof(k));
	if (rc)
		return "not an identity this process may check: it holds a node's token "
		       "(RDMAPS_TOKEN), which checks only workers (a server's) or nothing (a "
		       "worker's); a token proves only its own role and rank";
	if (rps_auth_is_token(secret))
		return "wrong key: its proof does not match the key of the identity it claims "
		       "(the token of another job or rank, a replayed handshake or not an "
		       "rdmaps process of this job)";
	return "wrong secret: its proof does not match RDMAPS_SECRET (a different secret, a "
	       "replayed handshake or not an rdmaps process of this job)";
}

int rps_auth_token_role_ok(const char *secret, uint8_t role)
{
	struct rps_auth_token t;
	const char *why;
	int rc = 0;

	if (!rps_auth_is_token(secret) || rps_auth_token_parse(secret, &t, &why))
		return 0; /* a secret; a bad token is refused by rps_auth_secret_ok */
	if (t.role != role) {
		RPS_ERR("this is a %s but RDMAPS_TOKEN is the token of a %s (rank %u): give it "
			"the token made for it (rdmaps-launch, or `rdmaps-ctl token %s RANK`)",
			rps_auth_role_word(role) ? rps_auth_role_word(role) : "process",
			rps_auth_role_word(t.role), t.rank,
			rps_auth_role_word(role) ? rps_auth_role_word(role) : "ROLE");
		rc = -EACCES;
	}
	OPENSSL_cleanse(&t, sizeof(t));
	return rc;
}

int rps_auth_ring_credential(const char *secret, char *buf, size_t len)
{
	struct rps_auth_token t;
	uint8_t k[RPS_AUTH_KEY_LEN];
	char kh[2 * RPS_AUTH_KEY_LEN + 1], rh[2 * RPS_AUTH_KEY_LEN + 1];
	char th[2 * RPS_AUTH_KEY_LEN + 1] = "";
	const char *why;
	int n, rc = 0;

	if (!rps_auth_is_token(secret)) {
		n = snprintf(buf, len, "%s", secret ? secret : "");
		return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
	}
	if (rps_auth_token_parse(secret, &t, &why) || t.role != RPS_ROLE_WORKER || !t.has_ring) {
		OPENSSL_cleanse(&t, sizeof(t));
		return -EACCES;
	}
	rps_auth_id_key(t.ring, t.rank, k);
	hex(kh, k);
	hex(rh, t.ring);
	if (t.has_tls)
		hex(th, t.tls);
	n = snprintf(buf, len, RPS_TOKEN_PREFIX "worker:%u:%s:verify-worker:%s%s%s", t.rank, kh,
		     rh, t.has_tls ? ":tls:" : "", t.has_tls ? th : "");
	if (n < 0 || (size_t)n >= len)
		rc = -ENOSPC;
	OPENSSL_cleanse(&t, sizeof(t));
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(kh, sizeof(kh));
	OPENSSL_cleanse(rh, sizeof(rh));
	OPENSSL_cleanse(th, sizeof(th));
	if (rc)
		OPENSSL_cleanse(buf, len);
	return rc;
}
