#!/usr/bin/env bash
# perf_smoke.sh BIN_DIR: rdmaps-perf works end to end over TCP on a local
# cluster and its --json output is well formed, with the figures a user
# reads present and non-zero. No timing thresholds: timed tests flake here.
#
# Runs (a few seconds in all):
#   pull_lat  8 B and 4 KiB, 200 requests
#   push_bw   64 KiB, 1 s, 2 servers, 2 keys
#   pushpull  4 KiB, 100 steps, 2 worker processes, BSP
set -euo pipefail
BIN=${1:?usage: perf_smoke.sh BIN_DIR}
PERF=$BIN/rdmaps-perf
[ -x "$PERF" ] || { echo "perf_smoke: $PERF not built"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to check the JSON"; exit 77; }

export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {
	local name=$1
	shift
	echo "perf_smoke: $name: rdmaps-perf $*"
	if ! timeout 120 "$PERF" --local-cluster --json --timeout 100 "$@" >"$tmp/$name.json" 2>"$tmp/$name.err"; then
		echo "perf_smoke: FAIL: $name: rdmaps-perf exited non-zero"
		sed 's/^/  | /' "$tmp/$name.err"
		exit 1
	fi
}

run pull_lat pull_lat --sizes 8,4K -n 200
run push_bw push_bw -s 64K -D 1 --servers 2 -k 2
run pushpull pushpull -s 4K -n 100 --procs 2 -c bsp

python3 - "$tmp" <<'PY'
import json, math, sys
tmp = sys.argv[1]
fails = []

def check(name, mode, sizes, procs, servers, fields):
    try:
        doc = json.load(open(f"{tmp}/{name}.json"))
    except Exception as e:  # not JSON at all
        fails.append(f"{name}: output is not JSON: {e}")
        return
    for k, want in (("tool", "rdmaps-perf"), ("mode", mode), ("transport", "tcp"),
                    ("procs", procs), ("servers", servers)):
        if doc.get(k) != want:
            fails.append(f"{name}: {k} = {doc.get(k)!r}, expected {want!r}")
    res = doc.get("results", [])
    if [r.get("bytes") for r in res] != sizes:
        fails.append(f"{name}: sizes {[r.get('bytes') for r in res]}, expected {sizes}")
    for r in res:
        for f in fields + ["iters", "server_cpu_pct", "client_cpu_pct"]:
            v = r.get(f)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                fails.append(f"{name}: {r.get('bytes')} B: {f} = {v!r}, expected > 0")
        if r.get("errors") != 0:
            fails.append(f"{name}: {r.get('bytes')} B: errors = {r.get('errors')!r}")
        if "t_min_us" in fields and not (r["t_min_us"] <= r["t_median_us"] <= r["t_p99_us"] <= r["t_p999_us"]):
            fails.append(f"{name}: {r['bytes']} B: percentiles out of order: {r}")
    print(f"perf_smoke: {name}: " + "; ".join(
        f"{r.get('bytes')} B " + ", ".join(f"{f} {r.get(f)}" for f in fields) for r in res))

lat = ["t_min_us", "t_median_us", "t_avg_us", "t_p99_us", "t_p999_us"]
check("pull_lat", "pull_lat", [8, 4096], 1, 1, lat)
check("push_bw", "push_bw", [65536], 1, 2, ["bw_MBps", "msg_rate_Mps"])
check("pushpull", "pushpull", [4096], 2, 1, lat + ["bw_MBps"])
doc = json.load(open(f"{tmp}/pull_lat.json"))
if doc["results"] and doc["results"][0].get("iters") != 200:
    fails.append(f"pull_lat: iters {doc['results'][0].get('iters')}, expected 200 (-n 200)")
doc = json.load(open(f"{tmp}/pushpull.json"))
if doc["results"] and doc["results"][0].get("iters") != 200:
    fails.append(f"pushpull: iters {doc['results'][0].get('iters')}, expected 2 x 100 steps")
for f in fails:
    print("perf_smoke: FAIL:", f)
sys.exit(1 if fails else 0)
PY
echo "perf_smoke: PASS"
