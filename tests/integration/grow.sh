#!/usr/bin/env bash
# Workers join a running job beyond the initial count (issue 24,
# RDMAPS_MAX_WORKERS, docs/scheduler.md "Growth"):
#   grow.sh BIN_DIR bsp|ssp
# rdmaps-launch starts 1 scheduler, 2 servers and 2 itest-grow workers
# (RDMAPS_NUM_WORKERS=2, RDMAPS_MAX_WORKERS=4); when worker 0 reached clock 3
# this script starts a third itest-grow by hand with the job's scheduler and
# secret, at clock 8 a fourth. They get ranks 2 and 3 and join at the job's
# clock; the first two hold at clock 15 until the job has 4 workers. Every
# pull must show exactly the clocks of the workers in the job (BSP), the final
# values the exact sums given when each worker joined (itest_grow.c). A fifth
# worker started by hand then is refused, naming RDMAPS_MAX_WORKERS.
set -euo pipefail
BIN=$1
MODE=$2

export RDMAPS_SHARDS=2
export RDMAPS_SLICE_BYTES=256K
export RDMAPS_SECRET=itest-secret
export RDMAPS_OPTIMIZER=sgd
export RDMAPS_LR=1
export RDMAPS_INIT=zeros
export RDMAPS_TIMEOUT_MS=30000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
export RDMAPS_MAX_WORKERS=4 ITEST_GROW_W0=2 ITEST_GROW_TARGET=4 ITEST_GROW_CLOCKS=30
case $MODE in
bsp) export RDMAPS_CONSISTENCY=bsp ;;
ssp) export RDMAPS_CONSISTENCY=ssp RDMAPS_STALENESS=2 ;;
*)
	echo "usage: grow.sh BIN_DIR bsp|ssp" >&2
	exit 2
	;;
esac
port=$(/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/../free_port.py")
tmp=$(mktemp -d /tmp/itest-grow-XXXXXX)
export ITEST_GROW_MARK=$tmp/mark
# everyone waits at clock 20 until the fifth worker below was refused
export ITEST_GROW_WAIT_AT=20 ITEST_GROW_WAIT_FILE=$tmp/go
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

"$BIN/rdmaps-launch" --servers 2 --workers 2 --port "$port" --timeout 55 \
	-- "$BIN/itest-grow" "$MODE" &
launch=$!
pids+=("$launch")

# until worker 0 has passed clock $1 (it writes each clock it reaches)
wait_mark() {
	while :; do
		c=$(cat "$ITEST_GROW_MARK" 2>/dev/null || true)
		if [ -n "$c" ] && [ "$c" -ge "$1" ]; then
			return 0
		fi
		if ! kill -0 "$launch" 2>/dev/null; then
			echo "grow.sh: the job ended before worker 0 reached clock $1" >&2
			exit 1
		fi
		sleep 0.05
	done
}

# a worker started by hand: the job's scheduler and secret, nothing else
joiner() {
	env -u RDMAPS_RANK -u RDMAPS_TOKEN RDMAPS_SCHEDULER="127.0.0.1:$port" \
		RDMAPS_TRANSPORT=tcp "$BIN/itest-grow" "$MODE" &
	pids+=("$!")
}

wait_mark 3
joiner
j1=$!
wait_mark 8
joiner
j2=$!

# a fifth worker while the job has its 4 (worker 0 is past its hold at
# clock 15): refused, with the setting that would let it in
wait_mark 16
set +e
env -u RDMAPS_RANK -u RDMAPS_TOKEN RDMAPS_SCHEDULER="127.0.0.1:$port" RDMAPS_TRANSPORT=tcp \
	RDMAPS_TIMEOUT_MS=10000 "$BIN/itest-grow" "$MODE" >"$tmp/fifth" 2>&1
frc=$?
set -e
touch "$tmp/go"
rc=0
if [ "$frc" = 0 ] || ! grep -q "4 workers, the most RDMAPS_MAX_WORKERS=4 allows" "$tmp/fifth"; then
	echo "grow.sh: a fifth worker was not refused with the reason (exit $frc):" >&2
	cat "$tmp/fifth" >&2
	rc=1
fi
wait "$j1" || { echo "grow.sh: the first worker started by hand failed" >&2; rc=1; }
wait "$j2" || { echo "grow.sh: the second worker started by hand failed" >&2; rc=1; }
wait "$launch" || { echo "grow.sh: rdmaps-launch (scheduler, servers, first workers) failed" >&2; rc=1; }
pids=()
exit $rc
