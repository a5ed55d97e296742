#!/usr/bin/env bash
# guest-bench.sh OUTDIR BINDIR [quick]: the RDMA half of the benchmark suite. Runs
# where two SoftRoCE devices exist (inside tools/softroce/rxe-run): perftest
# (ib_read_lat, ib_read_bw, ib_send_lat, ib_send_bw) with its server on rxe0
# (10.9.0.1) and its client on rxe1, then rdmaps-perf --transport rdma on
# the same devices (servers on rxe0, workers on rxe1) and the same sizes.
# Raw outputs land in OUTDIR (perftest text, rdmaps-perf JSON); the host
# side (tools/bench/report.py) parses them.
#
# The guest is emulated (TCG, 2 vCPUs): every run is kept to a few seconds.
# "quick" shortens everything further (a check of the plumbing).
set -uo pipefail
OUT=${1:?usage: guest-bench.sh OUTDIR BINDIR}
BIN=${2:?usage: guest-bench.sh OUTDIR BINDIR}
dev0=${RDMAPS_RXE_DEV0:-}
dev1=${RDMAPS_RXE_DEV1:-}
ip0=${RDMAPS_RXE_IP0:-}
if [ -z "$dev0" ] || [ -z "$dev1" ] || [ -z "$ip0" ]; then
	echo "SKIP: RDMAPS_RXE_* not set; run through tools/softroce/rxe-run"
	exit 77
fi
mkdir -p "$OUT"
quick=${3:-}
LAT_SIZES="8 64 512 4096"
SEND_LAT_SIZES="8 4096"
BW_SIZES="4096 65536 1048576"
lat_iters=1000
bw_secs=3  # rdmaps-perf -D per size
cpu_secs=10
rounds=${RDMAPS_BENCH_ROUNDS:-5} # of the pull-latency and push-bandwidth comparisons
# perftest bandwidth by iterations (its -D mode reports 0 MB/s for sends
# and measures inside 2 s margins): a few seconds each at SoftRoCE-in-TCG
# speeds (5..30 MB/s)
bw_iters() {
	case $1 in
	4096) echo 2000 ;;
	65536) echo 300 ;;
	*) echo 40 ;;
	esac
}
if [ "$quick" = quick ]; then
	LAT_SIZES="8 4096"
	SEND_LAT_SIZES="8"
	BW_SIZES="1048576"
	lat_iters=200
	bw_secs=1
	cpu_secs=2
	rounds=1
	bw_iters() { echo 20; }
fi
limit=90 # seconds, any one program
port=$((19000 + RANDOM % 500))
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-error}

say() { echo "guest-bench: $*"; }
# drop / retry counters before and after every run: OUT/NAME.cnt (counters.sh;
# report.py flags a run with drops or retries instead of using it)
# shellcheck source=counters.sh
. "$(dirname "$0")/counters.sh"
cnt_note() { cnt_snap "$OUT/.cnt.after"; cnt_diff "$OUT/.cnt.before" "$OUT/.cnt.after" >"$OUT/$1.cnt"; }
cnt_text() { case $(cat "$OUT/$1.cnt") in "drops 0 retries 0") echo "" ;; *) echo ", FLAGGED: $(cat "$OUT/$1.cnt")" ;; esac; }
# rxe under emulation sometimes drops its own ACKs ("rdma_rxe: Failed sending
# ACK" in the kernel log): count them per test, they explain outliers
acks() { dmesg 2>/dev/null | grep -c 'Failed sending ACK'; }
ack0=0
ack_note() {
	local n=$(($(acks) - ack0))
	[ "$n" -gt 0 ] && echo ", $n rxe ACK failures"
}
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }

{
	echo "kernel $(uname -r)"
	echo "cpus $(nproc)"
	grep -m1 'model name' /proc/cpuinfo
	ibv_devinfo -d "$dev0" 2>/dev/null | grep -E 'hca_id|active_mtu|state'
} >"$OUT/guest-info.txt" 2>&1

