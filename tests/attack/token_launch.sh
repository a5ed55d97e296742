#!/usr/bin/env bash
# Tokens by default (issue 20, docs/security.md "Tokens"): rdmaps-launch
# gives the scheduler the job secret and each server and worker only its own
# token (RDMAPS_TOKEN), and a Fashion-MNIST job trains that way.
#  1. 2 servers x 2 workers, BSP, one short epoch of fmnist-train: it trains
#     (test accuracy >= 0.6); every worker has RDMAPS_TOKEN of its own rank
#     and no RDMAPS_SECRET; every server likewise (read from /proc while the
#     job runs); the tokens are in no command line (ps).
#  2. --shared-secret: every process gets the secret and no token (the all
#     trusted mode), and the job trains too.
#
#   token_launch.sh BIN_DIR
set -euo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() {
	echo "FAIL: $*"
	tail -n 30 "$T"/*.log 2>/dev/null || true
	exit 1
}
for v in $(env | grep -o '^RDMAPS_[A-Z_]*'); do unset "$v"; done
export RDMAPS_LOG_LEVEL=warn T BIN
FM="$BIN/fmnist-train --epochs 1 --train-limit 4096 --batch 128 --no-progress"

# What each worker sees, written to $T/env.RANK; worker 0 also looks at the
# servers (its parent is rdmaps-launch, theirs too) and at ps.
cat > "$T/worker.sh" <<'EOS'
#!/usr/bin/env bash
{
	echo "secret=${RDMAPS_SECRET:-}"
	echo "token=${RDMAPS_TOKEN:-}"
	echo "rank=${RDMAPS_RANK:-}"
} > "$T/env.$RDMAPS_RANK"
if [ "$RDMAPS_RANK" = 0 ]; then
	for p in $(pgrep -x rdmaps-server -P "$PPID"); do
		tr '\0' '\n' < /proc/$p/environ | grep -E '^RDMAPS_(SECRET|TOKEN|RANK)=' \
			> "$T/server.$p" || true
	done
	ps -eo args > "$T/ps.txt"
fi
exec "$@"
EOS
chmod +x "$T/worker.sh"

# 1. token mode (the default)
RDMAPS_SECRET=token-launch-secret-$RANDOM$RANDOM \
	"$BIN/rdmaps-launch" --servers 2 --workers 2 --consistency bsp --timeout 120 -- \
	"$T/worker.sh" $FM > "$T/launch.log" 2>&1 || fail "token mode: the job failed"
acc=$(sed -n 's/.*done: test accuracy \([0-9.]*\).*/\1/p' "$T/launch.log" | tail -1)
[ -n "$acc" ] || fail "token mode: no test accuracy printed"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.6 else 1)" ||
	fail "token mode: test accuracy $acc < 0.6"
echo "ok   token mode: 2x2 BSP fmnist-train trains (test accuracy $acc)"
for r in 0 1; do
	grep -qx "secret=" "$T/env.$r" || fail "worker $r has RDMAPS_SECRET"
	grep -q "^token=rdmaps-token-v1:worker:$r:[0-9a-f]\{64\}:ring:[0-9a-f]\{64\}:tls:[0-9a-f]\{64\}$" "$T/env.$r" ||
		fail "worker $r has no worker token of rank $r: $(grep -c token= "$T/env.$r")"
done
echo "ok   token mode: each worker holds only the token of its own rank, no secret"
n=0
for f in "$T"/server.*; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	! grep -q '^RDMAPS_SECRET=' "$f" || fail "a server has RDMAPS_SECRET"
	r=$(sed -n 's/^RDMAPS_RANK=//p' "$f")
	grep -q "^RDMAPS_TOKEN=rdmaps-token-v1:server:$r:[0-9a-f]\{64\}:verify-worker:[0-9a-f]\{64\}:tls:[0-9a-f]\{64\}$" "$f" ||
		fail "server $r has no server token of its rank"
done
[ "$n" -eq 2 ] || fail "found $n servers in /proc, not 2"
echo "ok   token mode: each server holds only its own server token, no secret"
if grep -q "rdmaps-token-v1" "$T/ps.txt"; then
	fail "a token is visible on a command line (ps)"
fi
echo "ok   token mode: no token on a command line"

# 2. --shared-secret: the all-trusted mode
rm -f "$T"/env.* "$T"/server.*
RDMAPS_SECRET=token-launch-secret-$RANDOM$RANDOM \
	"$BIN/rdmaps-launch" --shared-secret --servers 1 --workers 2 --consistency bsp \
	--timeout 120 -- "$T/worker.sh" $FM > "$T/shared.log" 2>&1 ||
	fail "--shared-secret: the job failed"
grep -q "done: test accuracy" "$T/shared.log" || fail "--shared-secret: no test accuracy"
for r in 0 1; do
	grep -q "^secret=token-launch-secret-" "$T/env.$r" || fail "--shared-secret: worker $r has no secret"
	grep -qx "token=" "$T/env.$r" || fail "--shared-secret: worker $r has a token"
done
echo "ok   --shared-secret: every worker holds the job secret, no token; the job trains"
echo PASS
