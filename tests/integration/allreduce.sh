#!/usr/bin/env bash
# rps_worker_allreduce on a real local cluster (itest_allreduce.c):
#   allreduce.sh BIN_DIR MODE WORKERS
# MODE exact (integer sums bit for bit, uneven lengths), mismatch (one rank
# passes another length: every rank -EINVAL), dead (the last rank is killed:
# every other rank -EHOSTDOWN within the timeout).
set -euo pipefail
BIN=$1
MODE=$2
W=$3
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
export RDMAPS_SECRET=itest-secret
export RDMAPS_TIMEOUT_MS=10000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}

extra=()
[ "$MODE" = dead ] && extra=(--expect-killed 1)
rc=0
"$BIN/rdmaps-launch" --servers 1 --workers "$W" --timeout 50 "${extra[@]}" -- \
	"$BIN/itest-allreduce" "$MODE" >"$DIR/out.log" 2>&1 || rc=$?
cat "$DIR/out.log"
if [ "$rc" != 0 ]; then
	echo "FAIL: rdmaps-launch exited with $rc"
	exit 1
fi
case $MODE in
exact) want=$((W * 5)); pat='exact$' ;;
mismatch) want=$W; pat='mismatch refused' ;;
dead) want=$((W - 1)); pat='dead worker reported' ;;
esac
got=$(grep -c "$pat" "$DIR/out.log" || true)
if [ "$got" != "$want" ]; then
	echo "FAIL: $got lines '$pat', want $want"
	exit 1
fi
case $MODE in
mismatch) grep -q "every worker must pass the same keys and lengths" "$DIR/out.log" ||
	{ echo "FAIL: no message naming the length mismatch"; exit 1; } ;;
dead) grep -Eq "lost worker rank $((W - 1))|worker rank [0-9]+ failed: lost worker rank $((W - 1))" "$DIR/out.log" ||
	{ echo "FAIL: no message naming the dead rank $((W - 1))"; exit 1; } ;;
esac
echo "PASS: allreduce $MODE with $W workers"
