#!/usr/bin/env bash
# The communication benchmark over a slowed link, between 2 "hosts" (network
# namespaces on a bridge, netns.sh):
#   host 1: `rdmaps-perf` server side (rdmaps-sched and 1 server)
#   host 2: `rdmaps-perf HOST` client (the worker)
# push_bw of 64 KiB keys over TCP for DURATION s, first on the full-speed link,
# then with host 1's link limited to RATE_MBIT Mbit/s both ways (netns_slow:
# tbf, no sch_netem needed). The slowed figure must be at most the token
# bucket's rate (RATE_MBIT/8 MB/s, +10% for the bucket's burst and timing) and
# at most a third of the full-speed figure; both are printed.
#   slowlink.sh BIN_DIR [RATE_MBIT] [DURATION]
set -euo pipefail
BIN=$(cd "$1" && pwd)
RATE=${2:-100}
DUR=${3:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/netns.sh"
netns_test_begin 2
echo "hosts: ${NETNS_IP[*]:1} (bridge $NETNS_NET.254)"
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_TRANSPORT=tcp RDMAPS_SECRET=slowlink-test

# bench NAME: one push_bw run, server side on host 1, client on host 2; prints
# the MB/s (run in $(...): a failure exits that subshell, and set -e this script)
bench()
{
	local name=$1 srv rc=0 wrc=0
	(netns_run 1 timeout 60 "$BIN/rdmaps-perf" --host "${NETNS_IP[1]}" --timeout 50 -q \
		> "$T/$name-server.log" 2>&1) &
	srv=$!
	# the client retries its control connection until the server side listens
	(netns_run 2 timeout 60 "$BIN/rdmaps-perf" push_bw -s 64K -D "$DUR" --json --timeout 50 \
		--worker-host "${NETNS_IP[2]}" "${NETNS_IP[1]}" > "$T/$name.json" 2> "$T/$name.err") || rc=$?
	wait "$srv" || wrc=$?
	[ "$rc" != 0 ] || rc=$wrc
	if [ "$rc" != 0 ]; then
		tail -n 20 "$T/$name-server.log" "$T/$name.err" >&2
		echo "FAIL: $name: rdmaps-perf exited $rc" >&2
		exit 1
	fi
	/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["bw_MBps"])' "$T/$name.json"
}

full=$(bench full)
echo "push_bw 64 KiB, full-speed link: $full MB/s"
netns_slow 1 "${RATE}mbit"
tc qdisc show dev "v$NETNS_TAG-1"
slow=$(bench slow)
echo "push_bw 64 KiB, host 1's link at ${RATE} Mbit/s (tbf): $slow MB/s"
netns_unslow 1
if tc qdisc show dev "v$NETNS_TAG-1" | grep -q tbf ||
	tc -n "$(netns_name 1)" qdisc show dev eth0 | grep -q tbf; then
	echo "FAIL: netns_unslow left a tbf qdisc on host 1's link"
	exit 1
fi
/usr/bin/python3 - "$full" "$slow" "$RATE" <<'PY'
import sys
full, slow, rate = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
cap = rate / 8
print(f"slowed: {slow:.2f} MB/s, tbf rate {cap:.2f} MB/s (limit {cap * 1.1:.2f}); full speed {full:.2f} MB/s")
fails = []
if slow > cap * 1.1:
    fails.append(f"slowed figure {slow:.2f} MB/s above the tbf rate {cap:.2f} MB/s + 10%")
if slow > full / 3:
    fails.append(f"slowed figure {slow:.2f} MB/s not clearly below the full-speed {full:.2f} MB/s")
if slow < cap * 0.3:
    fails.append(f"slowed figure {slow:.2f} MB/s far below the tbf rate: something else is limiting")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
echo "PASS"
