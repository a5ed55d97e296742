/* Per-node tokens (src/auth.h "Tokens", src/auth_token.c, issue 20): a
 * worker's token proves only its own identity, a server's also checks
 * workers; the library, rdmaps-launch's copy (tools/common/job_token.c) and
 * the derivation from the secret agree; RDMAPS_TOKEN in the configuration. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/auth.h"
#include "src/config.h"

#include "../../tools/common/job_token.c" /* rdmaps-launch's copy, checked against ours */

static const char *const sec = "token-unit-secret";

static void key_of(const char *cred, uint8_t role, uint32_t rank, uint8_t k[RPS_AUTH_KEY_LEN],
		   int want_rc)
{
	assert_int_equal(rps_auth_key(cred, role, rank, k), want_rc);
}

static void test_make_parse(void **state)
{
	char w[256], s[256], tool[256];
	struct rps_auth_token t;
	uint8_t k[RPS_AUTH_KEY_LEN], r[RPS_AUTH_KEY_LEN];
	const char *why = NULL;

	(void)state;
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, 3, w, sizeof(w)), 0);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_SERVER, 1, s, sizeof(s)), 0);
	assert_true(rps_auth_is_token(w) && rps_auth_is_token(s) && !rps_auth_is_token(sec));
	/* rdmaps-launch / rdmaps-ctl token make the very same text */
	assert_int_equal(rps_tool_token(sec, 2, 3, tool, sizeof(tool)), 0);
	assert_string_equal(tool, w);
	assert_int_equal(rps_tool_token(sec, 1, 1, tool, sizeof(tool)), 0);
	assert_string_equal(tool, s);
	assert_true(strlen(s) <= RPS_TOKEN_MAX);

	assert_int_equal(rps_auth_token_parse(w, &t, &why), 0);
	assert_int_equal(t.role, RPS_ROLE_WORKER);
	assert_int_equal(t.rank, 3);
	assert_int_equal(t.verify, 0);
	assert_true(t.has_ring);
	key_of(sec, RPS_ROLE_WORKER, 3, k, 0);
	assert_memory_equal(t.key, k, sizeof(k));
	assert_int_equal(rps_auth_token_parse(s, &t, &why), 0);
	assert_int_equal(t.role, RPS_ROLE_SERVER);
	assert_int_equal(t.rank, 1);
	assert_int_equal(t.verify, 1u << RPS_ROLE_WORKER);
	rps_auth_role_key(sec, RPS_ROLE_WORKER, r);
	assert_memory_equal(t.vkey[RPS_ROLE_WORKER], r, sizeof(r));

	/* only servers and workers get tokens; never of "any rank"; not from a token */
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_SCHEDULER, 0, w, sizeof(w)), -EINVAL);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_CTL, 0, w, sizeof(w)), -EINVAL);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, UINT32_MAX, w, sizeof(w)),
			 -EINVAL);
	assert_int_equal(rps_auth_token_make("", RPS_ROLE_WORKER, 0, w, sizeof(w)), -EINVAL);
	assert_int_equal(rps_auth_token_make(s, RPS_ROLE_WORKER, 0, w, sizeof(w)), -EINVAL);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_SERVER, 0, w, 40), -ENOSPC);
	assert_int_equal(rps_tool_token(sec, 0, 0, tool, sizeof(tool)), -1);
}

static void test_parse_rejects(void **state)
{
	static const char *const bad[] = {
	    "",
	    "rdmaps-token-v2:worker:0:" /* wrong version */,
	    "rdmaps-token-v1:",
	    "rdmaps-token-v1:scheduler:0:0000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:ctl:0:0000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:worker",
	    "rdmaps-token-v1:worker:",
	    "rdmaps-token-v1:worker:x:0000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:worker:-1:0000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:worker:4294967295:0000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:worker:99999999999:0000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:worker:0",
	    "rdmaps-token-v1:worker:0:00",
	    "rdmaps-token-v1:worker:0:000000000000000000000000000000000000000000000000000000000000000g",
	    "rdmaps-token-v1:worker:0:00000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:worker:0:0000000000000000000000000000000000000000000000000000000000000000:",
	    "rdmaps-token-v1:worker:0:0000000000000000000000000000000000000000000000000000000000000000:ring",
	    "rdmaps-token-v1:worker:0:0000000000000000000000000000000000000000000000000000000000000000:ring:00",
	    "rdmaps-token-v1:worker:0:0000000000000000000000000000000000000000000000000000000000000000:ring:0000000000000000000000000000000000000000000000000000000000000000:ring:0000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:server:0:0000000000000000000000000000000000000000000000000000000000000000:verify-server:0000000000000000000000000000000000000000000000000000000000000000",
	    "rdmaps-token-v1:server:0:0000000000000000000000000000000000000000000000000000000000000000:verify-worker",
	    "rdmaps-token-v1:server:0:0000000000000000000000000000000000000000000000000000000000000000:verify-worker:00",
	};
	struct rps_auth_token t;
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		assert_int_equal(rps_auth_token_parse(bad[i], &t, &why), -EINVAL);
		assert_non_null(why);
		if (bad[i][0])
			assert_int_equal(rps_auth_secret_ok(bad[i], 0),
					 rps_auth_is_token(bad[i]) ? -EINVAL : 0);
	}
}

