#!/usr/bin/env bash
# Run one integration scenario on a real local cluster:
#   cluster.sh BIN_DIR MODE [TRANSPORT]
# 1 rdmaps-sched, 2 rdmaps-server (2 shards each), 4 itest-worker MODE (3 for bsp_order).
# MODE ssp: SSP with bound 2; ssp0: SSP with bound 0 (must behave as BSP);
# dead_bsp / dead_ssp: worker 3 is killed at clock 3 (RDMAPS_FAULT); drop:
# servers refuse 30% of the pushes (-EIO); bsp_faults: bsp with delayed frames
# and stalled update threads; metrics: scrape /metrics, rdmaps-ctl status;
# elastic: a killed worker is replaced by a new one mid-run; restart: a killed
# server is restored from its checkpoint (exact clocks lost); torn_sleep:
# torn with waiters that sleep at once (RDMAPS_WAIT_SPIN_US=0); bsp_order /
# bsp_order_arrival: 3 workers, BSP sums in rank order / in arrival order.
# TRANSPORT rdma: servers on the SoftRoCE device rxe0 (RDMAPS_RXE_IP0), workers
# on rxe1 (RDMAPS_RXE_IP1) — run it inside tools/softroce/rxe-run.
set -euo pipefail
BIN=$1
MODE=$2
TRANSPORT=${3:-tcp}

export RDMAPS_SHARDS=2
export RDMAPS_SLICE_BYTES=256K
export RDMAPS_SECRET=itest-secret
export RDMAPS_OPTIMIZER=sgd
export RDMAPS_LR=1
export RDMAPS_INIT=zeros
export RDMAPS_TIMEOUT_MS=30000
export RDMAPS_LOG_LEVEL=${RDMAPS_LOG_LEVEL:-warn}
WMODE=$MODE # the itest-worker mode
NW=4        # workers
NS=2        # servers
extra=()    # more rdmaps-launch options
case $MODE in
bsp) export RDMAPS_CONSISTENCY=bsp ;;
ssp) export RDMAPS_CONSISTENCY=ssp RDMAPS_STALENESS=2 ;;
ssp0) export RDMAPS_CONSISTENCY=ssp RDMAPS_STALENESS=0 WMODE=ssp ;;
dead_bsp | dead_ssp)
	# worker 3 dies (SIGKILL) on reaching clock 3; the others go on
	export RDMAPS_FAULT=kill_at_clock=3,kill_role=worker,kill_rank=3 WMODE=dead
	extra+=(--expect-killed 1)
	if [ "$MODE" = dead_bsp ]; then
		export RDMAPS_CONSISTENCY=bsp
	else
		export RDMAPS_CONSISTENCY=ssp RDMAPS_STALENESS=1
	fi
	;;
drop) export RDMAPS_CONSISTENCY=asp RDMAPS_FAULT=drop=0.3,seed=7 ;;
torn_sleep)
	# torn, with waiters that sleep at once: the progress thread reaps, and
	# a direct pull's READ wakes its sleeping waiter
	export RDMAPS_CONSISTENCY=asp RDMAPS_WAIT_SPIN_US=0 WMODE=torn
	;;
bsp_faults)
	# late frames and slow update threads must not change a single value
	export RDMAPS_CONSISTENCY=bsp WMODE=bsp
	export RDMAPS_FAULT=delay_ms=2,delay_p=0.05,stall_update_ms=1,stall_p=0.05,seed=3
	;;
elastic)
	# worker 3 dies at clock 2; rdmaps-launch starts it again: it joins the
	# running job in rank 3 (at the shards' clock)
	export RDMAPS_CONSISTENCY=bsp ITEST_KILL_CLOCK=2
	export RDMAPS_FAULT=kill_at_clock=2,kill_role=worker,kill_rank=3
	extra+=(--expect-killed 1 --restart-workers)
	;;
