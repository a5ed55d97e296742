#!/usr/bin/env bash
# Train Fashion-MNIST for one epoch on 2 workers and 2 servers (BSP) and check
# the test accuracy: fmnist.sh BIN_DIR [TRANSPORT] [MIN_ACCURACY] [fmnist-train args...]
# FMNIST_CONSISTENCY: rdmaps-launch --consistency (default bsp; "default": no
# flag, the servers' default, as a new user runs it)
set -euo pipefail
BIN=$1
TRANSPORT=${2:-tcp}
MIN=${3:-0.82}
shift $(($# < 3 ? $# : 3))
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# fmnist-train's own recipe (docs/training.md): no training variable is set here
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
cons=(--consistency "${FMNIST_CONSISTENCY:-bsp}")
[ "${FMNIST_CONSISTENCY:-bsp}" = default ] && cons=()
"$BIN/rdmaps-launch" --servers 2 --workers 2 "${cons[@]}" --transport "$TRANSPORT" --timeout 600 "${hosts[@]}" -- \
	"$BIN/fmnist-train" --epochs 1 --no-progress --summary-json "$OUT/summary.json" "$@"
cat "$OUT/summary.json"
/usr/bin/python3 - "$OUT/summary.json" "$MIN" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
acc, need = s["test_accuracy"], float(sys.argv[2])
print(f"test accuracy {acc:.4f} (need >= {need})")
# the schedule's length comes from --epochs: one optimizer step per clock
# under BSP, one per push (W per clock) under ASP/SSP
per_clock = 1 if s["consistency"] in ("bsp", "local") else s["workers"]
want = s["epochs"] * s["steps_per_epoch"] * per_clock
print(f"schedule: {s['total_steps']} steps, warm-up {s['warmup_steps']} (want {want})")
ok = s["total_steps"] == want and 0 < s["warmup_steps"] < want
sys.exit(0 if ok and acc >= need and s["workers"] == 2 and s["epochs"] == 1 else 1)
PY
