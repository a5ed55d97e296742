#!/usr/bin/env bash
# The main job: install what is needed, build, and train Fashion-MNIST on a
# local rdmaps cluster (1 scheduler, 2 servers, 4 workers, BSP).
# Uses RDMA when this machine has an RDMA device, TCP otherwise.
# Extra arguments go to fmnist-train (e.g. --epochs 3).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"

transport=tcp
if command -v ibv_devices >/dev/null && [ "$(ibv_devices 2>/dev/null | tail -n +3 | wc -l)" -gt 0 ]; then
	transport=rdma
fi

mkdir -p results
# Servers and the scheduler log warnings and errors only, so the progress bar stays readable.
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
# Server-side training settings (every RDMAPS_* variable is documented in docs/options.md).
export RDMAPS_CONSISTENCY=${RDMAPS_CONSISTENCY:-bsp}
export RDMAPS_OPTIMIZER=${RDMAPS_OPTIMIZER:-momentum}
export RDMAPS_LR=${RDMAPS_LR:-0.1}
export RDMAPS_MOMENTUM=${RDMAPS_MOMENTUM:-0.9}
# cosine decay over the whole run: 10 epochs x 234 BSP steps (60000 / batch 256)
export RDMAPS_LR_SCHEDULE=${RDMAPS_LR_SCHEDULE:-cosine}
export RDMAPS_LR_TOTAL=${RDMAPS_LR_TOTAL:-2340}
exec build/bin/rdmaps-launch --servers 2 --workers 4 --transport "$transport" -- \
	build/bin/fmnist-train --epochs 10 --summary-json results/fmnist-summary.json "$@"
