"""Worker processes of the pytest suite: python3 procs.py MODE [ARGS].
The scheduler, secret, transport and host come from RDMAPS_* (rdmaps.Cluster.env).
Each mode prints lines the test waits for and exits 0 when all its checks held."""
import sys
import time

import numpy as np

import rdmaps

N1, N2 = 1000, 3  # lengths of keys 1 and 2


def grad(rank, clock, n, salt):
    # integers: every partial sum is exact in float32
    return ((np.arange(n) % 7) + (rank + 1) * (clock + 1) + salt).astype(np.float32)


def expected(nw, clocks, n, salt):
    tot = np.zeros(n, np.float64)
    for c in range(clocks):
        for r in range(nw):
            tot += grad(r, c, n, salt)
    return (-tot).astype(np.float32)  # sgd, lr 1, zeros


def bsp_sums(steps):
    with rdmaps.Worker() as w:
        assert w.consistency == "bsp", w.consistency
        nw = w.num_workers
        w.declare([1, 2], [N1, N2], init="zeros")
        w.barrier()
        a, b = np.empty(N1, np.float32), np.empty(N2, np.float32)
        for c in range(steps):
            # clock c: exactly every worker's pushes of clocks < c
            w.pull([1, 2], [a, b]).wait()
            for got, n, salt in ((a, N1, 0), (b, N2, 100)):
                want = expected(nw, c, n, salt)
                if not np.array_equal(got, want):
                    print("FAIL rank %d clock %d: got %s want %s" % (w.rank, c, got[:4], want[:4]))
                    return 1
            if c % 2:
                w.push([1, 2], [grad(w.rank, c, N1, 0), grad(w.rank, c, N2, 100)]).wait()
                w.clock()
            else:
                # pushpull, with the two keys' gradients in one flat buffer
                flat = np.concatenate([grad(w.rank, c, N1, 0), grad(w.rank, c, N2, 100)])
                w.pushpull([1, 2], flat, [a, b]).wait()
                for got, n, salt in ((a, N1, 0), (b, N2, 100)):
                    if not np.array_equal(got, expected(nw, c + 1, n, salt)):
                        print("FAIL rank %d pushpull clock %d" % (w.rank, c))
                        return 1
        w.barrier()
        print("OK rank %d of %d, %d clocks" % (w.rank, nw, steps))
    return 0


def asp(pushes):
    with rdmaps.Worker() as w:
        assert w.consistency == "asp", w.consistency
        nw = w.num_workers
        w.declare(1, 8, init="zeros")
        w.barrier()
        v = np.empty(8, np.float32)
        one = np.ones(8, np.float32)
        for i in range(pushes):
            w.push(1, one).wait()
            w.clock()
            w.pull(1, v).wait()
            # at least this worker's own pushes, at most everybody's
            if not (-(nw * pushes) <= v[0] <= -(i + 1)):
                print("FAIL rank %d push %d: %g" % (w.rank, i, v[0]))
                return 1
        w.barrier()
        until = time.monotonic() + 20
        while time.monotonic() < until:
            w.pull(1, v).wait()
            if np.all(v == -(nw * pushes)):
                break
            time.sleep(0.05)
        if not np.all(v == -(nw * pushes)):
            print("FAIL rank %d final %s want %d" % (w.rank, v, -(nw * pushes)))
            return 1
        w.barrier()
        print("OK rank %d asp %g" % (w.rank, v[0]))
    return 0


def blocked_pull():
    """For the Ctrl-C test: a BSP pull at clock 1 that waits for the other
    worker; SIGINT must end wait() with KeyboardInterrupt at once, and the
    worker must still work afterwards."""
    import signal
    # a shell's background job starts with SIGINT ignored: Python's handler back
    signal.signal(signal.SIGINT, signal.default_int_handler)
    w = rdmaps.Worker()
    w.declare(1, 4, init="zeros")
    w.barrier()
    w.push(1, np.ones(4, np.float32)).wait()
    w.clock()
    out = np.zeros(4, np.float32)
    r = w.pull(1, out)
    print("WAITING", flush=True)
    t0 = time.monotonic()
    try:
        r.wait()
        print("FAIL: wait returned without the other worker")
        return 1
    except KeyboardInterrupt:
        print("INTERRUPTED %.3f" % (time.monotonic() - t0), flush=True)
    # the worker still works: what it is, and another call
    assert w.rank in (0, 1) and not r.done()
    print("USABLE rank %d" % w.rank, flush=True)
    r.wait(timeout=30)  # completes once the other worker ended its clock
    print("DONE %g" % out[0], flush=True)
    w.barrier()
    w.close()
    print("CLOSED", flush=True)
    return 0


def blocked_barrier():
    """For the Ctrl-C test: a barrier the other worker has not reached;
    SIGINT raises KeyboardInterrupt at once, the barrier goes on, and the
    next barrier() waits for that same one."""
    import signal
    signal.signal(signal.SIGINT, signal.default_int_handler)
    w = rdmaps.Worker()
    print("WAITING", flush=True)
    t0 = time.monotonic()
    try:
        w.barrier()
        print("FAIL: barrier returned without the other worker")
        return 1
    except KeyboardInterrupt:
        print("INTERRUPTED %.3f" % (time.monotonic() - t0), flush=True)
    print("USABLE rank %d" % w.rank, flush=True)
    w.barrier()  # the same barrier: ends when the other worker arrives
    print("DONE", flush=True)
    w.barrier()  # a new one
    w.close()
    print("CLOSED", flush=True)
    return 0


def blocked_join():
    """For the Ctrl-C test: Worker() waits for a cluster that never
    completes; SIGINT raises KeyboardInterrupt at once."""
    import signal
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print("WAITING", flush=True)
    t0 = time.monotonic()
    try:
        rdmaps.Worker(timeout=60)
        print("FAIL: joined a cluster that lacks a worker")
        return 1
    except KeyboardInterrupt:
        print("INTERRUPTED %.3f" % (time.monotonic() - t0), flush=True)
    return 0


def stopped_then_declare():
    """Connects, says so, then declares after a pause the test stops us in
    (SIGSTOP) for longer than the servers' idle timeout."""
    with rdmaps.Worker() as w:
        print("CONNECTED")
        time.sleep(0.5)
        w.declare(7, 4, init="zeros")
        w.push(7, np.full(4, 3, np.float32)).wait()
        w.clock()
        out = np.empty(4, np.float32)
        w.pull(7, out).wait()
        print("DONE %g" % out[0])
        return 0 if list(out) == [-3.0] * 4 else 1


def ring_then_hang():
    """For the dead-worker test: one all-reduce with the others, then wait
    to be killed (the others' next all-reduce must fail, not hang)."""
    w = rdmaps.Worker()
    print("RANK %d" % w.rank, flush=True)
    v = np.full(5, w.rank + 1, np.float32)
    w.allreduce(9, v)
    print("REDUCED %g" % v[0], flush=True)
    time.sleep(120)
    return 1


def main():
    mode = sys.argv[1]
    args = [int(a) for a in sys.argv[2:]]
    return {"bsp_sums": bsp_sums, "asp": asp, "blocked_pull": blocked_pull,
            "blocked_barrier": blocked_barrier, "blocked_join": blocked_join,
            "stopped_then_declare": stopped_then_declare,
            "ring_then_hang": ring_then_hang}[mode](*args)


if __name__ == "__main__":
    sys.exit(main())
