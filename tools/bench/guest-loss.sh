#!/usr/bin/env bash
# guest-loss.sh OUTDIR BINDIR [quick]: RDMA bandwidth with packet loss on the
# SoftRoCE link (issue 21, "loss-tolerant RoCE"). Runs where two SoftRoCE
# devices exist; one command from the repository root:
#
#   tools/softroce/rxe-run --rw "$PWD/results" -- \
#       tools/bench/guest-loss.sh "$PWD/results/loss" "$PWD/build-h/bin"
#
# For each loss rate in $LOSSES (default "0 0.1 1" percent), `tc qdisc add
# dev vethN root netem loss P%` on BOTH veths (requests and responses are
# dropped alike), then, in every round ($RDMAPS_BENCH_ROUNDS, default 2):
#   ib_read_bw -o 16 at 256 KiB (rdmaps' READ size, RDMAPS_RDMA_READ_BYTES)
#   (and at 1 MiB with IB1M=1: it drops even without loss), rdmaps-perf pull_bw 1 MiB and push_bw 64 KiB (SGD) with the
#   defaults (or with each RDMAPS_RDMA_ACK_TIMEOUT in $ACKS, e.g. ACKS="12 14 16"),
#   and both again with RDMAPS_RDMA_ACK_TIMEOUT=0 (rdma_cm's default timeout,
#   ~2 s: what rdmaps did before; CMDEFAULT=0 leaves it out).
# Every run's drop and retry counters (tools/bench/counters.sh) go beside it.
# At the end tools/bench/loss_report.py prints every run, the medians and
# each median's share of the loss-free one. Needs sch_netem in the guest
# (tools/softroce/lib.sh loads it).
set -uo pipefail
OUT=${1:?usage: guest-loss.sh OUTDIR BINDIR [quick]}
BIN=${2:?usage: guest-loss.sh OUTDIR BINDIR [quick]}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=counters.sh
. "$here/counters.sh"
dev0=${RDMAPS_RXE_DEV0:-}
dev1=${RDMAPS_RXE_DEV1:-}
ip0=${RDMAPS_RXE_IP0:-}
if [ -z "$dev0" ] || [ -z "$dev1" ] || [ -z "$ip0" ]; then
	echo "SKIP: RDMAPS_RXE_* not set; run through tools/softroce/rxe-run"
	exit 77
fi
mkdir -p "$OUT"
LOSSES=${LOSSES:-"0 0.1 1"}
# ACK timeouts to compare (RDMAPS_RDMA_ACK_TIMEOUT; "default": rdmaps' own
# default, not set). E.g. ACKS="12 14 16" CMDEFAULT=0 to choose a default.
ACKS=${ACKS:-${ACK:-default}}
rounds=${RDMAPS_BENCH_ROUNDS:-2}
secs=3
n256=100
n1m=30
if [ "${3:-}" = quick ]; then
	rounds=1 secs=1 n256=20 n1m=5
fi
limit=90
port=$((19500 + RANDOM % 400))
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-error}
say() { echo "guest-loss: $*"; }

if ! tc qdisc add dev veth0 root netem loss 0% 2>"$OUT/netem.err"; then
	say "cannot add a netem qdisc: $(cat "$OUT/netem.err")"
	say "the guest kernel needs sch_netem (tools/softroce/lib.sh RXE_GUEST_MODULES)"
	exit 1
fi
tc qdisc del dev veth0 root 2>/dev/null

set_loss() {
	local v
	for v in veth0 veth1; do
		tc qdisc del dev "$v" root 2>/dev/null
		if [ "$1" != 0 ]; then
			tc qdisc add dev "$v" root netem loss "$1%" || return 1
		fi
	done
}

wait_tcp() {
	local i
	for i in $(seq 100); do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

# note NAME: the counters of the run just ended into OUT/NAME.cnt
note() { cnt_snap "$OUT/.after"; cnt_diff "$OUT/.before" "$OUT/.after" >"$OUT/$1.cnt"; }

# pt NAME TOOL ARGS...: perftest, server rxe0, client rxe1
pt() {
	local name=$1 tool=$2 spid rc
	shift 2
	port=$((port + 1))
	cnt_snap "$OUT/.before"
	timeout "$limit" "$tool" -d "$dev0" -x 1 -F -p "$port" "$@" >"$OUT/$name.server.txt" 2>&1 &
	spid=$!
	wait_tcp "$port" || say "$name: the server does not listen"
	timeout "$limit" "$tool" -d "$dev1" -x 1 -F -p "$port" "$@" "$ip0" >"$OUT/$name.txt" 2>&1
	rc=$?
	wait "$spid"
	note "$name"
	[ $rc -eq 0 ] || say "$name: $tool $* failed (exit $rc)"
	say "$name: $(awk '$1 ~ /^[0-9]+$/ && NF >= 4 { print $4 " MB/s"; exit }' "$OUT/$name.txt") [$(cat "$OUT/$name.cnt")]"
}

# rp NAME ARGS...: rdmaps-perf, servers on rxe0, workers on rxe1
rp() {
	local name=$1
	shift
	cnt_snap "$OUT/.before"
	if ! timeout $((limit * 2)) "$BIN/rdmaps-perf" --local-cluster --transport rdma --json -q \
		--timeout $((limit * 2 - 10)) "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"; then
		say "$name: rdmaps-perf $* FAILED"
		tail -n 3 "$OUT/$name.err" | sed 's/^/  | /'
	fi
	note "$name"
	say "$name: $(/usr/bin/python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["results"][0]["bw_MBps"], 2), "MB/s")' "$OUT/$name.json" 2>/dev/null) [$(cat "$OUT/$name.cnt")]"
}

{
	echo "kernel $(uname -r) cpus $(nproc) netdev_max_backlog $(sysctl -n net.core.netdev_max_backlog)"
	echo "losses $LOSSES rounds $rounds secs $secs"
} >"$OUT/info.txt"
for k in $(seq "$rounds"); do
	for l in $LOSSES; do
		set_loss "$l" || { say "netem loss $l% failed"; exit 1; }
		say "round $k, loss $l%"
		pt "ib_read_bw_256k_l${l}_r$k" ib_read_bw -o 16 -s 262144 -n "$n256"
		# single 1 MiB READs overflow the guest's backlog even without
		# netem (docs/benchmarks.md, "Fair baselines"): only on request
		[ "${IB1M:-0}" = 1 ] && pt "ib_read_bw_1m_l${l}_r$k" ib_read_bw -o 16 -s 1048576 -n "$n1m"
		for a in $ACKS; do
			sfx=; [ "$a" = default ] || sfx=_ack$a
			(
				[ "$a" = default ] || export RDMAPS_RDMA_ACK_TIMEOUT="$a"
				rp "pull_1m${sfx}_l${l}_r$k" pull_bw -s 1M -D "$secs"
				RDMAPS_OPTIMIZER=sgd rp "push_64k${sfx}_l${l}_r$k" push_bw -s 64K -D "$secs"
			)
		done
		if [ "${CMDEFAULT:-1}" = 1 ]; then
			RDMAPS_RDMA_ACK_TIMEOUT=0 rp "pull_1m_cmdefault_l${l}_r$k" pull_bw -s 1M -D "$secs"
			RDMAPS_RDMA_ACK_TIMEOUT=0 RDMAPS_OPTIMIZER=sgd rp "push_64k_cmdefault_l${l}_r$k" push_bw -s 64K -D "$secs"
		fi
	done
done
set_loss 0
/usr/bin/python3 "$here/loss_report.py" "$OUT"
