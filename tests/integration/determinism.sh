#!/usr/bin/env bash
# BSP is reproducible bit for bit: two identical Fashion-MNIST runs (2 servers,
# 4 workers, sums in worker-rank order, RDMAPS_BSP_SUM=ordered) must report the
# same test accuracy, the same train loss to all 17 digits and the same
# fingerprint (FNV-1a) of the final parameters:
#   determinism.sh BIN_DIR [TRANSPORT] [EPOCHS] [TRAIN_LIMIT]
set -euo pipefail
BIN=$1
TRANSPORT=${2:-tcp}
EPOCHS=${3:-2}
LIMIT=${4:-20000}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

export RDMAPS_CONSISTENCY=bsp RDMAPS_BSP_SUM=ordered
export RDMAPS_OPTIMIZER=momentum RDMAPS_LR=0.1 RDMAPS_MOMENTUM=0.9
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
for run in 1 2; do
	"$BIN/rdmaps-launch" --servers 2 --workers 4 --transport "$TRANSPORT" --timeout 300 \
		"${hosts[@]}" -- "$BIN/fmnist-train" --epochs "$EPOCHS" --train-limit "$LIMIT" \
		--no-progress --summary-json "$OUT/run$run.json"
done
/usr/bin/python3 - "$OUT/run1.json" "$OUT/run2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ok = True
for k in ("test_accuracy", "train_loss_exact", "params_fnv1a"):
    print(f"{k}: {a[k]} {b[k]}")
    ok = ok and a[k] == b[k]
ok = ok and a["workers"] == 4 and a["consistency"] == "bsp"
print("identical" if ok else "DIFFERENT")
sys.exit(0 if ok else 1)
PY
