"""Requests hold their buffers; threads share a worker; the GIL is released."""
import gc
import os
import threading
import time
import weakref

import numpy as np
import pytest

import rdmaps
from conftest import worker, workers, together, SLOW


def test_buffer_dropped_before_wait(cluster):
    c = cluster(servers=1, workers=1)
    with worker(c) as w:
        w.declare(1, 100000, init=3.0)
        out = np.zeros(100000, np.float32)
        ref = weakref.ref(out)
        r = w.pull(1, out)
        del out
        gc.collect()
        assert ref() is not None  # the request holds it
        r.wait()
        assert ref() is None  # released when the request completed
        # the same with the values checked through a second reference
        out = np.zeros(100000, np.float32)
        keep = out.view()
        r = w.pull(1, out)
        del out
        gc.collect()
        r.wait()
        assert np.all(keep == 3.0)
        # push buffers made on the fly and dropped at once, requests too
        for _ in range(50):
            w.push(1, np.ones(100000, np.float32))
        gc.collect()
        w.clock()
        v = np.zeros(100000, np.float32)
        until = time.monotonic() + 10 * SLOW
        while time.monotonic() < until:
            w.pull(1, v).wait()
            if v[0] == -47.0:
                break
        assert np.all(v == -47.0), v[:3]  # 3 - 50: every dropped push was sent


def test_request_dropped_in_flight_keeps_buffer_until_done(cluster):
    c = cluster(servers=1, workers=2, consistency="bsp")
    a, b = workers(c, 2)
    try:
        together(lambda w: (w.declare(1, 4096, init="zeros"), w.barrier()), [a, b])
        a.push(1, np.ones(4096, np.float32)).wait()
        a.clock()
        out = np.full(4096, 7, np.float32)
        ref = weakref.ref(out)
        a.pull(1, out)  # blocks: b has not ended clock 0; request dropped
        del out
        gc.collect()
        assert ref() is not None  # held by the orphaned request
        b.push(1, np.ones(4096, np.float32)).wait()
        b.clock()
        # the pull completes into memory still alive; the worker frees it at its next call
        until = time.monotonic() + 10 * SLOW
        while ref() is not None and time.monotonic() < until:
            a.declared_size(1)
            a.push(1, np.zeros(4096, np.float32)).wait()  # a call: reaps finished orphans
            gc.collect()
            time.sleep(0.01)
        assert ref() is None
        together(lambda w: w.barrier(), [a, b])
    finally:
        together(lambda w: w.close(), [a, b])


def test_close_with_requests_in_flight(cluster):
    c = cluster(servers=1, workers=2, consistency="bsp", timeout_ms=int(1500 * SLOW))
    a, b = workers(c, 2)
    together(lambda w: (w.declare(1, 16, init="zeros"), w.barrier()), [a, b])
    a.push(1, np.ones(16, np.float32)).wait()
    a.clock()
    out = np.zeros(16, np.float32)
    r = a.pull(1, out)  # never served: b does not end its clock
    a.pull(1, np.zeros(16, np.float32))  # and one dropped
    r2 = a.pull(1, np.zeros(16, np.float32))
    got = []

    def waiter():  # another thread waits while the worker closes
        try:
            r2.wait()
            got.append(None)
        except Exception as e:
            got.append(e)
    t = threading.Thread(target=waiter)
    t.start()
    t0 = time.monotonic()
    a.close()
    assert time.monotonic() - t0 < 10 * SLOW
    t.join(5 * SLOW)
    assert not t.is_alive() and len(got) == 1 and isinstance(got[0], rdmaps.Error), got
    assert r.done()
    assert r.exception() is not None  # failed (ECANCELED or the transport's error)
    b.close()


