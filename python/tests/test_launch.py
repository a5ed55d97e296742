"""python3 -m rdmaps.launch runs a script as the workers of a local job."""
import os
import subprocess
import sys

from conftest import TRANSPORT, SLOW

SCRIPT = r'''
import numpy as np, rdmaps
with rdmaps.Worker() as w:
    w.declare(1, 4, init="zeros")
    w.barrier()
    w.push(1, np.full(4, w.rank + 1, np.float32)).wait()
    w.clock()
    v = np.zeros(4, np.float32)
    w.pull(1, v).wait()
    print("rank %d of %d sees %g" % (w.rank, w.num_workers, v[0]), flush=True)
    w.barrier()
'''


def test_launch_runs_script(tmp_path):
    if TRANSPORT != "tcp":
        import pytest
        pytest.skip("launch is tested over tcp")
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env.update(RDMAPS_CONSISTENCY="bsp", RDMAPS_OPTIMIZER="sgd", RDMAPS_LR="1",
               RDMAPS_INIT="zeros", RDMAPS_SECRET="pytest-launch", RDMAPS_TIMEOUT_MS="10000")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    p = subprocess.run([sys.executable, "-m", "rdmaps.launch", "--servers", "2", "--workers",
                        "3", "--timeout", "60", "--", str(script)], env=env,
                       capture_output=True, text=True, timeout=90 * SLOW)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    for r in range(3):
        assert "rank %d of 3 sees -6" % r in out, out


def test_launch_argv():
    from rdmaps.launch import build_argv
    a = build_argv(["--servers", "2", "--", "train.py", "--epochs", "3"])
    assert a[0].endswith("rdmaps-launch")
    assert a[1:] == ["--servers", "2", "--", sys.executable, "train.py", "--epochs", "3"]
    assert build_argv(["-w", "2", "--", "-m", "mod"])[-3:] == [sys.executable, "-m", "mod"]
    assert build_argv(["--", "/bin/true"])[-1] == "/bin/true"


def test_logreg_example():
    """python/examples/logreg.py, as its docstring runs it."""
    if TRANSPORT != "tcp":
        import pytest
        pytest.skip("launch is tested over tcp")
    ex = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "logreg.py")
    env = dict(os.environ, RDMAPS_SECRET="pytest-logreg", RDMAPS_LOG_LEVEL="warn")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    p = subprocess.run([sys.executable, "-m", "rdmaps.launch", "--servers", "1", "--workers", "2",
                        "--consistency", "bsp", "--timeout", "60", "--", ex], env=env,
                       capture_output=True, text=True, timeout=90)
    out = p.stdout + p.stderr
    assert p.returncode == 0, "exit %d: %s" % (p.returncode, out)
    import re
    accs = dict(re.findall(r"worker (\d+): accuracy ([0-9.]+)", out))
    assert sorted(accs) == ["0", "1"], out
    assert min(float(a) for a in accs.values()) >= 0.95, out
