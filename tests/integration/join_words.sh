#!/usr/bin/env bash
# Errors a person can act on while a job starts (issue 20):
#  1. no scheduler at the address: the node says so once ("not reachable
#     yet ... retrying"), then once more with the count of attempts, not a
#     line per attempt;
#  2. a node that times out waiting for the cluster quotes the scheduler's
#     state when it gave up, not the state at its own registration: worker A
#     registers first (1 more worker missing then), worker B after it, and A's
#     message says "0 more worker(s)".
#
#   join_words.sh BIN_DIR
set -euo pipefail
BIN=$1
OUT=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$OUT"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	tail -n 20 "$OUT"/*.log 2>/dev/null || true
	exit 1
}
# wait_for FILE TEXT: until FILE has TEXT (at most 30 s: a failure, not a pace)
wait_for() {
	for _ in $(seq 1 600); do
		grep -qF "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "no \"$2\" in $1"
}
free_port() {
	/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/../free_port.py"
}

for v in $(env | grep -o '^RDMAPS_[A-Z_]*'); do unset "$v"; done
export RDMAPS_LOG_LEVEL=info RDMAPS_TRANSPORT=tcp RDMAPS_SECRET=join-words-secret

# 1. nothing listens: two lines, the second with the count
export RDMAPS_SCHEDULER=127.0.0.1:$(free_port)
rc=0
RDMAPS_TIMEOUT_MS=1500 timeout 30 "$BIN/itest-worker" bsp > "$OUT/unreach.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a worker with no scheduler: exit $rc"
n=$(grep -c "not reachable yet" "$OUT/unreach.log" || true)
[ "$n" -eq 1 ] || fail "\"not reachable yet\" said $n times (want once)"
grep -Eq "no scheduler at $RDMAPS_SCHEDULER after 1500 ms \(([2-9]|[1-9][0-9]+) attempts\)" \
	"$OUT/unreach.log" || fail "no final line with the count of attempts"
lines=$(wc -l < "$OUT/unreach.log")
[ "$lines" -le 6 ] || fail "$lines lines for one unreachable scheduler"
echo "ok: an unreachable scheduler is reported once, then with the count ($lines lines)"

# 2. the state when A gave up: 1 server and 2 workers wanted, A and B register
export RDMAPS_SCHEDULER=127.0.0.1:$(free_port) RDMAPS_NUM_SERVERS=1 RDMAPS_NUM_WORKERS=2
"$BIN/rdmaps-sched" > "$OUT/sched.log" 2>&1 &
pids+=($!)
wait_for "$OUT/sched.log" "listening on"
RDMAPS_TIMEOUT_MS=8000 "$BIN/itest-worker" bsp > "$OUT/a.log" 2>&1 &
a=$!
pids+=($a)
wait_for "$OUT/sched.log" "registered: 0/1 servers, 1/2 workers"
RDMAPS_TIMEOUT_MS=60000 "$BIN/itest-worker" bsp > "$OUT/b.log" 2>&1 &
pids+=($!)
wait_for "$OUT/sched.log" "registered: 0/1 servers, 2/2 workers"
rc=0
wait "$a" || rc=$?
[ "$rc" -ne 0 ] || fail "worker A joined a cluster without a server"
grep -qF "no cluster map after 8000 ms: scheduler waits for 1 more server(s) and 0 more worker(s) (0/1 servers, 2/2 workers registered)" \
	"$OUT/a.log" || fail "worker A does not quote the scheduler's state when it gave up"
echo "ok: the waiting node quotes the state when it gave up"
echo "PASS"
