#!/usr/bin/env bash
# The job's optimizer spec per key on a real local cluster:
#   optim.sh BIN_DIR spec [TRANSPORT]
#                           2 servers (2 shards), 2 workers, BSP: itest-optim spec;
#                           TRANSPORT tcp (default) or rdma (servers on the
#                           SoftRoCE device of RDMAPS_RXE_IP0, workers on
#                           RDMAPS_RXE_IP1: run it inside tools/softroce/rxe-run)
#   optim.sh BIN_DIR ckpt   1 server, 1 worker, BSP, checkpoints every 4 clocks:
#                           itest-optim ckpt trains 4 clocks; the server is
#                           killed (SIGKILL) and restored from its checkpoint of
#                           clock 4 with ANOTHER default optimizer; the worker
#                           goes on and the values must equal the local math of
#                           each key's own spec.
# The servers' environment default (RDMAPS_OPTIMIZER ...) is never a key's spec.
set -euo pipefail
BIN=$1
MODE=$2
TRANSPORT=${3:-tcp}
OUT=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $OUT"; else rm -rf "$OUT"; fi
}
trap cleanup EXIT

export RDMAPS_SHARDS=2 RDMAPS_SLICE_BYTES=256 RDMAPS_CONSISTENCY=bsp
export RDMAPS_OPTIMIZER=momentum RDMAPS_LR=0.3 RDMAPS_INIT=zeros
export RDMAPS_SECRET=optim-test RDMAPS_TIMEOUT_MS=30000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}

if [ "$MODE" = spec ]; then
	hosts=()
	if [ "$TRANSPORT" = rdma ]; then
		hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
	fi
	"$BIN/rdmaps-launch" --servers 2 --workers 2 --transport "$TRANSPORT" --timeout 240 \
		"${hosts[@]}" -- "$BIN/itest-optim" spec
	exit $?
fi

# ckpt: the scheduler, one server and one worker started here
export RDMAPS_NUM_SERVERS=1 RDMAPS_NUM_WORKERS=1 RDMAPS_TRANSPORT=tcp
export RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000
export RDMAPS_CHECKPOINT_DIR=$OUT/ckpt RDMAPS_CHECKPOINT_EVERY=4
export ITEST_READY=$OUT/ready ITEST_GO=$OUT/go
mkdir -p "$RDMAPS_CHECKPOINT_DIR"
for try in $(seq 1 20); do
	export RDMAPS_SCHEDULER=127.0.0.1:$((10000 + (RANDOM % 200) * 100 + 78))
	"$BIN/rdmaps-sched" > "$OUT/sched.log" 2>&1 &
	sched=$!
	sleep 0.3
	kill -0 "$sched" 2>/dev/null && break
done
pids+=("$sched")
RDMAPS_RANK=0 "$BIN/rdmaps-server" > "$OUT/server.log" 2>&1 &
spid=$!
pids+=("$spid")
"$BIN/itest-optim" ckpt > "$OUT/worker.log" 2>&1 &
wpid=$!
pids+=("$wpid")
fail() {
	cat "$OUT"/*.log
	echo "FAIL: $*"
	exit 1
}
for i in $(seq 1 600); do
	[ -e "$ITEST_READY" ] && break
	kill -0 "$wpid" 2>/dev/null || break
	sleep 0.05
done
[ -e "$ITEST_READY" ] || fail "the worker did not finish its first clocks"
for s in 0 1; do
	for i in $(seq 1 200); do
		[ -e "$RDMAPS_CHECKPOINT_DIR/server0-shard$s-clock4.ckpt" ] && break
		sleep 0.05
	done
	[ -e "$RDMAPS_CHECKPOINT_DIR/server0-shard$s-clock4.ckpt" ] || fail "no checkpoint of clock 4"
done
kill -9 "$spid"
for i in $(seq 1 100); do
	grep -q "declared dead" "$OUT/sched.log" && break
	sleep 0.05
done
grep -q "declared dead" "$OUT/sched.log" || fail "the scheduler did not notice the server's death"
# another default optimizer: the keys keep their own specs from the file
RDMAPS_OPTIMIZER=adagrad RDMAPS_LR=5 RDMAPS_RANK=0 RDMAPS_LOG_LEVEL=info \
	"$BIN/rdmaps-server" --restore "$RDMAPS_CHECKPOINT_DIR" > "$OUT/server-restored.log" 2>&1 &
pids+=($!)
touch "$ITEST_GO"
if ! timeout 120 tail --pid="$wpid" -f /dev/null; then
	fail "the worker did not finish"
fi
wait "$wpid" || fail "the worker failed"
cat "$OUT/worker.log"
grep -q "restored from .* at clock 4" "$OUT/server-restored.log" ||
	fail "the server did not say it restored the checkpoint of clock 4"
