#!/usr/bin/python3
"""Does the servers' push priority policy help asynchronous training?

Fashion-MNIST under ASP with W workers, one of them a straggler
(RDMAPS_FAULT slow_rank/slow_factor: its clocks take FACTOR times as long),
each priority policy (RDMAPS_PRIORITY) over several seeds, the runs
interleaved (policy is the innermost loop). For every run: test accuracy per
epoch, wall time to --target accuracy, and the deepest priority ring seen
(polled from the servers' /metrics: a policy can only reorder what waits in
a ring). Prints every run, then the medians over seeds per (scenario,
policy); --json writes everything, --plot FILE.svg draws accuracy per epoch
(gnuplot).

Scenarios: "straggler" (the servers keep up; only the straggler is slow) and
"busy-server" (also stall_update_ms/stall_p, so pushes queue in the rings).

  tools/bench/priority_study.py --bin build/bin --epochs 6 --seeds 1,2,3 \\
      --factors 2,5 --json results/priority.json --plot docs/img/priority.svg
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

POLICIES = ["fifo", "freshest", "staleness", "magnitude"]
EPOCH_RE = re.compile(r"epoch (\d+)/(\d+) loss ([0-9.]+) samples/s ([0-9.]+) "
                      r"test_accuracy ([0-9.]+)")


def free_ports(n):
    """A port p with p .. p + n - 1 free now (the metrics ports: the scheduler's,
    then one per server)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        try:
            socks = []
            for i in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise SystemExit("priority_study: no run of free ports for /metrics")


def poll_depth(ports, stop, out):
    """Deepest rdmaps_ring_depth over the servers' /metrics until stop."""
    deepest = 0
    while not stop.is_set():
        for p in ports:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=1) as r:
                    for line in r.read().decode().splitlines():
                        if line.startswith("rdmaps_ring_depth"):
                            deepest = max(deepest, int(float(line.split()[-1])))
            except OSError:
                pass
        stop.wait(0.2)
    out.append(deepest)


