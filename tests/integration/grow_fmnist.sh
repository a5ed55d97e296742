#!/usr/bin/env bash
# A real job grows (issue 24, docs/scheduler.md "Growth"):
#   grow_fmnist.sh BIN_DIR [bsp|ssp|asp]
# rdmaps-launch starts 2 servers and 2 workers of fmnist-train
# (RDMAPS_MAX_WORKERS=3); once worker 0 finished epoch 1 this script starts
# a third fmnist-train by hand with the job's scheduler and secret. It must
# join the running job (rank 2, at the job's clock, epoch 2 or later), the
# first two must split their data again at their next epoch ("the job has 3
# workers now"), and the job must finish with the usual accuracy.
set -euo pipefail
BIN=$1
CONS=${2:-bsp}
MIN_ACC=${MIN_ACC:-0.80}
OUT=$(mktemp -d /tmp/grow-fmnist-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $OUT"; else rm -rf "$OUT"; fi
}
trap cleanup EXIT

export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_SECRET=grow-test
export RDMAPS_MAX_WORKERS=3 RDMAPS_STALENESS=2
port=$(/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/../free_port.py")
TRAIN=("$BIN/fmnist-train" --epochs "${EPOCHS:-5}" --train-limit 12000 --no-progress --lr 0.05)

"$BIN/rdmaps-launch" --servers 2 --workers 2 --consistency "$CONS" --port "$port" \
	--timeout 100 -- "${TRAIN[@]}" --summary-json "$OUT/run.json" >"$OUT/run.log" 2>&1 &
launch=$!
pids+=("$launch")
until grep -q "^epoch 1/" "$OUT/run.log"; do
	if ! kill -0 "$launch" 2>/dev/null; then
		cat "$OUT/run.log"
		echo "FAIL: the job ended before epoch 1 was done"
		exit 1
	fi
	sleep 0.1
done
env -u RDMAPS_RANK -u RDMAPS_TOKEN RDMAPS_SCHEDULER="127.0.0.1:$port" RDMAPS_TRANSPORT=tcp \
	"${TRAIN[@]}" >"$OUT/joiner.log" 2>&1 &
joiner=$!
pids+=("$joiner")
rc=0
wait "$joiner" || rc=$?
wait "$launch" || rc=$?
pids=()
if [ "$rc" != 0 ]; then
	cat "$OUT/run.log" "$OUT/joiner.log"
	echo "FAIL: the job or the worker that joined it did not finish cleanly"
	exit 1
fi
grep -E "joins|workers now|^epoch|done" "$OUT/run.log" "$OUT/joiner.log" || true
join=$(grep -o "worker 2 joins the running job at clock [0-9]*" "$OUT/joiner.log" | grep -o "[0-9]*$" || true)
[ -n "$join" ] || {
	cat "$OUT/joiner.log"
	echo "FAIL: the third worker did not join the running job in rank 2"
	exit 1
}
n=$(grep -c "the job has 3 workers now" "$OUT/run.log" || true)
[ "$n" -ge 2 ] || {
	cat "$OUT/run.log"
	echo "FAIL: the first two workers did not split their data again ($n)"
	exit 1
}
acc=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$OUT/run.json")
echo "$CONS: worker 2 joined at clock $join; test accuracy $acc (bar $MIN_ACC)"
/usr/bin/python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$acc" "$MIN_ACC" || {
	cat "$OUT/run.log"
	echo "FAIL: test accuracy $acc < $MIN_ACC"
	exit 1
}
echo "PASS"
