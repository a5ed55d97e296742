"""Fixtures of the rdmaps pytest suite: real local clusters of rdmaps-sched
and rdmaps-server (the build tree's, RPS_BIN_DIR), one per test, on
127.0.0.1 with random free ports. RDMAPS_TEST_TRANSPORT=rdma runs the same
tests over RDMA in the SoftRoCE guest (servers on RDMAPS_RXE_IP0, workers on
RDMAPS_RXE_IP1; tests/rdma/python.cmake)."""
import os
import subprocess
import sys

import pytest

import rdmaps

HERE = os.path.dirname(os.path.abspath(__file__))
TRANSPORT = os.environ.get("RDMAPS_TEST_TRANSPORT", "tcp")
SERVER_HOST = os.environ.get("RDMAPS_RXE_IP0", "10.9.0.1") if TRANSPORT == "rdma" else "127.0.0.1"
WORKER_HOST = os.environ.get("RDMAPS_RXE_IP1", "10.9.0.2") if TRANSPORT == "rdma" else "127.0.0.1"
# The guest runs under TCG: everything is ~10x slower there.
SLOW = 5.0 if TRANSPORT == "rdma" else 1.0
SECRET = "pytest-secret"

# the workers this process creates find their address here
os.environ["RDMAPS_HOST"] = WORKER_HOST
os.environ.setdefault("RDMAPS_LOG_LEVEL", "warn")

BASE = dict(shards=2, optimizer="sgd", lr=1, init="zeros", timeout_ms=int(5000 * SLOW),
            log_level=os.environ["RDMAPS_LOG_LEVEL"], heartbeat_timeout_ms=int(5000 * SLOW))


@pytest.fixture
def cluster():
    """cluster(servers=1, workers=1, consistency="asp", **settings): a started
    rdmaps.Cluster, stopped after the test."""
    made = []

    def make(servers=1, workers=1, consistency="asp", **settings):
        s = dict(BASE)
        s.update(settings)
        c = rdmaps.Cluster(servers=servers, workers=workers, transport=TRANSPORT,
                           secret=SECRET, host=SERVER_HOST, worker_host=WORKER_HOST,
                           consistency=consistency, **s)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop(timeout=5)


def worker(c, **kw):
    """A Worker of cluster c in this process."""
    kw.setdefault("timeout", 5 * SLOW)
    return rdmaps.Worker(scheduler=c.scheduler, secret=c.secret, transport=c.transport, **kw)


class Proc:
    """A worker process: python3 tests/procs.py MODE ARGS with the cluster's
    environment; its stdout lines are collected by a thread."""

    def __init__(self, c, mode, *args):
        import queue
        import threading
        env = dict(c.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["PYTHONUNBUFFERED"] = "1"
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "procs.py"), mode] +
                                  [str(a) for a in args], env=env, stdout=subprocess.PIPE,
                                  text=True)
        self.lines = queue.Queue()
        self.seen = []
        t = threading.Thread(target=self._read, daemon=True)
        t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix, timeout):
        """The first line starting with prefix; fails after timeout s or at EOF."""
        import queue
        import time
        until = time.monotonic() + timeout * SLOW
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                pytest.fail("no %r from worker pid %d within %g s; it said %r" %
                            (prefix, self.p.pid, timeout * SLOW, self.seen))
            if line is None:
                pytest.fail("worker pid %d exited (%s) before %r; it said %r" %
                            (self.p.pid, self.p.wait(), prefix, self.seen))
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def wait(self, timeout):
        return self.p.wait(timeout * SLOW)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def workers(c, n, **kw):
    """n Workers of cluster c in this process, created at once from threads
    (a worker's create waits for the whole cluster), ordered by rank."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(n) as ex:
        ws = list(ex.map(lambda _: worker(c, **kw), range(n)))
    return sorted(ws, key=lambda w: w.rank)


def together(fn, ws):
    """fn(w) for every worker at once (threads); the results in order."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(len(ws)) as ex:
        return list(ex.map(fn, ws))