/* What each credential can prove: K(role, rank) or -EACCES. */
static void test_reach(void **state)
{
	char w[256], s[256];
	uint8_t k[RPS_AUTH_KEY_LEN], want[RPS_AUTH_KEY_LEN];

	(void)state;
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, 3, w, sizeof(w)), 0);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_SERVER, 1, s, sizeof(s)), 0);
	assert_int_equal(rps_auth_secret_ok(w, 0), 0);
	assert_int_equal(rps_auth_secret_ok(s, 0), 0);

	/* a worker's token: its own identity only */
	key_of(sec, RPS_ROLE_WORKER, 3, want, 0);
	key_of(w, RPS_ROLE_WORKER, 3, k, 0);
	assert_memory_equal(k, want, sizeof(k));
	key_of(w, RPS_ROLE_WORKER, 2, k, -EACCES);
	key_of(sec, RPS_ROLE_WORKER, 2, want, 0);
	assert_memory_not_equal(k, want, sizeof(k)); /* random, not the real key */
	key_of(w, RPS_ROLE_WORKER, UINT32_MAX, k, -EACCES);
	key_of(w, RPS_ROLE_SERVER, 3, k, -EACCES);
	key_of(w, RPS_ROLE_SERVER, 0, k, -EACCES);
	key_of(w, RPS_ROLE_SCHEDULER, 0, k, -EACCES);
	key_of(w, RPS_ROLE_CTL, 0, k, -EACCES);
	key_of(w, RPS_ROLE_CTL, UINT32_MAX, k, -EACCES);

	/* a server's token: itself and every worker, no other server, no scheduler */
	key_of(s, RPS_ROLE_SERVER, 1, k, 0);
	key_of(sec, RPS_ROLE_SERVER, 1, want, 0);
	assert_memory_equal(k, want, sizeof(k));
	for (uint32_t r = 0; r < 5; r++) {
		key_of(s, RPS_ROLE_WORKER, r, k, 0);
		key_of(sec, RPS_ROLE_WORKER, r, want, 0);
		assert_memory_equal(k, want, sizeof(k));
	}
	key_of(s, RPS_ROLE_SERVER, 0, k, -EACCES);
	key_of(s, RPS_ROLE_SERVER, UINT32_MAX, k, -EACCES);
	key_of(s, RPS_ROLE_SCHEDULER, 0, k, -EACCES);
	key_of(s, RPS_ROLE_CTL, 0, k, -EACCES);

	assert_int_equal(rps_auth_token_role_ok(w, RPS_ROLE_WORKER), 0);
	assert_int_equal(rps_auth_token_role_ok(w, RPS_ROLE_SERVER), -EACCES);
	assert_int_equal(rps_auth_token_role_ok(s, RPS_ROLE_SERVER), 0);
	assert_int_equal(rps_auth_token_role_ok(s, RPS_ROLE_WORKER), -EACCES);
	assert_int_equal(rps_auth_token_role_ok(sec, RPS_ROLE_SERVER), 0);
}

/* The handshake between token holders: a worker with its token and a server
 * with its; the scheduler with the secret; a claim of another rank fails. */
