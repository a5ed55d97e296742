#!/usr/bin/env bash
# The whole test suite: unit, integration (real processes on 127.0.0.1),
# python (pytest of the rdmaps package against a local cluster), RDMA (in
# the SoftRoCE guest, or skipped with the reason), then unit + integration
# again under AddressSanitizer + UndefinedBehaviorSanitizer, then every
# libFuzzer target for a fixed time over its seeds (scripts/fuzz.sh).
# Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=$(nproc)

./scripts/deps.sh
if [ -x tools/softroce/setup ]; then
	tools/softroce/setup
fi

echo "== build (RelWithDebInfo, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRPS_WERROR=ON >/dev/null
cmake --build build -j"$JOBS"

echo "== unit + integration"
(cd build && ctest -L 'unit|integration' -E '^integration\.install$' --output-on-failure -j"$JOBS")

echo "== installed package: cmake --install, then examples/ and tools/ built with find_package(rdmaps)"
(cd build && ctest -R '^integration\.install$' -V)

echo "== python: the rdmaps package's pytest suite against a local cluster"
(cd build && ctest -L python --output-on-failure -j"$JOBS")

echo "== rdma (SoftRoCE)"
(cd build && ctest -L rdma --output-on-failure)

echo "== sanitizers (ASan + UBSan): unit + integration"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DRPS_ASAN=ON -DRPS_UBSAN=ON -DRPS_WERROR=ON >/dev/null
cmake --build build-asan -j"$JOBS"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ctest -L 'unit|integration' --output-on-failure -j"$JOBS")

echo "== fuzz targets (clang, libFuzzer + ASan + UBSan), 20 s each over their seeds"
./scripts/fuzz.sh

echo "== all tests passed"
