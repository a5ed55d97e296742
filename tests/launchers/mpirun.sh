#!/usr/bin/env bash
# The MPMD mpirun recipe of docs/scheduler.md, run for real with Open MPI:
# scheduler + 2 servers + 4 fmnist-train workers for one epoch.
#   mpirun.sh BIN_DIR DOCS_MD MIN_ACCURACY
# The block marked "recipe: mpirun" (and "recipe: server.sh") is extracted
# from the docs and run with only these changes, each of which must still
# match the docs: the hosts' --host options dropped (one machine) and
# --oversubscribe added (2 cores, 7 processes); the scheduler on 127.0.0.1 at a
# free port instead of 10.0.0.1:9090; --epochs 1 instead of 10; ./train is
# fmnist-train writing a summary. Checks:
#  1. the job ends 0 and reaches MIN_ACCURACY;
#  2. rank-to-role mapping: while it runs, every node in `rdmaps-ctl status`
#     is a process whose OMPI_COMM_WORLD_RANK is that of its role in the recipe
#     (0 scheduler, 1-2 servers, 3-6 workers);
#  3. a worker killed (SIGKILL) in a second run: mpirun ends the whole job
#     with a non-zero status within 60 s, no process of the job left.
set -euo pipefail
BIN=$(cd "$1" && pwd)
RECIPES=$2
MIN=${3:-0.82}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

command -v mpirun >/dev/null || launcher_skip "mpirun not installed (Debian: openmpi-bin; scripts/deps.sh installs it)"
mpirun --version 2>/dev/null | grep -q "Open MPI" || launcher_skip "mpirun is not Open MPI's: $(mpirun --version 2>&1 | head -n1)"
if [ "$(id -u)" = 0 ]; then
	# Open MPI refuses root unless both are set (its FAQ / mpirun(1))
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

T=$(mktemp -d)
MPIPID=
cleanup()
{
	# timeout passes TERM on to mpirun, which ends its processes
	[ -n "$MPIPID" ] && kill -TERM "$MPIPID" 2>/dev/null && timeout 10 tail --pid="$MPIPID" -f /dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
export PATH="$BIN:$PATH" RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
export PYTHONDONTWRITEBYTECODE=1

recipe server.sh > "$T/server.sh"
recipe mpirun > "$T/job.sh"
chmod +x "$T/server.sh"
cat > "$T/train" <<EOT
#!/bin/sh
exec fmnist-train --no-progress --summary-json "$T/summary.json" "\$@"
EOT
chmod +x "$T/train"
PORT=$(free_port)
subst "$T/job.sh" "mpirun -x" "mpirun --oversubscribe -x"
subst "$T/job.sh" " --host node1 " " "
subst "$T/job.sh" " --host node2,node3 " " "
subst "$T/job.sh" " --host node4:2,node5:2 " " "
subst "$T/job.sh" "10.0.0.1:9090" "127.0.0.1:$PORT"
subst "$T/job.sh" "0.0.0.0:9090" "0.0.0.0:$PORT"
subst "$T/job.sh" "./train --epochs 10" "./train --epochs 1"
echo "--- the recipe as run (docs: $RECIPES)"; cat "$T/job.sh"

# The recipe exports the secret itself; the wrapper below runs it and leaves
# the secret where this script's rdmaps-ctl finds it.
{ echo "set -e"; cat "$T/job.sh"; } > "$T/run.sh"
subst "$T/run.sh" "
mpirun " "
printf %s \"\$RDMAPS_SECRET\" > secret
exec mpirun "

echo "--- 1. the job, one epoch"
start=$(date +%s)
(cd "$T" && exec timeout -k 5 120 bash "$T/run.sh") > "$T/mpirun.log" 2>&1 &
MPIPID=$!
rank_roles "$PORT" "$T/secret" OMPI_COMM_WORLD_RANK "$MPIPID" "$T/status" | sort -n > "$T/roles" || { cat "$T/mpirun.log"; exit 1; }
cat "$T/roles"
rc=0; wait "$MPIPID" || rc=$?
MPIPID=
tail -n 20 "$T/mpirun.log"
echo "mpirun exit $rc after $(( $(date +%s) - start )) s"
[ "$rc" = 0 ] || { echo "FAIL: mpirun exit $rc"; exit 1; }
check_roles "$T/roles" || exit 1
echo "rank-to-role mapping as the recipe says"
check_summary "$T/summary.json" "$MIN" 4 2 || { echo "FAIL: accuracy/summary"; exit 1; }

echo "--- 2. a worker killed: mpirun ends the job with an error"
rm -f "$T/summary.json" "$T/secret"
PORT2=$(free_port)
sed -i "s/127.0.0.1:$PORT/127.0.0.1:$PORT2/; s/0.0.0.0:$PORT/0.0.0.0:$PORT2/" "$T/run.sh"
PORT=$PORT2
start=$(date +%s)
(cd "$T" && exec timeout -k 5 60 bash "$T/run.sh") > "$T/mpirun.log" 2>&1 &
MPIPID=$!
rank_roles "$PORT" "$T/secret" OMPI_COMM_WORLD_RANK "$MPIPID" "$T/status" | sort -n > "$T/roles" || { cat "$T/mpirun.log"; exit 1; }
victim=$(awk '$1 == 4 { print $3 }' "$T/roles")
[ -n "$victim" ] || { echo "FAIL: no process with OMPI rank 4"; cat "$T/roles"; exit 1; }
pids=$(awk '{ print $3 }' "$T/roles")
[ ! -e "$T/summary.json" ] || { echo "FAIL: the job was over before the kill"; exit 1; }
kill -KILL "$victim"
echo "killed worker pid $victim (OMPI rank 4)"
rc=0; wait "$MPIPID" || rc=$?
MPIPID=
took=$(( $(date +%s) - start ))
tail -n 15 "$T/mpirun.log"
echo "mpirun exit $rc after $took s"
[ "$rc" != 0 ] || { echo "FAIL: mpirun exit 0 after a worker was killed"; exit 1; }
# (mpirun's own status for a process killed by signal 9 is 137 too: the bound is the time)
[ "$took" -lt 55 ] || { echo "FAIL: mpirun did not end the job by itself within 55 s"; exit 1; }
grep -q "exited on signal 9" "$T/mpirun.log" || { echo "FAIL: mpirun did not name the killed process"; exit 1; }
# mpirun sends its processes SIGTERM (then SIGKILL) and may return before the
# last one is gone: give them 10 s
left=
for i in $(seq 1 100); do
	left=
	for p in $pids; do
		kill -0 "$p" 2>/dev/null && left="$left $p"
	done
	[ -z "$left" ] && break
	sleep 0.1
done
if [ -n "$left" ]; then
	echo "FAIL: pid(s)$left of the job still run 10 s after mpirun ended"
	kill -KILL $left 2>/dev/null
	exit 1
fi
echo "every process of the job is gone"
echo "PASS"
