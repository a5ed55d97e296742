# A one-node Slurm cluster for one test (sourced): munged + slurmctld + slurmd
# from Debian's munge and slurm-wlm, everything under $SL (a temporary
# directory the caller owns): a generated munge key and slurm.conf with this
# machine's cores and memory, ports picked free, no system file touched.
#   slurm_start DIR   start it; exports SLURM_CONF (srun/sbatch/scontrol use it)
#   slurm_stop        cancel the jobs, stop the daemons, kill what is left of
#                     them (call it from the caller's EXIT trap; trap TERM and
#                     INT to exit so that the EXIT trap runs under ctest's timeout)
# Needs root (slurmd starts tasks as the submitting user). launcher_skip (lib.sh)
# says why when a daemon cannot start.

SL_PIDS=()
# sweep: kill every process of the cluster under $2 (daemons marked with
# RPS_SLURM_TEST=$2, anything holding a file under $2 open such as
# slurmstepd, tasks of its jobs); "watch": first wait until pid $3 (the
# test's shell) is gone -- the watchdog that cleans up even after a SIGKILL
SL_SWEEP='
import os, signal, sys, time
mode, sl, owner = sys.argv[1], sys.argv[2], int(sys.argv[3])
while mode == "watch" and os.path.exists(f"/proc/{owner}"):
    time.sleep(1)
mark, conf = f"RPS_SLURM_TEST={sl}".encode(), f"SLURM_CONF={sl}/slurm.conf".encode()
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) in (owner, os.getpid()):
        continue
    try:
        env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
    except OSError:
        continue
    try:  # slurmstepd overwrites its environment (process title): its log under sl
        fds = [os.readlink(f"/proc/{p}/fd/{f}") for f in os.listdir(f"/proc/{p}/fd")]
    except OSError:
        fds = []
    if (mark in env or (conf in env and any(e.startswith(b"SLURM_JOB_ID=") for e in env))
            or any(f.startswith(sl + "/") for f in fds)):
        try:
            os.kill(int(p), signal.SIGKILL)
            print(f"slurm cleanup: killed leftover pid {p}", file=sys.stderr)
        except OSError:
            pass
'

slurm_stop()
{
	local p i alive
	[ -n "${SL:-}" ] || return 0
	# the jobs first, while slurmd can still end their steps
	if [ ${#SL_PIDS[@]} -gt 0 ] && [ -n "${SLURM_CONF:-}" ]; then
		scancel --quiet --full -u "$(id -un)" 2>/dev/null || true
		for i in $(seq 1 100); do
			[ -z "$(squeue -h -o %i 2>/dev/null | head -n1)" ] && break
			sleep 0.1
		done
	fi
	for p in "${SL_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for i in $(seq 1 50); do
		alive=0
		for p in "${SL_PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null && alive=1
		done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for p in "${SL_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	SL_PIDS=()
	# whatever is left of this cluster: slurmstepd (it inherits the daemons'
	# RPS_SLURM_TEST) and tasks of its jobs (their SLURM_CONF and SLURM_JOB_ID)
	/usr/bin/python3 -c "$SL_SWEEP" now "$SL" "$$"
}

# slurm_wait_pid FILE: the daemon's pid once its pid file is written
slurm_pid_file()
{
	local i
	for i in $(seq 1 100); do
		[ -s "$1" ] && { cat "$1"; return 0; }
		sleep 0.1
	done
	return 1
}

slurm_start()
{
	SL=$1
	local p
	for p in munged mungekey slurmctld slurmd srun sbatch scontrol; do
		command -v "$p" >/dev/null || PATH=$PATH:/usr/sbin command -v "$p" >/dev/null ||
			launcher_skip "$p not installed (Debian: slurm-wlm, munge; scripts/deps.sh installs them)"
	done
	export PATH=$PATH:/usr/sbin
	[ "$(id -u)" = 0 ] || launcher_skip "slurmd needs root to start tasks"
	mkdir -p "$SL/munge" "$SL/state" "$SL/spool" "$SL/log"
	# no daemon outlives this shell, even killed by SIGKILL (a ctest timeout)
	setsid /usr/bin/python3 -c "$SL_SWEEP" watch "$SL" "$$" < /dev/null > /dev/null 2>&1 &
	chmod 700 "$SL/munge"

	mungekey --create --keyfile "$SL/munge/munge.key" >/dev/null 2>&1 ||
		dd if=/dev/urandom of="$SL/munge/munge.key" bs=1024 count=1 status=none
	chmod 600 "$SL/munge/munge.key"
	RPS_SLURM_TEST=$SL munged --force --socket "$SL/munge/sock" --key-file "$SL/munge/munge.key" \
		--pid-file "$SL/munge/munged.pid" --log-file "$SL/log/munged.log" \
		--seed-file "$SL/munge/seed" 2>"$SL/log/munged.err" ||
		launcher_skip "munged did not start: $(tail -n2 "$SL/log/munged.err" "$SL/log/munged.log" 2>/dev/null | tr '\n' ' ')"
	SL_PIDS+=("$(slurm_pid_file "$SL/munge/munged.pid")")

	local node cpus mem cport dport
	node=$(hostname -s)
	cpus=$(nproc)
	mem=$(( $(awk '/^MemTotal/ { print $2 }' /proc/meminfo) / 1024 - 512 ))
	cport=$(free_port)
	dport=$(free_port)
	while [ "$dport" = "$cport" ]; do dport=$(free_port); done
	export SLURM_CONF=$SL/slurm.conf
	cat > "$SLURM_CONF" <<EOC
ClusterName=rdmapstest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$cport
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SL/munge/sock
CredType=cred/munge
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd.pid
SlurmctldLogFile=$SL/log/slurmctld.log
SlurmdLogFile=$SL/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig=$SL/plugstack.conf
MinJobAge=300
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=10 State=UP OverSubscribe=NO
EOC
	: > "$SL/plugstack.conf"
	RPS_SLURM_TEST=$SL slurmctld -D -i -f "$SLURM_CONF" > "$SL/log/slurmctld.out" 2>&1 &
	SL_PIDS+=($!)
	RPS_SLURM_TEST=$SL slurmd -D -f "$SLURM_CONF" -N "$node" > "$SL/log/slurmd.out" 2>&1 &
	SL_PIDS+=($!)
	# ready when the node is idle
	local i st=""
	for i in $(seq 1 200); do
		st=$(sinfo -h -N -o "%T" 2>/dev/null || true)
		[ "$st" = idle ] && return 0
		for p in "${SL_PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null || {
				local why
				why=$(tail -n 3 "$SL/log/slurmctld.log" "$SL/log/slurmd.log" "$SL/log/slurmctld.out" \
					"$SL/log/slurmd.out" 2>/dev/null | tr '\n' ' ')
				slurm_stop
				launcher_skip "a Slurm daemon (pid $p) did not start: $why"
			}
		done
		sleep 0.1
	done
	local why
	why="node state '$st' after 20 s: $(tail -n 3 "$SL/log/slurmd.log" 2>/dev/null | tr '\n' ' ')"
	slurm_stop
	launcher_skip "$why"
}