wait_tcp() {
	local i
	for i in $(seq 100); do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

# pt NAME TOOL ARGS...: perftest server on rxe0, client on rxe1, the client's
# output in OUT/NAME.txt. Latency tests whose clock calibration failed under
# emulation (a table of "inf") are run again, up to 3 times.
pt() {
	local name=$1 tool=$2 try
	shift 2
	for try in 1 2 3; do
		port=$((port + 1))
		ack0=$(acks)
		cnt_snap "$OUT/.cnt.before"
		timeout "$limit" "$tool" -d "$dev0" -x 1 -F -p "$port" "$@" >"$OUT/$name.server.txt" 2>&1 &
		local spid=$!
		wait_tcp "$port" || say "$name: the server does not listen"
		timeout "$limit" "$tool" -d "$dev1" -x 1 -F -p "$port" "$@" "$ip0" >"$OUT/$name.txt" 2>&1
		local rc=$?
		wait "$spid"
		cnt_note "$name"
		if [ $rc -ne 0 ]; then
			say "$name: $tool $* failed (exit $rc)"
			sed 's/^/  | /' "$OUT/$name.txt" | tail -n 5
			continue
		fi
		if grep -qE '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+.*(inf|nan)' "$OUT/$name.txt"; then
			say "$name: perftest could not calibrate its clock (emulation), run $try of 3"
			continue
		fi
		say "$name: $(awk '$1 ~ /^[0-9]+$/ && NF >= 4 { print; exit }' "$OUT/$name.txt" | tr -s ' \t' ' ') ($(elapsed) s$(ack_note)$(cnt_text "$name"))"
		return 0
	done
	return 1
}

# rp NAME ARGS...: rdmaps-perf on a local cluster over rdma, JSON in OUT/NAME.json
rp() {
	local name=$1
	shift
	ack0=$(acks)
	cnt_snap "$OUT/.cnt.before"
	if timeout $((limit * 3)) "$BIN/rdmaps-perf" --local-cluster --transport rdma --json -q \
		--timeout $((limit * 3 - 10)) "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"; then
		cnt_note "$name"
		say "$name: rdmaps-perf $* ($(elapsed) s$(ack_note)$(cnt_text "$name"))"
	else
		cnt_note "$name"
		say "$name: rdmaps-perf $* FAILED ($(elapsed) s)"
		tail -n 5 "$OUT/$name.err" | sed 's/^/  | /'
		rm -f "$OUT/$name.json"
	fi
}

say "perftest on $dev0 <- $dev1 ($ip0)"
for s in $SEND_LAT_SIZES; do
	pt "ib_send_lat_$s" ib_send_lat -s "$s" -n "$lat_iters"
done
for s in $BW_SIZES; do
	pt "ib_read_bw_$s" ib_read_bw -o 16 -s "$s" -n "$(bw_iters "$s")"
done
# The baseline of a 1 MiB pull at matched READ sizes: rdmaps posts READs of at
# most RDMAPS_RDMA_READ_BYTES (256K) in whole 16 KiB chunks plus their version
# lines, 14 chunks = 229,376 bytes of data (worker/read_mem.c). A single 1 MiB
# READ (1,024 packets) overflows the guest's netdev_max_backlog (1000) and
# measures retransmission timeouts, not the fabric (docs/benchmarks.md).
pt ib_read_bw_match1m ib_read_bw -o 16 -s 229376 -n "$(bw_iters 65536)"

lat_list=$(echo "$LAT_SIZES" | tr ' ' ',')
bw_list=$(echo "$BW_SIZES" | tr ' ' ',')
# Default settings: polling threads sleep on their completion channels when
# idle (RDMAPS_RDMA_EVENT_MODE=1, after RDMAPS_RDMA_POLL_SPIN_US), a waiting
# caller reaps its own completions (RDMAPS_WAIT_SPIN_US). The 10 s pull-only
# CPU check runs both ways (and with pure busy-polling).
say "rdmaps-perf over rdma, servers on $dev0, workers on $dev1"
rp rdmaps_push_lat push_lat --sizes "$(echo "$SEND_LAT_SIZES" | tr ' ' ',')" -n "$lat_iters"
rp rdmaps_pull_bw pull_bw --sizes "$bw_list" -D "$bw_secs"
# The pull-latency and push-bandwidth targets: $rounds interleaved rounds of
# perftest and rdmaps-perf, and the report takes each tool's best round. The
# emulated guest runs in a fast or a slow mode for a whole program (about 2x
# apart, perftest as much as rdmaps, see docs/benchmarks.md); one run of
# each would compare whichever modes they happened to land in.
for k in $(seq "$rounds"); do
	say "round $k of $rounds"
	for s in $LAT_SIZES; do
		pt "ib_read_lat_${s}_r$k" ib_read_lat -o 16 -s "$s" -n "$lat_iters"
	done
	rp "rdmaps_pull_lat_r$k" pull_lat --sizes "$lat_list" -n "$lat_iters"
	pt "ib_send_bw_65536_r$k" ib_send_bw -s 65536 -n "$(bw_iters 65536)"
	RDMAPS_OPTIMIZER=sgd rp "rdmaps_push_bw_r$k" push_bw -s 64K -D "$bw_secs"
done
rp rdmaps_cpu_pull pull_bw -s 64K -D "$cpu_secs"
RDMAPS_RDMA_EVENT_MODE=0 rp rdmaps_cpu_pull_busypoll pull_bw -s 64K -D "$cpu_secs"
say "done in $(elapsed) s"
