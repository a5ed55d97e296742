#!/usr/bin/env bash
# Time per training step over a bandwidth-limited link, compressed against
# uncompressed (docs/compression.md). Run as root; it sets up and removes
# everything itself and touches nothing outside its own private namespaces:
#
#   two network namespaces joined by one veth pair (10.RR.SS.1 <-> .2),
#   each end's egress shaped with `tc qdisc ... tbf rate $RATE` (both ways);
#   namespace "ps": rdmaps-sched and the servers; namespace "wk": the workers
#   (fmnist-train, BSP, TCP).
#
#   tools/bench/shaped-link.sh BIN_DIR [options] [-- extra fmnist-train args]
#     --rate R        tc rate of the link (default 1gbit; "none": no shaping)
#     --shape both|up both directions shaped (default), or only the workers'
#                     egress (pushes; pulls at full speed): what compressed
#                     pushes alone can win
#     --codecs LIST   comma-separated --compress values (default
#                     none,fp16,bf16,topk:0.01,sign)
#     --workers N     fmnist-train processes (default 4)
#     --servers N     rdmaps-server processes (default 1)
#     --epochs E      (default 1)  --train-limit N (default 0: all 60000)
#     --rounds R      runs of every codec, interleaved (default 1)
#     --out DIR       keep the summaries and logs there (default: a temporary
#                     directory, removed)
#   Anything after -- goes to every fmnist-train (e.g. --sync ring,
#   --local-agg on once those exist), so the same link compares them.
#
# Prints one line per run (codec, round, ms/step, samples/s, push bytes/step,
# accuracy) and then the medians per codec with the speed-up over "none".
# ms/step = global batch / samples/s (fmnist-train's training time only:
# evaluation and start-up excluded).
set -euo pipefail
BIN=$(cd "${1:?usage: shaped-link.sh BIN_DIR [options] [-- fmnist-train args]}" && pwd)
shift
RATE=1gbit
SHAPE=both
CODECS=none,fp16,bf16,topk:0.01,sign
NW=4
NS=1
EPOCHS=1
LIMIT=0
ROUNDS=1
KEEP=
EXTRA=()
while [ $# -gt 0 ]; do
	case $1 in
	--rate) RATE=$2; shift 2 ;;
	--shape) SHAPE=$2; shift 2 ;;
	--codecs) CODECS=$2; shift 2 ;;
	--workers) NW=$2; shift 2 ;;
	--servers) NS=$2; shift 2 ;;
	--epochs) EPOCHS=$2; shift 2 ;;
	--train-limit) LIMIT=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--out) KEEP=$2; shift 2 ;;
	--) shift; EXTRA=("$@"); break ;;
	*) echo "shaped-link.sh: unknown option $1 (see the head of $0)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "shaped-link.sh: needs root (network namespaces, tc)" >&2; exit 2; }
command -v ip >/dev/null && command -v tc >/dev/null ||
	{ echo "shaped-link.sh: needs ip and tc (iproute2)" >&2; exit 2; }
for p in rdmaps-sched rdmaps-server fmnist-train; do
	[ -x "$BIN/$p" ] || { echo "shaped-link.sh: no $BIN/$p (build it first)" >&2; exit 2; }
done

# private names and a private /24 from our pid: concurrent runs do not collide
TAG=sl$$
NSA=$TAG-ps
NSB=$TAG-wk
NET=10.$((208 + ($$ / 256) % 8)).$(($$ % 256))
IPA=$NET.1
IPB=$NET.2
if [ -n "$KEEP" ]; then
	mkdir -p "$KEEP"
	T=$(cd "$KEEP" && pwd)
else
	T=$(mktemp -d)
fi
pids=()
cleanup()
{
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	# whatever is left in our namespaces (and only there)
	for ns in "$NSA" "$NSB"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true # removes the veth pair with it
	done
	[ -n "$KEEP" ] || rm -rf "$T"
}
trap cleanup EXIT INT TERM

ip netns add "$NSA"
ip netns add "$NSB"
ip link add "$TAG-a" netns "$NSA" type veth peer name "$TAG-b" netns "$NSB"
ip -n "$NSA" addr add "$IPA/24" dev "$TAG-a"
ip -n "$NSB" addr add "$IPB/24" dev "$TAG-b"
for ns in "$NSA" "$NSB"; do
	ip -n "$ns" link set lo up
done
ip -n "$NSA" link set "$TAG-a" up
ip -n "$NSB" link set "$TAG-b" up
if [ "$RATE" != none ]; then
	# a token bucket on each end's egress: both directions at RATE
	[ "$SHAPE" = up ] ||
		tc -n "$NSA" qdisc add dev "$TAG-a" root tbf rate "$RATE" burst 256kb latency 50ms
	tc -n "$NSB" qdisc add dev "$TAG-b" root tbf rate "$RATE" burst 256kb latency 50ms
