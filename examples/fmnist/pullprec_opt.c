/* fmnist-train --pull-precision (pullprec_opt.h). */
#include "pullprec_opt.h"

#include <errno.h>
#include <stdio.h>

int pullprec_check(const char *text, int local)
{
	enum rps_pull_precision p;

	if (!text)
		return 0;
	if (rps_pull_precision_parse(text, &p)) {
		fprintf(stderr, "fmnist-train: --pull-precision %s: not a precision (fp32, fp16, "
				"bf16)\n",
			text);
		return -EINVAL;
	}
	if (local && p != RPS_PULL_FP32) {
		fprintf(stderr, "fmnist-train: --pull-precision %s reads the servers' copy: it "
				"needs servers (not --local)\n",
			text);
		return -EINVAL;
	}
	return 0;
}

int pullprec_apply(struct rps_worker *w, const rps_key_t *keys, size_t n, const char *text)
{
	enum rps_pull_precision p;
	int rc;

	if (!text)
		return 0;
	rc = rps_pull_precision_parse(text, &p);
	if (!rc)
		rc = rps_worker_set_pull_precision(w, keys, n, p);
	if (rc)
		fprintf(stderr, "fmnist-train: --pull-precision %s: %s\n", text, rps_strerror(rc));
	return rc;
}

void pullprec_report(struct rps_worker *w, const char *text, size_t steps, json_t *doc)
{
	struct rps_worker_stats st = {.field_mask = RPS_WORKER_STAT_BYTES_IN};
	double per_step;

	if (!w || rps_worker_stats(w, &st) || !steps)
		return;
	per_step = (double)st.bytes_in / (double)steps;
	if (!doc) {
		printf("fmnist-train: pulls (%s): %.0f parameter bytes/step received in pull "
		       "answers (0 over RDMA: one-sided reads)\n",
		       text ? text : "fp32", per_step);
		return;
	}
	json_object_set_new(doc, "pull_precision", json_string(text ? text : "fp32"));
	json_object_set_new(doc, "pull_bytes_in_per_step", json_real(per_step));
	json_object_set_new(doc, "pull_bytes_in", json_integer((json_int_t)st.bytes_in));
}
