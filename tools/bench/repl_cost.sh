#!/usr/bin/env bash
# repl_cost.sh BIN_DIR [ROUNDS] [TRANSPORT]: the cost of replicated shards
# (docs/replication.md). Push latency (push_lat) and push bandwidth (push_bw)
# through rdmaps-perf --local-cluster with 2 servers, 1 worker, ASP, once with
# RDMAPS_REPLICAS=1 and once with 2, alternating, ROUNDS times (default 5).
# Prints every round's figures, then the medians and the ratio 2 replicas /
# none. Sizes: RC_SIZES (default 4K,64K,1M); bandwidth runs RC_SECS seconds
# per size (default 2), latency RC_ITERS requests per size (default 2000).
# RC_REPLICAS=3 RC_SERVERS=3: 3 replicas (a chain of two backups) against none,
# on 3 servers (the default: RC_REPLICAS=2 on RC_SERVERS=2).
set -euo pipefail
BIN=${1:?usage: repl_cost.sh BIN_DIR [ROUNDS] [TRANSPORT]}
ROUNDS=${2:-5}
TRANSPORT=${3:-tcp}
SIZES=${RC_SIZES:-4K,64K,1M}
SECS=${RC_SECS:-2}
ITERS=${RC_ITERS:-2000}
REPL=${RC_REPLICAS:-2}
NS=${RC_SERVERS:-2}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-error}

for round in $(seq 1 "$ROUNDS"); do
	for r in 1 "$REPL"; do
		port=$((20000 + (RANDOM % 400) * 100))
		RDMAPS_REPLICAS=$r "$BIN/rdmaps-perf" push_lat --local-cluster --servers "$NS" -q \
			-t "$TRANSPORT" --sizes "$SIZES" -n "$ITERS" --json -p "$port" \
			> "$OUT/lat-$r-$round.json"
		port=$((20000 + (RANDOM % 400) * 100))
		RDMAPS_REPLICAS=$r "$BIN/rdmaps-perf" push_bw --local-cluster --servers "$NS" -q \
			-t "$TRANSPORT" --sizes "$SIZES" -D "$SECS" --json -p "$port" \
			> "$OUT/bw-$r-$round.json"
	done
done

/usr/bin/python3 - "$OUT" "$ROUNDS" "$REPL" "$NS" <<'PY'
import json, statistics, sys
out, rounds, R, ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def load(kind, r, k):
    return {x["bytes"]: x for x in json.load(open(f"{out}/{kind}-{r}-{k}.json"))["results"]}
med = {}
for kind, field, unit in (("lat", "t_median_us", "us median"), ("lat", "t_p99_us", "us p99"),
                          ("bw", "bw_MBps", "MB/s")):
    print(f"push {'latency' if kind == 'lat' else 'bandwidth'} ({unit}), {ns} servers, 1 worker")
    for k in range(1, rounds + 1):
        a, b = load(kind, 1, k), load(kind, R, k)
        row = "  ".join(f"{s}B: none {a[s][field]:.1f} / {R} replicas {b[s][field]:.1f}" for s in sorted(a))
        print(f"  round {k}: {row}")
    for s in sorted(load(kind, 1, 1)):
        m1 = statistics.median(load(kind, 1, k)[s][field] for k in range(1, rounds + 1))
        m2 = statistics.median(load(kind, R, k)[s][field] for k in range(1, rounds + 1))
        print(f"  median {s}B: none {m1:.1f}, {R} replicas {m2:.1f}, ratio {m2 / m1:.2f}")
PY
