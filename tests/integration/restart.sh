#!/usr/bin/env bash
# Kill -9 a server in the middle of Fashion-MNIST training and restart it from
# its checkpoint; training must finish with a test accuracy within MAX_DIFF of
# an uninterrupted run of the same configuration.
#
#   restart.sh BIN_DIR [TRANSPORT] [MAX_DIFF] [MODE]
#
# MODE manual (default): this script starts the scheduler, 2 servers and 2
#   workers itself, waits for server 1's checkpoint of clock KILL_AFTER, kills
#   it with SIGKILL, waits until the scheduler declared it dead and starts
#   `rdmaps-server --restore DIR` in its place.
# MODE launch: rdmaps-launch --restart-servers, with RDMAPS_FAULT killing
#   server 1 at clock KILL_AFTER + KILL_OFFSET (7); the launcher restarts it
#   with --restore.
# MODE repl: replicated shards (RDMAPS_REPLICAS=2, docs/replication.md), the
#   reference too; server 1 is killed with SIGKILL as in manual mode and
#   nobody is restarted: its backup on server 0 takes over, the same worker
#   processes finish the job.
# BSP, fmnist-train's recipe with lr 0.05, checkpoints every 20 clocks, 4 epochs of 20000
# images (312 clocks). Smaller jobs (the SoftRoCE guest is slow):
# ITEST_EPOCHS, ITEST_TRAIN, ITEST_LR, ITEST_CKPT_EVERY, KILL_AFTER, KILL_OFFSET.
set -euo pipefail
BIN=$1
TRANSPORT=${2:-tcp}
MAXDIFF=${3:-0.01}
MODE=${4:-manual}
KILL_AFTER=${KILL_AFTER:-60}     # a multiple of the checkpoint interval
KILL_OFFSET=${KILL_OFFSET:-7}    # launch mode: clocks after that checkpoint
OUT=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $OUT"; else rm -rf "$OUT"; fi
}
trap cleanup EXIT

export RDMAPS_CONSISTENCY=bsp
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_SECRET=restart-test
export RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000 RDMAPS_TIMEOUT_MS=60000
export RDMAPS_CHECKPOINT_EVERY=${ITEST_CKPT_EVERY:-20}
if [ "$MODE" = repl ]; then
	export RDMAPS_REPLICAS=2
fi
TRAIN=("$BIN/fmnist-train" --epochs ${ITEST_EPOCHS:-4} --train-limit ${ITEST_TRAIN:-20000} --no-progress
	--lr ${ITEST_LR:-0.05})
SHOST=127.0.0.1 WHOST=127.0.0.1
if [ "$TRANSPORT" = rdma ]; then
	SHOST=${RDMAPS_RXE_IP0:-10.9.0.1} WHOST=${RDMAPS_RXE_IP1:-10.9.0.2}
fi
hosts=(--server-host "$SHOST" --worker-host "$WHOST")

accuracy() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$1"; }

# 1. the reference: the same job, nobody killed
export RDMAPS_CHECKPOINT_DIR=$OUT/ckpt-ref
mkdir -p "$RDMAPS_CHECKPOINT_DIR"
"$BIN/rdmaps-launch" --servers 2 --workers 2 --transport "$TRANSPORT" --timeout 300 "${hosts[@]}" \
	-- "${TRAIN[@]}" --summary-json "$OUT/ref.json" > "$OUT/ref.log" 2>&1 || {
	cat "$OUT/ref.log"
	echo "FAIL: the uninterrupted run failed"
	exit 1
}
ref=$(accuracy "$OUT/ref.json")
echo "uninterrupted: test accuracy $ref"

# 2. the same job, server 1 killed and restored
export RDMAPS_CHECKPOINT_DIR=$OUT/ckpt
mkdir -p "$RDMAPS_CHECKPOINT_DIR"
if [ "$MODE" = launch ]; then
	# killed KILL_OFFSET clocks after its checkpoint: those updates are lost
	RDMAPS_FAULT=kill_at_clock=$((KILL_AFTER + KILL_OFFSET)),kill_role=server,kill_rank=1 \
		"$BIN/rdmaps-launch" --servers 2 --workers 2 --transport "$TRANSPORT" --timeout 300 \
		"${hosts[@]}" --restart-servers --expect-killed 1 \
		-- "${TRAIN[@]}" --summary-json "$OUT/run.json" > "$OUT/run.log" 2>&1 || {
		cat "$OUT/run.log"
		echo "FAIL: the run with a server killed failed"
		exit 1
	}
