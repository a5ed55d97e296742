#!/usr/bin/env bash
# Fashion-MNIST accuracy and push bytes per codec (docs/compression.md):
# BSP, 4 workers, 2 servers, TCP on loopback, one run per codec, in turn.
#   tools/bench/codec-accuracy.sh BIN_DIR EPOCHS OUT_DIR CODEC... [-- fmnist-train args]
# e.g. tools/bench/codec-accuracy.sh build/bin 10 /tmp/acc none fp16 bf16 topk:0.01 sign
# Each run: OUT_DIR/<codec>.json (--summary-json) and .log; then one table:
# accuracy, its difference from "none", push bytes per step on the wire
# (the average over the whole run: a sparsity warm-up's larger first pushes
# count). "none" is the run of this invocation, else CODEC_BASE=FILE (a
# none.json of an earlier run, e.g. with the recipe's own lr), e.g.
#   CODEC_BASE=/tmp/acc/none.json tools/bench/codec-accuracy.sh build/bin 10 \
#       /tmp/acc-mc topk:0.01,momentum=0.9 -- --optimizer sgd
# A codec may end in @PRECISION: that run also pulls in that precision
# (fmnist-train --pull-precision fp32|fp16|bf16, docs/compression.md
# "Low-precision pulls"), e.g. the pull precisions side by side:
#   tools/bench/codec-accuracy.sh build/bin 10 /tmp/pull none none@bf16 none@fp16
set -u
BIN=$1; EPOCHS=$2; OUT=$3; shift 3
codecs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do codecs+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
mkdir -p "$OUT"
for c in "${codecs[@]}"; do
	n=$(echo "$c" | tr ':' '_')
	pull=()
	case "$c" in *@*) pull=(--pull-precision "${c#*@}") ;; esac
	start=$(date +%s)
	RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn} "$BIN/rdmaps-launch" --servers 2 --workers 4 \
		--consistency bsp --transport tcp --timeout 3000 -- "$BIN/fmnist-train" \
		--epochs "$EPOCHS" --no-progress --compress "${c%%@*}" "${pull[@]}" \
		--summary-json "$OUT/$n.json" "$@" > "$OUT/$n.log" 2>&1
	echo "run: $c exit $? $(($(date +%s) - start)) s"
done
/usr/bin/python3 - "$OUT" "${CODEC_BASE:-}" "${codecs[@]}" <<'PY'
import json, os, sys
d, base_file, codecs = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {}
for c in codecs:
    try:
        runs[c] = json.load(open(os.path.join(d, c.replace(':', '_') + '.json')))
    except (OSError, ValueError):
        print('%s: no summary (see its .log)' % c)
base = runs.get('none')
if base is None and base_file:
    base = json.load(open(base_file))
    print('vs none: %s (test accuracy %.4f)' % (base_file, base['test_accuracy']))
print('| codec | test accuracy | vs none | train loss | push bytes/step | float32 bytes/step | less | pull | pull bytes/step |')
print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
for c, s in runs.items():
    print('| %s | %.4f | %s | %.4f | %.0f | %.0f | %.1fx | %s | %.0f |' % (
        c, s['test_accuracy'], '%+.4f' % (s['test_accuracy'] - base['test_accuracy']) if base else '-',
        s['train_loss'], s['push_wire_bytes_per_step'], s['push_raw_bytes_per_step'],
        s['push_raw_bytes_per_step'] / s['push_wire_bytes_per_step'],
        s.get('pull_precision', 'fp32'), s.get('pull_bytes_in_per_step', 0)))
PY
