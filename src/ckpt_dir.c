/* Shard checkpoints: the directory: listing a shard's files, retention,
 * finding the newest valid one and restoring from it. */
#include "src/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/ckpt_int.h"
#include "src/log.h"

struct ckpt_ent {
	uint64_t clock;
	int kind; /* 1 final, 2 temp */
};

static int ent_newest_first(const void *a, const void *b)
{
	const struct ckpt_ent *x = a, *y = b;

	return x->clock < y->clock ? 1 : x->clock > y->clock ? -1 : 0;
}

/* The shard's checkpoint names in dir, newest first. */
static int list_shard(const char *dir, uint32_t rank, uint32_t shard, struct ckpt_ent **ents_p,
		      size_t *n_p)
{
	DIR *d = opendir(dir);
	struct ckpt_ent *ents = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		uint32_t r, s;
		uint64_t c;
		int kind = rps_ckpt_parse_name(de->d_name, &r, &s, &c);

		if (!kind || r != rank || s != shard)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct ckpt_ent *ne = rps_realloc(ents, ncap * sizeof(*ents));

			if (!ne) {
				rps_free(ents);
				closedir(d);
				return -ENOMEM;
			}
			ents = ne;
			cap = ncap;
		}
		ents[n].clock = c;
		ents[n].kind = kind;
		n++;
	}
	closedir(d);
	if (n)
		qsort(ents, n, sizeof(*ents), ent_newest_first);
	*ents_p = ents;
	*n_p = n;
	return 0;
}

int rps_ckpt_prune(const char *dir, uint32_t server_rank, uint32_t shard, int keep)
{
	return rps_ckpt_prune_upto(dir, server_rank, shard, keep, UINT64_MAX);
}

int rps_ckpt_prune_upto(const char *dir, uint32_t server_rank, uint32_t shard, int keep,
			uint64_t upto)
{
	struct ckpt_ent *ents;
	size_t n;
	int kept = 0, removed = 0, future = 0;
	int rc = list_shard(dir, server_rank, shard, &ents, &n);

	if (rc) {
		RPS_ERR("checkpoint dir %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (keep <= 0)
		keep = RPS_CKPT_KEEP_DEFAULT;
	for (size_t i = 0; i < n; i++) {
		char path[RPS_CKPT_PATH_MAX];

		if (ents[i].kind == 1 && ents[i].clock > upto) {
			if (!future++)
				RPS_WARN("checkpoint dir %s: server %u shard %u has a checkpoint of "
					 "clock %" PRIu64 ", beyond the current %" PRIu64
					 ": left alone, not counted as the newest",
					 dir, server_rank, shard, ents[i].clock, upto);
			continue;
		}
		if (ents[i].kind == 1 && kept < keep) {
			kept++;
			continue;
		}
		if (rps_ckpt_path(dir, server_rank, shard, ents[i].clock, path, sizeof(path)) ||
		    (ents[i].kind == 2 && strlen(path) + 5 > sizeof(path)))
			continue;
		if (ents[i].kind == 2)
			strcat(path, ".tmp");
		if (unlink(path) < 0) {
			if (errno != ENOENT)
				RPS_WARN("checkpoint %s: unlink: %s", path, strerror(errno));
			continue;
		}
		RPS_DEBUG("checkpoint %s: removed (keeping the newest %d)", path, keep);
		removed++;
	}
	rps_free(ents);
	return removed;
}

int rps_ckpt_find(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		  struct rps_ckpt_info *info_p)
{
	return rps_ckpt_find_max(dir, server_rank, shard, num_shards, UINT64_MAX, info_p);
}

int rps_ckpt_find_max(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		      uint64_t max_clock, struct rps_ckpt_info *info_p)
{
	struct ckpt_ent *ents;
	size_t n;
	int refused = 0;
	char upto[48] = "";
	int rc = list_shard(dir, server_rank, shard, &ents, &n);

	if (rc == -ENOENT || rc == -ENOTDIR) {
		RPS_ERR("no checkpoint for server %u shard %u: directory %s: %s", server_rank,
			shard, dir, strerror(-rc));
		return -ENOENT;
	}
	if (rc) {
		RPS_ERR("checkpoint dir %s: %s", dir, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		char path[RPS_CKPT_PATH_MAX];

		if (ents[i].kind != 1 || ents[i].clock > max_clock ||
		    rps_ckpt_path(dir, server_rank, shard, ents[i].clock, path, sizeof(path)))
			continue;
		if (rps_ckpt_verify(path, server_rank, shard, num_shards, info_p)) {
			refused++;
			continue;
		}
		if (refused)
			RPS_WARN("checkpoint %s: using it; %d newer file(s) refused", path,
				 refused);
		rps_free(ents);
		return 0;
	}
	rps_free(ents);
	if (max_clock != UINT64_MAX)
		snprintf(upto, sizeof(upto), " at clock <= %" PRIu64, max_clock);
	if (refused)
		RPS_ERR("no valid checkpoint for server %u shard %u%s in %s (%d refused)",
			server_rank, shard, upto, dir, refused);
	else
		RPS_ERR("no checkpoint for server %u shard %u%s in %s", server_rank, shard, upto,
			dir);
	return -ENOENT;
}

int rps_ckpt_restore(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		     rps_ckpt_slice_fn fn, void *arg, struct rps_ckpt_info *info_p)
{
	struct rps_ckpt_info info;
	int rc = rps_ckpt_find(dir, server_rank, shard, num_shards, &info);

	if (rc)
		return rc;
	rc = rps_ckpt_read_once(info.path, server_rank, shard, num_shards, fn, arg, info_p);
	if (!rc)
		RPS_INFO("restored server %u shard %u from %s (clock %" PRIu64 ", %" PRIu64
			 " slices)",
			 server_rank, shard, info.path, info.clock, info.nslices);
	return rc;
}
