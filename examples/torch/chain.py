#!/usr/bin/python3
"""The communication of one BSP step of examples/torch/fmnist.py's MLP, with
no compute: what a 1-worker job adds to a step that --local does not have.

Run under rdmaps-launch (1 worker; 1 server for the throughput figure):
    rdmaps-launch --servers 1 --workers 1 --transport tcp --consistency bsp -- \\
        /usr/bin/python3 examples/torch/chain.py [--steps N]

Each step pushes the five small gradients (they go out during backward in the
real job), then the 784x256 weight's (the last gradient backward computes,
and the first value forward needs), ends the clock and pulls every key in
forward order, as rdmaps.torch does. Printed, p10 / median ms over the steps:
  push_w0     the big push call (over TCP: the copy into the socket)
  clock_pull  clock() and the six pull calls
  wait_w0     waiting for the big weight's fresh values (the server's receive,
              its momentum step at the clock, the answer, our receive)
  wait_rest   the other pulls after that
  chain       push_w0 + clock_pull + wait_w0 + wait_rest: the part of a step
              BSP cannot overlap with compute for this model
and the CPU time the communication costs per step (ms of CPU over the loop /
steps): this process (the calls, the waiting caller's polling, the progress
thread), and the servers started by the same rdmaps-launch (its children
named rdmaps-server, read from /proc; Linux only). On 2 cores the job has to
find that CPU time beside the compute that --local spreads over both.
"""
import argparse
import os
import time

import numpy as np

import rdmaps

SIZES = [784 * 256, 256, 256 * 128, 128, 128 * 10, 10]  # fc1.w, fc1.b, fc2.w, ...


def sibling_servers():
    """pids of the rdmaps-server processes started by our parent (rdmaps-launch)."""
    try:
        with open(f"/proc/{os.getppid()}/task/{os.getppid()}/children") as f:
            pids = [int(x) for x in f.read().split()]
    except OSError:
        return []
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "rdmaps-server":
                    out.append(pid)
        except OSError:
            pass
    return out


def cpu_seconds(pids):
    """utime + stime of the processes (every thread), in seconds."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--optimizer", default="momentum", choices=["sgd", "momentum"])
    a = p.parse_args()
    if a.steps < 10:
        p.error("--steps must be >= 10")
    now = time.perf_counter
    with rdmaps.Worker() as w:
        vals = [np.zeros(n, np.float32) for n in SIZES]
        grads = [np.full(n, 1e-6, np.float32) for n in SIZES]
        for k, n in enumerate(SIZES):
            w.declare(k, n, optimizer={"kind": a.optimizer, "lr": 0.1, "momentum": 0.9})
        regs = [w.register(v) for v in vals]
        w.barrier()
        t = {k: [] for k in ("push_w0", "clock_pull", "wait_w0", "wait_rest", "chain")}
        servers = sibling_servers()
        cpu0, srv0 = time.process_time(), cpu_seconds(servers)
        for _ in range(a.steps):
            pushes = [w.push(k, grads[k]) for k in (5, 4, 3, 2, 1)]
            time.sleep(0.0005)  # the rest of backward
            t0 = now()
            pushes.append(w.push(0, grads[0]))
            t1 = now()
            w.clock()
            pulls = [w.pull(k, vals[k]) for k in range(len(SIZES))]
            t2 = now()
            pulls[0].wait()
            t3 = now()
            for r in pulls[1:]:
                r.wait()
            t4 = now()
            for r in pushes:
                r.wait()
            for k, d in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                t[k].append(d)
        cpu_w = (time.process_time() - cpu0) / a.steps
        cpu_s = (cpu_seconds(servers) - srv0) / a.steps
        for r in regs:
            r.unregister()
        w.barrier()
        transport = w.transport
    mb = sum(SIZES) * 4 / 1e6
    print(f"chain.py: {a.steps} steps, {mb:.2f} MB pushed and pulled per step, "
          f"over {transport}; p10 / median ms:")
    print("  " + ", ".join(f"{k} {1000 * np.percentile(v, 10):.3f} / {1000 * np.median(v):.3f}"
                           for k, v in t.items()))
    line = f"  CPU ms per step: worker {1000 * cpu_w:.3f}"
    if servers:
        line += f", server {1000 * cpu_s:.3f}, total {1000 * (cpu_w + cpu_s):.3f}"
    else:
        line += " (no rdmaps-server beside this process: started by rdmaps-launch?)"
    print(line)


if __name__ == "__main__":
    main()
