#!/usr/bin/env bash
# Sparse tables on a real local cluster (itest-table, run as every worker):
#   table.sh BIN_DIR bsp|asp [TRANSPORT]   2 servers of 2 shards, 3 workers
#   table.sh BIN_DIR torn [TRANSPORT]      1 server of 2 shards, 2 workers, ASP:
#                                          no torn row under continuous updates
#   table.sh BIN_DIR index [TRANSPORT]     1 server of 2 shards, 2 workers, ASP:
#                                          one-sided lookups (itest-table-index)
#   table.sh BIN_DIR prec [TRANSPORT]      1 server of 2 shards, 2 workers, BSP:
#                                          fp16 / bf16 rows (itest-table-prec)
#   table.sh BIN_DIR export [TRANSPORT]    2 servers of 2 shards, 2 workers, BSP:
#                                          tables in rdmaps-ctl export's .npz
#                                          (itest-table-export), then read by numpy
#   table.sh BIN_DIR evict [TRANSPORT]     1 server of 2 shards, 1 worker, BSP:
#                                          idle rows evicted (itest-table-evict)
#   table.sh BIN_DIR evict_time [TRANSPORT] 1 server of 2 shards, 1 worker, ASP:
#                                          rows idle 2 s evicted
#                                          (itest-table-evict-time)
#   table.sh BIN_DIR evrace [TRANSPORT]    1 server of 2 shards, 2 workers, ASP:
#                                          rows read (one-sided over rdma) while
#                                          idle rows are evicted and their slots
#                                          reused, and hot rows updated
#                                          (itest-table-evrace)
set -euo pipefail
BIN=$1
MODE=$2
TRANSPORT=${3:-tcp}
SERVERS=2 WORKERS=3 CONS=$MODE
if [ "$MODE" = torn ]; then SERVERS=1 WORKERS=2 CONS=asp; fi
PROG=("$BIN/itest-table" "$MODE")
if [ "$MODE" = index ]; then SERVERS=1 WORKERS=2 CONS=asp PROG=("$BIN/itest-table-index"); fi
if [ "$MODE" = prec ]; then SERVERS=1 WORKERS=2 CONS=bsp PROG=("$BIN/itest-table-prec"); fi
if [ "$MODE" = export ]; then SERVERS=2 WORKERS=2 CONS=bsp PROG=("$BIN/itest-table-export"); fi
if [ "$MODE" = evict ]; then SERVERS=1 WORKERS=1 CONS=bsp PROG=("$BIN/itest-table-evict"); fi
if [ "$MODE" = evict_time ]; then SERVERS=1 WORKERS=1 CONS=asp PROG=("$BIN/itest-table-evict-time"); fi
if [ "$MODE" = evrace ]; then SERVERS=1 WORKERS=2 CONS=asp PROG=("$BIN/itest-table-evrace"); fi
export RDMAPS_SHARDS=2 RDMAPS_CONSISTENCY=$CONS
export RDMAPS_SECRET=table-test RDMAPS_TIMEOUT_MS=30000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
if [ "$MODE" = evict ]; then
	OUT=$(mktemp -d)
	trap 'rm -rf "$OUT"' EXIT
	mkdir -p "$OUT/ckpt"
	export RDMAPS_TABLE_EVICT_CLOCKS=2 RDMAPS_CHECKPOINT_DIR=$OUT/ckpt
	exec "$BIN/rdmaps-launch" --servers $SERVERS --workers $WORKERS --transport "$TRANSPORT" \
		--timeout 120 "${hosts[@]}" -- "${PROG[@]}"
fi
if [ "$MODE" = evict_time ]; then
	OUT=$(mktemp -d)
	trap 'rm -rf "$OUT"' EXIT
	mkdir -p "$OUT/ckpt"
	export RDMAPS_TABLE_EVICT_SECONDS=2 RDMAPS_CHECKPOINT_DIR=$OUT/ckpt
	"$BIN/rdmaps-launch" --servers $SERVERS --workers $WORKERS --transport "$TRANSPORT" \
		--timeout 120 "${hosts[@]}" -- "${PROG[@]}"
	exit 0
fi
if [ "$MODE" = evrace ]; then
	OUT=$(mktemp -d)
	trap 'rm -rf "$OUT"' EXIT
	export RDMAPS_TABLE_EVICT_CLOCKS=2 ITEST_SHM=$OUT/shm
	"$BIN/rdmaps-launch" --servers $SERVERS --workers $WORKERS --transport "$TRANSPORT" \
		--timeout 120 "${hosts[@]}" -- "${PROG[@]}"
	exit 0
fi
if [ "$MODE" = export ]; then
	OUT=$(mktemp -d)
	trap 'rm -rf "$OUT"' EXIT
	export ITEST_EXPORT=$OUT/model.npz ITEST_SECRET=$RDMAPS_SECRET RDMAPS_OPTIMIZER=sgd RDMAPS_LR=1 RDMAPS_INIT=zeros
	"$BIN/rdmaps-launch" --servers $SERVERS --workers $WORKERS --transport "$TRANSPORT" \
		--timeout 120 "${hosts[@]}" -- "${PROG[@]}"
	# the same file through numpy: the layout docs/tables.md promises
	/usr/bin/python3 - "$ITEST_EXPORT" <<'PY'
import sys
import numpy as np
m = np.load(sys.argv[1])
names = sorted(m.files)
assert names == ["5", "table1.ids", "table1.rows", "table2.ids", "table2.rows",
                 "table3.ids", "table3.rows"], names
for t in (1, 2):
    ids, rows = m["table%d.ids" % t], m["table%d.rows" % t]
    assert ids.dtype == np.uint64 and ids.ndim == 1, ids.dtype
    assert rows.dtype == np.float32 and rows.shape == (ids.size, 8), rows.shape
    assert np.all(ids[1:] > ids[:-1]), "ids not ascending"
print("table.sh export: numpy reads tables 1 and 2: %d and %d rows, uint64 ids ascending, "
      "float32 rows of 8" % (m["table1.ids"].size, m["table2.ids"].size))
PY
	exit 0
fi
exec "$BIN/rdmaps-launch" --servers $SERVERS --workers $WORKERS --transport "$TRANSPORT" --timeout 120 \
	"${hosts[@]}" -- "${PROG[@]}"
