#!/usr/bin/env bash
# smoke.sh [verbs|rdmacm]: check that the SoftRoCE devices of the harness work.
# Run it through the harness:  tools/softroce/rxe-run -- tests/rdma/smoke.sh
#
#   verbs  (default) ibv_devices lists rxe0 and rxe1; ib_read_lat -o 16 -n 100
#          with its server on rxe0 and its client on rxe1 (out-of-band set-up
#          over 10.9.0.1, RoCE v2 GID index 1); both must exit 0 and the
#          client must print a latency line.
#   rdmacm QPs connected through librdmacm, as the rdmaps transport does:
#          ib_read_lat -R to 10.9.0.1 (perftest resolves a local destination
#          to rxe0 on both ends: a loopback test of rxe0), then rping -V
#          (RDMA READ/WRITE) bound to 10.9.0.2 -> 10.9.0.1, i.e. rxe1 -> rxe0.
# Every cross-device test also checks that rxe1's sent_pkts counter moved,
# so traffic really went rxe1 -> veth1 -> veth0 -> rxe0.
# Exit: 0 pass, 1 fail, 77 (skip) when run outside the harness.
set -uo pipefail

dev0=${RDMAPS_RXE_DEV0:-}
dev1=${RDMAPS_RXE_DEV1:-}
ip0=${RDMAPS_RXE_IP0:-}
ip1=${RDMAPS_RXE_IP1:-}
if [ -z "$dev0" ] || [ -z "$dev1" ] || [ -z "$ip0" ] || [ -z "$ip1" ]; then
	echo "SKIP: RDMAPS_RXE_* not set; run through tools/softroce/rxe-run"
	exit 77
fi
mode=${1:-verbs}
limit=${SMOKE_TIMEOUT:-120} # per program, seconds
port=$((18515 + RANDOM % 1000))
failed=0

say() { echo "smoke: $*"; }
fail() {
	say "FAIL: $*"
	failed=1
}

# wait_listen tcp:PORT | cm:PORT: wait until the server listens, on a TCP
# port (perftest's out-of-band channel) or an rdma_cm port.
wait_listen() {
	local kind=${1%%:*} p=${1#*:}
	for _ in $(seq $((limit * 5))); do
		if [ "$kind" = tcp ]; then
			ss -Hltn "sport = :$p" 2>/dev/null | grep -q . && return 0
		else
			rdma res show cm_id 2>/dev/null | grep 'state LISTEN' | grep -q ":$p " && return 0
		fi
		sleep 0.2
	done
	return 1
}

# server_client NAME 'SERVER CMD' 'CLIENT CMD' tcp:PORT|cm:PORT [last]
# Runs both, checks both exit 0; the client's output lands in $out.
# Status 2 (not a failure yet unless "last" is given): the client's rdma_cm
# connect was rejected (perftest -R's listener, seen LISTENing, sometimes
# rejects the first connect under emulation); the server is stopped at once
# and the caller runs the pair again.
out=""
server_client() {
	local name=$1 scmd=$2 ccmd=$3 wport=$4 last=${5:-last} slog spid src crc
	slog=$(mktemp)
	say "$name: server: $scmd"
	timeout "$limit" bash -c "$scmd" >"$slog" 2>&1 &
	spid=$!
	wait_listen "$wport" || say "$name: nothing listens on $wport after $limit s"
	say "$name: client: $ccmd"
	out=$(timeout "$limit" bash -c "$ccmd" 2>&1)
	crc=$?
	if [ $crc -ne 0 ] && [ "$last" != last ] && echo "$out" | grep -q RDMA_CM_EVENT_REJECTED; then
		kill "$spid" 2>/dev/null # its client is gone: do not wait out its timeout
		wait "$spid" 2>/dev/null
		echo "$out" | sed "s/^/  client| /"
		say "$name: the connect was rejected; running the pair again"
		rm -f "$slog"
		return 2
	fi
	wait "$spid"
	src=$?
	echo "$out" | sed "s/^/  client| /"
	if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
		sed "s/^/  server| /" "$slog"
		fail "$name: server exit $src, client exit $crc"
		rm -f "$slog"
		return 1
	fi
	rm -f "$slog"
	return 0
}

# sent_pkts DEV: the device's packet counter (rxe hw_counters)
sent_pkts() {
	cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts" 2>/dev/null || echo 0
}
# moved DEV BEFORE NAME: fail unless DEV sent packets since BEFORE
moved() {
	local now
	now=$(sent_pkts "$1")
	if [ "$now" -gt "$2" ]; then
		say "$3: $1 sent $((now - $2)) packets"
	else
		fail "$3: $1 sent no packets: the traffic did not take $1"
	fi
}

# The line of a perftest latency table: "#bytes #iterations t_min ...".
# Status 0: a number; 1: no line (fail); 2: "inf", i.e. perftest's CPU clock
# calibration failed, which happens under emulation on a busy host (its r^2
# check), not an RDMA problem: the caller runs the pair again.
check_lat() {
	local name=$1 line
	line=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && $2 == 100 && NF >= 5 { print; exit }')
	if [ -z "$line" ]; then
		fail "$name: no latency line in the client's output"
		return 1
	fi
	echo "$line" | awk -v n="$name" '{ printf "smoke: %s: %s B, typical %s us (min %s, max %s)\n", n, $1, $5, $3, $4 }'
	case $(echo "$line" | awk '{ print $5 }') in
	inf | nan | -nan) return 2 ;;
	esac
	return 0
}

