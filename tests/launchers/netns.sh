# N "hosts" on one machine (sourced): Linux network namespaces joined by a
# bridge, each with its own address on a private /24, torn down by netns_down
# (call it from the caller's EXIT trap). Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN).
#   netns_up N           hosts 1..N; NETNS_IP[i] is host i's address, the
#                        bridge (this, the root namespace) is .254
#   netns_run I CMD...   run CMD on host I (in the background: use &)
#   netns_cut I          host I's link down: its packets stop, as when a
#                        machine's network dies (no FIN, no RST)
#   netns_slow I RATE    host I's link limited to RATE (tc units: 100mbit,
#                        1gbit, ...) both ways: a token bucket (tbf, built into
#                        the kernel; no sch_netem needed) on the egress of each
#                        end of its veth, burst 64 KiB, at most 50 ms queued
#   netns_unslow I       host I's link back to full speed
#   netns_kill_host I    SIGKILL every process on host I and delete it: the
#                        machine is gone
#   netns_down           every host and the bridge gone, their processes killed
#   netns_test_begin N   a test's frame: a temporary directory $T (kept with
#                        KEEP_OUT=1), netns_down and T's removal on EXIT,
#                        TERM and INT ending the script, then netns_up N
# launcher_skip (lib.sh) says why when namespaces cannot be made.

NETNS_N=0
NETNS_TAG=r$$
NETNS_BR=rpsbr$$
NETNS_NET=
declare -a NETNS_IP=()

netns_name() { echo "rps$$-h$1"; }

netns_up()
{
	local n=$1 i ns
	command -v ip >/dev/null || launcher_skip "ip (iproute2) not installed"
	[ "$(id -u)" = 0 ] || launcher_skip "network namespaces need root"
	# a /24 of 10.200.0.0/13 chosen from the pid: concurrent tests do not collide
	NETNS_NET=10.$((200 + ($$ / 256) % 8)).$(($$ % 256))
	ip link add "$NETNS_BR" type bridge 2>/dev/null ||
		launcher_skip "cannot create a bridge: $(ip link add "$NETNS_BR" type bridge 2>&1)"
	NETNS_N=$n
	ip addr add "$NETNS_NET.254/24" dev "$NETNS_BR"
	ip link set "$NETNS_BR" up
	for i in $(seq 1 "$n"); do
		ns=$(netns_name "$i")
		ip netns add "$ns" 2>/dev/null || {
			local why
			why=$(ip netns add "$ns" 2>&1)
			netns_down
			launcher_skip "cannot create a network namespace: $why"
		}
		ip link add "v$NETNS_TAG-$i" type veth peer name eth0 netns "$ns"
		ip link set "v$NETNS_TAG-$i" master "$NETNS_BR" up
		ip -n "$ns" addr add "$NETNS_NET.$i/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set lo up
		NETNS_IP[$i]=$NETNS_NET.$i
	done
	# host 1 reaches every other host over TCP before anything starts
	for i in $(seq 2 "$n"); do
		ip netns exec "$(netns_name "$i")" /usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 7)); s.listen(1); s.settimeout(5); s.accept()' \
			"${NETNS_IP[$i]}" &
		local lp=$! ok=0 t
		for t in $(seq 1 50); do
			if ip netns exec "$(netns_name 1)" /usr/bin/python3 -c '
import socket, sys
socket.create_connection((sys.argv[1], 7), timeout=1)' "${NETNS_IP[$i]}" 2>/dev/null; then
				ok=1
				break
			fi
			sleep 0.05
		done
		wait "$lp" 2>/dev/null || true
		[ $ok = 1 ] || { netns_down; launcher_skip "host 1 cannot reach host $i over the bridge"; }
	done
}

netns_run()
{
	local i=$1
	shift
	exec ip netns exec "$(netns_name "$i")" "$@"
}

netns_cut()
{
	ip link set "v$NETNS_TAG-$1" down
}

netns_slow()
{
	local i=$1 rate=$2 why
	command -v tc >/dev/null || launcher_skip "tc (iproute2) not installed"
	why=$(tc qdisc replace dev "v$NETNS_TAG-$i" root tbf rate "$rate" burst 64kb latency 50ms 2>&1) ||
		launcher_skip "cannot add a tbf qdisc: $why"
	tc -n "$(netns_name "$i")" qdisc replace dev eth0 root tbf rate "$rate" burst 64kb latency 50ms
}

netns_unslow()
{
	tc qdisc del dev "v$NETNS_TAG-$1" root 2>/dev/null || true
	tc -n "$(netns_name "$1")" qdisc del dev eth0 root 2>/dev/null || true
}

netns_kill_host()
{
	local ns pids try
	ns=$(netns_name "$1")
	# kill until none is left (a process could fork while we kill)
	for try in 1 2 3 4 5; do
		pids=$(ip netns pids "$ns" 2>/dev/null || true)
		[ -z "$pids" ] && break
		kill -KILL $pids 2>/dev/null || true
		sleep 0.05
	done
	ip netns del "$ns" 2>/dev/null || true
	ip link del "v$NETNS_TAG-$1" 2>/dev/null || true
}

netns_down()
{
	local i
	for i in $(seq 1 "$NETNS_N"); do
		netns_kill_host "$i" || true
	done
	ip link del "$NETNS_BR" 2>/dev/null || true
	NETNS_N=0
}

netns_test_end()
{
	netns_down
	if [ -n "${KEEP_OUT:-}" ]; then echo "logs kept in $T"; else rm -rf "$T"; fi
}

netns_test_begin()
{
	T=$(mktemp -d)
	trap netns_test_end EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	netns_up "$1"
}
