"""One worker in this process: the calls, the value forms, the properties."""
import array

import numpy as np
import pytest

import rdmaps
from conftest import worker, workers, together


def test_properties_and_roundtrip(cluster):
    c = cluster(servers=2, workers=1, consistency="bsp")
    with worker(c) as w:
        assert (w.rank, w.num_workers, w.num_servers) == (0, 1, 2)
        assert w.consistency == "bsp" and w.staleness_bound == 0
        assert w.transport == c.transport
        assert w.clock_value == 0 and not w.closed
        w.declare([1, 2], [5, 3], init="zeros")
        assert dict(w.declared) == {1: 5, 2: 3} and w.declared_size(2) == 3
        # one flat buffer for both keys, back to back
        w.push([1, 2], np.arange(8, dtype=np.float32)).wait()
        w.clock()
        assert w.clock_value == 1
        out = np.full(8, 9, np.float32)
        r = w.pull([1, 2], out)
        assert r.wait() is None and r.done() and r.exception() is None
        assert out.tolist() == [-float(i) for i in range(8)]
        # one buffer per key, any shape; memoryview and array.array
        a = np.zeros((5, 1), np.float32)
        b = array.array("f", [0.0] * 3)
        w.pull([1, 2], [a, memoryview(b)]).wait()
        assert a.ravel().tolist() == [0, -1, -2, -3, -4] and b.tolist() == [-5, -6, -7]
        # single key form
        one = np.zeros(3, np.float32)
        w.pull(2, one).wait()
        assert one.tolist() == [-5, -6, -7]
        # pushpull: push, end the clock, pull the next clock's values
        r = w.pushpull(2, np.ones(3, np.float32), one)
        r.wait()
        assert one.tolist() == [-6, -7, -8] and w.clock_value == 2
        assert w.max_staleness == 0
        st = w.stats()
        assert st["pushes"] >= 2 and st["pulls"] >= 3
        assert "rank 0 of 1" in repr(w)
    assert w.closed
    w.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        w.push(1, np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="closed"):
        w.rank


def test_adjacent_views_one_call(cluster):
    """Views of one flat array go as one batched call; scattered ones as several."""
    c = cluster(servers=2, workers=1)
    with worker(c) as w:
        keys = list(range(10, 20))
        w.declare(keys, 100, init="zeros")
        flat = np.ones(1000, np.float32)
        views = [flat[i * 100:(i + 1) * 100] for i in range(10)]
        w.push(keys, views).wait()
        w.clock()
        scattered = [np.zeros(100, np.float32) for _ in keys]
        w.pull(keys, scattered[::-1][::-1]).wait()
        assert all(np.all(s == -1) for s in scattered)
        out = np.zeros(1000, np.float32)
        w.pull(keys, [out[i * 100:(i + 1) * 100] for i in range(10)]).wait()
        assert np.all(out == -1)


def test_optimizer_and_init_specs(cluster):
    c = cluster(servers=1, workers=1)  # servers' default: sgd lr 1
    with worker(c) as w:
        w.declare(1, 4, init=2.5, optimizer=rdmaps.Optimizer("sgd", lr=0.5))
        w.declare(2, 4, init=rdmaps.Init("const", 1.0), optimizer={"kind": "sgd", "lr": 0.25})
        w.declare(3, 4, init="zeros")
        v = np.zeros(4, np.float32)
        w.pull(1, v).wait()
        assert np.all(v == 2.5)
        w.push([1, 2, 3], np.ones(12, np.float32)).wait()
        w.clock()
        out = np.zeros(12, np.float32)
        w.pull([1, 2, 3], out).wait()
        assert out.tolist() == [2.0] * 4 + [0.75] * 4 + [-1.0] * 4
        # the same spec again: fine; another one: refused by the servers
        w.declare(1, 4, optimizer=rdmaps.Optimizer("sgd", lr=0.5))
        with pytest.raises(rdmaps.InvalidArgumentError) as e:
            w.declare(1, 4, optimizer=rdmaps.Optimizer("adam", lr=1e-3))
        assert e.value.errno == 22 and isinstance(e.value, ValueError)
        # malformed specs never reach the servers
        with pytest.raises(ValueError, match="lr"):
            rdmaps.Optimizer("adam", lr=0)
        with pytest.raises(ValueError, match="total_steps"):
            rdmaps.Optimizer("adam", schedule="cosine")
        with pytest.raises(ValueError, match="no field"):
            rdmaps.Optimizer("adam", learning_rate=1)
        with pytest.raises(ValueError, match="kind"):
            rdmaps.Init("gaussian")


def test_models_out_and_in(cluster, tmp_path):
    c = cluster(servers=2, workers=1)
    with worker(c) as w:
        w.declare([5, 6], [10, 4], init="zeros")
        w.push([5, 6], np.arange(14, dtype=np.float32)).wait()
        w.clock()
        path = str(tmp_path / "m.npz")
        w.save_model([5, 6], path)
        m = np.load(path)
        assert m["5"].tolist() == [-float(i) for i in range(10)]
        np.savez(path, **{"5": np.full(10, 3, np.float32), "6": np.full(4, 4, np.float32)})
        w.load_model([5, 6], path)
        out = np.zeros(14, np.float32)
        w.pull([5, 6], out).wait()
        assert out.tolist() == [3.0] * 10 + [4.0] * 4
        np.savez(path, **{"5": np.zeros(9, np.float32), "6": np.zeros(4, np.float32)})
        with pytest.raises(rdmaps.InvalidArgumentError):
            w.load_model([5, 6], path)


