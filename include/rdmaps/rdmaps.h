/* rdmaps — umbrella header. */
#ifndef RDMAPS_RDMAPS_H
#define RDMAPS_RDMAPS_H

#include <rdmaps/status.h>
#include <rdmaps/types.h>
#include <rdmaps/worker.h>
#include <rdmaps/server.h>
#include <rdmaps/ctl.h>

#define RPS_VERSION_MAJOR 0
#define RPS_VERSION_MINOR 1

#endif
