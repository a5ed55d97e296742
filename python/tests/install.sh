#!/usr/bin/env bash
# The rdmaps package installed the two ways a user installs it, then used:
#   1. cmake --install into a temporary prefix: the package lands in
#      <prefix>/lib/python3.X/dist-packages (RPS_PYTHON_INSTALL_DIR);
#   2. pip, offline, into a venv with the system's site packages, built
#      against that prefix with pkg-config (python/setup.py):
#        python3 -m venv --system-site-packages v
#        PKG_CONFIG_PATH=<prefix>/lib/pkgconfig v/bin/pip install --no-build-isolation ./python
# Each imports rdmaps from where it was installed (not the build tree), finds
# the installed programs, and runs a job with 2 workers on a local cluster.
#   install.sh BUILD_DIR [PYTHON]
set -euo pipefail
BUILD=$(cd "$1" && pwd)
PY=${2:-/usr/bin/python3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset PYTHONPATH RPS_BIN_DIR

cmake --install "$BUILD" --prefix "$T/prefix" >/dev/null
for f in lib/librdmaps_libc.a lib/pkgconfig/rdmaps-libc.pc; do
	test -e "$T/prefix/$f" || { echo "missing after install: $f"; exit 1; }
done
site=$(cd "$T/prefix" && ls -d lib/python3*/*-packages)
test -e "$T/prefix/$site/rdmaps/__init__.py" || { echo "no rdmaps package under $T/prefix/lib"; exit 1; }

cat > "$T/job.py" <<'PY'
import sys, numpy as np, rdmaps
where = sys.argv[1]
assert rdmaps.__file__.startswith(where), (rdmaps.__file__, where)
assert rdmaps.find_program("rdmaps-sched").startswith(sys.argv[2]), rdmaps.find_program("rdmaps-sched")
with rdmaps.Cluster(servers=1, workers=2, consistency="bsp", optimizer="sgd", lr=1, init="zeros",
                    log_level="warn") as c:
    import threading
    got = {}
    def run():
        with rdmaps.Worker(scheduler=c.scheduler, secret=c.secret, timeout=20) as w:
            w.declare(1, 4)
            w.barrier()
            w.push(1, np.full(4, w.rank + 1, np.float32)).wait()
            w.clock()
            v = np.zeros(4, np.float32)
            w.pull(1, v).wait()
            got[w.rank] = v.tolist()
            w.barrier()
    ts = [threading.Thread(target=run) for _ in range(2)]
    [t.start() for t in ts]
    [t.join(60) for t in ts]
assert got == {0: [-3.0] * 4, 1: [-3.0] * 4}, got
print("ok:", rdmaps.__file__)
PY

echo "== cmake --install: $site"
(cd "$T" && PYTHONPATH="$T/prefix/$site" "$PY" job.py "$T/prefix/$site" "$T/prefix/bin")

echo "== pip install --no-build-isolation into a venv (offline)"
cp -r "$SRC/python" "$T/src" # pip builds in the source tree: not in ours
rm -rf "$T/src/build" "$T/src"/*.egg-info
"$PY" -m venv --system-site-packages "$T/v"
PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig" PIP_NO_INDEX=1 \
	"$T/v/bin/pip" install -q --no-build-isolation --no-index "$T/src"
(cd "$T" && "$T/v/bin/python" job.py "$T/v/lib" "$T/prefix/bin")
echo "install: ok"
