/* Fault injection for tests: drop or delay messages, stall an update thread,
 * kill a process at a given clock. Off unless the setting `fault`
 * (RDMAPS_FAULT / --fault) is non-empty; see docs/operations.md.
 *
 * Syntax: comma-separated NAME=VALUE items, spaces around items allowed, each
 * name at most once, e.g.
 *   "drop=0.01,delay_ms=5,delay_p=0.1,stall_update_ms=200,stall_p=0.01,
 *    kill_at_clock=7,kill_role=server,kill_rank=1,seed=1"
 *
 *   drop=P             probability in [0, 1] that a message at a drop point is dropped
 *   delay_ms=MS        delay (ms, fractions allowed, <= 3600000) at a delay point ...
 *   delay_p=P          ... with probability P (default 1; needs delay_ms)
 *   stall_update_ms=MS an update thread stalls this long before applying a push ...
 *   stall_p=P          ... with probability P (default 1; needs stall_update_ms)
 *   kill_at_clock=C    kill the matching process once its clock reaches C (>= C)
 *   kill_role=ROLE     scheduler | server | worker | any (default any; needs kill_at_clock)
 *   kill_rank=N        rank N >= 0, or -1 / any (default any; needs kill_at_clock)
 *   seed=N             PRNG seed, decimal or 0x hex (default 1)
 *   slow_rank=N        worker N is a straggler: ...
 *   slow_factor=F      ... each of its clocks takes F times as long (F in [1, 100]): it
 *                      sleeps (F - 1) x the time since its previous clock ended, before
 *                      ending the clock (both or neither)
 * A bad spec is refused with -EINVAL and one logged line naming the item and why.
 *
 * Decisions use a per-thread PRNG (splitmix64) seeded from (seed, stream): a
 * thread's stream is the order in which threads first drew since the last
 * rps_fault_init(), or the value it pinned with rps_fault_thread_seed() (do
 * that for per-shard determinism across runs). With one thread and one seed
 * the sequence of decisions is the same every run.
 *
 * Hot paths use the macros: with faults off each is one load of rps_fault_on
 * and a predicted branch; compiled with -DRPS_NO_FAULTS they are constant 0
 * and the functions are never called.
 */
#ifndef RPS_FAULT_H
#define RPS_FAULT_H

#include <stddef.h>
#include <stdint.h>

#include "src/util.h"

#define RPS_FAULT_MAX_MS 3600000.0

struct rps_fault_spec {
	double drop_p;	   /* 0 = off */
	uint64_t delay_ns; /* 0 = off */
	double delay_p;
	uint64_t stall_ns; /* 0 = off */
	double stall_p;
	int kill; /* 1 if kill_at_clock was given */
	uint64_t kill_clock;
	char kill_role[16]; /* "" = any role */
	int kill_rank;	    /* -1 = any rank */
	int slow_rank;	    /* -1 = no straggler */
	double slow_factor; /* >= 1 */
	uint64_t seed;
};

/* 1 while any switch is on; written by rps_fault_init / rps_fault_reset only. */
extern int rps_fault_on;

/* Parse a spec into *spec_p (untouched on error). NULL or "" (spaces only) is a
 * spec with everything off. -EINVAL (logged) for a bad spec. */
int rps_fault_parse(const char *s, struct rps_fault_spec *spec_p);
/* Parse and install process-wide; sets rps_fault_on; restarts every thread's
 * PRNG and re-arms the kill. On error the previous setting stays. Call at
 * start-up, before the threads that draw exist (or while they are quiet). */
int rps_fault_init(const char *s);
/* Everything off. */
void rps_fault_reset(void);
/* The installed spec. */
const struct rps_fault_spec *rps_fault_current(void);
/* Canonical text of a spec ("off" if nothing is on), for logs; like snprintf. */
int rps_fault_describe(const struct rps_fault_spec *spec, char *buf, size_t len);

/* Pin the calling thread's PRNG stream (e.g. the shard index). */
void rps_fault_thread_seed(uint64_t stream);

/* Decisions (one PRNG draw each when their switch is on, none when off). */
int rps_fault_drop(void);	   /* 1: drop this message */
uint64_t rps_fault_delay_ns(void); /* ns to delay this message, 0 = none */
uint64_t rps_fault_stall_ns(void); /* ns to stall before this update, 0 = none */
/* 1 exactly once per process (per rps_fault_init): kill_at_clock set, role
 * matches (kill_role "" / any matches every role), rank matches (-1 any) and
 * clock >= kill_at_clock. role is "scheduler" | "server" | "worker". */
int rps_fault_should_kill(const char *role, int rank, uint64_t clock);

/* Worker `rank` is the straggler (slow_rank): sleep (slow_factor - 1) x the
 * time since the previous call returned (nothing on the first call). Role is
 * "worker" for a match. */
void rps_fault_slow_down(const char *role, int rank);

/* Helpers for the injection points. */
void rps_fault_sleep_ns(uint64_t ns);
/* Log (error level) why, then SIGKILL the process: a crash, no clean-up. */
_Noreturn void rps_fault_kill(const char *why);

#endif /* RPS_FAULT_H */

/* The macros are (re)defined on every inclusion so that one file may opt out
 * with #define RPS_NO_FAULTS before including this header. */
#undef RPS_FAULT_DROP
#undef RPS_FAULT_DELAY_NS
#undef RPS_FAULT_STALL_NS
#undef RPS_FAULT_SHOULD_KILL
#undef RPS_FAULT_SLOW_DOWN
#ifdef RPS_NO_FAULTS
#define RPS_FAULT_DROP()     0
#define RPS_FAULT_DELAY_NS() ((uint64_t)0)
#define RPS_FAULT_STALL_NS() ((uint64_t)0)
#define RPS_FAULT_SHOULD_KILL(role, rank, clock)                                                   \
	((void)sizeof(role), (void)sizeof(rank), (void)sizeof(clock), 0)
#define RPS_FAULT_SLOW_DOWN(role, rank) ((void)sizeof(role), (void)sizeof(rank))
#else
#define RPS_FAULT_DROP()     (RPS_UNLIKELY(rps_fault_on) && rps_fault_drop())
#define RPS_FAULT_DELAY_NS() (RPS_UNLIKELY(rps_fault_on) ? rps_fault_delay_ns() : (uint64_t)0)
#define RPS_FAULT_STALL_NS() (RPS_UNLIKELY(rps_fault_on) ? rps_fault_stall_ns() : (uint64_t)0)
#define RPS_FAULT_SHOULD_KILL(role, rank, clock)                                                   \
	(RPS_UNLIKELY(rps_fault_on) && rps_fault_should_kill((role), (rank), (clock)))
#define RPS_FAULT_SLOW_DOWN(role, rank)                                                            \
	do {                                                                                       \
		if (RPS_UNLIKELY(rps_fault_on))                                                    \
			rps_fault_slow_down((role), (rank));                                       \
	} while (0)
#endif
