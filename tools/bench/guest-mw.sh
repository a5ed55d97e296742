#!/usr/bin/env bash
# guest-mw.sh OUTDIR BINDIR [quick]: pull latency with read access per
# connection (memory windows, RDMAPS_RDMA_MW=on) against one read-only
# registration for all (RDMAPS_RDMA_MW=off), in the SoftRoCE guest:
#
#   tools/softroce/rxe-run --rw "$PWD/results" -- \
#       tools/bench/guest-mw.sh "$PWD/results/mw" "$PWD/build-h/bin"
#
# $RDMAPS_BENCH_ROUNDS (default 3) interleaved rounds of rdmaps-perf pull_lat
# 8 B..64 KiB, windows then no windows. Prints every round, the medians and
# the windows/no-windows ratios.
set -uo pipefail
OUT=${1:?usage: guest-mw.sh OUTDIR BINDIR [quick]}
BIN=${2:?usage: guest-mw.sh OUTDIR BINDIR [quick]}
[ -n "${RDMAPS_RXE_IP0:-}" ] || { echo "SKIP: RDMAPS_RXE_* not set; run through tools/softroce/rxe-run"; exit 77; }
mkdir -p "$OUT"
rounds=${RDMAPS_BENCH_ROUNDS:-3}
n=${RDMAPS_BENCH_N:-1000}
[ "${3:-}" = quick ] && { rounds=1 n=200; }
sizes=8,64,4096,65536
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-error}
rp() {
	local name=$1
	shift
	timeout 300 "$BIN/rdmaps-perf" --local-cluster --transport rdma --json -q --timeout 290 "$@" \
		>"$OUT/$name.json" 2>"$OUT/$name.err" || echo "guest-mw: $name FAILED: $(tail -n 2 "$OUT/$name.err")"
}
for k in $(seq "$rounds"); do
	echo "guest-mw: round $k of $rounds"
	RDMAPS_RDMA_MW=on rp "lat_mw_r$k" pull_lat --sizes "$sizes" -n "$n"
	RDMAPS_RDMA_MW=off rp "lat_nomw_r$k" pull_lat --sizes "$sizes" -n "$n"
done
/usr/bin/python3 - "$OUT" "$rounds" "$sizes" <<'PY'
import json, os, statistics, sys
out, rounds, sizes = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")]
def res(name):
    try:
        return {r["bytes"]: r for r in json.load(open(os.path.join(out, name + ".json")))["results"]}
    except (OSError, ValueError, KeyError):
        return {}
lat = {m: [res(f"lat_{m}_r{k}") for k in range(1, rounds + 1)] for m in ("mw", "nomw")}
print("pull latency t_median [us], every round (windows | no windows):")
for s in sizes:
    d = [r[s]["t_median_us"] for r in lat["mw"] if s in r]
    b = [r[s]["t_median_us"] for r in lat["nomw"] if s in r]
    if d and b:
        md, mb = statistics.median(d), statistics.median(b)
        print(f"  {s:6d} B: " + ", ".join(f"{x:.1f}" for x in d) + " | "
              + ", ".join(f"{x:.1f}" for x in b)
              + f"  medians {md:.1f} | {mb:.1f}  ratio {md / mb:.3f}")
PY
