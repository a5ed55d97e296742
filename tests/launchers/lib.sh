# Shared by the launcher tests (sourced): the docs' recipes, skips, summaries.
# RECIPES: the file whose marked blocks are run (docs/scheduler.md).

# A test that cannot run here says why and is skipped (ctest SKIP_RETURN_CODE
# 77) -- except in CI (CI=1 or RPS_REQUIRE_LAUNCHERS=1), where it fails.
launcher_skip()
{
	if [ "${CI:-0}" = 1 ] || [ "${RPS_REQUIRE_LAUNCHERS:-0}" = 1 ]; then
		echo "FAIL (CI requires the launcher tests): $*" >&2
		exit 1
	fi
	echo "SKIP: $*" >&2
	exit 77
}

# recipe NAME: the fenced block after "<!-- recipe: NAME ..." in $RECIPES
recipe()
{
	/usr/bin/python3 - "$RECIPES" "$1" <<'PY'
import re, sys
text, name = open(sys.argv[1]).read(), sys.argv[2]
m = re.search(r"<!-- recipe: " + re.escape(name) + r"\b[^\n]*-->\n```[^\n]*\n(.*?)\n```", text, re.S)
if not m:
    sys.exit(f"{sys.argv[1]}: no block marked 'recipe: {name}'")
print(m.group(1))
PY
}

# subst FILE FROM TO: replace the literal FROM (must occur: a docs change that
# removes it fails the test instead of silently running something else)
subst()
{
	/usr/bin/python3 - "$@" <<'PY'
import sys
path, old, new = sys.argv[1:4]
s = open(path).read()
if old not in s:
    sys.exit(f"recipe {path} no longer contains {old!r}: update tests/launchers/ with the docs")
open(path, "w").write(s.replace(old, new))
PY
}

free_port()
{
	/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/../free_port.py"
}

# check_summary FILE MIN WORKERS SERVERS: one epoch, the counts, accuracy >= MIN
check_summary()
{
	/usr/bin/python3 - "$@" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
need, w, sv = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print(f"test accuracy {s['test_accuracy']:.4f} (need >= {need}), "
      f"{s['workers']} workers, {s['servers']} servers, {s['epochs']} epoch(s), {s['transport']}")
sys.exit(0 if s["test_accuracy"] >= need and s["workers"] == w and s["servers"] == sv
         and s["epochs"] == 1 else 1)
PY
}

# check_roles FILE: the "LAUNCH_RANK ROLE ..." lines of rank_roles (sorted)
# are the recipes' layout: rank 0 the scheduler, 1-2 servers, 3-6 workers
check_roles()
{
	local want="0 scheduler
1 server
2 server
3 worker
4 worker
5 worker
6 worker"
	[ "$(cut -d' ' -f1,2 "$1")" = "$want" ] && return 0
	echo "FAIL: rank-to-role mapping, want:"
	echo "$want"
	return 1
}

# rank_roles PORT SECRET_FILE RANK_VAR WATCH_PID STATUS_OUT: poll `rdmaps-ctl
# status` of the scheduler on 127.0.0.1:PORT until 2 servers and 4 workers are
# alive (fails if WATCH_PID ends first), then print "LAUNCH_RANK ROLE PID" per
# node -- role from the scheduler, LAUNCH_RANK from RANK_VAR in the process's
# environment -- and the scheduler's own line (the rdmaps-sched listening on PORT)
rank_roles()
{
	local port=$1 secret=$2 var=$3 watch=$4 out=$5 st="" i
	for i in $(seq 1 600); do
		st=$(RDMAPS_SCHEDULER=127.0.0.1:$port RDMAPS_SECRET=$(cat "$secret" 2>/dev/null) \
			RDMAPS_TIMEOUT_MS=1000 rdmaps-ctl status 2>/dev/null) || st=""
		echo "$st" | grep -q "servers 2/2 alive, workers 4/4 alive" && break
		kill -0 "$watch" 2>/dev/null || { echo "the launcher ended before the cluster was complete" >&2; return 1; }
		sleep 0.1
	done
	echo "$st" > "$out"
	/usr/bin/python3 - "$out" "$port" "$var" <<'PY'
import os, sys
def env(pid):
    try:
        e = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return {}
    return dict(x.decode(errors="replace").split("=", 1) for x in e if b"=" in x)
var = sys.argv[3]
rows = [l.split() for l in open(sys.argv[1]) if l.split()[:1] and l.split()[0].isdigit()]
for r in rows:
    pid, role = int(r[4]), r[1]
    print(env(pid).get(var, "?"), role, pid)
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"rdmaps-sched") and any(a.endswith(f":{sys.argv[2]}".encode()) for a in cmd):
            print(env(p).get(var, "?"), "scheduler", p)
PY
}
