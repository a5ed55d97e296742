"""Worker.allreduce (ring), Worker.local_pushpull (aggregation on the host)
and Worker.set_compression, against real local clusters."""
import time

import numpy as np
import pytest

import rdmaps
from conftest import Proc, workers, together, SLOW


def ints(rank, n, salt):
    # integers: every partial sum is exact in float32, whatever the order
    return ((np.arange(n) % 11) * (rank + 1) + salt + rank).astype(np.float32)


def test_allreduce_exact_sums_same_bits(cluster):
    c = cluster(servers=1, workers=3)
    ws = workers(c, 3)
    n1, n2 = 1000, 3  # keys need not be declared

    def run(w):
        a, b = ints(w.rank, n1, 0), ints(w.rank, n2, 50)  # two buffers, not adjacent
        w.allreduce([1, 2], [a, b])
        flat = np.concatenate([ints(w.rank, n1, 7), ints(w.rank, n2, 9)])
        w.allreduce([3, 4], [flat[:n1], flat[n1:]])  # views of one array: in place
        one = ints(w.rank, 257, 3)
        w.allreduce(5, one)  # one key, one buffer
        return a, b, flat, one

    got = together(run, ws)
    want = (sum(ints(r, n1, 0) for r in range(3)), sum(ints(r, n2, 50) for r in range(3)),
            np.concatenate([sum(ints(r, n1, 7) for r in range(3)),
                            sum(ints(r, n2, 9) for r in range(3))]),
            sum(ints(r, 257, 3) for r in range(3)))
    for r in range(3):
        for g, x in zip(got[r], want):
            assert g.dtype == np.float32 and np.array_equal(g, x)
    for i in range(4):  # the same bits on every worker
        assert got[1][i].tobytes() == got[0][i].tobytes() == got[2][i].tobytes()
    for w in ws:
        w.close()


def test_allreduce_bad_input_and_length_mismatch(cluster):
    c = cluster(servers=1, workers=3)
    ws = workers(c, 3)
    w0 = ws[0]
    w0.declare(6, 4, init="zeros")
    # found by the binding, nothing sent (the others are not involved)
    with pytest.raises(TypeError, match="key 6: dtype must be float32"):
        w0.allreduce(6, np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="key 6: 3 float32 elements given, the key was declared with 4"):
        w0.allreduce(6, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="key 8: an empty buffer"):
        w0.allreduce(8, np.zeros(0, np.float32))
    with pytest.raises(TypeError, match="key 8: the buffer is read-only"):
        w0.allreduce(8, np.frombuffer(bytes(16), np.float32))
    with pytest.raises(ValueError, match="key 8 is not declared through this worker"):
        w0.allreduce([6, 8], np.zeros(8, np.float32))

    # the workers disagree: rank 2 passes one element more
    def run(w):
        v = np.ones(100 + (w.rank == 2), np.float32)
        t0 = time.monotonic()
        try:
            w.allreduce(7, v)
        except Exception as e:  # noqa: BLE001
            return e, time.monotonic() - t0
        return None, time.monotonic() - t0

    res = together(run, ws)
    for r, (e, dt) in enumerate(res):
        assert isinstance(e, ValueError), (r, e)
        assert isinstance(e, rdmaps.InvalidArgumentError) and e.errno == 22, (r, e)
        assert "allreduce of key 7" in str(e), e
        assert dt < 4 * SLOW, (r, dt)  # told, not timed out
    # the ring is not used again: the same error
    with pytest.raises(ValueError):
        w0.allreduce(7, np.ones(100, np.float32))
    for w in ws:
        w.close()


