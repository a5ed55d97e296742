#!/usr/bin/env bash
# Install the Debian 12 packages rdmaps needs (only those missing).
# Used by scripts/run.sh and scripts/test.sh; safe to run again.
set -euo pipefail

PKGS=(
	build-essential cmake pkg-config git
	libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
	libopenblas-dev libjemalloc-dev libcmocka-dev zlib1g-dev libzip-dev
	libmicrohttpd-dev libjansson-dev libisal-dev libssl-dev
	python3-numpy python3-dev python3-pytest python3-venv python3-pip python3-setuptools python3-wheel python3-torch
	clang-14 libfuzzer-14-dev
	perftest iperf3 qperf
	dataset-fashion-mnist
	qemu-system-x86 busybox-static kmod cpio iproute2
	gnuplot-nox python3
	slurm-wlm munge openmpi-bin
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
