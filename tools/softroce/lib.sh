# shellcheck shell=bash
# Shared helpers of the SoftRoCE harness (sourced by rxe-run, fetch-kernel,
# mkinitramfs, setup). Not executable on its own.

SOFTROCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SOFTROCE_REPO=$(cd "$SOFTROCE_DIR/../.." && pwd)
# depmod, modprobe, sysctl live in sbin, which a normal user's PATH may lack
case ":$PATH:" in
*:/usr/sbin:*) ;;
*) PATH="$PATH:/usr/sbin:/sbin" ;;
esac

# Exit codes of the harness itself (the command's own status passes through).
RXE_EXIT_SKIP=77     # no way to get SoftRoCE here: ctest shows "skipped"
RXE_EXIT_TIMEOUT=124 # the global timeout fired
RXE_EXIT_HARNESS=125 # the guest did not boot, crashed, or set-up failed

# Kernel modules the guest loads (with their dependencies, in load order).
# crc32_generic first: without it rdma_rxe fails with
# "failed to init crc32 algorithm err:-2".
# sch_netem: packet loss on the veths for the lossy-RoCE benchmark
# (tools/bench/guest-loss.sh).
RXE_GUEST_MODULES="crc32_generic virtio_pci 9pnet_virtio 9p rdma_rxe rdma_ucm ib_uverbs veth sch_netem"

: "${RDMAPS_SOFTROCE_CACHE:=$SOFTROCE_REPO/.softroce}"

rxe_log() { printf 'rxe-run: %s\n' "$*" >&2; }
rxe_die() {
	printf 'rxe-run: ERROR: %s\n' "$*" >&2
	exit "$RXE_EXIT_HARNESS"
}
# Print the reason on stdout (ctest shows it) and exit 77.
rxe_skip() {
	printf 'SKIP: %s\n' "$*"
	exit "$RXE_EXIT_SKIP"
}

# Run as root: directly if we are root, else through non-interactive sudo.
rxe_as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	else
		sudo -n "$@"
	fi
}
rxe_can_root() {
	[ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }
}

# Hold an exclusive lock on FILE for the rest of the process (fd 9).
rxe_lock() {
	mkdir -p "$(dirname "$1")"
	exec 9>"$1"
	if ! flock -w "${2:-600}" 9; then
		rxe_die "could not lock $1 within ${2:-600} s"
	fi
}

# A short hash of stdin, used to name cache entries after what built them.
rxe_hash() { sha1sum | cut -c1-12; }
