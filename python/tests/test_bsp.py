"""Exact BSP sums from several worker processes, and ASP."""
from conftest import Proc


def test_bsp_exact_sums_from_processes(cluster):
    c = cluster(servers=2, workers=3, consistency="bsp")
    ps = [Proc(c, "bsp_sums", 6) for _ in range(3)]
    try:
        oks = sorted(p.expect("OK", 60) for p in ps)
        assert oks == ["OK rank %d of 3, 6 clocks" % r for r in range(3)]
        assert [p.wait(20) for p in ps] == [0, 0, 0]
    finally:
        for p in ps:
            p.kill()


def test_asp_from_processes(cluster):
    c = cluster(servers=2, workers=2, consistency="asp")
    ps = [Proc(c, "asp", 20) for _ in range(2)]
    try:
        for p in ps:
            assert p.expect("OK", 60).endswith("asp -40")
        assert [p.wait(20) for p in ps] == [0, 0]
    finally:
        for p in ps:
            p.kill()


def test_ssp_bound(cluster):
    """SSP with bound 2: a worker 2 clocks ahead still pulls, never more than 2 behind."""
    import numpy as np
    from conftest import workers, together
    c = cluster(servers=1, workers=2, consistency="ssp", staleness=2)
    a, b = workers(c, 2)
    try:
        assert (a.consistency, a.staleness_bound) == ("ssp", 2)
        together(lambda w: (w.declare(1, 4, init="zeros"), w.barrier()), [a, b])
        v = np.zeros(4, np.float32)
        for _ in range(2):  # a runs 2 clocks ahead of b: allowed
            a.push(1, np.ones(4, np.float32)).wait()
            a.clock()
        a.pull(1, v).wait(timeout=10)
        assert v[0] <= -2 and a.max_staleness <= 2
        a.push(1, np.ones(4, np.float32)).wait()
        a.clock()
        r = a.pull(1, v)  # 3 ahead: must wait for b
        import time
        time.sleep(0.3)
        assert not r.done()
        b.push(1, np.ones(4, np.float32)).wait()
        b.clock()
        r.wait(timeout=10)
        assert a.max_staleness <= 2
        together(lambda w: w.barrier(), [a, b])
    finally:
        together(lambda w: w.close(), [a, b])
