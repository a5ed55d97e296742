#!/usr/bin/env bash
# rps_worker_save_model / rps_worker_load_model on a real local cluster:
#   model.sh BIN_DIR [TRANSPORT] [CONSISTENCY]
# 1 rdmaps-sched, 2 rdmaps-server (2 shards each), 2 itest-model (BSP, or
# CONSISTENCY asp; momentum): NumPy writes the model b.npz and files that
# must be refused; itest-model saves, tries the refused files (no value may change), loads
# b.npz and saves it again as c.npz. Then: every refused file's message names
# the file, the key and what is wrong, and c.npz equals b.npz bit for bit.
# TRANSPORT rdma: servers on rxe0 (RDMAPS_RXE_IP0), workers on rxe1 — run it
# inside tools/softroce/rxe-run.
set -euo pipefail
BIN=$1
TRANSPORT=${2:-tcp}
CONSISTENCY=${3:-bsp}
PY=/usr/bin/python3
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

export RDMAPS_SHARDS=2
export RDMAPS_SLICE_BYTES=16K # key 1000 (20000 floats) in 5 slices over both servers
export RDMAPS_MAX_MSG=8K      # and each slice in several frames
export RDMAPS_SECRET=itest-secret
export RDMAPS_CONSISTENCY=$CONSISTENCY
export RDMAPS_OPTIMIZER=momentum RDMAPS_MOMENTUM=0.5 RDMAPS_LR=0.5
export RDMAPS_TIMEOUT_MS=30000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}

# keys 3 (5000), 10 (7), 11 (1), 1000 (20000): key k element i = k / 2 + i / 4
"$PY" - "$DIR" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
lens = {3: 5000, 10: 7, 11: 1, 1000: 20000}
good = {str(k): (np.float32(k * 0.5) + np.arange(n, dtype=np.float32) * np.float32(0.25))
        for k, n in lens.items()}
good["1000"] = good["1000"].reshape(100, 200)  # any shape of the right size
np.savez_compressed(f"{d}/b.npz", **good)
def save(name, **arrays):
    np.savez(f"{d}/{name}", **arrays)
save("bad-f64.npz", **{**good, "10": good["10"].astype(np.float64)})
save("bad-f64only.npz", **{k: v.astype(np.float64) for k, v in good.items()})
save("bad-missing.npz", **{k: v for k, v in good.items() if k != "11"})
save("bad-size.npz", **{**good, "3": np.zeros(5001, np.float32)})
save("bad-shape.npz", **{**good, "1000": np.zeros((100, 201), np.float32)})
save("bad-extra.npz", **{**good, "12": np.zeros(3, np.float32)})
save("bad-name.npz", **{**good, "W1": np.zeros(3, np.float32)})
raw = open(f"{d}/b.npz", "rb").read()
open(f"{d}/bad-trunc.npz", "wb").write(raw[: len(raw) // 2])
open(f"{d}/bad-text.npz", "w").write("these are not the weights you are looking for\n")
PY

hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
rc=0
"$BIN/rdmaps-launch" --servers 2 --workers 2 --transport "$TRANSPORT" --timeout 240 \
	"${hosts[@]}" -- "$BIN/itest-model" "$DIR" >"$DIR/out.log" 2>&1 || rc=$?
cat "$DIR/out.log"
if [ "$rc" != 0 ]; then
	echo "FAIL: rdmaps-launch exited with $rc"
	exit 1
fi

# What a user reads: the file, the key, what is wrong.
fail=0
while IFS= read -r want; do
	if ! grep -qF -- "$DIR/$want" "$DIR/out.log"; then
		echo "FAIL: no message '$DIR/$want'"
		fail=1
	fi
done <<'EOF'
bad-f64.npz: array '10': not float32 little-endian ('<f4')
bad-f64only.npz: array '
bad-missing.npz: key 11 missing
bad-size.npz: key 3 has 5001 floats, the job declared 5000
bad-shape.npz: key 1000 has 100x201 = 20100 floats, the job declared 20000
bad-extra.npz: array '12' is key 12, which is not one of the 4 keys given
bad-name.npz: array 'W1' is not a key
bad-text.npz: not an .npz (zip) archive
bad-trunc.npz: 
bad-nofile.npz: No such file or directory
EOF

# The round trip: c.npz (loaded from b.npz, saved again) is b.npz, bit for
# bit; a.npz was written too.
"$PY" - "$DIR" <<'PY' || fail=1
import sys
import numpy as np
d = sys.argv[1]
b, c, a = np.load(f"{d}/b.npz"), np.load(f"{d}/c.npz"), np.load(f"{d}/a.npz")
assert sorted(c.files) == sorted(b.files) == sorted(a.files), (b.files, c.files, a.files)
for k in b.files:
    x, y = b[k].reshape(-1), c[k]
    assert y.dtype == np.float32 and y.ndim == 1, (k, y.dtype, y.shape)
    assert x.view(np.uint32).tolist() == y.view(np.uint32).tolist(), f"key {k} differs"
print(f"c.npz == b.npz bit for bit ({sum(b[k].size for k in b.files)} floats)")
PY
[ "$fail" = 0 ] && echo "model: PASS" || { echo "model: FAIL"; exit 1; }
