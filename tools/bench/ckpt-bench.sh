#!/usr/bin/env bash
# ckpt-bench.sh BIN_DIR [rdmaps-bench-ckpt options...]
#
# Push latency over TCP while every shard writes its checkpoint of ~100 MB of
# parameters, against no checkpoint (docs/benchmarks.md "Checkpoints"): one
# server of CKPT_BENCH_SHARDS shards (default 2), one worker
# (rdmaps-bench-ckpt), ASP, checkpoints into a directory on disk
# (CKPT_BENCH_DIR, default a fresh one under the current directory: not
# tmpfs, so fsync is real). Interleaved rounds ckpt / none; every round and
# the medians are printed.
#   tools/bench/ckpt-bench.sh build-h/bin                 # 100 MiB, 5 + 5 rounds
#   tools/bench/ckpt-bench.sh build-h/bin --mb 200 --rounds 7
# CKPT_BENCH_SERVER=PATH runs another rdmaps-server (e.g. one built before
# checkpoints moved off the hot path) with the same launcher, ctl and worker.
set -euo pipefail
BIN=${1:?usage: ckpt-bench.sh BIN_DIR [rdmaps-bench-ckpt options]}
shift
BIN=$(cd "$BIN" && pwd)
DIR=${CKPT_BENCH_DIR:-$(mktemp -d "$PWD/ckpt-bench.XXXXXX")}
LBIN=$(mktemp -d)
trap 'rm -rf "$DIR" "$LBIN"' EXIT
mkdir -p "$DIR"
for p in rdmaps-launch rdmaps-sched rdmaps-server rdmaps-ctl rdmaps-bench-ckpt; do
	ln -s "$BIN/$p" "$LBIN/$p"
done
if [ -n "${CKPT_BENCH_SERVER:-}" ]; then
	ln -sf "$(readlink -f "$CKPT_BENCH_SERVER")" "$LBIN/rdmaps-server"
	echo "ckpt-bench: rdmaps-server is $CKPT_BENCH_SERVER"
fi
BIN=$LBIN
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} RDMAPS_CONSISTENCY=asp RDMAPS_OPTIMIZER=sgd
export RDMAPS_SHARDS=${CKPT_BENCH_SHARDS:-2} RDMAPS_SHARD_BYTES=${CKPT_BENCH_SHARD_BYTES:-160M}
export RDMAPS_CHECKPOINT_DIR=$DIR RDMAPS_TIMEOUT_MS=120000
# No OpenBLAS thread pool in any process of the job: the `rdmaps-ctl
# checkpoint` each ckpt round starts would otherwise spin its pool thread in
# sched_yield for ~0.1 s (60-65 ms of CPU per start seen with perf) on one of
# the cores, inside the round it measures. OPENBLAS_NUM_THREADS=0 keeps
# OpenBLAS's own choice (as measured before 2026-11-27 19:00 UTC).
if [ "${OPENBLAS_NUM_THREADS:-1}" = 0 ]; then unset OPENBLAS_NUM_THREADS; else export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}; fi
echo "ckpt-bench: $(date -u '+%F %T UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
	"$RDMAPS_SHARDS shards, checkpoints in $DIR ($(df -T "$DIR" | awk 'NR == 2 {print $2}')), OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-unset}"
"$BIN/rdmaps-launch" --servers 1 --workers 1 --transport tcp --timeout 900 --shared-secret ${CKPT_BENCH_VERBOSE:+--quiet-servers} \
	-- "$BIN/rdmaps-bench-ckpt" --ctl "$BIN/rdmaps-ctl" "$@"
