#!/usr/bin/env bash
# The cost of TLS (RDMAPS_TLS=1, docs/security.md "TLS") on 1 MiB pushes and
# pulls: rdmaps-perf on a local TCP cluster, with and without --tls, in
# interleaved rounds (the order flips every round, so a drifting machine
# load hits both alike). Every round is printed, then the medians.
#
#   tools/perf/tls_cost.sh BIN_DIR [ROUNDS (default 5)] [SECONDS per run (default 2)]
#   MODES="push_bw pull_bw push_lat pull_lat" SIZE=1M  (the defaults: push_bw pull_bw)
#
# Figures in docs/benchmarks.md ("TLS"); BW in MB/s (10^6 B/s), latency in us.
set -euo pipefail
BIN=${1:?usage: tls_cost.sh BIN_DIR [ROUNDS] [SECONDS]}
ROUNDS=${2:-5}
SECS=${3:-2}
MODES=${MODES:-push_bw pull_bw}
SIZE=${SIZE:-1M}
export RDMAPS_SECRET=${RDMAPS_SECRET:-tls-cost-bench}
export RDMAPS_TRANSPORT=tcp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one run: prints the figure (MB/s for *_bw, median us for *_lat)
run() {
	local mode=$1 tls=$2 out=$tmp/out.json
	local args=("$mode" -s "$SIZE" -D "$SECS" --local-cluster -q --json --timeout 120)
	[ "$tls" = tls ] && args+=(--tls)
	env -u RDMAPS_TLS timeout 180 "$BIN/rdmaps-perf" "${args[@]}" >"$out" 2>"$tmp/err" ||
		{ echo "tls_cost: rdmaps-perf ${args[*]} failed:" >&2; cat "$tmp/err" >&2; exit 1; }
	/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print("%.1f" % (r["bw_MBps"] if sys.argv[2].endswith("_bw") else r["t_median_us"]))' "$out" "$mode"
}

echo "tls_cost: rdmaps-perf MODE -s $SIZE -D $SECS --local-cluster [--tls], $ROUNDS interleaved rounds"
echo "tls_cost: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-6s %-9s %-6s %12s\n" round mode tls figure
for r in $(seq "$ROUNDS"); do
	for mode in $MODES; do
		order="plain tls"
		[ $((r % 2)) = 0 ] && order="tls plain"
		for tls in $order; do
			v=$(run "$mode" "$tls")
			unit=MB/s
			[[ $mode == *_lat ]] && unit=us
			printf "%-6s %-9s %-6s %10s %s\n" "$r" "$mode" "$tls" "$v" "$unit"
			echo "$mode $tls $v" >>"$tmp/all"
		done
	done
done
echo "tls_cost: load average after $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$tmp/all" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
modes = list(dict.fromkeys(r[0] for r in rows))
print("medians:")
for m in modes:
    med = {t: statistics.median(float(r[2]) for r in rows if r[0] == m and r[1] == t)
           for t in ("plain", "tls")}
    unit = "us" if m.endswith("_lat") else "MB/s"
    ratio = med["tls"] / med["plain"] if med["plain"] else float("nan")
    print(f"  {m:9s} plain {med['plain']:10.1f} {unit}   tls {med['tls']:10.1f} {unit}   "
          f"tls/plain {ratio:.2f}")
PY
