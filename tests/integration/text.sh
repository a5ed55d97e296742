#!/usr/bin/env bash
# examples/text (text-train) end to end: extract.py makes the data from this
# machine's package lists, then the same short run (a fixed subset, 2 epochs)
# --local and on 2 servers + 2 workers (BSP, sparse table + dense key). Checks:
# both clearly above the majority-class baseline, and the distributed test
# accuracy within TOL of --local's.
#   text.sh BIN_DIR EXTRACT_PY [TRANSPORT] [TOL]
set -euo pipefail
BIN=$1
EXTRACT=$2
TRANSPORT=${3:-tcp}
TOL=${4:-0.005}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}

if ! command -v apt-cache >/dev/null; then
	echo "SKIP: no apt-cache on this machine (extract.py reads apt-cache dumpavail)"
	exit 77
fi
/usr/bin/python3 "$EXTRACT" "$OUT/data"
# missing data: a clear message that names extract.py
if "$BIN/text-train" --local --data "$OUT/none" --epochs 1 2>"$OUT/err.txt"; then
	echo "FAIL: text-train ran without data"; exit 1
fi
grep -q 'extract.py' "$OUT/err.txt" || { cat "$OUT/err.txt"; echo "FAIL: no hint how to make the data"; exit 1; }

args=(--data "$OUT/data" --train-limit 8000 --epochs 2 --eval-every 100 --batch 256)
"$BIN/text-train" --local "${args[@]}" --summary-json "$OUT/local.json"
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
set +e
"$BIN/rdmaps-launch" --servers 2 --workers 2 --consistency bsp --transport "$TRANSPORT" \
	--timeout 300 "${hosts[@]}" -- "$BIN/text-train" "${args[@]}" \
	--summary-json "$OUT/dist.json" 2>&1 | tee "$OUT/dist.log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 0 ] || { echo "FAIL: distributed run exited $rc"; exit 1; }
/usr/bin/python3 - "$OUT/local.json" "$OUT/dist.json" "$TOL" <<'PY'
import json, sys
l, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
tol = float(sys.argv[3])
base = l["majority_baseline"]
print(f"--local test accuracy {l['test_accuracy']:.4f}, 2x2 bsp {d['test_accuracy']:.4f} "
      f"(|diff| {abs(l['test_accuracy'] - d['test_accuracy']):.4f}, tolerance {tol}), "
      f"majority baseline {base:.4f}")
ok = True
for name, s in (("local", l), ("distributed", d)):
    if not s["test_accuracy"] >= base + 0.3:
        print(f"FAIL: {name} accuracy {s['test_accuracy']:.4f} not clearly above the baseline")
        ok = False
if d["workers"] != 2 or d["servers"] != 2 or d["consistency"] != "bsp":
    print("FAIL: not a 2 x 2 bsp run"); ok = False
if abs(l["test_accuracy"] - d["test_accuracy"]) > tol:
    print("FAIL: distributed differs from --local by more than the tolerance"); ok = False
sys.exit(0 if ok else 1)
PY
