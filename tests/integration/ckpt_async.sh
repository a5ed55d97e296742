#!/usr/bin/env bash
# Checkpoints written off the hot path (server/ckpt_async.c) are consistent
# while pushes flow: a BSP job of integer-valued pushes (ctlreq-worker: SGD lr
# 1, zeros, every value after clocks < C known exactly) on 2 servers x 2
# shards, a checkpoint at every clock (RDMAPS_CHECKPOINT_EVERY=1: each file is
# written by the writer thread while the workers push the next clock and the
# update thread applies it), rank 0 asking for one at clock 7 on top
# (rps_worker_checkpoint). Then:
#   - every file left (the newest 2 per shard) is checked value by value
#     against the formula at its clock (ctlreq-worker verify);
#   - the files of clock C = CLOCKS - 1 (written while clock C's pushes were
#     applied) are restored by fresh servers (rdmaps-server --restore) of a
#     fresh scheduler, exported (rdmaps-ctl export) and every value compared
#     exactly with the formula at C;
#   - the servers' logs show pushes applied while files were written.
#
#   ckpt_async.sh BIN_DIR
set -euo pipefail
BIN=$1
OUT=$(mktemp -d)
PY=/usr/bin/python3
pids=()
cleanup() {
	touch "$OUT/job/release" "$OUT/restore/release" 2>/dev/null || true
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $OUT"; else rm -rf "$OUT"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	tail -n 20 "$OUT"/*/*.log 2>/dev/null || true
	exit 1
}

export RDMAPS_CONSISTENCY=bsp RDMAPS_OPTIMIZER=sgd RDMAPS_LR=1 RDMAPS_INIT=zeros
export RDMAPS_SHARDS=2 RDMAPS_SLICE_BYTES=256K RDMAPS_SECRET=ckpt-async-secret
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_TIMEOUT_MS=20000
export RDMAPS_HEARTBEAT_MS=100 RDMAPS_NUM_SERVERS=2 RDMAPS_NUM_WORKERS=2 RDMAPS_TRANSPORT=tcp
export RDMAPS_CHECKPOINT_DIR=$OUT/ckpt RDMAPS_CHECKPOINT_EVERY=1
CLOCKS=24
C=$((CLOCKS - 1))
mkdir -p "$RDMAPS_CHECKPOINT_DIR" "$OUT/job" "$OUT/restore" "$OUT/rdir"

start_sched() { # DIR
	for try in $(seq 1 20); do
		export RDMAPS_SCHEDULER=127.0.0.1:$((10000 + (RANDOM % 200) * 100 + 57))
		RDMAPS_LOG_LEVEL=info "$BIN/rdmaps-sched" > "$1/sched.log" 2>&1 &
		sched=$!
		sleep 0.3
		kill -0 "$sched" 2>/dev/null && break
	done
	pids+=("$sched")
}
wait_file() { # FILE: up to 60 s
	for i in $(seq 1 1200); do
		[ -e "$1" ] && return 0
		sleep 0.05
	done
	fail "no $1 after 60 s"
}

# ---- 1. the job: checkpoints at every clock while it pushes -------------------------
start_sched "$OUT/job"
spids=()
for r in 0 1; do
	RDMAPS_LOG_LEVEL=debug RDMAPS_RANK=$r RDMAPS_HOST=127.0.0.1 "$BIN/rdmaps-server" \
		> "$OUT/job/server$r.log" 2>&1 &
	spids+=($!)
	pids+=($!)
done
wpids=()
for r in 0 1; do
	ITEST_CKPT_AT=7 RDMAPS_RANK=$r RDMAPS_HOST=127.0.0.1 "$BIN/ctlreq-worker" run "$OUT/job" \
		$CLOCKS > "$OUT/job/worker$r.log" 2>&1 &
	wpids+=($!)
	pids+=($!)
done
wait_file "$OUT/job/trained"
grep -qx "rc 0 clock 7" "$OUT/job/worker-ckpt" || fail "worker checkpoint: $(cat "$OUT/job/worker-ckpt")"
touch "$OUT/job/release"
for p in "${wpids[@]}"; do
	wait "$p" || fail "a worker failed"
done
for p in "${spids[@]}"; do # the servers leave when the job ends (waiting for their writers)
	wait "$p" || fail "a server exited with $?"
