#!/usr/bin/env bash
# rdmaps-ctl checkpoint / export and rps_worker_checkpoint on a real local
# job (rdmaps-sched, 2 rdmaps-server of 2 shards, 2 ctlreq-worker; BSP, SGD
# lr 1, so every value is known exactly), then the refusals, then
# fmnist-train --eval-every 1 --checkpoint-after-eval.
#
#   ctlreq.sh BIN_DIR
set -euo pipefail
BIN=$1
OUT=$(mktemp -d)
PY=/usr/bin/python3
cleanup() {
	touch "$OUT/job1/release" "$OUT/job2/release" "$OUT/job3/release" 2>/dev/null || true
	for p in $(jobs -p); do kill -9 "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $OUT"; else rm -rf "$OUT"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	tail -n 30 "$OUT"/*/*.log 2>/dev/null || true
	exit 1
}

export RDMAPS_CONSISTENCY=bsp RDMAPS_OPTIMIZER=sgd RDMAPS_LR=1 RDMAPS_INIT=zeros
export RDMAPS_SHARDS=2 RDMAPS_SLICE_BYTES=256K RDMAPS_SECRET=ctlreq-secret
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_TIMEOUT_MS=20000
export RDMAPS_HEARTBEAT_MS=100 RDMAPS_NUM_SERVERS=2 RDMAPS_NUM_WORKERS=2 RDMAPS_TRANSPORT=tcp
CLOCKS=40

# start_job DIR CLOCKS: scheduler, 2 servers, 2 workers in the background
start_job() {
	local dir=$1 clocks=$2
	mkdir -p "$dir"
	for try in $(seq 1 20); do
		export RDMAPS_SCHEDULER=127.0.0.1:$((10000 + (RANDOM % 200) * 100 + 53))
		RDMAPS_LOG_LEVEL=info "$BIN/rdmaps-sched" > "$dir/sched.log" 2>&1 &
		sched=$!
		sleep 0.3
		kill -0 "$sched" 2>/dev/null && break
	done
	spids=()
	for r in 0 1; do
		RDMAPS_RANK=$r RDMAPS_HOST=127.0.0.1 "$BIN/rdmaps-server" > "$dir/server$r.log" 2>&1 &
		spids+=($!)
	done
	wpids=()
	for r in 0 1; do
		RDMAPS_RANK=$r RDMAPS_HOST=127.0.0.1 "$BIN/ctlreq-worker" run "$dir" "$clocks" \
			> "$dir/worker$r.log" 2>&1 &
		wpids+=($!)
	done
}
wait_file() { # FILE: up to 60 s
	for i in $(seq 1 1200); do
		[ -e "$1" ] && return 0
		sleep 0.05
	done
	fail "no $1 after 60 s"
}
end_job() { # DIR: release the workers, wait for everything to exit
	touch "$1/release"
	for p in "${wpids[@]}"; do
		wait "$p" || fail "a worker of $1 failed"
	done
	wait "$sched" || true
}
CTL=("$BIN/rdmaps-ctl")
errno_of() { $PY -c 'import errno, sys; print(getattr(errno, sys.argv[1]))' "$1"; }

# ---- job 1: checkpoint directory set -------------------------------------------
export RDMAPS_CHECKPOINT_DIR=$OUT/ckpt
mkdir -p "$RDMAPS_CHECKPOINT_DIR"
ITEST_SLEEP_MS=50 ITEST_CKPT_AT=3 start_job "$OUT/job1" $CLOCKS
wait_file "$OUT/job1/started"

# rdmaps-ctl checkpoint while it trains: a valid file per shard, values right
"${CTL[@]}" checkpoint > "$OUT/ckpt.out" 2> "$OUT/ckpt.err" || {
	cat "$OUT/ckpt.out" "$OUT/ckpt.err"
	fail "rdmaps-ctl checkpoint exited $?"
}
cat "$OUT/ckpt.out"
[ "$(wc -l < "$OUT/ckpt.out")" = 4 ] || fail "want 4 lines (2 servers x 2 shards)"
for rs in "0 0" "0 1" "1 0" "1 1"; do
	set -- $rs
	grep -Eq "^server $1 shard $2 clock [0-9]+ $RDMAPS_CHECKPOINT_DIR/server$1-shard$2-clock[0-9]+\.ckpt$" \
		"$OUT/ckpt.out" || fail "no line for server $1 shard $2"
done
"$BIN/ctlreq-worker" verify 2 2 $(awk '{print $7}' "$OUT/ckpt.out") || fail "checkpoint files"

# rdmaps-ctl export while it trains: one BSP clock T, every value after clocks < T
"${CTL[@]}" export "$OUT/mid.npz" > "$OUT/mid.out" || fail "rdmaps-ctl export (running) exited $?"
cat "$OUT/mid.out"
T=$(sed -n 's/^exported clock \([0-9]*\): 4 keys, 305101 elements to .*/\1/p' "$OUT/mid.out")
[ -n "$T" ] || fail "export output: $(cat "$OUT/mid.out")"

check_npz() { # FILE CLOCK [FINAL.f32]
	$PY - "$@" <<'PY'
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
    assert np.all(a == np.float32(want)), (k, a[:3], want)
if len(sys.argv) > 3:
    final = np.fromfile(sys.argv[3], dtype=np.float32)
    got = np.concatenate([z[str(k)] for k in sorted(lens)])
    assert got.view(np.uint32).tolist() == final.view(np.uint32).tolist(), "not bit-for-bit"
print(f"{path}: 4 keys at clock {T}: values right")
PY
}
check_npz "$OUT/mid.npz" "$T" || fail "mid-training export"

# the job's own checkpoint at clock 3 (rps_worker_checkpoint)
wait_file "$OUT/job1/trained"
grep -qx "rc 0 clock 3" "$OUT/job1/worker-ckpt" || fail "worker checkpoint: $(cat "$OUT/job1/worker-ckpt")"
"$BIN/ctlreq-worker" verify 2 2 "$RDMAPS_CHECKPOINT_DIR"/server{0,1}-shard{0,1}-clock3.ckpt ||
	fail "the worker's checkpoint of clock 3"

# after training (servers still up): bit-for-bit what the worker pulled
"${CTL[@]}" export "$OUT/final.npz" > "$OUT/final.out" || fail "rdmaps-ctl export (trained)"
cat "$OUT/final.out"
grep -q "^exported clock $CLOCKS: 4 keys, 305101 elements to $OUT/final.npz" "$OUT/final.out" ||
	fail "final export output"
check_npz "$OUT/final.npz" $CLOCKS "$OUT/job1/final.f32" || fail "final export"

# refusals: wrong secret, a directory that does not exist (nothing written)
if "${CTL[@]}" --secret wrong checkpoint > /dev/null 2> "$OUT/secret.err"; then
	fail "a wrong secret was accepted"
fi
grep -q "wrong secret" "$OUT/secret.err" || fail "wrong secret: $(cat "$OUT/secret.err")"
if "${CTL[@]}" export "$OUT/nodir/x.npz" > /dev/null 2> "$OUT/nodir.err"; then
	fail "export into a missing directory succeeded"
fi
grep -q "does not exist" "$OUT/nodir.err" || fail "missing directory: $(cat "$OUT/nodir.err")"
[ ! -e "$OUT/nodir" ] || fail "the missing directory appeared"

# a target clock nobody reaches: the scheduler gives up after the request's
# timeout, naming the servers
touch "$OUT/job1/far-timeout"
wait_file "$OUT/job1/far-timeout.rc"
grep -qx "rc -$(errno_of ETIMEDOUT)" "$OUT/job1/far-timeout.rc" || fail "far target: $(cat "$OUT/job1/far-timeout.rc")"
grep -q "did not answer within 1500 ms" "$OUT/job1/worker0.log" || fail "no timeout message"
# ... and a server that dies meanwhile is named
touch "$OUT/job1/far-death"
for i in $(seq 1 1200); do
	[ "$(grep -c 'CHECKPOINT requested by worker' "$OUT/job1/sched.log")" -ge 3 ] && break
	sleep 0.05
done
kill -9 "${spids[1]}"
for i in $(seq 1 200); do # at once, not after the request's 30 s
	[ -e "$OUT/job1/far-death.rc" ] && break
	sleep 0.05
done
[ -e "$OUT/job1/far-death.rc" ] || fail "the death of server 1 was not reported within 10 s"
grep -qx "rc -$(errno_of EHOSTDOWN)" "$OUT/job1/far-death.rc" || fail "server death: $(cat "$OUT/job1/far-death.rc")"
grep -q "server 1 (127.0.0.1:[0-9]*, pid ${spids[1]}) went away before it answered" \
	"$OUT/job1/worker0.log" || fail "no message naming the dead server"
SCHED1=$RDMAPS_SCHEDULER
end_job "$OUT/job1"
echo "job 1: checkpoint and export right"

# no scheduler any more
if "${CTL[@]}" --scheduler "$SCHED1" --timeout-ms 1000 checkpoint > /dev/null 2> "$OUT/nosched.err"; then
	fail "checkpoint without a scheduler succeeded"
fi
grep -q "cannot reach the scheduler" "$OUT/nosched.err" || fail "no scheduler: $(cat "$OUT/nosched.err")"

# ---- job 2: no checkpoint directory -----------------------------------------
unset RDMAPS_CHECKPOINT_DIR
ITEST_CKPT_AT=2 start_job "$OUT/job2" 4
wait_file "$OUT/job2/trained"
grep -q "^rc -[0-9]* clock 2$" "$OUT/job2/worker-ckpt" ||
	fail "worker checkpoint without a directory: $(cat "$OUT/job2/worker-ckpt")"
if "${CTL[@]}" checkpoint > "$OUT/nodir-ckpt.out" 2> "$OUT/nodir-ckpt.err"; then
	fail "checkpoint without a checkpoint directory succeeded"
fi
cat "$OUT/nodir-ckpt.err"
grep -q "no checkpoint directory" "$OUT/nodir-ckpt.err" || fail "no checkpoint directory message"
grep -q "RDMAPS_CHECKPOINT_DIR" "$OUT/nodir-ckpt.err" || fail "no hint what to do"
end_job "$OUT/job2"
echo "job 2: refused without a checkpoint directory"

# ---- job 3: ASP: export says it has no common clock; after training exact --------
RDMAPS_CONSISTENCY=asp ITEST_ASP=1 start_job "$OUT/job3" 6
wait_file "$OUT/job3/trained"
RDMAPS_CONSISTENCY=asp "${CTL[@]}" export "$OUT/asp.npz" > "$OUT/asp.out" || fail "export (asp)"
cat "$OUT/asp.out"
grep -q "^exported clocks 6\.\.6 (asp/ssp: each shard as it was when it took the request): 4 keys, 305101 elements" \
	"$OUT/asp.out" || fail "asp export output"
check_npz "$OUT/asp.npz" 6 "$OUT/job3/final.f32" || fail "asp export"
end_job "$OUT/job3"

# ---- fmnist-train --eval-every 1 --checkpoint-after-eval --------------------------
{
	export RDMAPS_CHECKPOINT_DIR=$OUT/fm-ckpt RDMAPS_OPTIMIZER=momentum RDMAPS_LR=0.1 RDMAPS_MOMENTUM=0.9
	unset RDMAPS_SCHEDULER RDMAPS_NUM_SERVERS RDMAPS_NUM_WORKERS RDMAPS_INIT RDMAPS_SLICE_BYTES
	mkdir -p "$RDMAPS_CHECKPOINT_DIR"
	"$BIN/rdmaps-launch" --servers 2 --workers 2 --timeout 240 -- "$BIN/fmnist-train" \
		--epochs 2 --train-limit 4000 --no-progress --eval-every 1 --checkpoint-after-eval \
		--summary-json "$OUT/fm.json" > "$OUT/fm.log" 2>&1 || { cat "$OUT/fm.log"; fail "fmnist-train"; }
	grep "^checkpoint at clock" "$OUT/fm.log"
	[ "$(grep -c '^checkpoint at clock [0-9]*: test accuracy 0\.[0-9]*$' "$OUT/fm.log")" = 2 ] ||
		fail "want 2 'checkpoint at clock C: test accuracy X' lines"
	C=$(grep '^checkpoint at clock' "$OUT/fm.log" | tail -1 | sed 's/^checkpoint at clock \([0-9]*\):.*/\1/')
	for f in server{0,1}-shard{0,1}-clock$C.ckpt; do
		[ -s "$RDMAPS_CHECKPOINT_DIR/$f" ] || fail "no $f"
	done
	$PY - "$OUT/fm.json" "$C" <<'PY' || fail "summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["checkpoint_clock"] == int(sys.argv[2]), s
assert abs(s["checkpoint_accuracy"] - s["test_accuracy"]) < 1e-9, s
print(f"summary: checkpoint at clock {s['checkpoint_clock']}, accuracy {s['checkpoint_accuracy']}")
PY
}
echo "PASS"