# lat_test NAME 'SERVER CMD' 'CLIENT CMD' tcp:PORT|cm:PORT: up to 3 runs until
# the latency is a number; an unmeasurable latency after 3 runs is a warning.
lat_test() {
	local name=$1 try rc
	for try in 1 2 3; do
		server_client "$name" "$2" "$3" "$4" "$([ $try = 3 ] && echo last || echo again)"
		rc=$?
		[ $rc = 2 ] && continue
		[ $rc = 0 ] || return 1
		check_lat "$name"
		rc=$?
		[ $rc = 2 ] || return $rc
		say "$name: latency not measurable (perftest clock calibration), run $try of 3"
	done
	say "WARNING: $name: RDMA worked but no latency number in 3 runs"
	return 0
}

case $mode in
verbs)
	devs=$(ibv_devices 2>&1)
	echo "$devs" | sed 's/^/  ibv_devices| /'
	for d in "$dev0" "$dev1"; do
		echo "$devs" | awk '{ print $1 }' | grep -qx "$d" || fail "ibv_devices does not list $d"
	done
	for d in "$dev0" "$dev1"; do
		ibv_devinfo -d "$d" | grep -q 'state:.*PORT_ACTIVE' || fail "$d: port not ACTIVE"
	done
	[ $failed = 0 ] || exit 1
	before=$(sent_pkts "$dev1")
	lat_test ib_read_lat \
		"ib_read_lat -d $dev0 -x 1 -o 16 -n 100 -p $port" \
		"ib_read_lat -d $dev1 -x 1 -o 16 -n 100 -p $port $ip0" "tcp:$port" &&
		moved "$dev1" "$before" ib_read_lat
	;;
rdmacm)
	before=$(sent_pkts "$dev0")
	lat_test "ib_read_lat -R" \
		"ib_read_lat -R -o 16 -n 100 -p $port" \
		"ib_read_lat -R -o 16 -n 100 -p $port $ip0" "cm:$port" &&
		moved "$dev0" "$before" "ib_read_lat -R (loopback)"
	port=$((port + 1))
	before=$(sent_pkts "$dev1")
	if server_client rping \
		"rping -s -a $ip0 -p $port -C 10 -V" \
		"rping -c -I $ip1 -a $ip0 -p $port -C 10 -V" "cm:$port"; then
		say "rping: 10 pings validated"
		moved "$dev1" "$before" rping
	fi
	;;
*)
	echo "usage: smoke.sh [verbs|rdmacm]" >&2
	exit 2
	;;
esac

if [ $failed = 0 ]; then
	say "PASS ($mode)"
	exit 0
fi
say "FAIL ($mode)"
exit 1