def test_allreduce_dead_worker_connection_error(cluster):
    c = cluster(servers=1, workers=3)
    p = Proc(c, "ring_then_hang")
    try:
        ws = workers(c, 2)
        dead = int(p.expect("RANK", 30).split()[1])
        vals = [np.full(5, w.rank + 1, np.float32) for w in ws]
        together(lambda i: ws[i].allreduce(9, vals[i]), [0, 1])
        assert all(v[0] == 6 for v in vals)  # 1 + 2 + 3
        assert p.expect("REDUCED", 10) == "REDUCED 6"
        p.kill()  # dead before the next call

        def run(w):
            t0 = time.monotonic()
            try:
                w.allreduce(9, np.ones(5, np.float32))
            except Exception as e:  # noqa: BLE001
                return e, time.monotonic() - t0
            return None, time.monotonic() - t0

        for e, dt in together(run, ws):
            assert isinstance(e, rdmaps.ConnectionError), e
            assert isinstance(e, ConnectionError)
            assert "rank %d" % dead in str(e), str(e)
            assert dt < 4 * SLOW, dt  # reported, not waited for (timeout 5 s)
        for w in ws:
            w.close()
    finally:
        p.kill()


def test_local_pushpull_exact_as_pushpull(cluster):
    c = cluster(servers=2, workers=3, consistency="bsp")
    ws = workers(c, 3)
    n1, n2, steps = 600, 5, 3

    def run(w):
        w.declare([1, 2, 3, 4], [n1, n2, n1, n2], init="zeros")
        w.barrier()
        a, b = np.empty(n1, np.float32), np.empty(n2, np.float32)
        local = []
        for s in range(steps):
            g = [ints(w.rank, n1, s), ints(w.rank, n2, 10 * s)]
            w.local_pushpull([1, 2], g, [a, b])
            local.append((a.copy(), b.copy()))
        size, leader = w.local_size, w.local_leader
        plain = []
        for s in range(steps):  # the same gradients, plain pushpull, keys 3 and 4
            g = np.concatenate([ints(w.rank, n1, s), ints(w.rank, n2, 10 * s)])
            w.pushpull([3, 4], g, [a, b]).wait()
            plain.append((a.copy(), b.copy()))
        return local, plain, size, leader

    res = together(run, ws)
    for r, (local, plain, size, leader) in enumerate(res):
        assert size == 3 and leader == 0, (size, leader)  # one host, one process
        for s in range(steps):
            want1 = -sum(ints(q, n1, t) for q in range(3) for t in range(s + 1))
            want2 = -sum(ints(q, n2, 10 * t) for q in range(3) for t in range(s + 1))
            assert np.array_equal(local[s][0], want1) and np.array_equal(local[s][1], want2)
            assert local[s][0].tobytes() == plain[s][0].tobytes()
            assert local[s][1].tobytes() == plain[s][1].tobytes()
    with pytest.raises(ValueError, match="key 9 was not declared"):
        ws[0].local_pushpull(9, np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="key 2: 4 float32 elements given"):
        ws[0].local_pushpull(2, np.zeros(4, np.float32), np.zeros(5, np.float32))
    for w in ws:
        w.close()


def test_set_compression_fp16_round_trip(cluster):
    c = cluster(servers=1, workers=1)
    ws = workers(c, 1)
    w = ws[0]
    n = 1024
    w.declare([1, 2], [n, 7], init="zeros")
    w.set_compression(1, "fp16")
    g = (np.arange(n) - 512).astype(np.float32) * 0.25  # every value exact in fp16
    other = np.full(7, 1 / 3, np.float32)  # key 2 stays float32: 1/3 exact too
    w.push([1, 2], [g, other]).wait()  # one push, a compressed and a plain key
    w.clock()
    out = np.empty(n, np.float32)
    o2 = np.empty(7, np.float32)
    w.pull([1, 2], [out, o2]).wait()
    assert np.array_equal(out, -g)
    assert np.array_equal(o2, -other)
    st = w.wire_stats(1)
    assert st["pushes"] >= 1 and st["raw_bytes"] == 4 * n and st["data_bytes"] == 2 * n, st
    assert w.wire_stats(2)["data_bytes"] == 4 * 7
    with pytest.raises(ValueError, match="codec 'fp8'"):
        w.set_compression(1, "fp8")
    with pytest.raises(ValueError, match="codec 'topk:2'"):
        w.set_compression(1, "topk:2")
    with pytest.raises(ValueError, match="key 5 was not declared"):
        w.set_compression(5, "bf16")
    w.set_compression([1, 2], "none")
    w.push(1, g).wait()
    assert w.wire_stats(1)["data_bytes"] == 2 * n + 4 * n
    w.close()
