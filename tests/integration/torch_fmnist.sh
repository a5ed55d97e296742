#!/usr/bin/env bash
# The PyTorch job through rdmaps: examples/torch/fmnist.py for one epoch on 2
# workers and 2 servers (BSP) over TRANSPORT, and check the JSON summary: test
# accuracy >= MIN_ACCURACY, the schedule as long as the run, 2 workers, and a
# per-step profile (--profile) whose parts fit in their wholes.
#   torch_fmnist.sh BIN_DIR PYTHONPATH [TRANSPORT] [MIN_ACCURACY] [fmnist.py args...]
# PYTHONPATH: where `import rdmaps` finds the package and its built _core.
set -euo pipefail
BIN=$1
export PYTHONPATH=$2
TRANSPORT=${3:-tcp}
MIN=${4:-0.82}
shift $(($# < 4 ? $# : 4))
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$HERE/../../examples/torch/fmnist.py
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "SKIP: python3-torch is not installed"; exit 77; }
/usr/bin/python3 -c 'import rdmaps, rdmaps.torch' || {
	echo "FAIL: cannot import rdmaps from PYTHONPATH=$PYTHONPATH (configure with -DRPS_WITH_PYTHON=ON)"
	exit 1
}
# authentication: every process of the job shares one secret
export RDMAPS_SECRET=${RDMAPS_SECRET:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
# one compute thread per worker: two workers and two servers share the cores
export OMP_NUM_THREADS=1
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
"$BIN/rdmaps-launch" --servers 2 --workers 2 --consistency bsp --transport "$TRANSPORT" \
	--timeout 600 "${hosts[@]}" -- \
	/usr/bin/python3 "$SCRIPT" --epochs 1 --no-progress --profile --summary-json "$OUT/summary.json" "$@"
cat "$OUT/summary.json"
/usr/bin/python3 - "$OUT/summary.json" "$MIN" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
acc, need = s["test_accuracy"], float(sys.argv[2])
print(f"test accuracy {acc:.4f} (need >= {need})")
want = s["epochs"] * s["steps_per_epoch"]  # BSP: one optimizer step per clock
print(f"schedule: {s['total_steps']} steps, warm-up {s['warmup_steps']} (want {want})")
ok = (s["total_steps"] == want and 0 < s["warmup_steps"] < want and acc >= need
      and s["workers"] == 2 and s["servers"] == 2 and s["consistency"] == "bsp"
      and s["epochs"] == 1)
p = s.get("profile_ms", {})
print(f"ms per step: {p}")
parts = ("data", "forward", "backward", "step", "rest")
prof_ok = (all(k in p for k in parts + ("pull_wait", "push", "total"))
           and p.get("forward", 0) > 0 and p.get("backward", 0) > 0 and (p.get("push", 0) > 0 or s.get("sync") == "ring")
           and 0 <= p.get("pull_wait", -1) <= p.get("forward", 0)
           and p.get("push", 0) <= p.get("backward", 0)
           and sum(p.get(k, 0) for k in parts) <= 1.01 * p.get("total", 0))
if not prof_ok:
    print("profile: missing parts, or a part larger than its whole")
ok = ok and prof_ok
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
