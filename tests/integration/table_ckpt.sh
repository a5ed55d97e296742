#!/usr/bin/env bash
# Sparse tables in checkpoints: 1 server (2 shards), 1 worker, BSP, a
# checkpoint every 4 clocks. itest-table ckpt trains 4 clocks on four tables
# (sgd, adagrad, adam; adam stored as fp16); the server is killed (SIGKILL) and restored from its
# checkpoint of clock 4 (table files beside the shard files); the worker goes
# on 4 clocks and every row must equal 8 clocks of local math.
#   table_ckpt.sh BIN_DIR
set -euo pipefail
BIN=$1
OUT=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $OUT"; else rm -rf "$OUT"; fi
}
trap cleanup EXIT
fail() {
	cat "$OUT"/*.log
	echo "FAIL: $*"
	exit 1
}
export RDMAPS_SHARDS=2 RDMAPS_CONSISTENCY=bsp
export RDMAPS_SECRET=table-ckpt RDMAPS_TIMEOUT_MS=30000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
export RDMAPS_NUM_SERVERS=1 RDMAPS_NUM_WORKERS=1 RDMAPS_TRANSPORT=tcp
export RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000
export RDMAPS_CHECKPOINT_DIR=$OUT/ckpt RDMAPS_CHECKPOINT_EVERY=4
export ITEST_READY=$OUT/ready ITEST_GO=$OUT/go
mkdir -p "$RDMAPS_CHECKPOINT_DIR"
for try in $(seq 1 20); do
	export RDMAPS_SCHEDULER=127.0.0.1:$((10000 + (RANDOM % 200) * 100 + 79))
	"$BIN/rdmaps-sched" > "$OUT/sched.log" 2>&1 &
	sched=$!
	sleep 0.3
	kill -0 "$sched" 2>/dev/null && break
done
pids+=("$sched")
RDMAPS_RANK=0 "$BIN/rdmaps-server" > "$OUT/server.log" 2>&1 &
spid=$!
pids+=("$spid")
"$BIN/itest-table" ckpt > "$OUT/worker.log" 2>&1 &
wpid=$!
pids+=("$wpid")
for i in $(seq 1 600); do
	[ -e "$ITEST_READY" ] && break
	kill -0 "$wpid" 2>/dev/null || break
	sleep 0.05
done
[ -e "$ITEST_READY" ] || fail "the worker did not finish its first clocks"
for s in 0 1; do
	f=$RDMAPS_CHECKPOINT_DIR/server0-shard$s-clock4.ckpt
	for i in $(seq 1 200); do [ -e "$f" ] && break; sleep 0.05; done
	[ -e "$f" ] || fail "no checkpoint of clock 4"
done
ls "$RDMAPS_CHECKPOINT_DIR" | grep -q 'clock4\.table3$' || fail "no table file beside the checkpoint"
kill -9 "$spid"
for i in $(seq 1 100); do
	grep -q "declared dead" "$OUT/sched.log" && break
	sleep 0.05
done
grep -q "declared dead" "$OUT/sched.log" || fail "the scheduler did not notice the server's death"
RDMAPS_RANK=0 RDMAPS_LOG_LEVEL=info \
	"$BIN/rdmaps-server" --restore "$RDMAPS_CHECKPOINT_DIR" > "$OUT/server-restored.log" 2>&1 &
pids+=($!)
touch "$ITEST_GO"
if ! timeout 60 tail --pid="$wpid" -f /dev/null; then
	fail "the worker did not finish"
fi
wait "$wpid" || fail "the worker failed"
cat "$OUT/worker.log"
grep -q "table 3 restored from" "$OUT/server-restored.log" || fail "the server did not restore table 3"
echo "table_ckpt: ok"