done
wait "$sched" || true

ls "$RDMAPS_CHECKPOINT_DIR"
# every file left is exact at its clock; no temp file is left behind
! ls "$RDMAPS_CHECKPOINT_DIR" | grep -q '\.tmp$' || fail "temp files left"
"$BIN/ctlreq-worker" verify 2 2 "$RDMAPS_CHECKPOINT_DIR"/*.ckpt || fail "a checkpoint file is wrong"
for s in 0 1; do
	for h in 0 1; do
		for c in $C $CLOCKS; do
			[ -s "$RDMAPS_CHECKPOINT_DIR/server$s-shard$h-clock$c.ckpt" ] ||
				fail "no checkpoint of server $s shard $h at clock $c"
		done
	done
done
# written by the writer threads, pushes applied meanwhile
nw=$(grep -c 'taken in .* by the update thread, written in .* by the writer' "$OUT"/job/server?.log || true)
nw=$(echo "$nw" | awk -F: '{s += $NF} END {print s + 0}')
pushes=$(sed -n 's/.*by the writer, \([0-9]*\) pushes applied meanwhile.*/\1/p' "$OUT"/job/server?.log |
	awk '{s += $1} END {print s + 0}')
echo "$nw checkpoint files written by the writer threads, $pushes pushes applied while they were written"
[ "$nw" -ge $((4 * CLOCKS)) ] || fail "want >= $((4 * CLOCKS)) files written by the writer, saw $nw"
[ "$pushes" -gt 0 ] || fail "no push was applied while a checkpoint was written"

# ---- 2. restore clock C into fresh servers, export, compare exactly ----------------
cp "$RDMAPS_CHECKPOINT_DIR"/server?-shard?-clock$C.ckpt "$OUT/rdir/"
unset RDMAPS_CHECKPOINT_DIR RDMAPS_CHECKPOINT_EVERY
start_sched "$OUT/restore"
rspids=()
for r in 0 1; do
	RDMAPS_RANK=$r RDMAPS_HOST=127.0.0.1 "$BIN/rdmaps-server" --restore "$OUT/rdir" \
		> "$OUT/restore/server$r.log" 2>&1 &
	rspids+=($!)
	pids+=($!)
done
for r in 0 1; do # workers that only join: the scheduler completes the cluster
	RDMAPS_RANK=$r RDMAPS_HOST=127.0.0.1 "$BIN/ctlreq-worker" idle "$OUT/restore" \
		> "$OUT/restore/worker$r.log" 2>&1 &
	pids+=($!)
done
wait_file "$OUT/restore/joined0"
wait_file "$OUT/restore/joined1"
for i in $(seq 1 600); do
	[ "$(cat "$OUT"/restore/server?.log | grep -c "restored from $OUT/rdir: 2 shards at clock $C ")" = 2 ] && break
	sleep 0.05
done
[ "$(cat "$OUT"/restore/server?.log | grep -c "restored from $OUT/rdir: 2 shards at clock $C ")" = 2 ] ||
	fail "the servers did not both restore clock $C"
"$BIN/rdmaps-ctl" export "$OUT/restored.npz" > "$OUT/export.out" 2> "$OUT/export.err" || {
	cat "$OUT/export.out" "$OUT/export.err"
	fail "rdmaps-ctl export of the restored servers"
}
cat "$OUT/export.out"
$PY - "$OUT/restored.npz" "$C" <<'PY' || fail "restored values"
import sys
import numpy as np
path, T = sys.argv[1], int(sys.argv[2])
lens = {1001: 1, 1002: 100, 1003: 5000, 1004: 300000}
z = np.load(path)
assert sorted(z.files) == sorted(str(k) for k in lens), z.files
for k, n in lens.items():
    a = z[str(k)]
    assert a.dtype == np.float32 and a.shape == (n,), (k, a.dtype, a.shape)
    want = -sum((w + 1) + 10 * c + (k - 1000) for c in range(T) for w in range(2))
    bad = np.nonzero(a != np.float32(want))[0]
    assert bad.size == 0, (k, bad.size, a[bad[:3]], want)
print(f"{path}: every value of the 4 keys exact at clock {T}")
PY
touch "$OUT/restore/release"
echo "PASS"
