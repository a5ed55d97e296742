#!/usr/bin/python3
"""The cost of the Python binding: the same pull of one 4 KiB tensor and the
same push of one 1 MiB tensor through rdmaps (Python) and through the C API
(rdmaps-bench-binding), side by side in one run.

    rdmaps-launch --servers 1 --workers 2 -- /usr/bin/python3 \\
        tools/bench/binding_bench.py --c-bench build/bin/rdmaps-bench-binding

Worker 0 is this script, worker 1 replaces itself with the C program (the
launcher gives each process its rank in RDMAPS_RANK). They take turns between
barriers, alternating which goes first in each round, so that whatever else
the machine does hits both alike. Every round is printed, then the medians
and the ratios; exit status 1 when Python is above --max-ratio (1.2) times C.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

KEY_SMALL, SMALL_LEN = 100, 1024      # 4 KiB
KEY_LARGE, LARGE_LEN = 101, 262144    # 1 MiB


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--c-bench", required=True, help="path of rdmaps-bench-binding")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--pulls", type=int, default=2000, help="pulls per measurement")
    p.add_argument("--pushes", type=int, default=200, help="pushes per measurement")
    p.add_argument("--max-ratio", type=float, default=1.2)
    p.add_argument("--c-results", default=None,
                   help="file the C worker writes (default: a name under /tmp from the "
                        "scheduler's port)")
    a = p.parse_args()
    if a.rounds < 1 or a.pulls < 1 or a.pushes < 1:
        p.error("--rounds, --pulls and --pushes must be >= 1")
    if a.c_results is None:
        sched = os.environ.get("RDMAPS_SCHEDULER", "local").replace(":", "_")
        a.c_results = f"/tmp/rdmaps-bench-binding-{sched}.txt"
    return a


def measure(w, small, large, pulls, pushes):
    """(median pull, median push, mean pull, mean push) in microseconds, each
    operation timed on its own as the C side does."""
    clock = time.perf_counter
    for _ in range(10):  # warm the path up, as the C side does
        w.pull(KEY_SMALL, small).wait()
    t = [0.0] * max(pulls, pushes)
    start = clock()
    for i in range(pulls):
        t0 = clock()
        w.pull(KEY_SMALL, small).wait()
        t[i] = clock() - t0
    pull_mean = (clock() - start) * 1e6 / pulls
    pull_med = statistics.median(t[:pulls]) * 1e6
    start = clock()
    for i in range(pushes):
        t0 = clock()
        w.push(KEY_LARGE, large).wait()
        t[i] = clock() - t0
    push_mean = (clock() - start) * 1e6 / pushes
    push_med = statistics.median(t[:pushes]) * 1e6
    return pull_med, push_med, pull_mean, push_mean


def main():
    a = parse_args()
    if os.environ.get("RDMAPS_RANK") == "1":
        os.execv(a.c_bench, [a.c_bench, "--rounds", str(a.rounds), "--pulls", str(a.pulls),
                             "--pushes", str(a.pushes), "--out", a.c_results])
    if os.environ.get("RDMAPS_RANK") not in ("0", None):
        sys.exit("binding_bench.py: run it with exactly 2 workers (rdmaps-launch --workers 2)")
    import rdmaps

    small = np.zeros(SMALL_LEN, np.float32)
    large = np.full(LARGE_LEN, 1e-6, np.float32)
    py = []
    with rdmaps.Worker() as w:
        if w.num_workers != 2:
            sys.exit("binding_bench.py: run it with exactly 2 workers (rdmaps-launch --workers 2)")
        w.declare([KEY_SMALL, KEY_LARGE], [SMALL_LEN, LARGE_LEN], init="zeros")
        w.barrier()
        for r in range(a.rounds):
            for slot in (0, 1):
                w.barrier()
                if slot != r % 2:
                    py.append(measure(w, small, large, a.pulls, a.pushes))
        w.barrier()  # the C worker has written every round
        transport = w.transport
    c = {}
    with open(a.c_results) as f:
        for line in f:
            fields = line.split()
            c[int(fields[1])] = tuple(float(x) for x in fields[2:])
    os.unlink(a.c_results)
    if len(c) != a.rounds:
        sys.exit(f"binding_bench.py: the C worker wrote {len(c)} of {a.rounds} rounds")

    print(f"binding_bench: {a.pulls} pulls of 4 KiB and {a.pushes} pushes of 1 MiB per "
          f"measurement, {a.rounds} rounds, transport {transport}; microseconds per operation "
          f"(median of the measurement's operations / mean)")
    print("round first |  C pull med/mean | Py pull med/mean |   C push med/mean | "
          " Py push med/mean")
    for r in range(a.rounds):
        print(f"{r:5d} {'C ' if r % 2 == 0 else 'Py'}    | {c[r][0]:7.2f} {c[r][2]:7.2f}  | "
              f"{py[r][0]:7.2f} {py[r][2]:7.2f}  | {c[r][1]:8.1f} {c[r][3]:8.1f} | "
              f"{py[r][1]:8.1f} {py[r][3]:8.1f}")
    med = statistics.median
    ok = True
    for i, what in ((0, "pull 4 KiB"), (1, "push 1 MiB")):
        cm, pm = med(v[i] for v in c.values()), med(v[i] for v in py)
        ca, pa = med(v[i + 2] for v in c.values()), med(v[i + 2] for v in py)
        print(f"{what}: median over rounds of the per-operation medians: C {cm:.2f} us, "
              f"Python {pm:.2f} us, ratio {pm / cm:.3f}; of the means: C {ca:.2f} us, "
              f"Python {pa:.2f} us, ratio {pa / ca:.3f}")
        ok = ok and pm / cm <= a.max_ratio
    print(f"{'PASS' if ok else 'FAIL'}: Python within {a.max_ratio}x of C (per-operation "
          f"medians)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
