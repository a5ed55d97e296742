#!/usr/bin/env bash
# table-bench.sh BIN_DIR [tcp|rdma] [rdmaps-bench-table options...]
#
# Sparse tables' figures (docs/benchmarks.md "Sparse tables"): for 1, 2 and 4
# workers (TABLE_BENCH_WORKERS) and TABLE_BENCH_SERVERS servers (default 1), a
# job of rdmaps-bench-table: create 10^7 rows of 64 floats (servers' RSS:
# memory per row), rounds of pull_rows and push_rows of batches of 4,096 ids
# drawn Zipf(1.1) (every round and the medians), servers' CPU during the pulls.
# Ends with the medians of every job side by side.
# TABLE_BENCH_EVICT="0 3600" runs every job once per value of
# RDMAPS_TABLE_EVICT_SECONDS (0: eviction off; on, nothing is idle that long,
# so the RSS shows what eviction's per-row words cost).
#   host, TCP:   tools/bench/table-bench.sh build-h/bin tcp
#   RDMA:        tools/softroce/rxe-run -- tools/bench/table-bench.sh build-h/bin rdma --rows 1000000
#                (the guest has 2 GiB: 10^7 rows do not fit there)
set -euo pipefail
BIN=${1:?usage: table-bench.sh BIN_DIR [tcp|rdma] [rdmaps-bench-table options]}
TRANSPORT=${2:-tcp}
shift $(($# < 2 ? $# : 2))
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	if [ -z "${RDMAPS_RXE_IP0:-}" ]; then
		echo "SKIP: rdma needs SoftRoCE devices: run through tools/softroce/rxe-run"
		exit 77
	fi
	hosts=(--server-host "$RDMAPS_RXE_IP0" --worker-host "${RDMAPS_RXE_IP1:-$RDMAPS_RXE_IP0}")
fi
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "table-bench: $(date -u '+%F %T UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ev in ${TABLE_BENCH_EVICT:-0}; do
	for w in ${TABLE_BENCH_WORKERS:-1 2 4}; do
		echo "== $w worker(s), ${TABLE_BENCH_SERVERS:-1} server(s), $TRANSPORT, RDMAPS_TABLE_EVICT_SECONDS=$ev"
		RDMAPS_TABLE_EVICT_SECONDS=$ev "$BIN/rdmaps-launch" --servers "${TABLE_BENCH_SERVERS:-1}" \
			--workers "$w" --transport "$TRANSPORT" \
			--timeout "${TABLE_BENCH_TIMEOUT:-900}" "${hosts[@]}" -- \
			"$BIN/rdmaps-bench-table" --out "$OUT" "$@" | tee "$OUT/w$w.e$ev.log"
	done
done
echo "== medians (rows/s, all workers); load average now $(cut -d' ' -f1-3 /proc/loadavg)"
for ev in ${TABLE_BENCH_EVICT:-0}; do
	for w in ${TABLE_BENCH_WORKERS:-1 2 4}; do
		grep -hE '^(pull|push) +median|^create|^draws|servers. CPU' "$OUT/w$w.e$ev.log" |
			sed "s/^/workers=$w evict_seconds=$ev: /"
	done
done
