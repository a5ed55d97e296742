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
# Nothing about training is set here: fmnist-train gives the servers its own
# recipe (docs/training.md) and derives the schedule's length from --epochs,
# so `./scripts/run.sh --epochs 3` anneals over 3 epochs.
exec build/bin/rdmaps-launch --servers 2 --workers 4 --consistency bsp --transport "$transport" -- \
	build/bin/fmnist-train --epochs 10 --summary-json results/fmnist-summary.json "$@"
