#!/usr/bin/env bash
# fmnist-train --sync ring: the workers all-reduce the gradients
# (rps_worker_allreduce) and each applies the optimizer itself.
#   fmnist_ring.sh BIN_DIR [MIN_ACCURACY] [WORKERS] [fmnist-train args...]
# One epoch; the test accuracy must reach MIN_ACCURACY and the summary must
# say ring with one optimizer step per step.
set -euo pipefail
BIN=$1
MIN=${2:-0.82}
W=${3:-2}
shift $(($# < 3 ? $# : 3))
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
"$BIN/rdmaps-launch" --servers 1 --workers "$W" --timeout 300 -- \
	"$BIN/fmnist-train" --sync ring --epochs 1 --no-progress --summary-json "$OUT/summary.json" "$@"
cat "$OUT/summary.json"
/usr/bin/python3 - "$OUT/summary.json" "$MIN" "$W" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
acc, need, w = s["test_accuracy"], float(sys.argv[2]), int(sys.argv[3])
print(f"test accuracy {acc:.4f} (need >= {need}), consistency {s['consistency']}")
want = s["epochs"] * s["steps_per_epoch"]  # one optimizer step per step, as BSP
ok = s["consistency"] == "ring" and s["total_steps"] == want and s["workers"] == w
sys.exit(0 if ok and acc >= need else 1)
PY