else
	export RDMAPS_NUM_SERVERS=2 RDMAPS_NUM_WORKERS=2 RDMAPS_TRANSPORT=$TRANSPORT
	for try in $(seq 1 20); do
		export RDMAPS_SCHEDULER=127.0.0.1:$((10000 + (RANDOM % 200) * 100 + 77))
		"$BIN/rdmaps-sched" > "$OUT/sched.log" 2>&1 &
		sched=$!
		sleep 0.3
		kill -0 "$sched" 2>/dev/null && break
	done
	pids+=("$sched")
	for r in 0 1; do
		RDMAPS_RANK=$r RDMAPS_HOST=$SHOST "$BIN/rdmaps-server" > "$OUT/server$r.log" 2>&1 &
		pids+=($!)
		spid[$r]=$!
	done
	for r in 0 1; do
		RDMAPS_RANK=$r RDMAPS_HOST=$WHOST "${TRAIN[@]}" \
			--summary-json "$OUT/run.json" > "$OUT/worker$r.log" 2>&1 &
		pids+=($!)
		wpid[$r]=$!
	done
	# wait for server 1's checkpoint of clock KILL_AFTER, then kill it
	for i in $(seq 1 1200); do
		ls "$RDMAPS_CHECKPOINT_DIR"/server1-shard0-clock"$KILL_AFTER".ckpt > /dev/null 2>&1 && break
		kill -0 "${wpid[0]}" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "${wpid[0]}" 2>/dev/null || {
		cat "$OUT"/*.log
		echo "FAIL: training ended before server 1 could be killed"
		exit 1
	}
	kill -9 "${spid[1]}"
	echo "killed server 1 (pid ${spid[1]}) after its checkpoint of clock $KILL_AFTER"
	# the scheduler notices (the connection closes), then the restart
	for i in $(seq 1 100); do
		grep -q "declared dead" "$OUT/sched.log" && break
		sleep 0.05
	done
	grep -q "declared dead" "$OUT/sched.log" || {
		cat "$OUT/sched.log"
		echo "FAIL: the scheduler did not notice"
		exit 1
	}
	if [ "$MODE" = repl ]; then
		: > "$OUT/server1-restored.log" # its backup in server 0 takes over
	else
		RDMAPS_HOST=$SHOST "$BIN/rdmaps-server" --restore "$RDMAPS_CHECKPOINT_DIR" \
			> "$OUT/server1-restored.log" 2>&1 &
		pids+=($!)
	fi
	for r in 0 1; do
		if ! timeout 120 tail --pid="${wpid[$r]}" -f /dev/null; then
			echo "FAIL: worker $r did not finish"
			cat "$OUT"/*.log
			exit 1
		fi
		wait "${wpid[$r]}" || {
			cat "$OUT"/*.log
			echo "FAIL: worker $r failed"
			exit 1
		}
	done
	wait "$sched" || true
	cat "$OUT/server1-restored.log"
	if [ "$MODE" = repl ]; then
		grep -q "backup promoted" "$OUT/server0.log" || {
			cat "$OUT"/*.log
			echo "FAIL: server 1's backup was not promoted"
			exit 1
		}
		grep "backup promoted\|backup took over" "$OUT"/*.log || true
		# nothing the workers sent may fail during the failover: a push
		# or pull failed (and a push given up as lost) is an update lost
		# or applied twice
		if grep "update lost\|pulling again\|fmnist-train: .* of tensor" "$OUT"/worker*.log; then
			echo "FAIL: a push or pull failed during the failover"
			exit 1
		fi
	fi
fi
run=$(accuracy "$OUT/run.json")
echo "server 1 killed and $([ "$MODE" = repl ] && echo "taken over by its backup" || echo restored): test accuracy $run (uninterrupted $ref)"
python3 - "$ref" "$run" "$MAXDIFF" <<'PY'
import sys
ref, run, d = map(float, sys.argv[1:])
print(f"difference {abs(ref - run):.4f} (allowed {d})")
sys.exit(0 if abs(ref - run) <= d else 1)
PY
