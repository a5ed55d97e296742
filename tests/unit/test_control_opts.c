/* Unit tests: the control client's option plumbing (control/control.c
 * rps_ctl_join_opts_init, control/ctl_status.c behind <rdmaps/ctl.h>). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <rdmaps/ctl.h>

#include "control/control.h"
#include "src/config.h"
#include "src/proto.h"

/* Join options come from the configuration, every field of it. */
static void test_join_opts_from_config(void **state)
{
	struct rps_ctl_join_opts o;
	struct rps_config cfg;

	(void)state;
	assert_int_equal(rps_config_init(&cfg), 0);
	snprintf(cfg.scheduler, sizeof(cfg.scheduler), "10.0.0.7:9091");
	snprintf(cfg.secret, sizeof(cfg.secret), "s3cret");
	snprintf(cfg.transport, sizeof(cfg.transport), "rdma");
	snprintf(cfg.host, sizeof(cfg.host), "10.0.0.8");
	cfg.rank = 3;
	cfg.timeout_ms = 1234;
	cfg.heartbeat_ms = 77;

	memset(&o, 0xa5, sizeof(o));
	rps_ctl_join_opts_init(&o, &cfg, RPS_ROLE_WORKER);
	assert_string_equal(o.scheduler, "10.0.0.7:9091");
	assert_string_equal(o.secret, "s3cret");
	assert_int_equal(o.role, RPS_ROLE_WORKER);
	assert_int_equal(o.transport, 0); /* the node's data path sets it, not the name */
	assert_string_equal(o.host, "10.0.0.8");
	assert_int_equal(o.port, 0);
	assert_int_equal(o.want_rank, 3);
	assert_int_equal(o.timeout_ms, 1234);
	assert_int_equal(o.heartbeat_ms, 77);
	assert_ptr_equal(o.cfg, &cfg);
	assert_null(o.events);
	assert_null(o.arg);

	snprintf(cfg.transport, sizeof(cfg.transport), "tcp");
	cfg.rank = -1;
	rps_ctl_join_opts_init(&o, &cfg, RPS_ROLE_SERVER);
	assert_int_equal(o.role, RPS_ROLE_SERVER);
	assert_int_equal(o.transport, 0);
	assert_int_equal(o.want_rank, UINT32_MAX);
}

/* rdmaps-ctl's flags land in the options; --config is told apart. */
static void test_ctl_opts_from_args(void **state)
{
	char a0[] = "rdmaps-ctl", a1[] = "--scheduler", a2[] = "127.0.0.1:4567",
	     a3[] = "--timeout-ms=250", a4[] = "status", a5[] = "--secret", a6[] = "xyz";
	char *argv[] = {a0, a1, a2, a3, a4, a5, a6, NULL};
	char c0[] = "rdmaps-ctl", c1[] = "--config";
	char *cargv[] = {c0, c1, NULL};
	char b0[] = "rdmaps-ctl", b1[] = "--no-such-flag", b2[] = "1";
	char *bargv[] = {b0, b1, b2, NULL};
	struct rps_ctl_opts o;
	int argc = 7, cargc = 2, bargc = 3;
	FILE *devnull = fopen("/dev/null", "w");

	(void)state;
	assert_non_null(devnull);
	assert_int_equal(rps_ctl_opts_from_args(&argc, argv, devnull, &o), 0);
	assert_int_equal(argc, 2);
	assert_string_equal(argv[1], "status");
	assert_string_equal(o.scheduler, "127.0.0.1:4567");
	assert_string_equal(o.secret, "xyz");
	assert_int_equal(o.timeout_ms, 250);
	assert_int_equal(o.field_mask,
			 RPS_CTL_OPT_SCHEDULER | RPS_CTL_OPT_SECRET | RPS_CTL_OPT_TIMEOUT_MS);

	assert_int_equal(rps_ctl_opts_from_args(&cargc, cargv, devnull, &o), 1);
	assert_int_equal(rps_ctl_opts_from_args(&bargc, bargv, devnull, &o), -EINVAL);
	fclose(devnull);
}

/* A bad address is told apart from an unreachable scheduler. */
static void test_ctl_status_errors(void **state)
{
	struct rps_ctl_opts o;
	FILE *devnull = fopen("/dev/null", "w");
	int rc;

	(void)state;
	assert_non_null(devnull);
	memset(&o, 0, sizeof(o));
	o.field_mask = RPS_CTL_OPT_SCHEDULER | RPS_CTL_OPT_SECRET | RPS_CTL_OPT_TIMEOUT_MS;
	snprintf(o.scheduler, sizeof(o.scheduler), "no-port-here");
	o.timeout_ms = 300;
	assert_int_equal(rps_ctl_status_print(&o, devnull), -EDESTADDRREQ);

	snprintf(o.scheduler, sizeof(o.scheduler), "127.0.0.1:1"); /* nobody listens */
	rc = rps_ctl_status_print(&o, devnull);
	assert_true(rc < 0);
	assert_int_not_equal(rc, -EDESTADDRREQ);
	fclose(devnull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_join_opts_from_config),
	    cmocka_unit_test(test_ctl_opts_from_args),
	    cmocka_unit_test(test_ctl_status_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
