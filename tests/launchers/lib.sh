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
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
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
