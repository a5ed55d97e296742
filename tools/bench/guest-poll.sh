#!/usr/bin/env bash
# guest-poll.sh OUTDIR BINDIR [quick]: the default (adaptive) polling mode
# against busy-polling (RDMAPS_RDMA_EVENT_MODE=0), in the SoftRoCE guest:
#
#   tools/softroce/rxe-run --rw "$PWD/results" -- \
#       tools/bench/guest-poll.sh "$PWD/results/poll" "$PWD/build-h/bin"
#
# $RDMAPS_BENCH_ROUNDS (default 3) interleaved rounds of: rdmaps-perf
# pull_lat 8 B..4 KiB default, the same busy-polling; then a 10 s pull-only
# run (pull_bw 64 KiB) each way for the server's CPU (/proc/<pid>/stat of the
# server processes over the timed part: rdmaps-perf's srv_cpu). Prints every
# round, the medians and default/busy-poll ratios (target: CPU <= 1% of a
# core by default, latency within 1.05x of busy-poll).
set -uo pipefail
OUT=${1:?usage: guest-poll.sh OUTDIR BINDIR [quick]}
BIN=${2:?usage: guest-poll.sh OUTDIR BINDIR [quick]}
[ -n "${RDMAPS_RXE_IP0:-}" ] || { echo "SKIP: RDMAPS_RXE_* not set; run through tools/softroce/rxe-run"; exit 77; }
mkdir -p "$OUT"
rounds=${RDMAPS_BENCH_ROUNDS:-3}
n=1000 cpu_secs=10
[ "${3:-}" = quick ] && { rounds=1 n=200 cpu_secs=2; }
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-error}
rp() {
	local name=$1
	shift
	timeout 300 "$BIN/rdmaps-perf" --local-cluster --transport rdma --json -q --timeout 290 "$@" \
		>"$OUT/$name.json" 2>"$OUT/$name.err" || echo "guest-poll: $name FAILED: $(tail -n 2 "$OUT/$name.err")"
}
for k in $(seq "$rounds"); do
	echo "guest-poll: round $k of $rounds"
	rp "lat_default_r$k" pull_lat --sizes 8,64,512,4096 -n "$n"
	RDMAPS_RDMA_EVENT_MODE=0 rp "lat_busypoll_r$k" pull_lat --sizes 8,64,512,4096 -n "$n"
done
rp cpu_default pull_bw -s 64K -D "$cpu_secs"
RDMAPS_RDMA_EVENT_MODE=0 rp cpu_busypoll pull_bw -s 64K -D "$cpu_secs"
/usr/bin/python3 - "$OUT" "$rounds" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def res(name):
    try:
        return {r["bytes"]: r for r in json.load(open(os.path.join(out, name + ".json")))["results"]}
    except (OSError, ValueError, KeyError):
        return {}
lat = {m: [res(f"lat_{m}_r{k}") for k in range(1, rounds + 1)] for m in ("default", "busypoll")}
print("pull latency t_median [us], every round (default | busy-poll):")
for s in (8, 64, 512, 4096):
    d = [r[s]["t_median_us"] for r in lat["default"] if s in r]
    b = [r[s]["t_median_us"] for r in lat["busypoll"] if s in r]
    if d and b:
        md, mb = statistics.median(d), statistics.median(b)
        print(f"  {s:5d} B: " + ", ".join(f"{x:.1f}" for x in d) + " | "
              + ", ".join(f"{x:.1f}" for x in b)
              + f"  medians {md:.1f} | {mb:.1f}  ratio {md / mb:.3f}")
for m in ("default", "busypoll"):
    r = res("cpu_" + m).get(65536)
    if r:
        print(f"server CPU, pull-only 64 KiB pull_bw ({m}): {r.get('server_cpu_pct'):.2f}% of a core "
              f"({r.get('server_cpu_s'):.3f} CPU-s in {r.get('server_window_s') or 0:.2f} s, "
              f"{r.get('bw_MBps'):.2f} MB/s); workers {r.get('client_cpu_pct'):.1f}%")
PY