static void test_handshake(void **state)
{
	char w3[256], w2[256], s[256];
	struct rps_hello h;
	struct rps_auth_challenge ch;
	struct rps_auth_proof pf;

	(void)state;
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, 3, w3, sizeof(w3)), 0);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, 2, w2, sizeof(w2)), 0);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_SERVER, 0, s, sizeof(s)), 0);

	rps_proto_hello_init(&h, RPS_ROLE_WORKER, 3);
	assert_int_equal(rps_auth_nonce(&h), 0);
	assert_int_equal(rps_auth_challenge_make(s, &h, &ch), 0); /* server listens */
	assert_int_equal(rps_auth_challenge_answer(w3, &h, &ch, &pf), 0);
	assert_int_equal(rps_auth_proof_check(s, &h, &ch, &pf), 0);
	assert_int_equal(rps_auth_challenge_make(sec, &h, &ch), 0); /* scheduler listens */
	assert_int_equal(rps_auth_challenge_answer(w3, &h, &ch, &pf), 0);
	assert_int_equal(rps_auth_proof_check(sec, &h, &ch, &pf), 0);
	assert_string_equal(rps_auth_refusal(s, &h),
			    rps_auth_refusal(s, &h)); /* a text, not NULL */

	/* worker 2 claims worker 3: its proof fails at the server and the scheduler,
	 * and the listener's MAC does not match what worker 2 can compute */
	assert_int_equal(rps_auth_challenge_make(s, &h, &ch), 0);
	assert_int_equal(rps_auth_challenge_answer(w2, &h, &ch, &pf), -EACCES);
	rps_auth_mac(w2, 'C', &h, ch.nonce, pf.mac);
	assert_int_equal(rps_auth_proof_check(s, &h, &ch, &pf), -EACCES);
	assert_int_equal(rps_auth_proof_check(sec, &h, &ch, &pf), -EACCES);

	/* a worker claims a server at the scheduler */
	rps_proto_hello_init(&h, RPS_ROLE_SERVER, 0);
	assert_int_equal(rps_auth_nonce(&h), 0);
	assert_int_equal(rps_auth_challenge_make(sec, &h, &ch), 0);
	assert_int_equal(rps_auth_challenge_answer(w3, &h, &ch, &pf), -EACCES);
	rps_auth_mac(w3, 'C', &h, ch.nonce, pf.mac);
	assert_int_equal(rps_auth_proof_check(sec, &h, &ch, &pf), -EACCES);
	/* the real server does */
	assert_int_equal(rps_auth_challenge_answer(s, &h, &ch, &pf), 0);
	assert_int_equal(rps_auth_proof_check(sec, &h, &ch, &pf), 0);
	/* a server listener cannot check another server (or rdmaps-ctl): it says so */
	rps_proto_hello_init(&h, RPS_ROLE_SERVER, 1);
	assert_non_null(strstr(rps_auth_refusal(s, &h), "not an identity this process may check"));
	assert_non_null(strstr(rps_auth_refusal(sec, &h), "wrong secret"));
}

/* RDMAPS_TOKEN in the configuration: it becomes the credential and the rank. */
static void test_config(void **state)
{
	struct rps_config c;
	char w[256];

	(void)state;
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, 3, w, sizeof(w)), 0);
	assert_int_equal(rps_config_init(&c), 0);
	assert_int_equal(rps_config_set(&c, "token", w), 0);
	assert_string_equal(c.secret, w);
	assert_int_equal(c.rank, 3);
	assert_int_equal(rps_config_set(&c, "rank", "3"), 0);
	assert_int_equal(rps_config_set(&c, "token", w), 0); /* the same rank: fine */

	assert_int_equal(rps_config_init(&c), 0);
	assert_int_equal(rps_config_set(&c, "rank", "4"), 0);
	assert_int_equal(rps_config_set(&c, "token", w), -EINVAL);
	assert_int_equal(c.rank, 3); /* the token's rank: the only one it proves */

	assert_int_equal(rps_config_init(&c), 0);
	assert_int_equal(rps_config_set(&c, "secret", sec), 0);
	assert_int_equal(rps_config_set(&c, "token", w), -EINVAL);
	assert_string_equal(c.secret, w); /* the token wins, never the secret */

	assert_int_equal(rps_config_init(&c), 0);
	assert_int_equal(rps_config_set(&c, "role", "server"), 0);
	assert_int_equal(rps_config_set(&c, "token", w), -EINVAL);

	assert_int_equal(rps_config_init(&c), 0);
	assert_int_equal(rps_config_set(&c, "token", "rdmaps-token-v1:worker:0:00"), -EINVAL);
	assert_string_equal(c.secret, "");
}

/* The workers' ring all-reduce: a key domain of its own. A worker's ring
 * credential checks every worker's ring identity but proves nothing to a
 * server or the scheduler. */
