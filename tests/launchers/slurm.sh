#!/usr/bin/env bash
# The Slurm recipe of docs/scheduler.md (the block marked "recipe: sbatch":
# srun --multi-prog inside a batch script, with "recipe: server.sh") run for
# real on a one-node Slurm cluster this test starts (slurm_cluster.sh):
# scheduler + 2 servers + 4 fmnist-train workers for one epoch.
#   slurm.sh BIN_DIR DOCS_MD MIN_ACCURACY
# Changes to the recipe, each of which must still match the docs: one node
# (--nodes=1, --overcommit: 7 tasks on this machine's cores), the scheduler's
# port picked free instead of 9090, tcp instead of rdma, --epochs 1 instead of
# 10; ./train is fmnist-train writing a summary. Checks:
#  1. the job completes (exit 0) and reaches MIN_ACCURACY;
#  2. rank-to-role mapping: task 0 is the scheduler, 1-2 servers, 3-6 workers
#     (SLURM_PROCID of each process in `rdmaps-ctl status`);
#  3. the job secret, generated in the script as documented, appears neither
#     in `scontrol show job` / `scontrol show step` nor in the job's stored
#     environment and script (slurmctld's state directory, `scontrol write
#     batch_script`), captured while the job runs.
set -euo pipefail
BIN=$(cd "$1" && pwd)
RECIPES=$2
MIN=${3:-0.82}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/slurm_cluster.sh"

