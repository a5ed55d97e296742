#!/usr/bin/env bash
# Sparse tables on a real local cluster (itest-table, run as every worker):
#   table.sh BIN_DIR bsp|asp [TRANSPORT]
# 2 servers of 2 shards, 3 workers.
set -euo pipefail
BIN=$1
MODE=$2
TRANSPORT=${3:-tcp}
export RDMAPS_SHARDS=2 RDMAPS_CONSISTENCY=$MODE
export RDMAPS_SECRET=table-test RDMAPS_TIMEOUT_MS=30000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
exec "$BIN/rdmaps-launch" --servers 2 --workers 3 --transport "$TRANSPORT" --timeout 120 \
	"${hosts[@]}" -- "$BIN/itest-table" "$MODE"
