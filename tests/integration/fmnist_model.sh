#!/usr/bin/env bash
# fmnist-train --save-model / --init-model, with NumPy as the judge:
#   fmnist_model.sh BIN_DIR [TRANSPORT] [TRAIN_LIMIT]
#  --local: train, save; NumPy evaluates the file and must get the summary's
#           test accuracy (to 1e-4); --init-model of it with --epochs 0 saves
#           it again bit for bit;
#  2 servers, 2 workers, BSP: the same for the distributed job; and the
#           --local model loaded into the servers evaluates as it did locally
#           (same keys, same layout);
#  a bad file (a key of the wrong size) ends both kinds of job with the message
#           and exit status 1 before any training.
set -euo pipefail
BIN=$1
TRANSPORT=${2:-tcp}
LIMIT=${3:-12000}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

export RDMAPS_CONSISTENCY=bsp RDMAPS_OPTIMIZER=momentum RDMAPS_LR=0.1 RDMAPS_MOMENTUM=0.9
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
train() { # train ARGS...: fmnist-train on 2 servers and 2 workers
	"$BIN/rdmaps-launch" --servers 2 --workers 2 --transport "$TRANSPORT" --timeout 300 \
		"${hosts[@]}" -- "$BIN/fmnist-train" --no-progress "$@"
}
same() { # same A.npz B.npz: every array equal bit for bit
	"$PY" - "$1" "$2" <<'PY'
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.files == b.files, (a.files, b.files)
for k in a.files:
    assert a[k].dtype == b[k].dtype == np.float32 and a[k].shape == b[k].shape, k
    assert a[k].view(np.uint32).tolist() == b[k].view(np.uint32).tolist(), f"key {k} differs"
print(f"{sys.argv[2]} == {sys.argv[1]} bit for bit")
PY
}
acc() { "$PY" -c 'import json, sys; print("%.4f" % json.load(open(sys.argv[1]))["test_accuracy"])' "$1"; }
refused() { # refused LOG: the message, exit status 1, no epoch ran
	grep -qF "bad.npz: key 5 has 128x256 = 32769 floats, the job declared 32768" "$1" ||
		grep -qF "bad.npz: key 5 has 32769 floats, the job declared 32768" "$1" ||
		{ echo "FAIL: no message naming bad.npz and key 5"; return 1; }
	if grep -qE "^(\[worker[0-9]+\] )?epoch [0-9]+/|fmnist-train: done" "$1"; then
		echo "FAIL: training ran with a bad --init-model"
		return 1
	fi
	echo "bad.npz refused before training"
}

echo "== --local"
"$BIN/fmnist-train" --local --epochs 1 --train-limit "$LIMIT" --no-progress \
	--summary-json "$OUT/l1.json" --save-model "$OUT/l1.npz"
"$PY" "$HERE/fmnist_eval.py" "$OUT/l1.npz" "$OUT/l1.json"
"$BIN/fmnist-train" --local --epochs 0 --init-model "$OUT/l1.npz" --no-progress \
	--summary-json "$OUT/l2.json" --save-model "$OUT/l2.npz"
same "$OUT/l1.npz" "$OUT/l2.npz"
[ "$(acc "$OUT/l1.json")" = "$(acc "$OUT/l2.json")" ] || { echo "FAIL: accuracy after --init-model"; exit 1; }

# key 5 (W2, 32768 floats) one too long
"$PY" - "$OUT" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
m = np.load(f"{d}/l1.npz")
arrays = {k: m[k] for k in m.files}
arrays["5"] = np.zeros(32769, np.float32)
np.savez(f"{d}/bad.npz", **arrays)
PY
rc=0
"$BIN/fmnist-train" --local --epochs 1 --train-limit "$LIMIT" --init-model "$OUT/bad.npz" \
	--no-progress >"$OUT/bad-local.log" 2>&1 || rc=$?
cat "$OUT/bad-local.log"
[ "$rc" = 1 ] || { echo "FAIL: --local with a bad --init-model exited $rc, not 1"; exit 1; }
refused "$OUT/bad-local.log"

echo "== 2 servers, 2 workers, BSP"
train --epochs 1 --train-limit "$LIMIT" --summary-json "$OUT/d1.json" --save-model "$OUT/d1.npz"
"$PY" "$HERE/fmnist_eval.py" "$OUT/d1.npz" "$OUT/d1.json"
train --epochs 0 --init-model "$OUT/d1.npz" --summary-json "$OUT/d2.json" --save-model "$OUT/d2.npz"
same "$OUT/d1.npz" "$OUT/d2.npz"
[ "$(acc "$OUT/d1.json")" = "$(acc "$OUT/d2.json")" ] || { echo "FAIL: accuracy after --init-model"; exit 1; }
# the --local model in the servers: what --local evaluated
train --epochs 0 --init-model "$OUT/l1.npz" --summary-json "$OUT/d3.json" --save-model "$OUT/d3.npz"
same "$OUT/l1.npz" "$OUT/d3.npz"
[ "$(acc "$OUT/l1.json")" = "$(acc "$OUT/d3.json")" ] || { echo "FAIL: --local model in the servers"; exit 1; }

rc=0
train --epochs 1 --train-limit "$LIMIT" --init-model "$OUT/bad.npz" >"$OUT/bad-dist.log" 2>&1 || rc=$?
cat "$OUT/bad-dist.log"
[ "$rc" = 1 ] || { echo "FAIL: a job with a bad --init-model exited $rc, not 1"; exit 1; }
grep -q "worker0 exited with status 1" "$OUT/bad-dist.log" || { echo "FAIL: worker 0 did not exit 1"; exit 1; }
refused "$OUT/bad-dist.log"
echo "fmnist_model: PASS"
