#!/usr/bin/env bash
# A malformed RDMAPS_SCHEDULER (no port, a port out of range) stops every
# program at once, naming the variable and the expected form: it must never
# carry on with the default address, where another job may be listening.
#
#   bad_scheduler.sh BIN_DIR
set -euo pipefail
BIN=$1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
fails=0

# check NAME VALUE CMD...: CMD exits non-zero within 2 s and says what is wrong
check() {
	local name=$1 value=$2 rc=0
	shift 2
	RDMAPS_SCHEDULER=$value RDMAPS_LOG_LEVEL=info timeout 2 "$@" > "$OUT/out" 2>&1 \
		< /dev/null || rc=$?
	if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
		echo "FAIL: $name with RDMAPS_SCHEDULER=$value: exit $rc (want a quick failure)"
		cat "$OUT/out"
		fails=$((fails + 1))
	elif ! grep -qF "RDMAPS_SCHEDULER=$value: expected host:port" "$OUT/out"; then
		echo "FAIL: $name with RDMAPS_SCHEDULER=$value: no message naming the variable"
		cat "$OUT/out"
		fails=$((fails + 1))
	else
		echo "ok: $name with RDMAPS_SCHEDULER=$value: exit $rc"
	fi
}

for v in 127.0.0.1 127.0.0.1:99999 127.0.0.1:; do
	check rdmaps-server "$v" "$BIN/rdmaps-server"
	check rdmaps-sched "$v" "$BIN/rdmaps-sched"
	check rdmaps-ctl "$v" "$BIN/rdmaps-ctl" status
	check worker "$v" "$BIN/itest-worker" bsp
done
[ "$fails" -eq 0 ] || { echo "FAIL: $fails case(s)"; exit 1; }
echo "PASS"
