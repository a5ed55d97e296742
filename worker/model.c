/* Models in and out through the servers: rps_worker_save_model (one pull,
 * then the file) and rps_worker_load_model (the file read and checked whole,
 * then ASSIGN frames, see docs/protocol.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include <rdmaps/model.h>

#include "src/alloc.h"
#include "src/log.h"
#include "worker/worker_int.h"

/* The keys against what this worker declared, then a buffer for all of
 * them. -EINVAL, -ENOENT (logged) or -ENOMEM. */
static int model_buf(struct rps_worker *w, const char *what, const rps_key_t *keys,
		     const size_t *lens, size_t n, const char *path, float **vals_p)
{
	size_t bad = 0, total = 0;
	int rc;

	if (!path || !n) {
		RPS_ERR("%s %s: %s", what, path ? path : "(null)", n ? "no file" : "no keys");
		return -EINVAL;
	}
	rc = rps_keytab_check(&w->keys, keys, lens, n, path, &bad);
	if (rc) {
		if (keys && lens && bad < n)
			RPS_ERR("%s %s: key %" PRIu64 " of %zu floats: %s", what, path, keys[bad],
				lens[bad],
				rc == -ENOENT ? "not declared through this worker"
					      : "not the declared length");
		else
			RPS_ERR("%s %s: NULL keys or lengths", what, path);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		if (lens[i] > SIZE_MAX / sizeof(float) - total)
			return -EINVAL; /* cannot be declared */
		total += lens[i];
	}
	*vals_p = rps_malloc(total ? total * sizeof(float) : sizeof(float));
	return *vals_p ? 0 : -ENOMEM;
}

int rps_worker_save_model(struct rps_worker *w, const rps_key_t *keys, const size_t *lens, size_t n,
			  const char *path)
{
	struct rps_req *req;
	float *vals = NULL;
	int rc;

	if (!w)
		return -EINVAL;
	rc = model_buf(w, "save model", keys, lens, n, path, &vals);
	if (rc)
		return rc;
	/* one batched pull at the current clock: a consistent model */
	rc = rps_worker_pull(w, keys, vals, lens, n, &req);
	if (!rc)
		rc = rps_req_wait(req, -1);
	if (rc)
		RPS_ERR("save model %s: pull: %s (nothing written)", path, rps_strerror(rc));
	else
		rc = rps_model_save(path, keys, lens, n, vals); /* logs its failure */
	if (!rc)
		RPS_INFO("model of %zu keys at clock %u written to %s", n, atomic_load(&w->clock),
			 path);
	rps_free(vals);
	return rc;
}

int rps_worker_load_model(struct rps_worker *w, const rps_key_t *keys, const size_t *lens, size_t n,
			  const char *path)
{
	struct rps_req *req;
	float *vals = NULL;
	int rc;

	if (!w)
		return -EINVAL;
	rc = model_buf(w, "load model", keys, lens, n, path, &vals);
	if (rc)
		return rc;
	/* the whole file, checked against every key: nothing is sent before */
	rc = rps_model_load(path, keys, lens, n, vals);
	if (rc)
		goto out_vals;
	rc = rps_wready(w);
	if (!rc)
		rc = rps_wassign_post(w, keys, vals, lens, n, &req);
	if (!rc) {
		rps_wreq_seal(req);
		rc = rps_req_wait(req, -1); /* every slice acknowledged */
	}
	if (rc)
		RPS_ERR("load model %s: assigning the values on the servers: %s (some slices "
			"may hold the file's values, others not: load it again)",
			path, rps_strerror(rc));
	else
		RPS_INFO("model %s loaded: %zu keys assigned", path, n);
out_vals:
	rps_free(vals);
	return rc;
}
