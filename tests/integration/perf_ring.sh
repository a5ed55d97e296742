#!/usr/bin/env bash
# rdmaps-perf ring_vs_ps end to end, small: every round printed and one
# median line per size and worker count, with positive times.
set -euo pipefail
BIN=$1
out=$("$BIN/rdmaps-perf" ring_vs_ps --sizes 64K,1M --workers-list 2,3 --rounds 3)
echo "$out"
rounds=$(echo "$out" | grep -cE '^[0-9]+ +[0-9]+ +(ps|ring) +[0-9]+ ')
[ "$rounds" = 24 ] || { echo "FAIL: $rounds round lines, want 24"; exit 1; }
echo "$out" | awk '/^# medians/ {m = 1; next} m && /^[0-9]/ {n++; if (!($3 > 0 && $4 > 0)) bad = 1}
	END {exit !(n == 4 && !bad)}' || { echo "FAIL: medians"; exit 1; }
echo PASS
