#!/usr/bin/env bash
# The scheduler's log line for a refused hello names the peer's address and
# what it claimed in words, and the refused worker exits at once saying why.
#
#   refusal_words.sh BIN_DIR
set -euo pipefail
BIN=$1
OUT=$(mktemp -d)
sched=
cleanup() {
	[ -n "$sched" ] && kill "$sched" 2>/dev/null || true
	rm -rf "$OUT"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	tail -n 20 "$OUT"/*.log 2>/dev/null || true
	exit 1
}

export RDMAPS_LOG_LEVEL=info RDMAPS_NUM_SERVERS=1 RDMAPS_NUM_WORKERS=1 RDMAPS_TRANSPORT=tcp
for try in $(seq 1 20); do
	export RDMAPS_SCHEDULER=127.0.0.1:$((10000 + (RANDOM % 200) * 100 + 91))
	RDMAPS_SECRET=the-right-one "$BIN/rdmaps-sched" > "$OUT/sched.log" 2>&1 &
	sched=$!
	for i in $(seq 1 100); do
		grep -q "listening on" "$OUT/sched.log" && break
		kill -0 "$sched" 2>/dev/null || break
		sleep 0.05
	done
	grep -q "listening on" "$OUT/sched.log" && break
	wait "$sched" 2>/dev/null || true
	sched=
done
[ -n "$sched" ] || fail "rdmaps-sched did not start"

rc=0
RDMAPS_SECRET=a-wrong-one timeout 10 "$BIN/itest-worker" bsp > "$OUT/worker.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "worker with a wrong secret: exit $rc"
grep -q "wrong shared secret (RDMAPS_SECRET)" "$OUT/worker.log" ||
	fail "the worker does not say its secret is wrong"
for i in $(seq 1 100); do
	grep -q "refusing" "$OUT/sched.log" && break
	sleep 0.05
done
grep -Eq "refusing 127\.0\.0\.1:[0-9]+, a worker asking for any rank: wrong secret" \
	"$OUT/sched.log" || fail "the scheduler's refusal does not name the peer and its claim"
echo "PASS"
