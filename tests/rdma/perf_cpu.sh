#!/usr/bin/env bash
# perf_cpu.sh BINDIR: the default polling mode sleeps when nothing arrives.
# A pull-only RDMA run (READs need no server CPU) of 2 s: the servers' CPU time
# (/proc/<pid>/stat, as rdmaps-perf reports it: srv_cpu) must stay <= 10% of a
# core with the defaults (adaptive: spin RDMAPS_RDMA_POLL_SPIN_US, then sleep
# on the completion channel), while RDMAPS_RDMA_EVENT_MODE=0 (busy-poll)
# burns >= 20% in the same run: so the measurement can tell them apart.
# Limits are loose: the guest is emulated and the host is shared.
set -uo pipefail
BIN=${1:?usage: perf_cpu.sh BINDIR}
[ -n "${RDMAPS_RXE_IP0:-}" ] || { echo "SKIP: RDMAPS_RXE_* not set; run through tools/softroce/rxe-run"; exit 77; }
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-error}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu() { # MODE-NAME [ENV...]: server CPU % of a 2 s 64 KiB pull_bw
	local name=$1
	shift
	env "$@" timeout 120 "$BIN/rdmaps-perf" --local-cluster --transport rdma --json -q \
		--timeout 100 pull_bw -s 64K -D 2 >"$tmp/$name.json" 2>"$tmp/$name.err" || {
		echo "FAIL: rdmaps-perf ($name) failed:"
		tail -n 5 "$tmp/$name.err"
		exit 1
	}
	/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(r["server_cpu_pct"], r["bw_MBps"])' "$tmp/$name.json"
}
# (no process substitution: the guest has no /dev/fd)
r=$(cpu default) || { echo "$r"; exit 1; }
read -r ev evbw <<<"$r"
r=$(cpu busypoll RDMAPS_RDMA_EVENT_MODE=0) || { echo "$r"; exit 1; }
read -r bp bpbw <<<"$r"
echo "server CPU in a 2 s pull-only run: default ${ev}% of a core (${evbw} MB/s), busy-poll ${bp}% (${bpbw} MB/s)"
ok=1
awk -v v="$ev" 'BEGIN { exit !(v <= 10) }' || { echo "FAIL: default mode used ${ev}% > 10%"; ok=0; }
awk -v v="$bp" 'BEGIN { exit !(v >= 20) }' || { echo "FAIL: busy-poll used only ${bp}% < 20%: the measurement sees no polling"; ok=0; }
[ $ok = 1 ] && echo "PASS"
[ $ok = 1 ]
