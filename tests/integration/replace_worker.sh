#!/usr/bin/env bash
# A worker of a real Fashion-MNIST job dies of SIGKILL mid-run and
# `rdmaps-launch --restart-workers` starts a replacement, as a user would run
# it (docs/operations.md, "Replacing a dead worker"): 2 servers, 4 workers.
# The replacement must join the running job in the dead worker's rank, go on
# from the job's clock (no start-up barrier to wait in, no clocks of its own to
# redo), and the job must finish with a sane test accuracy.
#
#   replace_worker.sh BIN_DIR CONSISTENCY [JOB]
#
# CONSISTENCY: bsp | ssp (staleness 2) | asp. JOB: c (fmnist-train, default)
# or torch (examples/torch/fmnist.py). RDMAPS_FAULT kills worker 2 at clock
# KILL_CLOCK (SIGKILL, the same signal as kill -9); the replacement runs
# without it. Bar: test accuracy >= MIN_ACC.
set -euo pipefail
BIN=$1
CONS=$2
JOB=${3:-c}
KILL_CLOCK=${KILL_CLOCK:-20}
MIN_ACC=${MIN_ACC:-0.80}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mktemp -d)
trap 'if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $OUT"; else rm -rf "$OUT"; fi' EXIT

export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_SECRET=replace-test
export RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000 RDMAPS_STALENESS=2
limit=100
if [ "$JOB" = torch ]; then
	# four Python workers importing torch on a loaded machine take a while
	# to register: the servers wait for them longer; the replacement, too,
	# takes seconds to start: 30 short epochs (about 20 s of training)
	export RDMAPS_TIMEOUT_MS=${RDMAPS_TIMEOUT_MS:-120000} OMP_NUM_THREADS=1
	limit=240
	export PYTHONPATH=$BIN/../python${PYTHONPATH:+:$PYTHONPATH}
	TRAIN=(/usr/bin/python3 "$SRC/examples/torch/fmnist.py" --epochs "${EPOCHS:-30}"
		--train-limit 12000 --no-progress --summary-json "$OUT/run.json")
else
	# ASP runs fastest: more epochs, so the replacement (about 2 s to start)
	# joins before the others are done
	epochs=${EPOCHS:-$([ "$CONS" = asp ] && echo 12 || echo 8)}
	TRAIN=("$BIN/fmnist-train" --epochs "$epochs" --train-limit 12000 --no-progress --lr 0.05
		--summary-json "$OUT/run.json")
fi

RDMAPS_FAULT=kill_at_clock=$KILL_CLOCK,kill_role=worker,kill_rank=2 \
	"$BIN/rdmaps-launch" --servers 2 --workers 4 --consistency "$CONS" --timeout "$limit" \
	--restart-workers --expect-killed 1 -- "${TRAIN[@]}" > "$OUT/run.log" 2>&1 || {
	cat "$OUT/run.log"
	echo "FAIL: the job with a worker replaced did not finish cleanly ($CONS, $JOB)"
	exit 1
}
grep -v "fault injection on" "$OUT/run.log" | grep -E "joins|killed|starting|done|epoch" || true
grep -q "starting worker2 again" "$OUT/run.log" || {
	cat "$OUT/run.log"
	echo "FAIL: worker 2 was not restarted"
	exit 1
}
join=$(grep -o "worker 2 joins the running job at clock [0-9]*" "$OUT/run.log" | grep -o "[0-9]*$" || true)
[ -n "$join" ] && [ "$join" -ge "$KILL_CLOCK" ] || {
	cat "$OUT/run.log"
	echo "FAIL: the replacement did not join the running job at a clock >= $KILL_CLOCK"
	exit 1
}
acc=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$OUT/run.json")
echo "$CONS $JOB: replacement joined at clock $join; test accuracy $acc (bar $MIN_ACC)"
/usr/bin/python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$acc" "$MIN_ACC" || {
	cat "$OUT/run.log"
	echo "FAIL: test accuracy $acc < $MIN_ACC"
	exit 1
}
echo "PASS"
