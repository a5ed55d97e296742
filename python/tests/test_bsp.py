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
