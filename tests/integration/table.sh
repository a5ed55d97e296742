#!/usr/bin/env bash
# Sparse tables on a real local cluster (itest-table, run as every worker):
#   table.sh BIN_DIR bsp|asp [TRANSPORT]   2 servers of 2 shards, 3 workers
#   table.sh BIN_DIR torn [TRANSPORT]      1 server of 2 shards, 2 workers, ASP:
#                                          no torn row under continuous updates
#   table.sh BIN_DIR index [TRANSPORT]     1 server of 2 shards, 2 workers, ASP:
#                                          one-sided lookups (itest-table-index)
#   table.sh BIN_DIR prec [TRANSPORT]      1 server of 2 shards, 2 workers, BSP:
#                                          fp16 / bf16 rows (itest-table-prec)
set -euo pipefail
BIN=$1
MODE=$2
TRANSPORT=${3:-tcp}
SERVERS=2 WORKERS=3 CONS=$MODE
if [ "$MODE" = torn ]; then SERVERS=1 WORKERS=2 CONS=asp; fi
PROG=("$BIN/itest-table" "$MODE")
if [ "$MODE" = index ]; then SERVERS=1 WORKERS=2 CONS=asp PROG=("$BIN/itest-table-index"); fi
if [ "$MODE" = prec ]; then SERVERS=1 WORKERS=2 CONS=bsp PROG=("$BIN/itest-table-prec"); fi
export RDMAPS_SHARDS=2 RDMAPS_CONSISTENCY=$CONS
export RDMAPS_SECRET=table-test RDMAPS_TIMEOUT_MS=30000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
exec "$BIN/rdmaps-launch" --servers $SERVERS --workers $WORKERS --transport "$TRANSPORT" --timeout 120 \
	"${hosts[@]}" -- "${PROG[@]}"
