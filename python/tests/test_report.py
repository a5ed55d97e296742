"""Worker.report: figures reach the scheduler's dashboard (GET /api/state on
RDMAPS_METRICS_PORT, docs/dashboard.md) with their names, values, worker
and clock; bad names and values raise; the rate bound drops (False) and
nothing else is lost."""
import json
import os
import random
import socket
import time
import urllib.request

import numpy as np
import pytest

from conftest import SLOW, worker

RATE = 100  # RPS_WORKER_REPORT_RATE (<rdmaps/worker.h>)


def free_run(n):
    """A port p with p .. p + n - 1 free on 127.0.0.1 (the scheduler's page is
    on p, server r's /metrics on p + 1 + r), below the ephemeral range."""
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError):
        pass
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        p = rng.randrange(max(1024, lo - 12000), lo - n)
        socks = []
        try:
            for q in range(p, p + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", q))
            return p
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.fail("no free run of %d ports on 127.0.0.1" % n)


def dash_cluster(cluster, servers=1, workers=1, **settings):
    """A cluster whose scheduler serves the dashboard; (cluster, port)."""
    last = None
    for _ in range(3):  # a port taken between the check and the bind: another run
        port = free_run(1 + servers)
        try:
            return cluster(servers=servers, workers=workers, metrics_port=port,
                           **settings), port
        except OSError as e:
            last = e
    pytest.fail("no cluster with a dashboard: %s" % last)


def state(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/api/state" % port, timeout=5) as r:
        assert r.status == 200
        return json.loads(r.read())


def series_of(port, want, timeout=10.0):
    """{(name, worker): series} once every (name, worker, total) of want is
    there. The scheduler rewrites the JSON every 250 ms while watched (2 s
    otherwise): poll."""
    until = time.monotonic() + timeout * SLOW
    while True:
        got = {(s["name"], s["worker"]): s for s in state(port)["series"]}
        if all(k in got and got[k]["total"] >= n for k, n in want.items()):
            return got
        if time.monotonic() > until:
            pytest.fail("dashboard series %r not seen within %g s; it has %r" %
                        (want, timeout * SLOW, got))
        time.sleep(0.1)


def test_reports_reach_the_dashboard(cluster):
    c, port = dash_cluster(cluster)
    with worker(c) as w:
        w.declare(0, 4, init="zeros")
        assert w.report("loss", 2.5) is True
        assert w.report("samples_s", 1234.5) is True
        w.clock()
        assert w.report("loss", 1.0 / 3.0) is True
        assert w.report("loss", np.float32(0.125)) is True  # numpy scalars are numbers
        assert w.report("test_accuracy", 0.875) is True
        assert w.report("gap.ok-name_1", float("nan")) is True  # not finite: a gap
        got = series_of(port, {("loss", 0): 3, ("samples_s", 0): 1,
                               ("test_accuracy", 0): 1, ("gap.ok-name_1", 0): 1})
    loss = got[("loss", 0)]
    assert loss["total"] == 3
    assert loss["v"][0] == 2.5 and loss["v"][2] == 0.125
    assert loss["v"][1] == pytest.approx(1.0 / 3.0, rel=1e-8)  # 9 digits in the JSON
    assert loss["clock"] == [0, 1, 1]  # the worker's clock when it reported
    assert got[("samples_s", 0)]["v"] == [1234.5] and got[("samples_s", 0)]["clock"] == [0]
    assert got[("test_accuracy", 0)]["v"] == [0.875]
    assert got[("gap.ok-name_1", 0)]["v"] == [None]
    assert len(got) == 4  # nothing else


def test_bad_reports_raise(cluster):
    c = cluster()
    with worker(c) as w:
        for name in ["", "x" * 24, "a b", "loss/2", "acc%", "é"]:
            with pytest.raises(ValueError, match="1 to 23 characters"):
                w.report(name, 1.0)
        assert w.report("x" * 23, 1.0) is True  # the longest name
        with pytest.raises(TypeError, match="name is a str"):
            w.report(b"loss", 1.0)
        with pytest.raises(TypeError, match="report loss: value is a number"):
            w.report("loss", "0.5")
        with pytest.raises(TypeError):
            w.report("loss")
        assert w.report(name="loss", value=1) is True  # keywords; ints are numbers
    with pytest.raises(ValueError, match="closed"):
        w.report("loss", 1.0)


def test_rate_bound_drops_and_keeps_the_rest(cluster):
    c, port = dash_cluster(cluster)
    with worker(c) as w:
        sent = [w.report("burst", float(i)) for i in range(250)]
        assert not all(sent), "250 reports at once: over the 100/s bound, some dropped"
        assert sum(sent) >= RATE
        n = sum(sent)
        got = series_of(port, {("burst", 0): n})
        s = got[("burst", 0)]
        # every report that returned True arrived, in order, with its value
        assert s["total"] == n
        assert s["v"] == [float(i) for i, ok in enumerate(sent) if ok]  # < 512: all kept
        time.sleep(1.05)  # a new second: reports go through again
        assert w.report("burst", -1.0) is True
