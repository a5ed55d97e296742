#!/usr/bin/env bash
# Secure by default (issue 20).
#  1. Without RDMAPS_SECRET, rdmaps-sched, rdmaps-server, rdmaps-ctl and a
#     worker (the library) exit non-zero at once, naming RDMAPS_SECRET and
#     --insecure.
#  2. With RDMAPS_INSECURE=1 (or --insecure) a whole job runs and every
#     process prints the INSECURE warning.
#  3. rdmaps-launch without a secret makes one: the job runs, and the secret
#     is in no process's command line (ps), only in the environment
#     (--shared-secret, so that the worker sees it; by default a worker gets
#     only its token: token_launch.sh).
#
#   secure_default.sh BIN_DIR
set -euo pipefail
BIN=$1
T=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	tail -n 20 "$T"/*.log 2>/dev/null || true
	exit 1
}
for v in $(env | grep -o '^RDMAPS_[A-Z_]*'); do unset "$v"; done
export RDMAPS_LOG_LEVEL=info RDMAPS_TRANSPORT=tcp

# 1. no secret: refused, with what to do
port=$(/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/../free_port.py")
export RDMAPS_SCHEDULER=127.0.0.1:$port
for prog in rdmaps-sched rdmaps-server "rdmaps-ctl status" "itest-worker bsp"; do
	rc=0
	timeout 20 $BIN/$prog > "$T/refuse.log" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$prog without a secret: exit $rc"
	grep -q "no job secret: set RDMAPS_SECRET" "$T/refuse.log" ||
		fail "$prog without a secret does not say to set RDMAPS_SECRET"
	grep -q -- "--insecure or set RDMAPS_INSECURE=1" "$T/refuse.log" ||
		fail "$prog without a secret does not name --insecure"
	echo "ok   $prog refuses to start without a secret"
done

# 2. insecure, explicitly: a job runs, each process warns loudly
export RDMAPS_NUM_SERVERS=1 RDMAPS_NUM_WORKERS=1 RDMAPS_SLICE_BYTES=256K RDMAPS_SHARDS=2
export RDMAPS_OPTIMIZER=sgd RDMAPS_LR=1 RDMAPS_INIT=zeros RDMAPS_CONSISTENCY=bsp
RDMAPS_INSECURE=1 "$BIN/rdmaps-sched" > "$T/sched.log" 2>&1 &
pids+=($!)
"$BIN/rdmaps-server" --insecure > "$T/server.log" 2>&1 &
pids+=($!)
RDMAPS_INSECURE=1 timeout 120 "$BIN/itest-worker" bsp > "$T/worker.log" 2>&1 ||
	fail "an insecure job did not run"
for f in sched server worker; do
	grep -q "INSECURE: no job secret" "$T/$f.log" || fail "$f: no INSECURE warning"
done
echo "ok   --insecure / RDMAPS_INSECURE=1: the job runs, every process warns"
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
pids=()

# 3. rdmaps-launch makes the secret, passes it in the environment only
unset RDMAPS_SCHEDULER
"$BIN/rdmaps-launch" --shared-secret --servers 1 --workers 1 --timeout 120 -- \
	bash -c 'ps -eo args > "'"$T"'/ps.txt"; [ ${#RDMAPS_SECRET} -eq 64 ] &&
		printf %s "$RDMAPS_SECRET" > "'"$T"'/secret" && exec "'"$BIN"'/itest-worker" bsp' \
	> "$T/launch.log" 2>&1 || fail "rdmaps-launch without a secret: the job failed"
[ -s "$T/secret" ] || fail "rdmaps-launch passed no 64-digit secret to the worker"
if grep -qF "$(cat "$T/secret")" "$T/ps.txt"; then
	fail "the job secret is visible on a command line (ps)"
fi
echo "ok   rdmaps-launch: a random secret, in no command line"
echo PASS
