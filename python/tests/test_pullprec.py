"""Worker.set_pull_precision (docs/compression.md "Low-precision pulls")
against a real local cluster: a pull returns the servers' copy, the
round-to-nearest-even of the float32 master, which stays float32."""
import numpy as np
import pytest

from conftest import workers


def bf16_round(x):
    # round to nearest even to bfloat16 and back (no NaN here)
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return r.astype(np.uint32).view(np.float32)


def test_pull_precision_rounds_the_master(cluster):
    c = cluster(servers=1, workers=1)
    w = workers(c, 1)[0]
    n = 1000
    w.declare([1, 2], [n, n], init="zeros")
    w.set_pull_precision(1, "bf16")
    w.set_pull_precision(2, "fp16")
    g = (np.arange(n, dtype=np.float32) + 1) / np.float32(3)  # thirds: not representable
    w.push([1, 2], [g, g]).wait()
    w.clock()
    a, b, m = (np.empty(n, np.float32) for _ in range(3))
    w.pull([1, 2], [a, b]).wait()
    w.set_pull_precision([1, 2], "fp32")
    w.pull(1, m).wait()
    assert np.array_equal(m, -g)  # the master: float32 as ever
    assert np.array_equal(a, bf16_round(m))
    assert np.array_equal(b, m.astype(np.float16).astype(np.float32))
    assert not np.array_equal(a, m)
    with pytest.raises(ValueError, match="pull precision 'bf17'"):
        w.set_pull_precision(1, "bf17")
    with pytest.raises(ValueError, match="key 5 was not declared"):
        w.set_pull_precision(5, "bf16")
    w.close()
