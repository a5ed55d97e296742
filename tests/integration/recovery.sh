#!/usr/bin/env bash
# Recovery a person can follow (docs/operations.md, "Recovering from a dead
# server"): what the logs and the exit say.
#
#   recovery.sh BIN_DIR MODE
#
# quiet:     integration.restart's job (server 1 killed at clock 10, restored
#            by rdmaps-launch --restart-servers) at log level warn: no line at
#            error level but the fault's own kill, the restore line is shown
#            (a warning), rdmaps-launch said at start what a server's death does.
# lost:      2 servers, 2 workers of fmnist-train (RDMAPS_TIMEOUT_MS=5000);
#            server 1 killed with -9 and not restarted: the workers say it is
#            lost for good and exit within 2 x RDMAPS_TIMEOUT_MS of the kill.
# abandoned: a scheduler waiting for 2 workers; the one worker that registered
#            dies: the scheduler ends the job (message, exit 1) after
#            RDMAPS_REGISTER_TIMEOUT_MS, and the waiting server leaves.
# corrupt:   every checkpoint of server 1's shard 0 is damaged:
#            rdmaps-server --restore exits 1 saying the restore failed and why
#            each file was refused (not "unknown key").
set -euo pipefail
BIN=$1
MODE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $OUT"; else rm -rf "$OUT"; fi
}
trap cleanup EXIT
fail() {
	for f in "$OUT"/*.log; do
		[ -f "$f" ] && { echo "== $f"; tail -40 "$f"; }
	done
	echo "FAIL: $*"
	exit 1
}
export RDMAPS_SECRET=recovery-test RDMAPS_LOG_LEVEL=warn

start_sched() {
	for try in $(seq 1 20); do
		export RDMAPS_SCHEDULER=127.0.0.1:$((10000 + (RANDOM % 200) * 100 + 59))
		RDMAPS_LOG_LEVEL=info "$BIN/rdmaps-sched" > "$OUT/sched.log" 2>&1 &
		sched=$!
		sleep 0.3
		kill -0 "$sched" 2>/dev/null && break
	done
	pids+=("$sched")
}

case $MODE in
quiet)
	RDMAPS_LOG_LEVEL=warn "$HERE/cluster.sh" "$BIN" restart tcp > "$OUT/run.log" 2>&1 ||
		fail "the restart job failed"
	errs=$(grep -E " error " "$OUT/run.log" | grep -v "fault injection: killing" || true)
	[ -z "$errs" ] || fail "error lines during a recovery that succeeded:
$errs"
	grep -q "warn .*restored from .* at clock" "$OUT/run.log" ||
		fail "no restore line at level warn"
	grep -q "rdmaps-launch: a server that dies is started again" "$OUT/run.log" ||
		fail "rdmaps-launch did not say what a server's death does"
	grep -E "restored from|reconnected at|a server that dies" "$OUT/run.log" | head -4
	;;
lost)
	# the servers wait long for the workers (which read the data set
	# first); the workers' deadline for a lost server is 5 s
	export RDMAPS_NUM_SERVERS=2 RDMAPS_NUM_WORKERS=2 RDMAPS_TIMEOUT_MS=60000
	export RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000 RDMAPS_CONSISTENCY=bsp
	start_sched
	for r in 0 1; do
		RDMAPS_RANK=$r "$BIN/rdmaps-server" > "$OUT/server$r.log" 2>&1 &
		pids+=($!)
		spid[$r]=$!
	done
	for r in 0 1; do
		RDMAPS_TIMEOUT_MS=5000 RDMAPS_RANK=$r "$BIN/fmnist-train" --epochs 50 --train-limit 6000 --no-progress \
			> "$OUT/worker$r.log" 2>&1 &
		pids+=($!)
		wpid[$r]=$!
	done
	for i in $(seq 1 600); do
		grep -q "optimizer" "$OUT/worker0.log" 2>/dev/null && break
		sleep 0.1
	done
	sleep 1
	kill -0 "${wpid[0]}" 2>/dev/null || fail "training ended before the kill"
	kill -9 "${spid[1]}"
	t0=$(date +%s.%N)
	for r in 0 1; do
		timeout 30 tail --pid="${wpid[$r]}" -f /dev/null || fail "worker $r still runs 30 s after the kill"
	done
	dt=$(echo "$(date +%s.%N) - $t0" | bc)
	echo "workers exited $dt s after server 1 was killed (their RDMAPS_TIMEOUT_MS: 5000)"
	grep -q "server 1 lost for good" "$OUT/worker0.log" || fail "no 'lost for good' line"
	[ "$(echo "$dt < 10" | bc)" = 1 ] || fail "workers took $dt s (> 2 x RDMAPS_TIMEOUT_MS)"
	;;
abandoned)
	export RDMAPS_NUM_SERVERS=1 RDMAPS_NUM_WORKERS=2 RDMAPS_REGISTER_TIMEOUT_MS=1500
	start_sched
	"$BIN/rdmaps-server" > "$OUT/server.log" 2>&1 &
	pids+=($!)
	srv=$!
	"$BIN/fmnist-train" --epochs 1 --no-progress > "$OUT/worker.log" 2>&1 &
	pids+=($!)
	w=$!
	for i in $(seq 1 200); do
		grep -q "1/2 workers" "$OUT/sched.log" 2>/dev/null && break
		sleep 0.05
	done
	grep -q "1/2 workers" "$OUT/sched.log" || fail "the worker did not register"
	kill -9 "$w"
	rc=0
	timeout 15 tail --pid="$sched" -f /dev/null || fail "the scheduler still runs 15 s later"
	wait "$sched" || rc=$?
	[ "$rc" = 1 ] || fail "scheduler exit status $rc, expected 1"
	grep -q "job over before it began: every worker that registered (1) went away" \
		"$OUT/sched.log" || fail "no message from the scheduler"
	timeout 10 tail --pid="$srv" -f /dev/null || fail "the waiting server did not leave"
	grep "job over before it began" "$OUT/sched.log"
	;;
corrupt)
	D=$OUT/ckpt
	mkdir -p "$D"
	for c in 20 40; do
		head -c 300 /dev/urandom > "$D/server1-shard0-clock$c.ckpt"
		head -c 300 /dev/urandom > "$D/server1-shard1-clock$c.ckpt"
	done
	export RDMAPS_NUM_SERVERS=2 RDMAPS_NUM_WORKERS=1 RDMAPS_SHARDS=2 RDMAPS_TIMEOUT_MS=3000
	export RDMAPS_SCHEDULER=127.0.0.1:9
	rc=0
	RDMAPS_RANK=1 timeout 20 "$BIN/rdmaps-server" --restore "$D" > "$OUT/server.log" 2>&1 || rc=$?
	[ "$rc" = 1 ] || fail "rdmaps-server --restore exit status $rc, expected 1"
	grep -q "refused: bad magic" "$OUT/server.log" || fail "no reason per refused file"
	grep -q "exiting: --restore $D: no valid checkpoint to restore from" "$OUT/server.log" ||
		fail "the exit line does not say the restore failed"
	grep -q "unknown key" "$OUT/server.log" && fail "'unknown key' in the log"
	tail -2 "$OUT/server.log"
	;;
*)
	echo "recovery.sh: unknown mode $MODE" >&2
	exit 2
	;;
esac
echo "PASS"