fi
echo "shaped-link: namespaces $NSA ($IPA: scheduler, $NS server(s)) and $NSB ($IPB: $NW" \
	"workers), veth pair, tbf rate $RATE, shaped: $SHAPE"
tc -n "$NSA" qdisc show dev "$TAG-a" | sed 's/^/shaped-link:   servers egress: /'
tc -n "$NSB" qdisc show dev "$TAG-b" | sed 's/^/shaped-link:   workers egress: /'

export RDMAPS_SECRET=shaped-link-$$ RDMAPS_TRANSPORT=tcp RDMAPS_CONSISTENCY=bsp
export RDMAPS_NUM_SERVERS=$NS RDMAPS_NUM_WORKERS=$NW RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
export RDMAPS_TIMEOUT_MS=120000 OPENBLAS_NUM_THREADS=1
limit=()
[ "$LIMIT" = 0 ] || limit=(--train-limit "$LIMIT")

# run CODEC ROUND: one job; prints its line and appends it to $T/runs.tsv
run()
{
	local codec=$1 round=$2 port name w rc=0
	name=$(echo "$codec" | tr ':' '_')-$round
	port=$((20000 + (RANDOM % 400) * 100 + round))
	export RDMAPS_SCHEDULER=$IPA:$port
	local job=()
	RDMAPS_HOST=$IPA ip netns exec "$NSA" "$BIN/rdmaps-sched" > "$T/$name-sched.log" 2>&1 &
	job+=($!)
	for s in $(seq 1 "$NS"); do
		RDMAPS_HOST=$IPA ip netns exec "$NSA" "$BIN/rdmaps-server" \
			> "$T/$name-server$s.log" 2>&1 &
		job+=($!)
	done
	local wpids=()
	for w in $(seq 1 "$NW"); do
		RDMAPS_HOST=$IPB ip netns exec "$NSB" "$BIN/fmnist-train" --epochs "$EPOCHS" \
			--no-progress --compress "$codec" --summary-json "$T/$name.json" \
			"${limit[@]}" "${EXTRA[@]}" > "$T/$name-worker$w.log" 2>&1 &
		wpids+=($!)
	done
	pids=("${job[@]}" "${wpids[@]}")
	for p in "${wpids[@]}"; do wait "$p" || rc=$?; done
	for p in "${job[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pids=()
	if [ "$rc" != 0 ] || [ ! -s "$T/$name.json" ]; then
		tail -n 15 "$T/$name"-*.log >&2
		echo "shaped-link: FAIL: run $name (exit $rc)" >&2
		exit 1
	fi
	/usr/bin/python3 - "$T/$name.json" "$codec" "$round" >> "$T/runs.tsv" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ms = s["batch"] / s["samples_per_sec"] * 1e3 if s["samples_per_sec"] else float("nan")
print("\t".join([sys.argv[2], sys.argv[3], "%.2f" % ms, "%.1f" % s["samples_per_sec"],
                 "%.0f" % s.get("push_wire_bytes_per_step", float("nan")),
                 "%.4f" % s["test_accuracy"]]))
PY
	tail -n 1 "$T/runs.tsv" | awk -F'\t' '{printf "run: %-11s round %s  %8s ms/step  %9s samples/s  %10s push bytes/step (worker 0)  accuracy %s\n", $1, $2, $3, $4, $5, $6}'
}

: > "$T/runs.tsv"
echo "shaped-link: fmnist-train BSP, $NW workers, $NS server(s), $EPOCHS epoch(s)," \
	"limit ${LIMIT}, extra args: ${EXTRA[*]:-none}"
for r in $(seq 1 "$ROUNDS"); do
	IFS=, read -r -a list <<< "$CODECS"
	for c in "${list[@]}"; do
		run "$c" "$r"
	done
done
/usr/bin/python3 - "$T/runs.tsv" "$RATE" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
codecs = []
for r in rows:
    if r[0] not in codecs:
        codecs.append(r[0])
med = {}
print("medians (link %s):" % sys.argv[2])
print("%-11s %5s %10s %12s %16s %9s %9s" % ("codec", "runs", "ms/step", "samples/s",
                                           "push bytes/step", "accuracy", "speed-up"))
for c in codecs:
    rs = [r for r in rows if r[0] == c]
    med[c] = [statistics.median(float(r[i]) for r in rs) for i in (2, 3, 4, 5)]
base = med.get("none")
for c in codecs:
    ms, sps, b, acc = med[c]
    up = "%.2fx" % (base[0] / ms) if base else "-"
    print("%-11s %5d %10.2f %12.1f %16.0f %9.4f %9s" % (c, sum(r[0] == c for r in rows), ms, sps,
                                                     b, acc, up))
PY