def test_two_threads_one_worker(cluster):
    c = cluster(servers=2, workers=1)
    with worker(c) as w:
        w.declare([1, 2], [1000, 1000], init="zeros")
        errors = []

        def run(key):
            try:
                g = np.ones(1000, np.float32)
                v = np.zeros(1000, np.float32)
                for _ in range(200):
                    w.push(key, g).wait()
                    w.pull(key, v).wait()
            except Exception as e:  # reported below
                errors.append(e)
        ts = [threading.Thread(target=run, args=(k,)) for k in (1, 2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60 * SLOW)
        assert not errors, errors
        w.clock()
        v = np.zeros(2000, np.float32)
        until = time.monotonic() + 10 * SLOW
        while time.monotonic() < until:
            w.pull([1, 2], v).wait()
            if np.all(v == -200):
                break
        assert np.all(v == -200)


SPINS = [None, 50000]  # the default (RDMAPS_WAIT_SPIN_US over RDMA, none over TCP); 50 ms


def test_wait_spin_default(cluster):
    c = cluster()
    with worker(c) as w:
        want = 0 if w.transport == "tcp" else int(os.environ.get("RDMAPS_WAIT_SPIN_US", 200))
        assert w._wait_spin_us == min(want, 50000)
        w._wait_spin_us = 7
        assert w._wait_spin_us == 7
        with pytest.raises(ValueError, match="microseconds"):
            w._wait_spin_us = 50001


@pytest.mark.parametrize("spin", SPINS)
def test_wait_timeout_while_spinning(cluster, spin):
    c = cluster(servers=1, workers=2, consistency="bsp")
    a, b = workers(c, 2)
    try:
        if spin is not None:
            a._wait_spin_us = spin
        together(lambda w: (w.declare(1, 4, init="zeros"), w.barrier()), [a, b])
        a.push(1, np.ones(4, np.float32)).wait()
        a.clock()
        out = np.zeros(4, np.float32)
        r = a.pull(1, out)  # clock 1: waits for b's push
        t0 = time.monotonic()
        with pytest.raises(rdmaps.TimeoutError):
            r.wait(timeout=0.001)  # the spin is cut to the timeout
        assert time.monotonic() - t0 < 0.5 * SLOW and not r.done()
        b.push(1, np.ones(4, np.float32)).wait()
        b.clock()
        r.wait(timeout=10 * SLOW)
        assert out.tolist() == [-2.0] * 4
        together(lambda w: w.barrier(), [a, b])
    finally:
        together(lambda w: w.close(), [a, b])


@pytest.mark.parametrize("spin", SPINS)
def test_wait_releases_the_gil(cluster, spin):
    c = cluster(servers=1, workers=2, consistency="bsp")
    a, b = workers(c, 2)
    try:
        if spin is not None:
            a._wait_spin_us = spin
        together(lambda w: (w.declare(1, 4, init="zeros"), w.barrier()), [a, b])
        a.push(1, np.ones(4, np.float32)).wait()
        a.clock()
        r = a.pull(1, np.zeros(4, np.float32))
        t = threading.Thread(target=r.wait)
        t.start()
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 0.3:
            n += 1  # runs while the other thread waits
        assert n > 1000 and t.is_alive()
        b.push(1, np.ones(4, np.float32)).wait()
        b.clock()
        t.join(10 * SLOW)
        assert not t.is_alive() and r.done()
        together(lambda w: w.barrier(), [a, b])
    finally:
        together(lambda w: w.close(), [a, b])


@pytest.mark.parametrize("spin", SPINS)
def test_two_threads_wait_one_request(cluster, spin):
    c = cluster(servers=1, workers=2, consistency="bsp")
    a, b = workers(c, 2)
    try:
        if spin is not None:
            a._wait_spin_us = spin
        together(lambda w: (w.declare(1, 4, init="zeros"), w.barrier()), [a, b])
        a.push(1, np.ones(4, np.float32)).wait()
        a.clock()
        out = np.zeros(4, np.float32)
        r = a.pull(1, out)
        done = []
        ts = [threading.Thread(target=lambda: done.append(r.wait())) for _ in range(3)]
        for t in ts:
            t.start()
        time.sleep(0.1)
        assert not r.done()
        b.push(1, np.ones(4, np.float32)).wait()
        b.clock()
        for t in ts:
            t.join(10 * SLOW)
        assert done == [None] * 3 and r.done() and out.tolist() == [-2.0] * 4
        together(lambda w: w.barrier(), [a, b])
    finally:
        together(lambda w: w.close(), [a, b])


def test_garbage_worker_with_registration(cluster):
    """A worker dropped with a registration (a reference cycle) is collected
    and closed by the garbage collector."""
    c = cluster(servers=1, workers=1)
    w = worker(c)
    buf = np.zeros(64, np.float32)
    bref = weakref.ref(buf)
    reg = w.register(buf)
    del buf
    gc.collect()
    assert bref() is not None  # registered: held, never freed while pinned
    ref = weakref.ref(w)
    del w, reg
    gc.collect()
    assert ref() is None and bref() is None  # closed, unregistered, released