restart)
	# server 1 is killed at clock 10 (checkpoints every 4) and restarted by
	# rdmaps-launch from its checkpoint of clock 8
	export RDMAPS_CONSISTENCY=bsp RDMAPS_CHECKPOINT_EVERY=4
	export RDMAPS_FAULT=kill_at_clock=10,kill_role=server,kill_rank=1
	RDMAPS_CHECKPOINT_DIR=$(mktemp -d)
	export RDMAPS_CHECKPOINT_DIR
	trap 'rm -rf "$RDMAPS_CHECKPOINT_DIR"' EXIT
	extra+=(--expect-killed 1 --restart-servers)
	;;
repl_bsp | repl_asp)
	# replicated shards (docs/replication.md): server 1 is killed (SIGKILL)
	# when its shards reach clock 5, while the workers push clock 5; its
	# backup on server 0 takes over and the workers resend what was not
	# acknowledged: the values must be exactly those of a run nobody killed
	export RDMAPS_REPLICAS=2 RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000
	export RDMAPS_FAULT=kill_at_clock=5,kill_role=server,kill_rank=1 ITEST_CLOCKS=12
	extra+=(--expect-killed 1)
	if [ "$MODE" = repl_bsp ]; then
		export RDMAPS_CONSISTENCY=bsp WMODE=bsp
	else
		export RDMAPS_CONSISTENCY=asp WMODE=asp
	fi
	;;
repl3_bsp | repl3_mid)
	# 3 replicas (a chain primary -> backup 1 -> backup 2, docs/replication.md)
	# on 3 servers: server 1 is killed (SIGKILL) when its shards reach clock
	# 5, while the workers push clock 5; its first backup (on server 2) takes
	# over and goes on forwarding to the second (on server 0); server 0's
	# chain loses its middle (server 2's backup links to server 0, which
	# sends it what it lacks), server 2's its last.
	# repl3_bsp: at clock 9 worker 0 kills server 2's process too (the
	# promoted rank 1 and rank 2): server 0's backups of both take over,
	# server 0 alone holds the whole model.
	# repl3_mid: at clock 9 worker 0 kills server 0 (rank 0): its backup on
	# server 2, linked to it over the dead middle, takes over; server 2
	# alone holds the whole model.
	# Every BSP pull must still equal exactly the sums of the clocks before it.
	export RDMAPS_REPLICAS=3 RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000
	export RDMAPS_FAULT=kill_at_clock=5,kill_role=server,kill_rank=1 ITEST_CLOCKS=14
	export RDMAPS_CONSISTENCY=bsp WMODE=bsp ITEST_KILL2=9,1 ITEST_BIN=$BIN
	[ "$MODE" = repl3_mid ] && export ITEST_KILL2=9,0
	extra+=(--expect-killed 2)
	NS=3
	;;
repl_join)
	# a replacement server joins as a backup (docs/replication.md): server 1
	# is killed (SIGKILL) at clock 5 while the workers push; its backup on
	# server 0 takes over; rdmaps-launch --restart-servers starts a new
	# server, which joins as the backup of both ranks (server 0 lost its
	# backup with server 1) and copies their shards while the job goes on.
	# At clock 10 worker 0 waits until both copies are whole, then kills
	# server 0's process (ranks 0 and 1): the new server's backups take over.
	# Every BSP pull at every clock must equal exactly the sums before it.
	export RDMAPS_REPLICAS=2 RDMAPS_HEARTBEAT_MS=200 RDMAPS_HEARTBEAT_TIMEOUT_MS=2000
	export RDMAPS_FAULT=kill_at_clock=5,kill_role=server,kill_rank=1 ITEST_CLOCKS=16
	export RDMAPS_CONSISTENCY=bsp WMODE=bsp ITEST_KILL2=10,1 ITEST_BIN=$BIN
	JOB_LOG=$(mktemp /tmp/itest-repl-join-XXXXXX)
	trap 'rm -f "$JOB_LOG"' EXIT
	export ITEST_KILL2_WAIT="2,backup here holds all,$JOB_LOG"
	extra+=(--expect-killed 2 --restart-servers)
	;;
