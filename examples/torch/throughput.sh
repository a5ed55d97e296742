#!/usr/bin/env bash
# Throughput of examples/torch/fmnist.py through rdmaps against the same script
# in one process: 1 worker + 1 server over TRANSPORT vs fmnist.py --local.
# Runs alternate (local, distributed, local, ...) so that whatever else the
# machine does hits both alike; prints every run, the medians and the ratio.
#   throughput.sh [BIN_DIR] [PYTHONPATH] [ROUNDS] [EPOCHS] [TRANSPORT] [CONSISTENCY]
set -euo pipefail
BIN=${1:-build/bin}
export PYTHONPATH=${2:-build/python}
ROUNDS=${3:-5}
EPOCHS=${4:-2}
TRANSPORT=${5:-tcp}
CONSISTENCY=${6:-bsp}
SCRIPT=$(cd "$(dirname "$0")" && pwd)/fmnist.py
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export RDMAPS_LOG_LEVEL=warn
export RDMAPS_SECRET=${RDMAPS_SECRET:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}

sps() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_sec"])' "$1"; }
loc=() dist=()
for r in $(seq 1 "$ROUNDS"); do
	/usr/bin/python3 "$SCRIPT" --local --epochs "$EPOCHS" --no-progress --summary-json "$T/l.json" >/dev/null
	"$BIN/rdmaps-launch" --servers 1 --workers 1 --transport "$TRANSPORT" --consistency "$CONSISTENCY" -- \
		/usr/bin/python3 "$SCRIPT" --epochs "$EPOCHS" --no-progress --summary-json "$T/d.json" >/dev/null 2>&1
	loc+=("$(sps "$T/l.json")")
	dist+=("$(sps "$T/d.json")")
	echo "round $r: local ${loc[-1]} samples/s, 1 worker + 1 server ($TRANSPORT, $CONSISTENCY) ${dist[-1]} samples/s"
done
/usr/bin/python3 - "${loc[*]}" "${dist[*]}" <<'PY'
import statistics, sys
loc = [float(x) for x in sys.argv[1].split()]
dist = [float(x) for x in sys.argv[2].split()]
ml, md = statistics.median(loc), statistics.median(dist)
ratio = md / ml
print(f"median local {ml:.0f} samples/s, distributed {md:.0f} samples/s, ratio {ratio:.3f}")
print(f"{'PASS' if ratio >= 0.9 else 'FAIL'}: 1 worker + 1 server >= 0.9x --local ({ratio:.3f})")
PY
