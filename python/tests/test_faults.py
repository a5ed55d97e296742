"""Ctrl-C during a wait, and a server killed during a wait."""
import signal
import time

import numpy as np
import pytest

import rdmaps
from conftest import Proc, worker, workers, together, SLOW


def test_ctrl_c_during_wait(cluster):
    c = cluster(servers=1, workers=2, consistency="bsp")
    p = Proc(c, "blocked_pull")
    try:
        w = worker(c)  # the other worker of the job
        w.declare(1, 4, init="zeros")
        w.barrier()
        p.expect("WAITING", 30)
        time.sleep(0.2)  # well inside wait()
        t0 = time.monotonic()
        p.p.send_signal(signal.SIGINT)
        line = p.expect("INTERRUPTED", 5)
        assert time.monotonic() - t0 < 1.0 * SLOW  # promptly
        assert float(line.split()[1]) >= 0.2
        p.expect("USABLE", 5)
        # end clock 0 here: the child's pull at clock 1 completes
        w.push(1, np.full(4, 2, np.float32)).wait()
        w.clock()
        assert p.expect("DONE", 10) == "DONE -3"  # 1 + 2 pushed, sgd lr 1
        w.barrier()
        p.expect("CLOSED", 10)
        assert p.wait(10) == 0
        w.close()
    finally:
        p.kill()


def test_ctrl_c_during_barrier(cluster):
    c = cluster(servers=1, workers=2)
    p = Proc(c, "blocked_barrier")
    try:
        w = worker(c)
        p.expect("WAITING", 30)
        time.sleep(0.3)
        t0 = time.monotonic()
        p.p.send_signal(signal.SIGINT)
        p.expect("INTERRUPTED", 5)
        assert time.monotonic() - t0 < 1.0 * SLOW
        p.expect("USABLE", 5)
        w.barrier()  # meets the barrier the child left and waits for again
        p.expect("DONE", 10)
        w.barrier()
        p.expect("CLOSED", 10)
        assert p.wait(10) == 0
        w.close()
    finally:
        p.kill()


def test_ctrl_c_while_joining(cluster):
    c = cluster(servers=1, workers=2)  # the second worker never comes
    p = Proc(c, "blocked_join")
    try:
        p.expect("WAITING", 30)
        time.sleep(0.5)
        t0 = time.monotonic()
        p.p.send_signal(signal.SIGINT)
        p.expect("INTERRUPTED", 5)
        assert time.monotonic() - t0 < 1.0 * SLOW
        assert p.wait(10) == 0
    finally:
        p.kill()


def test_server_killed_during_wait(cluster):
    c = cluster(servers=2, workers=2, consistency="bsp", timeout_ms=int(3000 * SLOW))
    a, b = workers(c, 2, timeout=3 * SLOW)
    try:
        together(lambda w: (w.declare([1, 2], [64, 64], init="zeros"), w.barrier()), [a, b])
        a.push([1, 2], np.ones(128, np.float32)).wait()
        a.clock()
        out = np.zeros(128, np.float32)
        r = a.pull([1, 2], out)  # waits for b's clock 0 on both servers
        time.sleep(0.2)
        c.servers[1].kill(signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises((rdmaps.ConnectionError, rdmaps.TimeoutError)) as e:
            r.wait(timeout=30 * SLOW)
        took = time.monotonic() - t0
        assert took < 10 * SLOW, took
        assert e.value.errno > 0 and e.value.strerror and "pull of 2 keys" in str(e.value)
        assert r.done() and r.exception() is not None
    finally:
        t0 = time.monotonic()
        together(lambda w: w.close(), [a, b])
        assert time.monotonic() - t0 < 15 * SLOW  # closing does not hang either



def test_declare_after_idle_close(cluster):
    """A worker stopped (SIGSTOP, a debugger) longer than the servers' idle
    timeout finds its connections closed when it goes on: its declare
    reconnects and succeeds, and the values are right."""
    c = cluster(servers=1, workers=1, idle_timeout_ms=int(800 * SLOW))
    p = Proc(c, "stopped_then_declare")
    try:
        p.expect("CONNECTED", 30)
        p.p.send_signal(signal.SIGSTOP)
        time.sleep(2.0 * SLOW)  # the server closes the silent connection
        p.p.send_signal(signal.SIGCONT)
        assert p.expect("DONE", 20) == "DONE -3"  # sgd lr 1
        assert p.wait(10) == 0
    finally:
        p.kill()
