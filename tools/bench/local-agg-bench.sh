#!/usr/bin/env bash
# Aggregation on the host (docs/local-aggregation.md): server traffic and time
# per step with it on and off, W workers and S servers on this host, BSP over
# TCP, ELEMS floats per step (3 keys). Rounds alternate on / off; every round
# is printed, then the medians.
#   tools/bench/local-agg-bench.sh BIN_DIR [ROUNDS=5] [WORKERS=4] [ELEMS=1048576] [STEPS=20] [SERVERS=2]
# The figures: the servers' rdmaps_bytes_total{dir="rx"} (/metrics) read by
# worker 0 before and after STEPS steps, divided by STEPS; and the wall time of
# those steps on worker 0.
set -euo pipefail
BIN=$1
ROUNDS=${2:-5}
W=${3:-4}
ELEMS=${4:-1048576}
STEPS=${5:-20}
S=${6:-2}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

export RDMAPS_CONSISTENCY=bsp RDMAPS_LOG_LEVEL=warn ITEST_ELEMS=$ELEMS ITEST_STEPS=$STEPS
for r in $(seq 1 "$ROUNDS"); do
	for mode in auto off; do
		ok=0
		for try in 1 2 3 4 5; do # a metrics port someone else holds: another one
			port=$((20000 + (RANDOM % 400) * 100))
			if RDMAPS_LOCAL_AGG=$mode RDMAPS_METRICS_PORT=$port \
				"$BIN/rdmaps-launch" --servers "$S" --workers "$W" --timeout 300 \
				-- "$BIN/itest-local" bench >"$OUT/run.log" 2>&1; then
				ok=1
				break
			fi
			grep -q "address already in use" "$OUT/run.log" || break
		done
		[ "$ok" = 1 ] || { cat "$OUT/run.log"; echo "round $r $mode failed" >&2; exit 1; }
		line=$(grep "servers received" "$OUT/run.log")
		echo "round $r: $line"
		b=$(sed -n 's/.*received \([0-9.]*\) bytes per step.*/\1/p' <<<"$line")
		ms=$(sed -n 's/.*, \([0-9.]*\) ms per step.*/\1/p' <<<"$line")
		echo "$b $ms" >>"$OUT/$mode"
	done
done
/usr/bin/python3 - "$OUT/auto" "$OUT/off" "$ELEMS" <<'PY'
import statistics, sys
def med(p):
    rows = [tuple(map(float, l.split())) for l in open(p)]
    return statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
on, off, elems = med(sys.argv[1]), med(sys.argv[2]), int(sys.argv[3])
print(f"median on : {on[0]:.0f} bytes/step ({on[0] / (4 * elems):.2f} x the gradient), {on[1]:.2f} ms/step")
print(f"median off: {off[0]:.0f} bytes/step ({off[0] / (4 * elems):.2f} x the gradient), {off[1]:.2f} ms/step")
print(f"server bytes received per step: off / on = {off[0] / on[0]:.2f}; time per step: off / on = {off[1] / on[1]:.2f}")
PY
