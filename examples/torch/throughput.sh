#!/usr/bin/env bash
# Throughput of examples/torch/fmnist.py through rdmaps against the same script
# in one process: 1 worker + 1 server over TRANSPORT vs fmnist.py --local.
# Runs alternate (local, distributed, local, ...) so that whatever else the
# machine does hits both alike; prints every run, the medians and the ratio,
# and where a step's time goes (fmnist.py --profile: ms per step in forward,
# backward, step, and for the job the parts of them spent waiting for pulls
# and pushing), every round and the medians.
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
# one line of ms per step: "forward 1.234 backward ..."
prof() {
	/usr/bin/python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))["profile_ms"]
print(" ".join(f"{k} {v:.3f}" for k, v in p.items()))' "$1"
}
loc=() dist=()
for r in $(seq 1 "$ROUNDS"); do
	/usr/bin/python3 "$SCRIPT" --local --epochs "$EPOCHS" --no-progress --profile \
		--summary-json "$T/l.json" >/dev/null
	"$BIN/rdmaps-launch" --servers 1 --workers 1 --transport "$TRANSPORT" --consistency "$CONSISTENCY" -- \
		/usr/bin/python3 "$SCRIPT" --epochs "$EPOCHS" --no-progress --profile \
		--summary-json "$T/d.json" >/dev/null 2>&1
	loc+=("$(sps "$T/l.json")")
	dist+=("$(sps "$T/d.json")")
	prof "$T/l.json" >>"$T/l.prof"
	prof "$T/d.json" >>"$T/d.prof"
	echo "round $r: local ${loc[-1]} samples/s, 1 worker + 1 server ($TRANSPORT, $CONSISTENCY) ${dist[-1]} samples/s"
	echo "  ms/step local: $(tail -n 1 "$T/l.prof")"
	echo "  ms/step job:   $(tail -n 1 "$T/d.prof")"
done
/usr/bin/python3 - "${loc[*]}" "${dist[*]}" "$T/l.prof" "$T/d.prof" <<'PY'
import statistics, sys
loc = [float(x) for x in sys.argv[1].split()]
dist = [float(x) for x in sys.argv[2].split()]

def medians(path):
    rows = [line.split() for line in open(path) if line.strip()]
    keys = rows[0][0::2]
    return " ".join(f"{k} {statistics.median(float(r[2 * i + 1]) for r in rows):.3f}"
                    for i, k in enumerate(keys))

print(f"median ms/step local: {medians(sys.argv[3])}")
print(f"median ms/step job:   {medians(sys.argv[4])}")
print("  (local: step = the optimizer; job: step = model.step(), forward includes")
print("   pull_wait, backward includes push)")
ml, md = statistics.median(loc), statistics.median(dist)
ratio = md / ml
print(f"median local {ml:.0f} samples/s, distributed {md:.0f} samples/s, ratio {ratio:.3f}")
print(f"{'PASS' if ratio >= 0.9 else 'FAIL'}: 1 worker + 1 server >= 0.9x --local ({ratio:.3f})")
PY