T=$(mktemp -d)
SBPID=
cleanup()
{
	[ -n "$SBPID" ] && kill -TERM "$SBPID" 2>/dev/null
	slurm_stop
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
slurm_start "$T/slurm"
echo "one-node Slurm cluster up: $(sinfo -h -N -o '%N %c CPUs %m MB %T')"

export PATH="$BIN:$PATH" RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
export PYTHONDONTWRITEBYTECODE=1
J=$T/job
mkdir -p "$J"
recipe server.sh > "$J/server.sh"
recipe sbatch > "$J/job.sbatch"
chmod +x "$J/server.sh"
# the test's ./train: fmnist-train, and the secret written where the checks
# below find it (only to look for it in Slurm's records)
cat > "$J/train" <<EOT
#!/bin/sh
[ "\$SLURM_PROCID" = 3 ] && printf %s "\$RDMAPS_SECRET" > "$T/secret"
exec fmnist-train --no-progress --summary-json "$T/summary.json" "\$@"
EOT
chmod +x "$J/train"
PORT=$(free_port)
subst "$J/job.sbatch" "#SBATCH --nodes=5 --ntasks=7" "#SBATCH --nodes=1 --ntasks=7 --overcommit"
subst "$J/job.sbatch" ":9090" ":$PORT"
subst "$J/job.sbatch" "RDMAPS_TRANSPORT=rdma" "RDMAPS_TRANSPORT=tcp"
subst "$J/job.sbatch" "./train --epochs 10" "./train --epochs 1"
echo "--- the batch script as run (docs: $RECIPES)"; cat "$J/job.sbatch"

start=$(date +%s)
sbatch --parsable --wait --chdir "$J" -o "$J/slurm-%j.out" "$J/job.sbatch" > "$T/sbatch.out" 2>&1 &
SBPID=$!
job=
for i in $(seq 1 100); do
	job=$(head -n1 "$T/sbatch.out" | tr -cd 0-9)
	[ -n "$job" ] && break
	sleep 0.1
done
[ -n "$job" ] || { echo "FAIL: sbatch gave no job id: $(cat "$T/sbatch.out")"; exit 1; }
echo "job $job submitted"
rank_roles "$PORT" "$T/secret" SLURM_PROCID "$SBPID" "$T/status" | sort -n > "$T/roles" ||
	{ echo "FAIL: the job's ranks and roles could not be read (job output follows)"; cat "$J"/slurm-*.out; exit 1; }
# Slurm's records of the job, while it runs (a query that fails, e.g. a step
# not listed yet, must not end the script silently under set -e: what the
# records must hold is checked below, with a message)
{
	scontrol show job -dd "$job" || echo "(scontrol show job failed: $?)"
	scontrol show step "$job" || echo "(scontrol show step failed: $?)"
	scontrol write batch_script "$job" - || echo "(scontrol write batch_script failed: $?)"
} > "$T/records" 2>&1
cp -r "$T/slurm/state" "$T/state-copy" || echo "note: copying slurmctld's state met a changing file"
cat "$T/roles"
rc=0; wait "$SBPID" || rc=$?
SBPID=
echo "sbatch --wait exit $rc after $(( $(date +%s) - start )) s"
tail -n 8 "$J"/slurm-*.out
[ "$rc" = 0 ] || { echo "FAIL: the job failed"; cat "$J"/slurm-*.out; exit 1; }
scontrol show job "$job" | grep -E "JobState|ExitCode"
scontrol show job "$job" | grep -q "JobState=COMPLETED" || { echo "FAIL: job not COMPLETED"; exit 1; }

check_roles "$T/roles" || exit 1
echo "rank-to-role mapping as the recipe says (SLURM_PROCID)"
check_summary "$T/summary.json" "$MIN" 4 2 || { echo "FAIL: accuracy/summary"; exit 1; }

secret=$(cat "$T/secret")
[ "${#secret}" = 32 ] || { echo "FAIL: no 32-hex-digit secret seen by the workers ('$secret')"; exit 1; }
grep -q "JobId=$job" "$T/records" || { echo "FAIL: scontrol show job gave nothing"; cat "$T/records"; exit 1; }
grep -q "RDMAPS_SECRET=\$(head" "$T/records" || { echo "FAIL: scontrol write batch_script gave no script"; exit 1; }
envfile=$(find "$T/state-copy" -name environment | head -n1)
[ -n "$envfile" ] && grep -qa "SLURM_CONF=" "$envfile" || { echo "FAIL: no stored job environment in slurmctld's state"; exit 1; }
if grep -rqa -- "$secret" "$T/records" "$T/state-copy"; then
	echo "FAIL: the job secret appears in Slurm's records:"
	grep -rla -- "$secret" "$T/records" "$T/state-copy"
	exit 1
fi
# the check can fail: a variable exported before sbatch is in the stored environment
probe=probe$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
pj=$(RPS_PROBE=$probe sbatch --parsable --hold --chdir "$J" -o /dev/null --wrap true)
grep -rqa -- "$probe" "$T/slurm/state" || { echo "FAIL: the stored-environment check sees nothing (job $pj)"; exit 1; }
scancel "$pj"
echo "(control: a variable exported before sbatch is in slurmctld's stored environment)"
echo "the secret is in no Slurm record (scontrol show job/step, stored script and environment $(basename "$(dirname "$envfile")")/environment)"


echo "--- 2. the separate-steps recipe (\"recipe: srun-steps\") in the same script's setting"
# the batch script's lines up to its multi-prog part, then the steps block
recipe sbatch | sed '/^cat > rdmaps.conf/,$d' > "$J/steps.sbatch"
recipe srun-steps >> "$J/steps.sbatch"
PORT=$(free_port)
subst "$J/steps.sbatch" "#SBATCH --nodes=5 --ntasks=7" "#SBATCH --nodes=1 --ntasks=7 --overcommit"
subst "$J/steps.sbatch" ":9090" ":$PORT"
subst "$J/steps.sbatch" "RDMAPS_TRANSPORT=rdma" "RDMAPS_TRANSPORT=tcp"
subst "$J/steps.sbatch" "./train --epochs 10" "./train --epochs 1"
subst "$J/steps.sbatch" "--overlap -N2 -n2 " "--overlap -N1 -n2 "
subst "$J/steps.sbatch" "--overlap -N2 -n4 " "--overlap -N1 -n4 "
cat "$J/steps.sbatch"
rm -f "$T/summary.json"
start=$(date +%s)
rc=0
timeout -k 5 90 sbatch --parsable --wait --chdir "$J" -o "$J/steps-%j.out" "$J/steps.sbatch" > "$T/sbatch2.out" 2>&1 || rc=$?
job=$(head -n1 "$T/sbatch2.out" | tr -cd 0-9)
echo "sbatch --wait exit $rc after $(( $(date +%s) - start )) s"
tail -n 6 "$J"/steps-*.out
[ "$rc" = 0 ] || { echo "FAIL: the separate-steps job failed"; cat "$J"/steps-*.out; exit 1; }
scontrol show job "$job" | grep -q "JobState=COMPLETED" || { echo "FAIL: job $job not COMPLETED"; exit 1; }
check_summary "$T/summary.json" "$MIN" 4 2 || { echo "FAIL: accuracy/summary (separate steps)"; exit 1; }
echo "PASS"
