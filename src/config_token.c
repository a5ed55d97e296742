/* RDMAPS_TOKEN (issue 20, docs/security.md "Tokens"): a node's token takes
 * the job secret's place as the handshake's credential (src/auth.h). */
#include "src/config_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "src/auth.h"
#include "src/log.h"

int rps_cfg_check_token(const char *v, const char **why_p)
{
	struct rps_auth_token t;
	int rc;

	if (!v[0])
		return 0;
	rc = rps_auth_token_parse(v, &t, why_p);
	OPENSSL_cleanse(&t, sizeof(t));
	return rc;
}

int rps_cfg_token_apply(struct rps_config *cfg)
{
	struct rps_auth_token t;
	const char *why, *word;
	int rc = 0;

	if (!cfg->token[0])
		return 0;
	if (rps_auth_token_parse(cfg->token, &t, &why)) {
		RPS_ERR("RDMAPS_TOKEN is not a token (%s): give this process the token "
			"rdmaps-launch or `rdmaps-ctl token ROLE RANK` made for it",
			why);
		OPENSSL_cleanse(&t, sizeof(t));
		return -EINVAL;
	}
	word = rps_auth_role_word(t.role);
	if (cfg->secret[0] && strcmp(cfg->secret, cfg->token)) {
		RPS_ERR("both RDMAPS_SECRET and RDMAPS_TOKEN are set: give a server or worker "
			"one of them (the token: it is used, the secret ignored)");
		rc = -EINVAL;
	}
	if (cfg->rank >= 0 && (uint32_t)cfg->rank != t.rank) {
		RPS_ERR("RDMAPS_RANK=%d but RDMAPS_TOKEN is the token of %s rank %u: a token "
			"proves only its own rank (rank %u is used)",
			cfg->rank, word, t.rank, t.rank);
		rc = -EINVAL;
	}
	if (cfg->role[0] && strcmp(cfg->role, word)) {
		RPS_ERR("RDMAPS_ROLE=%s but RDMAPS_TOKEN is the token of a %s: give this "
			"process a %s token",
			cfg->role, word, cfg->role);
		rc = -EINVAL;
	}
	snprintf(cfg->secret, sizeof(cfg->secret), "%s", cfg->token);
	if (t.rank < (uint32_t)RPS_MAX_NODES)
		cfg->rank = (int)t.rank;
	OPENSSL_cleanse(&t, sizeof(t));
	return rc;
}
