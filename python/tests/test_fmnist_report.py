"""examples/torch/fmnist.py reports the curves fmnist-train reports (loss,
samples_s, staleness of every worker, rank 0's test_accuracy) to the
scheduler's dashboard: a short BSP run of 2 workers (processes) against a
cluster whose scheduler serves /api/state, watched while it trains."""
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import SLOW
from test_report import dash_cluster

pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "torch", "fmnist.py")
DATA = "/usr/share/datasets/fashion-mnist"


def snapshot(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/api/state" % port, timeout=2) as r:
            return json.loads(r.read())
    except OSError:  # the job ended: the scheduler is gone
        return None


def test_fmnist_reports_its_curves(cluster):
    if not os.path.exists(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")):
        pytest.skip("Fashion-MNIST is not installed (%s: dataset-fashion-mnist)" % DATA)
    # the server waits for the workers, which import torch and read the data
    # first: seconds under load, more than the suite's 5 s timeout
    c, port = dash_cluster(cluster, servers=1, workers=2, consistency="bsp",
                           timeout_ms=int(60000 * SLOW))
    env = dict(c.env, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    # 3 epochs of 12000 images: the first epoch's test accuracy is reported while
    # the run goes on (the scheduler ends with the job: the last one may be missed)
    args = [sys.executable, SCRIPT, "--epochs", "3", "--train-limit", "12000", "--batch", "100",
            "--no-progress"]
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    last = None
    until = time.monotonic() + 100 * SLOW
    try:
        while any(p.poll() is None for p in procs):
            if time.monotonic() > until:
                pytest.fail("fmnist.py did not finish within %g s" % (100 * SLOW))
            s = snapshot(port)
            if s is not None:
                last = s
            time.sleep(0.1)
        out = [p.communicate()[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], out
    # rank 0 printed its evaluations
    accs = [float(m) for o in out for m in re.findall(r"^epoch \d+/3 .*test_accuracy (\S+)$",
                                                       o, re.M)]
    assert len(accs) == 3, out
    assert last is not None, "the dashboard never answered"
    got = {(s["name"], s["worker"]): s for s in last["series"]}
    for r in (0, 1):
        for name in ("loss", "samples_s", "staleness"):
            assert (name, r) in got, "no %s curve of worker %d: %r" % (name, r, sorted(got))
            # at least the forced report at the end of each finished epoch
            assert got[(name, r)]["total"] >= 2, got[(name, r)]
        loss, sps = got[("loss", r)], got[("samples_s", r)]
        assert all(v is not None and 0 < v < 5 for v in loss["v"]), loss
        assert all(v is not None and v > 0 for v in sps["v"]), sps
        assert got[("staleness", r)]["v"] == [0] * len(got[("staleness", r)]["v"])  # BSP
        assert loss["clock"] == sorted(loss["clock"]) and loss["clock"][-1] > 0
    assert ("test_accuracy", 1) not in got  # rank 0 evaluates
    ta = got[("test_accuracy", 0)]["v"]
    assert 1 <= len(ta) <= 3
    # the same figures as printed (4 decimals on screen)
    for v, printed in zip(ta, accs):
        assert math.isclose(v, printed, abs_tol=5.1e-5), (ta, accs)
    assert set(k for k, _ in got) == {"loss", "samples_s", "staleness", "test_accuracy"}
