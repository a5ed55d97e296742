#!/usr/bin/env bash
# rps_worker_allreduce on a real local cluster (itest_allreduce.c):
#   allreduce.sh BIN_DIR MODE WORKERS [TRANSPORT]
# MODE exact (integer sums bit for bit, uneven lengths), mismatch (one rank
# passes another length: every rank -EINVAL), dead (the last rank is killed:
# every other rank -EHOSTDOWN within the timeout).
# TRANSPORT rdma (inside tools/softroce/rxe-run): servers on rxe0, workers on
# rxe1, and the ring's frames are RDMA SENDs too (RDMAPS_RING_TRANSPORT=rdma).
set -euo pipefail
BIN=$1
MODE=$2
W=$3
TRANSPORT=${4:-tcp}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
export RDMAPS_SECRET=itest-secret
# the guest (TCG) starts a server in tens of seconds: a longer join there
[ "$TRANSPORT" = rdma ] && to=60000 || to=10000
export RDMAPS_TIMEOUT_MS=${ALLREDUCE_TIMEOUT_MS:-$to}
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}

extra=(--transport "$TRANSPORT")
if [ "$TRANSPORT" = rdma ]; then
	export RDMAPS_RING_TRANSPORT=rdma
	extra+=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
[ "$MODE" = dead ] && extra+=(--expect-killed 1)
rc=0
"$BIN/rdmaps-launch" --servers 1 --workers "$W" --timeout "${ALLREDUCE_TIMEOUT:-$((to / 200))}" "${extra[@]}" -- \
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
echo "PASS: allreduce $MODE with $W workers over $TRANSPORT"
