#!/usr/bin/python3
"""loss_report.py OUTDIR: the table of tools/bench/guest-loss.sh.

Prints every run (MB/s and its drop/retry counters), then per test and loss
rate the median over rounds and its share of the loss-free median."""
import glob
import json
import os
import re
import statistics
import sys


def perftest_mbps(path):
    try:
        for line in open(path):
            f = line.split()
            if len(f) >= 4 and f[0].isdigit():
                return float(f[3])  # #bytes #iterations BW_peak BW_average
    except (OSError, ValueError):
        pass
    return None


def perf_mbps(path):
    try:
        return float(json.load(open(path))["results"][0]["bw_MBps"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def main():
    out = sys.argv[1]
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "*.cnt"))):
        name = os.path.basename(path)[:-4]
        m = re.match(r"(.+)_l([0-9.]+)_r([0-9]+)$", name)
        if not m:
            continue
        test, loss, rnd = m.group(1), m.group(2), int(m.group(3))
        base = os.path.join(out, name)
        bw = perftest_mbps(base + ".txt") if test.startswith("ib_") else perf_mbps(base + ".json")
        cnt = open(path).read().strip()
        runs.setdefault((test, loss), []).append((rnd, bw, cnt))
    tests = sorted({t for t, _ in runs})
    losses = sorted({l for _, l in runs}, key=float)
    print("every run (MB/s; drops/retries from the counters, netem's own drops included):")
    for t in tests:
        for l in losses:
            for rnd, bw, cnt in sorted(runs.get((t, l), [])):
                print(f"  {t:22s} loss {l:>4s}% round {rnd}: "
                      f"{'FAILED' if bw is None else f'{bw:8.2f}'}  [{cnt}]")
    print()
    print(f"{'test':22s} " + " ".join(f"{'loss ' + l + '%':>18s}" for l in losses))
    for t in tests:
        cells, base = [], None
        for l in losses:
            v = [bw for _, bw, _ in runs.get((t, l), []) if bw is not None]
            if not v:
                cells.append(f"{'-':>18s}")
                continue
            med = statistics.median(v)
            if float(l) == 0:
                base = med
            share = f" ({med / base:.2f}x)" if base and float(l) != 0 else ""
            cells.append(f"{med:10.2f}{share:>8s}")
        if "_cmdefault" in t:
            b = [bw for _, bw, _ in runs.get((t.replace("_cmdefault", ""), "0"), []) if bw is not None]
            if b:
                base = statistics.median(b)
                cells = []
                for l in losses:
                    v = [bw for _, bw, _ in runs.get((t, l), []) if bw is not None]
                    cells.append(f"{'-':>18s}" if not v else
                                 f"{statistics.median(v):10.2f} ({statistics.median(v) / base:.2f}x)")
        print(f"{t:22s} " + " ".join(cells))
    print("medians of the rounds in MB/s; (Nx) = share of the same test's loss-free median "
          "(*_cmdefault, RDMAPS_RDMA_ACK_TIMEOUT=0: of the default settings' loss-free median)")


if __name__ == "__main__":
    main()
