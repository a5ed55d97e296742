/* Per-node tokens (job_token.h): R = HMAC-SHA256(secret, "rdmaps-role-v1" |
 * role), K = HMAC-SHA256(R, "rdmaps-id-v2" | rank_le32), text
 * "rdmaps-token-v1:ROLE:RANK:hex(K)" and for a server ":verify-worker:hex(R
 * of the worker role)", for a worker ":ring:hex(HMAC-SHA256(secret,
 * "rdmaps-ring-v1"))" (the workers' ring all-reduce); both end with
 * ":tls:hex(HMAC-SHA256(secret, "rdmaps-tls-psk-v1"))" (the TLS key). */
#include "job_token.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

static void role_key(const char *secret, int role, unsigned char out[32])
{
	unsigned char msg[15];
	unsigned int len = 32;

	memcpy(msg, "rdmaps-role-v1", 14);
	msg[14] = (unsigned char)role;
	HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, sizeof(msg), out, &len);
}

static void hex(char *out, const unsigned char k[32])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", k[i]);
}

int rps_tool_token(const char *secret, int role, unsigned rank, char *buf, size_t len)
{
	unsigned char r[32], k[32], msg[16];
	unsigned int klen = 32;
	char kh[65], vh[65] = "", th[65];
	int n;

	if (!secret || !secret[0] || (role != 1 && role != 2) || rank == 0xffffffffu)
		return -1;
	role_key(secret, role, r);
	memcpy(msg, "rdmaps-id-v2", 12);
	for (int i = 0; i < 4; i++)
		msg[12 + i] = (unsigned char)(rank >> (8 * i));
	HMAC(EVP_sha256(), r, sizeof(r), msg, sizeof(msg), k, &klen);
	hex(kh, k);
	if (role == 1) {
		role_key(secret, 2, r);
	} else {
		klen = 32;
		HMAC(EVP_sha256(), secret, (int)strlen(secret),
		     (const unsigned char *)"rdmaps-ring-v1", 14, r, &klen);
	}
	hex(vh, r);
	klen = 32;
	HMAC(EVP_sha256(), secret, (int)strlen(secret),
	     (const unsigned char *)"rdmaps-tls-psk-v1", 17, k, &klen);
	hex(th, k);
	n = snprintf(buf, len, "rdmaps-token-v1:%s:%u:%s%s%s:tls:%s",
		     role == 1 ? "server" : "worker", rank, kh,
		     role == 1 ? ":verify-worker:" : ":ring:", vh, th);
	OPENSSL_cleanse(r, sizeof(r));
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(kh, sizeof(kh));
	OPENSSL_cleanse(vh, sizeof(vh));
	OPENSSL_cleanse(th, sizeof(th));
	if (n < 0 || (size_t)n >= len) {
		OPENSSL_cleanse(buf, len);
		return -1;
	}
	return 0;
}
