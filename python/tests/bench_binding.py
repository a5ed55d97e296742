"""The binding's cost, side by side in one process: the same 4 KiB pull and
1 MiB push of one key through the C API (Worker._c_bench: rps_worker_pull/
push + rps_req_wait timed in C) and through Python (pull()/push() +
wait()), 3 interleaved rounds on a local cluster (1 server, tcp).
Not a test (pytest does not collect it):
    PYTHONPATH=build/python RPS_BIN_DIR=build/bin python3 python/tests/bench_binding.py
"""
import numpy as np, rdmaps, time
with rdmaps.Cluster(servers=1, workers=1, consistency="asp", log_level="error") as c:
    with rdmaps.Worker(scheduler=c.scheduler, secret=c.secret, timeout=10) as w:
        w.declare(1, 1024, init="zeros"); w.declare(2, 262144, init="zeros")
        a = np.zeros(1024, np.float32); g = np.zeros(262144, np.float32)
        pc = time.perf_counter_ns
        for key, buf, kind, n in ((1, a, "pull", 2000), (2, g, "push", 300)):
            op = w.pull if kind == "pull" else w.push
            for rnd in range(3):
                cns = np.empty(n, np.int64); w._c_bench(kind, key, buf, cns)
                ts = np.empty(n)
                for i in range(n):
                    t0 = pc(); op(key, buf).wait(); ts[i] = pc() - t0
                print("%s %d B round %d: C median %.1f us, Python median %.1f us, ratio %.3f" % (
                    kind, buf.nbytes, rnd, np.median(cns) / 1e3, np.median(ts) / 1e3, np.median(ts) / np.median(cns)))
