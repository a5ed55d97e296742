#!/usr/bin/env bash
# A whole host lost mid-run, over TCP between 4 "hosts" (network namespaces on
# a bridge, netns.sh):
#   host 1: rdmaps-sched            host 2: server 0, workers 0 and 1
#   host 3: server 1, workers 2, 3  host 4: spare
# BSP fmnist-train (2 servers, 4 workers, lr 0.05, EPOCHS of TRAIN images,
# checkpoints every 20 clocks). After server 1's checkpoint of clock 60, host
# 3's link is cut (no FIN, no RST: a machine whose network died) and then every
# process on it is killed and the namespace deleted. As docs/operations.md
# ("Recovering from a dead server") says: the scheduler declares server 1 and
# workers 2 and 3 dead after the heartbeat timeout (2 s here); an
# `rdmaps-server --restore` started on host 4 joins in rank 1 and loads the
# clock-60 checkpoint; workers 0 and 1 reconnect, the BSP barrier goes on
# without the dead workers, training finishes (exit 0) above MIN_ACCURACY and
# the scheduler ends the job (exit 0: "2 worker(s) left, 2 died").
#   hostfail.sh BIN_DIR MIN_ACCURACY
set -euo pipefail
BIN=$(cd "$1" && pwd)
MIN=${2:-0.7}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/netns.sh"
netns_test_begin 4
echo "hosts: ${NETNS_IP[*]:1} (bridge $NETNS_NET.254)"

export RDMAPS_CONSISTENCY=bsp RDMAPS_TRANSPORT=tcp RDMAPS_NUM_SERVERS=2 RDMAPS_NUM_WORKERS=4
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_SECRET=hostfail-test
export RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000 RDMAPS_TIMEOUT_MS=60000
export RDMAPS_CHECKPOINT_EVERY=20 RDMAPS_CHECKPOINT_DIR=$T/ckpt
export RDMAPS_SCHEDULER=${NETNS_IP[1]}:9090
mkdir -p "$RDMAPS_CHECKPOINT_DIR"
TRAIN=("$BIN/fmnist-train" --epochs "${HOSTFAIL_EPOCHS:-4}" --train-limit "${HOSTFAIL_TRAIN:-20000}"
	--no-progress --lr 0.05 --summary-json "$T/summary.json")

(netns_run 1 "$BIN/rdmaps-sched" > "$T/sched.log" 2>&1) &
sched=$!
for h in 2 3; do
	r=$((h - 2))
	(RDMAPS_RANK=$r RDMAPS_HOST=${NETNS_IP[$h]} netns_run $h "$BIN/rdmaps-server" > "$T/server$r.log" 2>&1) &
done
declare -a wpid
for w in 0 1 2 3; do
	h=$((2 + w / 2))
	(RDMAPS_RANK=$w RDMAPS_HOST=${NETNS_IP[$h]} netns_run $h "${TRAIN[@]}" > "$T/worker$w.log" 2>&1) &
	wpid[$w]=$!
done

ck=$RDMAPS_CHECKPOINT_DIR/server1-shard0-clock60.ckpt
for i in $(seq 1 1200); do
	[ -e "$ck" ] && break
	kill -0 "${wpid[0]}" 2>/dev/null || break
	sleep 0.05
done
[ -e "$ck" ] && kill -0 "${wpid[0]}" 2>/dev/null || {
	tail -n 5 "$T"/*.log
	echo "FAIL: no checkpoint of clock 60 from server 1 while training ran"
	exit 1
}
cut_at=$(date +%s.%N)
netns_cut 3
netns_kill_host 3
echo "host 3 (${NETNS_IP[3]}: server 1, workers 2 and 3) cut off and killed after server 1's checkpoint of clock 60"

# the scheduler hears nothing more from host 3: dead after the heartbeat timeout
for i in $(seq 1 200); do
	[ "$(grep -c "declared dead" "$T/sched.log")" -ge 3 ] && break
	sleep 0.05
done
dead_after=$(/usr/bin/python3 -c "import sys,time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$cut_at")
grep "declared dead" "$T/sched.log" || true
[ "$(grep -c "declared dead" "$T/sched.log")" = 3 ] || { cat "$T/sched.log"; echo "FAIL: want 3 nodes declared dead"; exit 1; }
grep -q "(server rank 1, ${NETNS_IP[3]}:.*declared dead: no heartbeat" "$T/sched.log" ||
	{ echo "FAIL: server 1 not declared dead for its silence"; exit 1; }
for w in 2 3; do
	grep -q "(worker rank $w, ${NETNS_IP[3]}:.*declared dead" "$T/sched.log" ||
		{ echo "FAIL: worker $w not declared dead"; exit 1; }
done
echo "3 nodes of host 3 declared dead ${dead_after} s after the cut (heartbeat timeout 2 s)"

# docs/operations.md step 2: the replacement, on another host
(RDMAPS_LOG_LEVEL=info RDMAPS_RANK=1 RDMAPS_HOST=${NETNS_IP[4]} netns_run 4 "$BIN/rdmaps-server" --restore "$RDMAPS_CHECKPOINT_DIR" \
	> "$T/server1-restored.log" 2>&1) &
restored=$!
for w in 0 1; do
	if ! timeout 150 tail --pid="${wpid[$w]}" -f /dev/null; then
		tail -n 20 "$T"/*.log
		echo "FAIL: worker $w did not finish"
		exit 1
	fi
	wait "${wpid[$w]}" || { tail -n 20 "$T"/*.log; echo "FAIL: worker $w failed"; exit 1; }
done
rc=0; timeout 30 tail --pid="$sched" -f /dev/null || rc=1
[ $rc = 0 ] && { wait "$sched" || rc=$?; }
tail -n 3 "$T/sched.log"
[ $rc = 0 ] || { echo "FAIL: the scheduler did not end the job cleanly ($rc)"; exit 1; }
grep -q "job over: 2 worker(s) left, 2 died" "$T/sched.log" || { echo "FAIL: no 'job over' with 2 left, 2 died"; exit 1; }
timeout 30 tail --pid="$restored" -f /dev/null || { echo "FAIL: the restored server did not stop"; exit 1; }
grep "restored from" "$T/server1-restored.log" || { cat "$T/server1-restored.log"; echo "FAIL: server 1 not restored"; exit 1; }
grep -q "at clock 60" "$T/server1-restored.log" || { echo "FAIL: not restored at clock 60"; exit 1; }
for w in 0 1; do
	grep "server 1 reconnected at ${NETNS_IP[4]}:" "$T/worker$w.log" ||
		{ echo "FAIL: worker $w did not reconnect to the replacement on host 4"; exit 1; }
done
tail -n 2 "$T/worker0.log"
/usr/bin/python3 - "$T/summary.json" "$MIN" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
need = float(sys.argv[2])
print(f"test accuracy {s['test_accuracy']:.4f} (need >= {need}) after losing a host")
sys.exit(0 if s["test_accuracy"] >= need else 1)
PY
echo "PASS"