def run_one(a, policy, factor, seed, busy):
    env = dict(os.environ)
    metrics = free_ports(1 + a.servers)
    fault = f"slow_rank={a.workers - 1},slow_factor={factor},seed={seed}"
    if busy:
        fault += f",stall_update_ms={a.stall_ms},stall_p={a.stall_p}"
    env.update({
        "RDMAPS_PRIORITY": policy,
        "RDMAPS_FAULT": fault,
        "RDMAPS_RING_SIZE": str(a.ring_size),
        "RDMAPS_METRICS_PORT": str(metrics),
        "RDMAPS_LOG_LEVEL": "warn",
        "OMP_NUM_THREADS": "1",
    })
    cmd = [os.path.join(a.bin, "rdmaps-launch"), "--servers", str(a.servers), "--workers",
           str(a.workers), "--consistency", "asp", "--timeout",
           str(a.run_timeout), "--", os.path.join(a.bin, "fmnist-train"), "--epochs",
           str(a.epochs), "--seed", str(seed), "--no-progress"] + a.train_args
    stop, deepest = threading.Event(), []
    ports = [metrics + 1 + r for r in range(a.servers)]
    poller = threading.Thread(target=poll_depth, args=(ports, stop, deepest), daemon=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    poller.start()
    epochs, log = [], []
    try:
        for line in proc.stdout:
            log.append(line.rstrip())
            m = EPOCH_RE.search(line)
            if m:
                epochs.append({"epoch": int(m.group(1)), "time_s": time.monotonic() - t0,
                               "loss": float(m.group(3)), "samples_s": float(m.group(4)),
                               "accuracy": float(m.group(5))})
        rc = proc.wait()
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGTERM)
        raise
    finally:
        stop.set()
        poller.join()
    if rc != 0 or not epochs:
        sys.stderr.write("\n".join(log[-20:]) + "\n")
        raise SystemExit(f"priority_study: run {policy} factor {factor} seed {seed} failed "
                         f"(exit {rc}, {len(epochs)} epoch lines): {' '.join(cmd)}")
    reach = next((e["time_s"] for e in epochs if e["accuracy"] >= a.target), None)
    return {"policy": policy, "factor": factor, "seed": seed,
            "scenario": "busy-server" if busy else "straggler", "fault": fault,
            "epochs": epochs, "final_accuracy": epochs[-1]["accuracy"],
            "time_to_target_s": reach, "wall_s": time.monotonic() - t0,
            "deepest_ring": deepest[0] if deepest else None}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def plot(runs, a, path):
    """Median accuracy per epoch, one line per policy, one panel per scenario/factor."""
    groups = sorted({(r["scenario"], r["factor"]) for r in runs})
    data = path + ".dat"
    with open(data, "w") as f:
        for g in groups:
            for p in POLICIES:
                rs = [r for r in runs if (r["scenario"], r["factor"]) == g and r["policy"] == p]
                if not rs:
                    continue
                f.write(f"# {g[0]} x{g[1]} {p}\n")
                for e in range(1, a.epochs + 1):
                    accs = [x["accuracy"] for r in rs for x in r["epochs"] if x["epoch"] == e]
                    if accs:
                        f.write(f"{e} {statistics.median(accs):.4f}\n")
                f.write("\n\n")
    blocks, idx = [], 0
    script = [f"set terminal svg size {420 * len(groups)},360 dynamic font 'sans,11'",
              f"set output '{path}'", f"set multiplot layout 1,{len(groups)}",
              "set xlabel 'epoch'", "set ylabel 'test accuracy (median of seeds)'",
              "set key bottom right", "set grid"]
    for g in groups:
        parts = []
        for p in POLICIES:
            if any(r for r in runs if (r["scenario"], r["factor"]) == g and r["policy"] == p):
                parts.append(f"'{data}' index {idx} with linespoints title '{p}'")
                idx += 1
        script.append(f"set title '{g[0]}, straggler {g[1]}x slower'")
        script.append("plot " + ", ".join(parts))
        blocks.append(g)
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)
    os.unlink(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin", help="folder of rdmaps-launch and fmnist-train")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--factors", default="2,5", help="straggler slow-down factors")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--scenarios", default="straggler,busy-server")
    ap.add_argument("--stall-ms", type=float, default=2.0,
                    help="busy-server: stall_update_ms (default 2)")
    ap.add_argument("--stall-p", type=float, default=0.5, help="busy-server: stall_p")
    ap.add_argument("--ring-size", type=int, default=4096)
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--run-timeout", type=int, default=900)
    ap.add_argument("--json", help="write every run here")
    ap.add_argument("--plot", help="write an SVG of accuracy per epoch here (gnuplot)")
    ap.add_argument("train_args", nargs="*", help="more fmnist-train arguments (after --)")
    a = ap.parse_args()
    for prog in ("rdmaps-launch", "fmnist-train"):
        if not os.access(os.path.join(a.bin, prog), os.X_OK):
            raise SystemExit(f"priority_study: no {prog} in {a.bin}: build first, or give --bin")
    policies = a.policies.split(",")
    for p in policies:
        if p not in POLICIES:
            raise SystemExit(f"priority_study: unknown policy {p!r} (known: {', '.join(POLICIES)})")
    runs = []
    print("scenario     factor seed policy     final_acc time_to_%.2f_s wall_s deepest_ring  "
          "accuracy per epoch" % a.target, flush=True)
    for scen in a.scenarios.split(","):
        if scen not in ("straggler", "busy-server"):
            raise SystemExit(f"priority_study: unknown scenario {scen!r}")
        for factor in [float(f) for f in a.factors.split(",")]:
            for seed in [int(s) for s in a.seeds.split(",")]:
                for p in policies:
                    r = run_one(a, p, factor, seed, scen == "busy-server")
                    runs.append(r)
                    if a.json:  # after every run: a stopped study keeps what it measured
                        with open(a.json, "w") as f:
                            json.dump({"args": vars(a), "runs": runs}, f, indent=1)
                    print(f"{scen:12s} {factor:6g} {seed:4d} {p:10s} {r['final_accuracy']:9.4f} "
                          f"{fmt(r['time_to_target_s'], '14.1f')} {r['wall_s']:6.1f} "
                          f"{fmt(r['deepest_ring'], '12d')}  "
                          + " ".join(f"{e['accuracy']:.4f}" for e in r["epochs"]), flush=True)
    print("\nmedians over seeds")
    print("scenario     factor policy     final_acc time_to_%.2f_s deepest_ring reached" % a.target)
    for scen in a.scenarios.split(","):
        for factor in [float(f) for f in a.factors.split(",")]:
            for p in policies:
                rs = [r for r in runs if r["scenario"] == scen and r["factor"] == factor
                      and r["policy"] == p]
                reached = sum(r["time_to_target_s"] is not None for r in rs)
                print(f"{scen:12s} {factor:6g} {p:10s} {med([r['final_accuracy'] for r in rs]):9.4f} "
                      f"{fmt(med([r['time_to_target_s'] for r in rs]), '14.1f')} "
                      f"{fmt(med([r['deepest_ring'] for r in rs]), '12.0f')} {reached}/{len(rs)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "runs": runs}, f, indent=1)
    if a.plot:
        plot(runs, a, a.plot)


if __name__ == "__main__":
    main()
