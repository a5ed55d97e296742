/* Eviction of idle table rows (RDMAPS_TABLE_EVICT_CLOCKS, docs/tables.md
 * "Eviction"), on the shard's update thread, in slices: after every ring
 * entry at most EVICT_SLICE slots are looked at, so a pass over millions of
 * rows never holds pushes back for long. One pass per clock of the shard.
 *
 * Time-based (RDMAPS_TABLE_EVICT_SECONDS, p.evict_secs; not with clocks): a
 * touch records milliseconds since the shard's tables began instead of the
 * clock, a row idle for evict_secs seconds is evicted under the same rule,
 * and a pass begins every max(evict_secs / 4, 0.1) seconds (after an entry,
 * in slices as above; or whole when the update thread found its ring empty
 * for a second: rps_shard_tables_idle), so a row goes between evict_secs and
 * evict_secs * 1.25 (+ 1 s on an idle shard) after its last touch.
 *
 * A row is evicted when it was neither pushed nor pulled by frame (nor
 * created) during the last `evict_clocks` clocks of its shard, and its last
 * update, if any, is in a committed checkpoint ("saved"). Saved is tracked by
 * epochs: every row update records its table's epoch; a checkpoint that
 * writes the table files moves the epoch on (table_ckpt.c calls
 * rps_shard_tables_ckpt_written), and when that checkpoint commits (the
 * shard's ckpts_ok counter moves; checkpoints complete one at a time, in
 * order) rows of the epochs before are saved. Without checkpoints only rows
 * never updated (their value is the initial one) are evicted.
 */
#include "server/table.h"

#include <stdatomic.h>

#include "src/log.h"
#include "src/util.h"

#define EVICT_SLICE 4096u /* slots looked at per ring entry */

static uint64_t mono_ms(void)
{
	return rps_now_ns() / 1000000u;
}

static uint64_t tables_ms(struct rps_shard_tables *ts)
{
	if (!ts->now_ms)
		ts->now_ms = mono_ms;
	if (!ts->t0_ms)
		ts->t0_ms = ts->now_ms() - 1; /* never 0: "not set" */
	return ts->now_ms() - ts->t0_ms;
}

uint32_t rps_shard_tables_now(struct rps_shard *sh)
{
	if (!sh->p.evict_secs || !sh->tables)
		return (uint32_t)sh->clock;
	return (uint32_t)tables_ms(sh->tables); /* wraps after 49 days: differences stay right */
}

void rps_shard_tables_ckpt_written(struct rps_shard *sh)
{
	struct rps_shard_tables *ts = sh->tables;

	if (!ts || (!sh->p.evict_clocks && !sh->p.evict_secs) || ts->ck_pending)
		return; /* one tracked at a time: a later one is covered by the next */
	for (uint32_t i = 0; i < ts->n; i++) {
		struct rps_shard_table *t = ts->t[i];

		t->pend_epoch = t->rt.epoch;
		if (++t->rt.epoch > RPS_ROW_EPOCH)
			t->rt.epoch = RPS_ROW_EPOCH; /* 2^30 checkpoints: stays conservative */
	}
	ts->ck_ok0 = atomic_load(&sh->ckpts_ok);
	ts->ck_fail0 = atomic_load(&sh->ckpts_failed);
	ts->ck_pending = 1;
}

/* The tracked checkpoint ended: its rows are saved if it committed. */
static void ckpt_check(struct rps_shard *sh, struct rps_shard_tables *ts)
{
	uint64_t ok = atomic_load(&sh->ckpts_ok), fail = atomic_load(&sh->ckpts_failed);

	if (!ts->ck_pending || ok + fail == ts->ck_ok0 + ts->ck_fail0)
		return;
	ts->ck_pending = 0;
	if (fail != ts->ck_fail0 || ok == ts->ck_ok0)
		return;
	for (uint32_t i = 0; i < ts->n; i++)
		ts->t[i]->saved_epoch = ts->t[i]->pend_epoch;
}

void rps_shard_tables_evict_tick(struct rps_shard *sh)
{
	struct rps_shard_tables *ts = sh->tables;
	uint32_t idle = sh->p.evict_clocks;
	uint64_t budget = EVICT_SLICE;
	int timed = sh->p.evict_secs && !sh->p.evict_clocks;

	if (timed)
		idle = sh->p.evict_secs * 1000u; /* <= 2,000,000 s (src/config_table.c) */
	if (!idle || !ts || !ts->n)
		return;
	ckpt_check(sh, ts);
	if (!ts->ev_active) {
		if (timed) {
			uint64_t ms = tables_ms(ts), every = RPS_MAX(idle / 4u, 100u);

			if (ts->ev_ms && ms - ts->ev_ms < every)
				return; /* the last pass began less than `every` ago */
			ts->ev_ms = ms;
		} else if (sh->clock == ts->ev_clock) {
			return; /* this clock's pass is done */
		}
		ts->ev_active = 1;
		ts->ev_clock = sh->clock;
		ts->ev_table = 0;
		for (uint32_t i = 0; i < ts->n; i++)
			ts->t[i]->rt.cursor = 0;
	}
	while (ts->ev_table < ts->n && budget) {
		struct rps_shard_table *t = ts->t[ts->ev_table];
		struct rps_rowtab *rt = &t->rt;
		uint64_t n = RPS_MIN(rt->nrows > rt->cursor ? rt->nrows - rt->cursor : 0, budget);
		uint64_t ev;

		rt->now = rps_shard_tables_now(sh);
		ev = n ? rps_rowtab_evict_scan(rt, idle, t->saved_epoch, n, NULL) : 0;
		if (ev)
			RPS_DEBUG("shard %u table %u: %llu rows evicted at clock %llu (%llu rows "
				  "left)",
				  sh->p.idx, t->decl.table, (unsigned long long)ev,
				  (unsigned long long)sh->clock,
				  (unsigned long long)rps_rowtab_rows(rt));
		budget -= n;
		if (rt->cursor >= rt->nrows)
			ts->ev_table++;
	}
	if (ts->ev_table >= ts->n)
		ts->ev_active = 0;
}

void rps_shard_tables_idle(struct rps_shard *sh)
{
	struct rps_shard_tables *ts = sh->tables;

	if (!ts || !sh->p.evict_secs)
		return;
	/* a due pass, whole: nothing waits in the ring (slices of 4096 slots,
	 * so at most a few ms per million rows before the next pop) */
	do
		rps_shard_tables_evict_tick(sh);
	while (ts->ev_active);
}
