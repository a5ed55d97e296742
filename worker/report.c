/* rps_worker_report: a named figure of the job to the scheduler (REPORT,
 * src/proto.h), for the dashboard's curves. Rate-bounded per worker. */
#include "worker/worker_int.h"

#include <errno.h>
#include <string.h>

#include "control/control.h"
#include "src/log.h"
#include "src/proto.h"
#include "src/util.h"

int rps_worker_report(struct rps_worker *w, const char *name, double value)
{
	struct rps_report r;
	const char *why = NULL;
	uint64_t sec;

	if (!w || !name)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	if (strlen(name) > RPS_REPORT_NAME_MAX) {
		RPS_ERR("report \"%.40s\": name longer than %d characters", name,
			RPS_REPORT_NAME_MAX);
		return -EINVAL;
	}
	memcpy(r.name, name, strlen(name));
	if (rps_proto_report_check(&r, &why)) {
		RPS_ERR("report \"%s\": %s", name, why);
		return -EINVAL;
	}
	if (!w->ctl)
		return -ENOTCONN; /* an offline worker: nobody to tell */
	/* at most RPS_WORKER_REPORT_RATE per second (a benign race at the
	 * turn of a second lets a few more through) */
	sec = rps_now_ns() / 1000000000ull;
	if (atomic_exchange(&w->report_sec, sec) != sec)
		atomic_store(&w->report_n, 0);
	if (atomic_fetch_add(&w->report_n, 1) >= RPS_WORKER_REPORT_RATE)
		return -EAGAIN;
	r.clock = atomic_load(&w->clock);
	r.value = value;
	return rps_ctl_send(w->ctl, RPS_OP_REPORT, 0, 0, 0, &r, sizeof(r), NULL, 0);
}