metrics)
	export RDMAPS_CONSISTENCY=bsp RDMAPS_HEARTBEAT_MS=200 ITEST_BIN=$BIN
	export RDMAPS_FAULT=delay_ms=0.5,delay_p=0.2,stall_update_ms=0.5,stall_p=0.2,seed=5
	export RDMAPS_METRICS_PORT=$((10050 + (RANDOM % 200) * 100))
	# worker 0 runs rdmaps-ctl status, which needs the job secret (a worker's
	# token does not prove rdmaps-ctl: docs/security.md "Tokens")
	extra+=(--shared-secret)
	;;
clip_asp | clip_bsp)
	# clipping per tensor: a tensor of 5 frames (docs/protocol.md, Push)
	export RDMAPS_CLIP_NORM=32 RDMAPS_MAX_MSG=4K WMODE=clip
	if [ "$MODE" = clip_bsp ]; then
		export RDMAPS_CONSISTENCY=bsp
	else
		export RDMAPS_CONSISTENCY=asp
	fi
	;;
bsp_order | bsp_order_arrival)
	# 3 workers push order-sensitive gradients in forced orders; frames of
	# 64K, popped by size (magnitude) so a worker's frames come out of order
	export RDMAPS_CONSISTENCY=bsp RDMAPS_MAX_MSG=64K RDMAPS_PRIORITY=magnitude WMODE=bsp_order
	NW=3
	if [ "$MODE" = bsp_order_arrival ]; then
		export RDMAPS_BSP_SUM=arrival
	else
		export RDMAPS_BSP_SUM=ordered
	fi
	;;
*) export RDMAPS_CONSISTENCY=asp ;;
esac

hosts=()
export ITEST_SERVER_HOST=127.0.0.1
if [ "$TRANSPORT" = rdma ]; then
	hosts=(--server-host "${RDMAPS_RXE_IP0:-10.9.0.1}" --worker-host "${RDMAPS_RXE_IP1:-10.9.0.2}")
	ITEST_SERVER_HOST=${RDMAPS_RXE_IP0:-10.9.0.1}
	# the workers read the servers' /metrics at the servers' RDMA address
	# (inside the guest); HTTP listens on loopback only unless told
	export RDMAPS_HTTP_HOST='*'
	case $MODE in
	repl_*) # a pull by READs of the dead primary fails: pulled again (docs/replication.md)
		export ITEST_PULL_AGAIN=1 ;;
	esac
fi
ports=()
if [ "$MODE" = errors ] && [ "$TRANSPORT" = tcp ]; then
	# below the ephemeral range (32768-60999), where outgoing connections live
	base=$((10000 + (RANDOM % 200) * 100))
	ports=(--server-port-base "$base")
	export ITEST_SERVER_PORTS="$base,$((base + 1))"
	# rank 0 marks here when its raw frames are done (itest-worker errors_raw)
	ITEST_ERRORS_MARK=$(mktemp -u /tmp/itest-errors-XXXXXX)
	export ITEST_ERRORS_MARK
	trap 'rm -f "$ITEST_ERRORS_MARK"' EXIT
fi

if [ -n "${JOB_LOG:-}" ]; then # a worker reads the job's output
	"$BIN/rdmaps-launch" --servers "$NS" --workers "$NW" --transport "$TRANSPORT" --timeout 240 \
		"${hosts[@]}" "${ports[@]}" "${extra[@]}" -- "$BIN/itest-worker" "$WMODE" 2>&1 |
		tee "$JOB_LOG"
	exit "${PIPESTATUS[0]}"
fi
"$BIN/rdmaps-launch" --servers "$NS" --workers "$NW" --transport "$TRANSPORT" --timeout 240 \
	"${hosts[@]}" "${ports[@]}" "${extra[@]}" -- "$BIN/itest-worker" "$WMODE"
