/* fmnist-train --compress (compress_opt.h). */
#include "compress_opt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int compress_check(const char *text, int local)
{
	struct rps_compress_opts o;

	if (!text)
		return 0;
	if (rps_compress_parse(text, &o)) {
		fprintf(stderr, "fmnist-train: --compress %s: not a codec (none, fp16, bf16, "
				"topk:RATIO[,warmup=STEPS,from=RATIO,momentum=M], randk:RATIO, "
				"sign, sign:BLOCK)\n",
			text);
		return -EINVAL;
	}
	if (local && o.kind != RPS_CODEC_NONE) {
		fprintf(stderr, "fmnist-train: --compress %s compresses pushes to servers: it "
				"needs a distributed run (not --local)\n",
			text);
		return -EINVAL;
	}
	return 0;
}

void compress_momentum_note(const char *text, int optim_kind)
{
	struct rps_compress_opts o;

	if (text && !rps_compress_parse(text, &o) && o.momentum != 0.0f &&
	    optim_kind != RPS_OPT_SGD)
		fprintf(stderr,
			"fmnist-train: note: --compress %s keeps the momentum on the workers "
			"(momentum correction) and the servers' optimizer is not sgd: the "
			"gradients get momentum twice (docs/compression.md; add --optimizer "
			"sgd)\n",
			text);
}

int compress_apply(struct rps_worker *w, const rps_key_t *keys, size_t n, const char *text)
{
	struct rps_compress_opts o;
	int rc;

	if (!text)
		return 0;
	rc = rps_compress_parse(text, &o);
	if (!rc && o.kind == RPS_CODEC_NONE)
		return 0;
	if (!rc)
		rc = rps_worker_set_compression(w, keys, n, &o);
	if (rc)
		fprintf(stderr, "fmnist-train: --compress %s: %s\n", text, rps_strerror(rc));
	return rc;
}

void compress_report(struct rps_worker *w, const char *text, size_t steps, json_t *doc)
{
	struct rps_worker_stats st = {.field_mask = RPS_WORKER_STAT_BYTES_OUT |
						    RPS_WORKER_STAT_PUSH_RAW_BYTES |
						    RPS_WORKER_STAT_PUSH_WIRE_BYTES |
						    RPS_WORKER_STAT_LAST_STEP_PUSH_BYTES};
	double per_step, raw_step;

	if (!w || rps_worker_stats(w, &st) || !steps)
		return;
	per_step = (double)st.push_wire_bytes / (double)steps;
	raw_step = (double)st.push_raw_bytes / (double)steps;
	if (!doc) {
		printf("fmnist-train: pushes (%s): %.0f bytes/step on the wire, %.0f as float32 "
		       "(%.1fx less), %zu steps\n",
		       text ? text : "none", per_step, raw_step,
		       per_step > 0 ? raw_step / per_step : 0.0, steps);
		return;
	}
	json_object_set_new(doc, "compress", json_string(text ? text : "none"));
	json_object_set_new(doc, "push_wire_bytes_per_step", json_real(per_step));
	json_object_set_new(doc, "push_raw_bytes_per_step", json_real(raw_step));
	json_object_set_new(doc, "push_wire_bytes", json_integer((json_int_t)st.push_wire_bytes));
	json_object_set_new(doc, "push_data_bytes", json_integer((json_int_t)st.bytes_out));
	json_object_set_new(doc, "push_last_step_bytes",
			    json_integer((json_int_t)st.last_step_push_bytes));
}