def test_register(cluster):
    c = cluster(servers=1, workers=1)
    with worker(c) as w:
        w.declare(1, 1024, init=1.0)
        buf = np.zeros(1024, np.float32)
        with w.register(buf) as reg:
            assert reg.registered and reg.nbytes == 4096
            with pytest.raises(rdmaps.Error) as e:
                w.register(buf[10:20])  # overlaps
            assert e.value.errno == 17
            w.pull(1, buf).wait()
            assert np.all(buf == 1)
        assert not reg.registered
        reg.unregister()  # idempotent
        kept = w.register(np.zeros(16, np.float32))  # released by close()
    assert not kept.registered


def test_barrier_and_two_workers_bsp(cluster):
    c = cluster(servers=2, workers=2, consistency="bsp")
    ws = workers(c, 2)
    try:
        assert [w.rank for w in ws] == [0, 1]

        def step(w):
            w.declare(1, 6, init="zeros")
            w.barrier()
            for i in range(5):
                v = np.zeros(6, np.float32)
                w.pull(1, v).wait()
                assert np.all(v == -3 * i), (w.rank, i, v)  # ranks 0, 1 push 1 and 2
                w.push(1, np.full(6, w.rank + 1, np.float32)).wait()
                w.clock()
            w.barrier()
            return True
        assert together(step, ws) == [True, True]
    finally:
        together(lambda w: w.close(), ws)


def test_in_process_servers(cluster):
    """Servers as threads of this process (rps_server_create / run)."""
    import rdmaps
    from conftest import BASE, TRANSPORT, SERVER_HOST, WORKER_HOST, SECRET
    s = dict(BASE)
    with rdmaps.Cluster(servers=2, workers=1, transport=TRANSPORT, secret=SECRET,
                        host=SERVER_HOST, worker_host=WORKER_HOST, consistency="bsp",
                        in_process=True, **s) as c:
        assert all(isinstance(x, rdmaps.InProcessServer) and x.running for x in c.servers)
        with worker(c) as w:
            assert w.num_servers == 2 and w.consistency == "bsp"
            w.declare([1, 2], [300000, 3], init="zeros")  # key 1 sliced over both
            w.push([1, 2], np.ones(300003, np.float32)).wait()
            w.clock()
            v = np.zeros(300003, np.float32)
            w.pull([1, 2], v).wait()
            assert np.all(v == -1)
        # the job is over when its only worker left: the servers end by themselves
        assert [x.wait(10) for x in c.servers] == [True, True]
        assert not any(x.running for x in c.servers)
    with pytest.raises(ValueError, match="no such rdmaps setting"):
        rdmaps.InProcessServer("127.0.0.1:1", no_such_setting=1)


def test_assign(cluster):
    """Rank 0 assigns, everyone pulls after a barrier; optimizer state restarts."""
    c = cluster(servers=2, workers=2, consistency="bsp")
    a, b = workers(c, 2)
    try:
        def run(w):
            w.declare([1, 2, 3], [300000, 5, 7], init="zeros")
            if w.rank == 0:
                flat = np.arange(300005, dtype=np.float32)
                w.assign([1, 2], flat)  # one buffer, back to back
                w.assign(3, [np.full(7, 2.5, np.float32)])
                with pytest.raises(ValueError, match="key 3: 6 float32"):
                    w.assign(3, np.zeros(6, np.float32))
            w.barrier()
            out = np.zeros(300012, np.float32)
            w.pull([1, 2, 3], out).wait()
            assert np.array_equal(out[:300005], np.arange(300005, dtype=np.float32))
            assert np.all(out[300005:] == 2.5)
            w.push(3, np.ones(7, np.float32)).wait()
            w.clock()
            w.pull(3, out[:7]).wait()
            assert np.all(out[:7] == 0.5)  # 2.5 - (1 + 1), sgd lr 1
            w.barrier()
            return True
        assert together(run, [a, b]) == [True, True]
    finally:
        together(lambda w: w.close(), [a, b])


def test_random_inits_are_deterministic(cluster):
    c = cluster(servers=2, workers=2)
    a, b = workers(c, 2)
    try:
        def run(w):
            w.declare([5, 6], 50000, init=rdmaps.Init("normal", 0.0, 1.0, seed=7))
            w.declare(7, 1000, init={"kind": "uniform", "a": -2, "b": 2, "seed": 3})
            w.barrier()
            v = np.zeros(101000, np.float32)
            w.pull([5, 6, 7], v).wait()
            w.barrier()
            return v
        va, vb = together(run, [a, b])
        assert np.array_equal(va, vb)
        k5, k6, k7 = va[:50000], va[50000:100000], va[100000:]
        assert abs(k5.mean()) < 0.05 and 0.95 < k5.std() < 1.05
        assert not np.array_equal(k5, k6)  # another key, other values
        assert k7.min() >= -2 and k7.max() < 2 and k7.std() > 1
    finally:
        together(lambda w: w.close(), [a, b])