static void test_ring(void **state)
{
	char w3[256], s[256], rc3[256], rcs[256];
	uint8_t k[RPS_AUTH_KEY_LEN], k2[RPS_AUTH_KEY_LEN];
	struct rps_hello h;
	struct rps_auth_challenge ch;
	struct rps_auth_proof pf;

	(void)state;
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, 3, w3, sizeof(w3)), 0);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_SERVER, 0, s, sizeof(s)), 0);
	assert_int_equal(rps_auth_ring_credential(w3, rc3, sizeof(rc3)), 0);
	assert_int_equal(rps_auth_secret_ok(rc3, 0), 0);
	assert_int_equal(rps_auth_ring_credential(sec, rcs, sizeof(rcs)), 0);
	assert_string_equal(rcs, sec); /* all trusted: the secret itself */
	assert_int_equal(rps_auth_ring_credential(s, rcs, sizeof(rcs)), -EACCES);
	/* every worker's ring key, none of them a real worker key */
	for (uint32_t r = 0; r < 5; r++) {
		key_of(rc3, RPS_ROLE_WORKER, r, k, 0);
		key_of(sec, RPS_ROLE_WORKER, r, k2, 0);
		assert_memory_not_equal(k, k2, sizeof(k));
	}
	key_of(rc3, RPS_ROLE_SERVER, 0, k, -EACCES);
	/* worker 3's ring credential and worker 1's agree on worker 1's ring key */
	{
		char w1[256], rc1[256];

		assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, 1, w1, sizeof(w1)), 0);
		assert_int_equal(rps_auth_ring_credential(w1, rc1, sizeof(rc1)), 0);
		rps_proto_hello_init(&h, RPS_ROLE_WORKER, 1);
		assert_int_equal(rps_auth_nonce(&h), 0);
		assert_int_equal(rps_auth_challenge_make(rc3, &h, &ch), 0);
		assert_int_equal(rps_auth_challenge_answer(rc1, &h, &ch, &pf), 0);
		assert_int_equal(rps_auth_proof_check(rc3, &h, &ch, &pf), 0);
		/* ... but the ring proof of worker 1 means nothing to a server */
		assert_int_equal(rps_auth_challenge_make(s, &h, &ch), 0);
		assert_int_equal(rps_auth_challenge_answer(rc3, &h, &ch, &pf), -EACCES);
		rps_auth_mac(rc3, 'C', &h, ch.nonce, pf.mac);
		assert_int_equal(rps_auth_proof_check(s, &h, &ch, &pf), -EACCES);
		assert_int_equal(rps_auth_proof_check(sec, &h, &ch, &pf), -EACCES);
	}
}

/* RDMAPS_TLS=1 with tokens: every token (and a worker's ring credential)
 * carries the job's TLS key, the one the secret gives; without it, -EACCES. */
static void test_tls(void **state)
{
	char w[256], srv[256], rc[256], old[256];
	uint8_t want[RPS_AUTH_KEY_LEN], k[RPS_AUTH_KEY_LEN];
	char *tail;

	(void)state;
	assert_int_equal(rps_auth_tls_psk(sec, want), 0);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_WORKER, 4294967294u, w, sizeof(w)), 0);
	assert_int_equal(rps_auth_token_make(sec, RPS_ROLE_SERVER, 4294967294u, srv, sizeof(srv)),
			 0);
	assert_true(strlen(w) <= RPS_TOKEN_MAX && strlen(srv) <= RPS_TOKEN_MAX);
	assert_int_equal(rps_auth_tls_psk(w, k), 0);
	assert_memory_equal(k, want, sizeof(k));
	assert_int_equal(rps_auth_tls_psk(srv, k), 0);
	assert_memory_equal(k, want, sizeof(k));
	assert_int_equal(rps_auth_ring_credential(w, rc, sizeof(rc)), 0);
	assert_int_equal(rps_auth_tls_psk(rc, k), 0);
	assert_memory_equal(k, want, sizeof(k));
	/* another secret, another key */
	assert_int_equal(rps_auth_tls_psk("another-secret", k), 0);
	assert_memory_not_equal(k, want, sizeof(k));
	/* a token without its tls field (an older maker), an empty secret */
	strcpy(old, w);
	tail = strstr(old, ":tls:");
	assert_non_null(tail);
	*tail = 0;
	assert_true(rps_auth_is_token(old));
	assert_int_equal(rps_auth_tls_psk(old, k), -EACCES);
	assert_int_equal(rps_auth_tls_psk("", k), -EACCES);
	/* a malformed tls field is refused by the parser */
	strcpy(old, w);
	tail = strstr(old, ":tls:");
	tail[6] = 'x';
	assert_int_equal(rps_auth_tls_psk(old, k), -EACCES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_make_parse), cmocka_unit_test(test_parse_rejects),
	    cmocka_unit_test(test_reach),      cmocka_unit_test(test_handshake),
	    cmocka_unit_test(test_config),     cmocka_unit_test(test_ring),
	    cmocka_unit_test(test_tls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
