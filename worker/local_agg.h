/* Aggregation on the host before the network (docs/local-aggregation.md):
 * the internals of rps_worker_local_pushpull (<rdmaps/local.h>).
 *
 * Two POSIX shared memory segments per job and host, both named after the
 * job key (a hash of the scheduler's address, the user and every worker's
 * node id, rank and pid in the cluster map: the same on every worker of the
 * job, never the same for two jobs):
 *   /rdmaps-agg-<key>    struct rps_lagg_ctl: one slot per worker rank, the
 *                        futex words of the steps and a robust mutex per
 *                        member that says whether it is alive;
 *   /rdmaps-agg-<key>-d  the gradients of each member and the pulled values.
 * Both names are unlinked as soon as every member has them mapped (the ctl
 * after the discovery barrier, the data once every follower attached), so a
 * job that dies later leaves nothing in /dev/shm; a file left by a job that
 * died during its first step is removed by the next job's sweep
 * (local_agg_shm.c).
 */
#ifndef RPS_WORKER_LOCAL_AGG_H
#define RPS_WORKER_LOCAL_AGG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "src/proto.h"

#define RPS_LAGG_MAGIC 0x4741474cu /* "LGAG" */
#define RPS_LAGG_PREFIX "/rdmaps-agg-"

enum { RPS_LAGG_EMPTY = 0, RPS_LAGG_INIT = 1, RPS_LAGG_READY = 2 };

struct rps_lagg_slot {
	_Alignas(64) pthread_mutex_t life; /* robust, process-shared: held by the member's life thread */
	_Atomic uint32_t state;	  /* RPS_LAGG_* */
	uint32_t pid;
	_Atomic uint32_t seq;	  /* steps this member contributed (futex word) */
	uint32_t pad;
	_Atomic uint64_t layout;  /* hash of the keys and lengths of its last step */
};

struct rps_lagg_ctl {
	_Atomic uint32_t magic;	 /* RPS_LAGG_MAGIC: slots may be looked at */
	uint32_t version;
	uint64_t key;
	_Atomic uint32_t data_ready; /* leader: the data segment exists (futex word) */
	_Atomic uint32_t attached;   /* followers that mapped it (futex word) */
	uint64_t data_elems;	     /* floats per slot */
	uint64_t data_bytes;	     /* the data segment's size */
	uint64_t layout;
	_Atomic uint32_t done;	     /* steps the leader finished (futex word) */
	_Atomic int32_t status;	     /* their result: 0 or -errno */
	_Atomic uint32_t failed;     /* 0, or 1 + rank of the member whose loss broke the group */
	_Atomic uint32_t status_step; /* the step status belongs to */
	struct rps_lagg_slot slot[RPS_MAX_WORKERS];
};

/* ---- local_agg_shm.c: segments, waits, liveness ---- */
/* Open the ctl segment name, creating it (zero-filled) if it does not exist,
 * mapped at *ctl_p. 0 or -errno (logged). */
int rps_lagg_ctl_open(const char *name, struct rps_lagg_ctl **ctl_p);
void rps_lagg_unmap(void *p, size_t len);
/* The leader: a fresh data segment of bytes (a stale one of the name is
 * removed first). Followers: open and map the existing one, checked to be
 * bytes long. 0 or -errno (logged). */
int rps_lagg_data_create(const char *name, size_t bytes, void **p_p);
int rps_lagg_data_open(const char *name, size_t bytes, void **p_p);
/* Remove files of this user left by jobs that died in their first step:
 * /dev/shm/rdmaps-agg-* older than max_age_s whose members (if it is a ctl
 * segment) are all gone. Logs what it removes. */
void rps_lagg_sweep(int max_age_s);

/* 1 if the member of slot s is alive (its life mutex is held), else 0. */
int rps_lagg_alive(struct rps_lagg_slot *s);
/* Hold slot s's life mutex from a thread of ours until rps_lagg_life_stop. */
struct rps_lagg_life;
int rps_lagg_life_start(struct rps_lagg_slot *s, struct rps_lagg_life **life_p);
void rps_lagg_life_stop(struct rps_lagg_life *life);

/* Wait until (int32_t)(*word - target) >= 0. Every ~10 ms: ctl->failed set
 * -> -EHOSTDOWN; the member of slot watch (NULL: none) gone -> -EHOSTDOWN;
 * deadline_ns (0: none) passed -> -ETIMEDOUT. Logs nothing. */
int rps_lagg_wait(struct rps_lagg_ctl *ctl, _Atomic uint32_t *word, uint32_t target,
		  struct rps_lagg_slot *watch, uint64_t deadline_ns);
void rps_lagg_wake(_Atomic uint32_t *word);

/* ---- local_agg.c ---- */
struct rps_worker;
struct rps_wlocal;
/* Free what the worker's local aggregation holds (destroy). */
void rps_wlocal_fini(struct rps_worker *w);

#endif
