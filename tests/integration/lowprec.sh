#!/usr/bin/env bash
# Low-precision pulls on a real local cluster (docs/compression.md
# "Low-precision pulls"):
#   lowprec.sh BIN_DIR [TRANSPORT]
# 2 servers (2 shards each), 2 workers, BSP (summed in worker-rank order),
# SGD lr 1, zeros: itest-lowprec checks the pulled values (exact where bf16
# represents them, the converter's rounding of the master where it does not),
# the bytes of the pull answers (TCP), and the refusals; this script checks
# that the refusals' reasons reach the log, and fmnist-train's
# --pull-precision check. TRANSPORT tcp (default) or rdma (servers on the
# SoftRoCE device of RDMAPS_RXE_IP0, workers on RDMAPS_RXE_IP1: inside
# tools/softroce/rxe-run).
set -euo pipefail
BIN=$1
TRANSPORT=${2:-tcp}
export RDMAPS_SHARDS=2 RDMAPS_SLICE_BYTES=256 RDMAPS_CONSISTENCY=bsp RDMAPS_BSP_SUM=ordered
export RDMAPS_OPTIMIZER=sgd RDMAPS_LR=1 RDMAPS_INIT=zeros
# chunks of 64 bytes: a slice of 64 floats is 4 chunks, its copy 2 (versions,
# torn-chunk re-reads and the last chunk of both layouts are exercised)
export RDMAPS_SECRET=lowprec-test RDMAPS_TIMEOUT_MS=60000 RDMAPS_SHARD_BYTES=1M RDMAPS_CHUNK_BYTES=64
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
hosts=()
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
"$BIN/rdmaps-launch" --servers 2 --workers 2 --transport "$TRANSPORT" --timeout 120 \
	"${hosts[@]}" -- "$BIN/itest-lowprec" >"$log" 2>&1 || rc=$?
cat "$log"
if [ "$rc" != 0 ]; then
	echo "lowprec.sh: the cluster run failed (exit $rc)"
	exit 1
fi
expect() {
	if ! grep -qF -- "$1" "$log"; then
		echo "lowprec.sh: FAIL: not in the log: $1"
		exit 1
	fi
}
expect "itest-lowprec: worker 0: ok ($TRANSPORT)"
expect "itest-lowprec: worker 1: ok ($TRANSPORT)"
expect "pull precision 'bf17' unknown: use fp32 (the default), fp16 or bf16"
expect "set_pull_precision: key 99 was not declared through this worker"
expect "key 2 slice 0: pull precision fp16 refused, the key has a bf16 copy"
# ASP: pulls of the copy while another worker pushes: never a torn chunk
rc=0
RDMAPS_CONSISTENCY=asp LOWPREC_ASP=1 "$BIN/rdmaps-launch" --servers 2 --workers 2 \
	--transport "$TRANSPORT" --timeout 120 "${hosts[@]}" -- "$BIN/itest-lowprec" >"$log" 2>&1 ||
	rc=$?
cat "$log"
if [ "$rc" != 0 ]; then
	echo "lowprec.sh: the ASP cluster run failed (exit $rc)"
	exit 1
fi
expect "itest-lowprec: worker 0: asp ok ($TRANSPORT)"
expect "itest-lowprec: worker 1: asp ok ($TRANSPORT)"
# fmnist-train refuses a wrong name before it starts anything
out=$("$BIN/fmnist-train" --local --epochs 0 --pull-precision half 2>&1) && {
	echo "lowprec.sh: FAIL: fmnist-train accepted --pull-precision half"
	exit 1
}
echo "$out" | grep -qF "fmnist-train: --pull-precision half: not a precision (fp32, fp16, bf16)" || {
	echo "lowprec.sh: FAIL: fmnist-train's refusal: $out"
	exit 1
}
echo "lowprec.sh: ok ($TRANSPORT)"
