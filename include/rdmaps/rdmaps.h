/* rdmaps — umbrella header. */
#ifndef RDMAPS_RDMAPS_H
#define RDMAPS_RDMAPS_H

#include <rdmaps/status.h>
#include <rdmaps/types.h>
#include <rdmaps/config.h>
#include <rdmaps/keys.h>
#include <rdmaps/optim.h>
#include <rdmaps/compress.h>
#include <rdmaps/pullprec.h>
#include <rdmaps/model.h>
#include <rdmaps/worker.h>
#include <rdmaps/table.h>
#include <rdmaps/local.h>
#include <rdmaps/server.h>
#include <rdmaps/ctl.h>

/* The version these headers belong to; rps_version() is the library's. */
#define RPS_VERSION_MAJOR 0
#define RPS_VERSION_MINOR 1
#define RPS_VERSION_PATCH 0
#define RPS_VERSION_STRING "0.1.0"
/* One number that compares: RPS_VERSION >= RPS_VERSION_NUM(0, 1, 0). */
#define RPS_VERSION_NUM(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define RPS_VERSION RPS_VERSION_NUM(RPS_VERSION_MAJOR, RPS_VERSION_MINOR, RPS_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library loaded at run time, "MAJOR.MINOR.PATCH". */
RPS_API const char *rps_version(void);

#ifdef __cplusplus
}
#endif
#endif
