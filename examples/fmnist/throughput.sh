#!/usr/bin/env bash
# Throughput of the Fashion-MNIST job through rdmaps against the same job in
# one process: 1 worker + 1 server over TCP loopback vs fmnist-train --local.
# Runs alternate (local, distributed, local, ...) so that whatever else the
# machine does hits both alike; prints every run, the medians and the ratio.
#   throughput.sh [BIN_DIR] [ROUNDS] [EPOCHS] [TRANSPORT] [CONSISTENCY]
set -euo pipefail
BIN=${1:-build/bin}
ROUNDS=${2:-5}
EPOCHS=${3:-2}
TRANSPORT=${4:-tcp}
CONSISTENCY=${5:-bsp}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export RDMAPS_LOG_LEVEL=warn RDMAPS_CONSISTENCY=$CONSISTENCY

sps() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_sec"])' "$1"; }
loc=() dist=()
for r in $(seq 1 "$ROUNDS"); do
	"$BIN/fmnist-train" --local --epochs "$EPOCHS" --no-progress --summary-json "$T/l.json" >/dev/null
	"$BIN/rdmaps-launch" --servers 1 --workers 1 --transport "$TRANSPORT" -- \
		"$BIN/fmnist-train" --epochs "$EPOCHS" --no-progress --summary-json "$T/d.json" >/dev/null 2>&1
	loc+=("$(sps "$T/l.json")")
	dist+=("$(sps "$T/d.json")")
	echo "round $r: local ${loc[-1]} samples/s, 1 worker + 1 server ($TRANSPORT, $CONSISTENCY) ${dist[-1]} samples/s"
done
python3 - "${loc[*]}" "${dist[*]}" <<'PY'
import statistics, sys
loc = [float(x) for x in sys.argv[1].split()]
dist = [float(x) for x in sys.argv[2].split()]
ml, md = statistics.median(loc), statistics.median(dist)
ratio = md / ml
print(f"median local {ml:.0f} samples/s, distributed {md:.0f} samples/s, ratio {ratio:.3f}")
print(f"{'PASS' if ratio >= 0.85 else 'FAIL'}: 1 worker + 1 server >= 0.85x --local ({ratio:.3f})")
PY
