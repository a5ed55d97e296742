#!/usr/bin/env bash
# Compression chosen by the job per key on a real local cluster:
#   compress.sh BIN_DIR [TRANSPORT]
# 2 servers (2 shards each), 2 workers, BSP (summed in worker-rank order), SGD
# lr 1, zeros: itest-compress checks every key's values exactly and the wire
# counters. TRANSPORT tcp (default) or rdma (servers on the SoftRoCE device
# of RDMAPS_RXE_IP0, workers on RDMAPS_RXE_IP1: inside tools/softroce/rxe-run).
set -euo pipefail
BIN=$1
TRANSPORT=${2:-tcp}
export RDMAPS_SHARDS=2 RDMAPS_SLICE_BYTES=256 RDMAPS_CONSISTENCY=bsp RDMAPS_BSP_SUM=ordered
export RDMAPS_OPTIMIZER=sgd RDMAPS_LR=1 RDMAPS_INIT=zeros
export RDMAPS_SECRET=compress-test RDMAPS_TIMEOUT_MS=60000 RDMAPS_SHARD_BYTES=1M
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
exec "$BIN/rdmaps-launch" --servers 2 --workers 2 --transport "$TRANSPORT" --timeout 120 \
	"${hosts[@]}" -- "$BIN/itest-compress"
