#!/usr/bin/env bash
# Aggregation on the host before the network (docs/local-aggregation.md), 2
# servers and 4 workers on this host, BSP, over TRANSPORT:
#   local_agg.sh BIN_DIR exact|kill|kill_leader|stale|fmnist [TRANSPORT]
# exact: integer gradients summed exactly at every step with aggregation on
#        (one group of 4) and off (groups of 1); both runs end with the same
#        values (the same FNV-1a of the last pull).
# kill:  worker 2 (a follower) kills itself before step 3: the other three get
#        an error naming it from that step within 20 s (no hang), and the job
#        leaves no segment in /dev/shm.
# kill_leader: the same with worker 0, the host's leader.
# fmnist: Fashion-MNIST (1 epoch of 20000 images, BSP, sums in rank order)
#        with fmnist-train --local-agg on and off: the same final parameters
#        bit for bit (params_fnv1a), the same loss to 17 digits.
# stale: files a dead job left in /dev/shm (old, named like ours) do not
#        change the next job's exact sums, and that job removes them.
set -euo pipefail
BIN=$1
MODE=$2
TRANSPORT=${3:-tcp}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

export RDMAPS_CONSISTENCY=bsp RDMAPS_LOG_LEVEL=info # the segment names are read from the log
export RDMAPS_TIMEOUT_MS=${RDMAPS_TIMEOUT_MS:-20000}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
	# a step takes seconds in the TCG-emulated SoftRoCE guest
	export ITEST_STEPS=${ITEST_STEPS:-5}
fi

left_of() { # the segments of the job logged in $OUT/$1.log still in /dev/shm
	local name
	name=$(sed -n 's/.*segment \/\(rdmaps-agg-[0-9a-f]*\)).*/\1/p' "$OUT/$1.log" | sort -u)
	[ -n "$name" ] || { echo "no segment named in $1.log" >&2; echo "?"; return; }
	for n in $name; do
		[ -e "/dev/shm/$n" ] && echo "/dev/shm/$n"
		[ -e "/dev/shm/$n-d" ] && echo "/dev/shm/$n-d"
	done
	true
}

run() { # run NAME [launch options] -- itest-local MODE: output in $OUT/NAME.log
	local name=$1
	shift
	local rc=0
	"$BIN/rdmaps-launch" --servers 2 --workers 4 --transport "$TRANSPORT" --timeout 100 \
		"${hosts[@]}" "$@" >"$OUT/$name.log" 2>&1 || rc=$?
	return $rc
}

fnv_of() { sed -n 's/.*final fnv1a \([0-9a-f]*\).*/\1/p' "$OUT/$1.log"; }

case "$MODE" in
exact)
	RDMAPS_LOCAL_AGG=auto ITEST_LOCAL_SIZE=4 run on -- "$BIN/itest-local" exact ||
		{ cat "$OUT/on.log"; echo "FAIL: aggregation on"; exit 1; }
	RDMAPS_LOCAL_AGG=off ITEST_LOCAL_SIZE=1 run off -- "$BIN/itest-local" exact ||
		{ cat "$OUT/off.log"; echo "FAIL: aggregation off"; exit 1; }
	grep -h "steps exact\|local aggregation:" "$OUT/on.log" "$OUT/off.log" | sed 's/^/  /'
	a=$(fnv_of on) b=$(fnv_of off)
	echo "final values: on $a, off $b"
	[ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: final values differ"; exit 1; }
	left=$(left_of on)
	[ -z "$left" ] || { echo "FAIL: segments left: $left"; exit 1; }
	echo "PASS"
	;;
kill | kill_leader)
	victim=2
	[ "$MODE" = kill_leader ] && victim=0
	rc=0
	RDMAPS_LOCAL_AGG=auto ITEST_KILL_RANK=$victim ITEST_KILL_STEP=3 ITEST_KILL_MAX_S=20 \
		run kill --expect-killed 1 -- "$BIN/itest-local" kill || rc=$?
	cat "$OUT/kill.log" | grep -E "itest-local|failed as expected|local aggregation" | sed 's/^/  /'
	[ "$rc" = 0 ] || { cat "$OUT/kill.log"; echo "FAIL: launch exited $rc"; exit 1; }
	n=$(grep -c "failed as expected" "$OUT/kill.log" || true)
	[ "$n" = 3 ] || { echo "FAIL: $n of 3 surviving workers reported the loss"; exit 1; }
	grep -Eq "worker $victim of this host|leader \(worker $victim," "$OUT/kill.log" ||
		{ echo "FAIL: the error does not name worker $victim"; exit 1; }
	left=$(left_of kill)
	[ -z "$left" ] || { echo "FAIL: segments left: $left"; exit 1; }
	echo "PASS"
	;;
stale)
	# what a job killed during its first step leaves: a control segment and a
	# data segment, an hour old (and a fresh one, which must be left alone)
	old="/dev/shm/rdmaps-agg-00000000deadbeef"
	fresh="/dev/shm/rdmaps-agg-00000000feedf00d"
	head -c 70000 /dev/urandom >"$old"
	head -c 4096 /dev/urandom >"$old-d"
	head -c 4096 /dev/urandom >"$fresh-d"
	touch -d '1 hour ago' "$old" "$old-d"
	trap 'rm -rf "$OUT"; rm -f "$old" "$old-d" "$fresh-d"' EXIT
	RDMAPS_LOCAL_AGG=auto ITEST_LOCAL_SIZE=4 run stale -- "$BIN/itest-local" exact ||
		{ cat "$OUT/stale.log"; echo "FAIL: job after a stale segment"; exit 1; }
	grep -h "steps exact\|removed" "$OUT/stale.log" | sed 's/^/  /'
	[ ! -e "$old" ] && [ ! -e "$old-d" ] || { echo "FAIL: stale files not removed"; exit 1; }
	[ -e "$fresh-d" ] || { echo "FAIL: a fresh file was removed"; exit 1; }
	echo "PASS"
	;;
fmnist)
	export RDMAPS_BSP_SUM=ordered RDMAPS_OPTIMIZER=momentum RDMAPS_LR=0.1 RDMAPS_MOMENTUM=0.9
	for m in on off; do
		run "fmnist-$m" -- "$BIN/fmnist-train" --epochs 1 --train-limit 20000 --no-progress \
			--local-agg "$m" --summary-json "$OUT/$m.json" ||
			{ cat "$OUT/fmnist-$m.log"; echo "FAIL: fmnist-train --local-agg $m"; exit 1; }
	done
	/usr/bin/python3 - "$OUT/on.json" "$OUT/off.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ok = a["local_agg_group"] == 4 and b["local_agg_group"] == 1
for k in ("test_accuracy", "train_loss_exact", "params_fnv1a", "samples_per_sec"):
    print(f"  {k}: on {a[k]}, off {b[k]}")
    if k != "samples_per_sec":
        ok = ok and a[k] == b[k]
print("PASS" if ok else "FAIL: --local-agg on and off differ")
sys.exit(0 if ok else 1)
PY
	;;
*)
	echo "usage: local_agg.sh BIN_DIR exact|kill|kill_leader|stale|fmnist [TRANSPORT]" >&2
	exit 2
	;;
esac
