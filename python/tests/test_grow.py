"""Workers join a running job beyond the initial count (RDMAPS_MAX_WORKERS,
docs/scheduler.md "Growth"): a job of 1 worker with room for 2; a second
Worker created while the first runs gets rank 1, both see num_workers 2, the
first sees num_workers_gen go to 1. Without max_workers the second is
refused."""
import time

import numpy as np
import pytest

import rdmaps
from conftest import SLOW, worker


def wait_for(cond, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_grow(cluster):
    c = cluster(servers=1, workers=1, consistency="bsp", max_workers=2)
    with worker(c) as w0:
        assert (w0.rank, w0.num_workers, w0.num_workers_gen) == (0, 1, 0)
        w0.declare([1], [4], init="zeros")
        w0.push(1, np.ones(4, np.float32)).wait()
        w0.clock()
        out = np.zeros(4, np.float32)
        w0.pull(1, out).wait()  # the shard is at clock 1 now
        assert out.tolist() == [-1.0] * 4
        with worker(c) as w1:
            assert (w1.rank, w1.num_workers, w1.num_workers_gen) == (1, 2, 0)
            assert w1.clock_value == 1  # joins at the job's clock
            assert wait_for(lambda: w0.num_workers == 2, 5 * SLOW)
            assert w0.num_workers_gen == 1
            w1.declare([1], [4], init="zeros")
            # clock 1 is summed with both
            w0.push(1, np.ones(4, np.float32)).wait()
            w1.push(1, np.full(4, 2, np.float32)).wait()
            w0.clock()
            w1.clock()
            w0.pull(1, out).wait()
            assert out.tolist() == [-4.0] * 4


def test_no_growth(cluster):
    c = cluster(servers=1, workers=1)
    with worker(c) as w0:
        assert w0.num_workers == 1
        with pytest.raises(rdmaps.Error):
            worker(c, timeout=2 * SLOW)
