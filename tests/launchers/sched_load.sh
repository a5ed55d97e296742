#!/usr/bin/env bash
# The scheduler at the size of a large job, measured on this machine:
#   sched_load.sh BIN_DIR [SERVERS] [WORKERS] [HEARTBEAT_MS] [HOLD_S]
# (default 64 servers, 512 workers, heartbeat 1000 ms, 8 s held). A real
# rdmaps-sched; sched-load joins every node from one process, passes one
# barrier of all of them, holds the cluster with heartbeats only and leaves.
# Printed (docs/deploy.md rests on them): time until every node has its map,
# the barrier's time, the scheduler's CPU share while only heartbeats come,
# its open file descriptors and resident memory, the time and size of one
# `rdmaps-ctl status`. Checks: every node joined and passed the barrier, no
# node declared dead, the status lists them all alive, the scheduler holds one
# descriptor per node and used < 25% of a core for the heartbeats, the job
# ends cleanly (the scheduler exits 0).
set -euo pipefail
BIN=$(cd "$1" && pwd)
S=${2:-64}
W=${3:-512}
HB=${4:-1000}
HOLD=${5:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
T=$(mktemp -d)
pids=()
cleanup()
{
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
N=$((S + W))
# sched-load holds 3 descriptors per node (socket, epoll, eventfd)
need=$((4 * N + 256))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
	ulimit -n "$need" 2>/dev/null || launcher_skip "ulimit -n $need refused (hard limit $(ulimit -Hn))"
fi
export RDMAPS_SCHEDULER=127.0.0.1:$(free_port) RDMAPS_NUM_SERVERS=$S RDMAPS_NUM_WORKERS=$W
export RDMAPS_SECRET=sched-load RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_HEARTBEAT_MS=$HB
"$BIN/rdmaps-sched" > "$T/sched.log" 2>&1 &
sched=$!
pids+=("$sched")
"$BIN/sched-load" "$RDMAPS_SCHEDULER" "$RDMAPS_SECRET" "$S" "$W" "$HB" "$HOLD" > "$T/load.out" 2> "$T/load.err" &
load=$!
pids+=("$load")
for i in $(seq 1 1200); do
	grep -q "^barrier_ms" "$T/load.out" && break
	kill -0 "$load" 2>/dev/null || break
	sleep 0.05
done
grep -q "^barrier_ms" "$T/load.out" || { cat "$T/load.out" "$T/load.err" "$T/sched.log"; echo "FAIL: no barrier"; exit 1; }
cat "$T/load.out"
sleep 1
cpu() { awk '{ print $14 + $15 }' "/proc/$sched/stat"; }
tck=$(getconf CLK_TCK)
c0=$(cpu); t0=$(date +%s.%N)
sleep $((HOLD - 3))
c1=$(cpu); t1=$(date +%s.%N)
fds=$(ls "/proc/$sched/fd" | wc -l)
rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$sched/status")
s0=$(date +%s.%N)
RDMAPS_TIMEOUT_MS=5000 "$BIN/rdmaps-ctl" status > "$T/status" 2>&1 || { cat "$T/status"; echo "FAIL: status"; exit 1; }
s1=$(date +%s.%N)
/usr/bin/python3 - "$c0" "$c1" "$t0" "$t1" "$tck" "$fds" "$rss" "$s0" "$s1" "$T/status" "$N" "$HB" > "$T/figures" <<'PY'
import os, sys
c0, c1, t0, t1, tck = map(float, sys.argv[1:6])
fds, rss, s0, s1 = int(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8]), float(sys.argv[9])
n, hb = int(sys.argv[11]), int(sys.argv[12])
cpu = (c1 - c0) / tck / (t1 - t0)
hb_per_s = n * 1000.0 / hb
print(f"scheduler_cpu_share {cpu:.4f}  (of one core, {t1 - t0:.1f} s of heartbeats only)")
print(f"heartbeats_per_s {hb_per_s:.0f}  cpu_us_per_heartbeat {cpu * 1e6 / hb_per_s:.1f}")
print(f"scheduler_fds {fds}  scheduler_rss_kb {rss}  rss_kb_per_node {rss / n:.1f}")
print(f"status_ms {(s1 - s0) * 1000:.0f}  status_bytes {os.path.getsize(sys.argv[10])}")
PY
cat "$T/figures"
head -n 2 "$T/status"
grep -q "servers $S/$S alive, workers $W/$W alive, 0 dead" "$T/status" || { echo "FAIL: not every node alive"; exit 1; }
[ "$fds" -ge "$N" ] || { echo "FAIL: $fds descriptors for $N nodes"; exit 1; }
awk '/^scheduler_cpu_share/ { exit !($2 < 0.25) }' "$T/figures" || { echo "FAIL: heartbeats cost the scheduler >= 25% of a core"; exit 1; }
rc=0; wait "$load" || rc=$?
cat "$T/load.out" | tail -n 2
[ $rc = 0 ] || { cat "$T/load.err"; echo "FAIL: sched-load exit $rc"; exit 1; }
rc=0; timeout 20 tail --pid="$sched" -f /dev/null || rc=1
[ $rc = 0 ] && { wait "$sched" || rc=$?; }
[ $rc = 0 ] || { tail "$T/sched.log"; echo "FAIL: the scheduler did not end the job cleanly"; exit 1; }
echo "PASS"
