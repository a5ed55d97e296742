#!/usr/bin/env python3
"""Turn the raw outputs of one benchmark-suite run into results.

    report.py RAWDIR OUT_PREFIX [--docs DOCS_MD --img-dir DIR] [--plots-gp FILE]

RAWDIR holds what tools/bench/run-suite collected: host/ (iperf3 JSON, qperf
text, rdmaps-perf JSON over TCP, rdmaps-bench-optim JSON, scaling runs, info)
and guest/ (perftest text and rdmaps-perf JSON over SoftRoCE, from
tools/bench/guest-bench.sh). Writes OUT_PREFIX.json (every figure, the
ratios, PASS/FAIL), OUT_PREFIX.md (the tables) and OUT_PREFIX-*.png (gnuplot),
prints the PASS/FAIL lines, and with --docs puts the tables and plots into
docs/benchmarks.md between its "results" markers.

Units: bandwidth in MB/s with 1 MB = 10^6 bytes everywhere. perftest's
"MB/sec" is 2^20 bytes/s (its format_factor 0x100000), converted here;
iperf3 reports bits/s, qperf GB/sec or MB/sec (10^9 / 10^6 bytes).
"""
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys

MIB = 1048576


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def run_counters(path):
    """The drop / retry counters of the run whose output is path (NAME.txt or
    NAME.json): NAME.cnt, written by tools/bench/counters.sh in the guest.
    (drops, retries, text), or None when the run has none (older suites)."""
    t = read(re.sub(r"\.(txt|json)$", "", path) + ".cnt")
    m = re.match(r"drops (\d+) retries (\d+)", t or "")
    return (int(m.group(1)), int(m.group(2)), t.strip()) if m else None


FLAGGED = []  # (run name, counters text): runs with drops or retries, not used


def clean_run(path):
    """False (and the run noted in FLAGGED) when the counters of the run at
    path moved: it measured retransmission timeouts, not the fabric."""
    c = run_counters(path)
    if c and (c[0] or c[1]):
        name = os.path.basename(path)
        if name not in [n for n, _ in FLAGGED]:
            FLAGGED.append((name, c[2]))
        return False
    return True


def size_name(b):
    for unit, n in (("MiB", MIB), ("KiB", 1024)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def fmt(v, digits=2):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.1f}"
    return f"{v:.{digits}f}"


# ---------------------------------------------------------------- parsers

def perftest_table(text):
    """Rows of a perftest result table: list of dicts keyed by column."""
    if not text:
        return []
    rows = []
    header = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#bytes"):
            header = s
            continue
        if header and re.match(r"^\d+\s+\d+", s):
            f = s.split()
            try:
                vals = [float(x) for x in f]
            except ValueError:
                continue
            if "t_typical" in header or "t_min" in header:
                # #bytes #iter t_min t_max t_typical t_avg t_stdev p99 p99.9
                keys = ["bytes", "iters", "t_min", "t_max", "t_typical", "t_avg",
                        "t_stdev", "t_p99", "t_p999"]
            else:
                # #bytes #iter BW_peak BW_avg MsgRate
                keys = ["bytes", "iters", "bw_peak", "bw_avg", "msg_rate"]
            row = dict(zip(keys, vals))
            if "bw_avg" in row:
                gbits = "Gb/sec" in header
                factor = 125e6 if gbits else MIB  # bytes per unit
                row["bw_MBps"] = row["bw_avg"] * factor / 1e6
            rows.append(row)
    return rows


def perftest_lat(path):
    rows = perftest_table(read(path))
    r = rows[0] if rows else None
    if not r or not all(math.isfinite(r[k]) for k in ("t_typical", "t_min")):
        return None
    return r


def perftest_bw(path):
    rows = perftest_table(read(path))
    if not rows or not math.isfinite(rows[0].get("bw_MBps", float("nan"))) \
            or rows[0]["bw_MBps"] <= 0:
        return None
    return rows[0]


def qperf_value(path):
    """qperf prints 'latency  =  13.1 us' or 'bw  =  1.36 GB/sec'."""
    text = read(path)
    if not text:
        return None
    m = re.search(r"latency\s*=\s*([\d.]+)\s*(ns|us|ms|sec)", text)
    if m:
        return float(m.group(1)) * {"ns": 1e-3, "us": 1, "ms": 1e3, "sec": 1e6}[m.group(2)]
    m = re.search(r"bw\s*=\s*([\d.]+)\s*(KB|MB|GB|B)/sec", text)
    if m:
        return float(m.group(1)) * {"B": 1e-6, "KB": 1e-3, "MB": 1, "GB": 1e3}[m.group(2)]
    return None


def iperf3_MBps(path):
    doc = load_json(path)
    try:
        return doc["end"]["sum_received"]["bits_per_second"] / 8 / 1e6
    except (TypeError, KeyError):
        return None


def perf_results(path):
    """{bytes: result dict} of one rdmaps-perf --json file."""
    doc = load_json(path)
    if not doc:
        return {}
    return {r["bytes"]: r for r in doc.get("results", [])}


# ---------------------------------------------------------------- targets

class Targets:
    def __init__(self):
        self.rows = []

    def add(self, name, ours, base, op, target, unit, base_name, note=""):
        """op '>=' : ours/base >= target; '<=' : ours/base <= target;
        'abs<=' : ours <= target (no baseline)."""
        row = {"name": name, "ours": ours, "baseline": base, "baseline_name": base_name,
               "unit": unit, "op": op, "target": target, "note": note}
        if ours is None or (op != "abs<=" and not base):
            row["ratio"] = None
            row["status"] = "SKIP"
            row["note"] = note or "no figure (see the raw output)"
        else:
            if op == "abs<=":
                row["ratio"] = None
                ok = ours <= target
            else:
                row["ratio"] = ours / base
                ok = row["ratio"] >= target if op == ">=" else row["ratio"] <= target
            row["status"] = "PASS" if ok else "FAIL"
        self.rows.append(row)

    def lines(self):
        out = []
        for r in self.rows:
            if r["op"] == "abs<=":
                want = f"<= {r['target']}{r['unit']}"
                got = f"{fmt(r['ours'])}{r['unit']}" if r["ours"] is not None else "n/a"
            else:
                want = f"{r['op']} {r['target']}x {r['baseline_name']}"
                got = (f"{fmt(r['ours'])} vs {fmt(r['baseline'])}{r['unit']}, "
                       f"ratio {r['ratio']:.2f}" if r["ratio"] is not None else "n/a")
            note = f" ({r['note']})" if r["note"] else ""
            out.append(f"{r['status']}: {r['name']}: {got} (target {want}){note}")
        return out


# ---------------------------------------------------------------- main

def main(argv):
    args = [a for a in argv[1:]]
    docs = img_dir = None
    plots_gp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plots.gp")
    if "--docs" in args:
        i = args.index("--docs")
        docs = args[i + 1]
        del args[i:i + 2]
    if "--img-dir" in args:
        i = args.index("--img-dir")
        img_dir = args[i + 1]
        del args[i:i + 2]
    if "--plots-gp" in args:
        i = args.index("--plots-gp")
        plots_gp = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    raw, prefix = args
    H = os.path.join(raw, "host")
    G = os.path.join(raw, "guest")
    info = load_json(os.path.join(H, "info.json")) or {}
    ginfo = read(os.path.join(G, "guest-info.txt"))
    res = {"date": info.get("date"), "host": info, "guest_info": ginfo, "raw": raw,
           "units": {"bw": "MB/s (10^6 bytes/s)", "lat": "us", "cpu": "% of one core"}}
    T = Targets()

    # ---- host: TCP loopback
    def rounds(pattern):
        files = [f for f in glob.glob(os.path.join(H, pattern))
                 if re.search(r"-(\d+)\.json$", f)]
        return sorted(files, key=lambda f: int(re.search(r"-(\d+)\.json$", f).group(1)))

    ip_runs = [iperf3_MBps(f) for f in rounds("iperf3-*.json")]
    ips = [v for v in ip_runs if v]
    iperf = sum(ips) / len(ips) if ips else None
    pulls = [perf_results(f).get(MIB, {}) for f in rounds("tcp_pull_bw_1m-*.json")]
    pushes = [perf_results(f).get(MIB, {}) for f in rounds("tcp_push_bw_1m-*.json")]

    def mean_bw(rs):
        v = [r["bw_MBps"] for r in rs if r.get("bw_MBps")]
        return sum(v) / len(v) if v else None

    def mean_of(rs, key):
        v = [r[key] for r in rs if r.get(key) is not None]
        return sum(v) / len(v) if v else None

    res["tcp"] = {"iperf3_runs_MBps": ip_runs, "iperf3_MBps": iperf,
                  "pull_bw_1m_runs": pulls, "push_bw_1m_runs": pushes,
                  "pull_bw_1m_MBps": mean_bw(pulls), "push_bw_1m_MBps": mean_bw(pushes),
                  "pull_bw_1m_server_cpu_pct": mean_of(pulls, "server_cpu_pct"),
                  "push_bw_1m_server_cpu_pct": mean_of(pushes, "server_cpu_pct")}
    note = (f"means of {len(pulls)} runs and of the {len(ips)} iperf3 runs around them"
            if len(ips) > 1 else "")
    T.add("TCP pull bandwidth 1 MiB (loopback)", res["tcp"]["pull_bw_1m_MBps"], iperf, ">=",
          0.7, " MB/s", "iperf3", note)
    T.add("TCP push bandwidth 1 MiB (loopback, SGD)", res["tcp"]["push_bw_1m_MBps"], iperf,
          ">=", 0.7, " MB/s", "iperf3", note)

    optim = load_json(os.path.join(H, "optim.json"))
    res["optim"] = optim
    if optim:
        k = optim.get("kernels", {})
        sgd_note = (f"SGD {fmt(k.get('sgd', {}).get('grad_gbps'))} GB/s vs saxpy "
                    f"{fmt(k.get('saxpy', {}).get('grad_gbps'))} GB/s of gradient, 1 core")
        T.add("SGD apply rate vs cblas_saxpy", optim.get("sgd_vs_saxpy"), 1.0, ">=", 0.8,
              "x", "saxpy", sgd_note)
    else:
        T.add("SGD apply rate vs cblas_saxpy", None, None, ">=", 0.8, "x", "saxpy",
              "rdmaps-bench-optim not built")

    # sweeps over TCP, with qperf beside them
    tl = {"pull": perf_results(os.path.join(H, "tcp_pull_lat.json")),
          "push": perf_results(os.path.join(H, "tcp_push_lat.json"))}
    tb = {"pull": perf_results(os.path.join(H, "tcp_pull_bw.json")),
          "push": perf_results(os.path.join(H, "tcp_push_bw.json"))}
    sizes = sorted(set(tl["pull"]) | set(tl["push"]) | set(tb["pull"]) | set(tb["push"]))
    q_lat = {s: qperf_value(os.path.join(H, f"qperf_lat_{s}.txt")) for s in sizes}
    q_bw = {s: qperf_value(os.path.join(H, f"qperf_bw_{s}.txt")) for s in sizes}
    res["tcp"]["sweep"] = [
        {"bytes": s,
         "pull_median_us": tl["pull"].get(s, {}).get("t_median_us"),
         "push_median_us": tl["push"].get(s, {}).get("t_median_us"),
         "qperf_tcp_lat_us": q_lat.get(s),  # qperf reports one way (half the ping-pong)
         "qperf_rtt_us": 2 * q_lat[s] if q_lat.get(s) else None,
         "pull_bw_MBps": tb["pull"].get(s, {}).get("bw_MBps"),
         "push_bw_MBps": tb["push"].get(s, {}).get("bw_MBps"),
         "qperf_tcp_bw_MBps": q_bw.get(s)} for s in sizes]

    # ---- guest: SoftRoCE
    def rounds_of(stem, ext):
        """The files of an interleaved comparison: STEM_r1.EXT, STEM_r2.EXT...
        (tools/bench/guest-bench.sh), else the older STEM.EXT and STEM_again.EXT."""
        fs = [f for f in glob.glob(os.path.join(G, f"{stem}_r[0-9]*.{ext}"))
              if re.search(r"_r\d+\." + ext + "$", f)]  # not NAME_rK.server.txt
        fs.sort(key=lambda f: int(re.search(r"_r(\d+)\.", f).group(1)))
        fs = fs or [f for f in (os.path.join(G, f"{stem}.{ext}"),
                                os.path.join(G, f"{stem}_again.{ext}")) if os.path.exists(f)]
        return [f for f in fs if clean_run(f)]  # runs with drops: flagged, not used

    def best(runs, key, better):
        """runs: result dicts (None for a failed run). The round whose value of
        key is the median of the rounds (the lower middle one for an even
        count; `better` is not used: never the best round of one side), with
        every round's value beside it."""
        vals = [r[key] for r in runs if r and r.get(key)]
        if not vals:
            return None
        med = sorted(vals)[(len(vals) - 1) // 2]
        pick = next(r for r in runs if r and r.get(key) == med)
        out = dict(pick)
        out[key + "_runs"] = vals
        return out

    def perf_rounds(stem, key, better):
        """{bytes: best result} over the rounds of one rdmaps-perf comparison."""
        per = [perf_results(f) for f in rounds_of(stem, "json")]
        sizes = sorted(set().union(*per)) if per else []
        return {b: best([p.get(b) for p in per], key, better) for b in sizes}

    rl = perf_rounds("rdmaps_pull_lat", "t_median_us", min)
    pl = perf_results(os.path.join(G, "rdmaps_push_lat.json"))
    rb_path = os.path.join(G, "rdmaps_pull_bw.json")
    rb = perf_results(rb_path) if clean_run(rb_path) else {}
    pb = perf_rounds("rdmaps_push_bw", "bw_MBps", max)
    cpu = perf_results(os.path.join(G, "rdmaps_cpu_pull.json"))
    cpu_bp = perf_results(os.path.join(G, "rdmaps_cpu_pull_busypoll.json"))
    have_guest = os.path.isdir(G)
    gsizes = sorted(set(rl) | set(pl) | set(rb) | set(pb) |
                    {int(m.group(1)) for f in glob.glob(os.path.join(G, "ib_*_*.txt"))
                     for m in [re.search(r"_(\d+)(?:_r\d+|_again)?\.txt$", f)] if m})

    def perftest_best(parse, stem, key, better):
        return best([parse(f) for f in rounds_of(stem, "txt")], key, better)

    rdma = []
    for s in gsizes:
        irl = perftest_best(perftest_lat, f"ib_read_lat_{s}", "t_typical", min)
        isl = perftest_lat(os.path.join(G, f"ib_send_lat_{s}.txt"))
        irb_path = os.path.join(G, f"ib_read_bw_{s}.txt")
        irb = perftest_bw(irb_path) if clean_run(irb_path) else None
        isb = perftest_best(perftest_bw, f"ib_send_bw_{s}", "bw_MBps", max)
        rdma.append({"bytes": s,
                     "pull_median_us": (rl.get(s) or {}).get("t_median_us"),
                     "pull_median_us_runs": (rl.get(s) or {}).get("t_median_us_runs"),
                     "ib_read_lat_typical_us": irl and irl["t_typical"],
                     "ib_read_lat_typical_us_runs": irl and irl.get("t_typical_runs"),
                     "push_median_us": pl.get(s, {}).get("t_median_us"),
                     "ib_send_lat_typical_us": isl and isl["t_typical"],  # one way
                     "ib_send_rtt_us": isl and 2 * isl["t_typical"],
                     "pull_bw_MBps": rb.get(s, {}).get("bw_MBps"),
                     "ib_read_bw_MBps": irb and irb["bw_MBps"],
                     "push_bw_MBps": (pb.get(s) or {}).get("bw_MBps"),
                     "push_bw_MBps_runs": (pb.get(s) or {}).get("bw_MBps_runs"),
                     "ib_send_bw_MBps": isb and isb["bw_MBps"],
                     "ib_send_bw_MBps_runs": isb and isb.get("bw_MBps_runs"),
                     "pull_server_cpu_pct": (rl.get(s) or {}).get("server_cpu_pct")})
    res["rdma"] = rdma
    glog = read(os.path.join(raw, "guest.log")) or ""
    res["guest_rxe_ack_failures"] = glog.count("Failed sending ACK")
    acks = {m.group(1): int(m.group(2)) for m in
            re.finditer(r"guest-bench: (\S+): .*?, (\d+) rxe ACK failures\)", glog)}
    res["guest_rxe_ack_failures_by_test"] = acks

    def ack_note(*tests):
        """ACK failures of the named tests (NAME or its rounds NAME_rK)."""
        hits = {t: sum(n for k, n in acks.items() if k == t or re.fullmatch(re.escape(t) + r"_r\d+", k))
                for t in tests}
        return "; ".join(f"{t} hit {n} rxe ACK failures" for t, n in hits.items() if n)

    def rounds_note(r, ours, base):
        """'rounds: ours a, b, c; baseline x, y, z' when there was more than one."""
        o, b = r.get(ours + "_runs") or [], r.get(base + "_runs") or []
        if len(o) < 2 and len(b) < 2:
            return ""
        return (f"median of {max(len(o), len(b))} interleaved rounds; ours "
                + ", ".join(fmt(x) for x in o) + "; baseline " + ", ".join(fmt(x) for x in b))

    def notes(*parts):
        return "; ".join(p for p in parts if p)
    res["rdma_cpu"] = {"event_mode": cpu.get(65536), "busy_poll": cpu_bp.get(65536)}
    why = "" if have_guest else "guest part not run"
    for r in rdma:
        if r["bytes"] <= 4096 and (r["pull_median_us"] or r["ib_read_lat_typical_us"]):
            T.add(f"RDMA pull latency {size_name(r['bytes'])} (median)", r["pull_median_us"],
                  r["ib_read_lat_typical_us"], "<=", 1.2, " us", "ib_read_lat",
                  why or rounds_note(r, "pull_median_us", "ib_read_lat_typical_us"))
    if not any(r["bytes"] <= 4096 for r in rdma):
        T.add("RDMA pull latency 8 B..4 KiB", None, None, "<=", 1.2, " us", "ib_read_lat",
              why or "no figures")
    by = {r["bytes"]: r for r in rdma}
    r1m = by.get(MIB, {})
    # matched READ sizes: rdmaps' 1 MiB pull posts READs of <= 229,376 data
    # bytes (14 chunks of 16 KiB); ib_read_bw -s 229376 is its baseline. A
    # single 1 MiB READ is 1,024 packets, more than the guest's backlog.
    m_path = os.path.join(G, "ib_read_bw_match1m.txt")
    match = perftest_bw(m_path) if clean_run(m_path) else None
    res["ib_read_bw_match1m_MBps"] = match and match["bw_MBps"]
    raw1m = perftest_bw(os.path.join(G, "ib_read_bw_1048576.txt"))
    c1m = run_counters(os.path.join(G, "ib_read_bw_1048576.txt"))
    T.add("RDMA pull bandwidth 1 MiB (matched READ size)", r1m.get("pull_bw_MBps"),
          match and match["bw_MBps"], ">=", 1.0, " MB/s", "ib_read_bw -s 229376",
          why or notes(ack_note("ib_read_bw_match1m", "rdmaps_pull_bw"),
                       f"ib_read_bw -s 1M: {fmt(raw1m and raw1m['bw_MBps'])} MB/s"
                       + (f" ({c1m[2]})" if c1m else "")))
    r64 = by.get(65536, {})
    T.add("RDMA push bandwidth 64 KiB (SGD applied)", r64.get("push_bw_MBps"),
          r64.get("ib_send_bw_MBps"), ">=", 0.6, " MB/s", "ib_send_bw",
          why or notes(rounds_note(r64, "push_bw_MBps", "ib_send_bw_MBps"),
                       ack_note("ib_send_bw_65536", "rdmaps_push_bw")))
    ev = res["rdma_cpu"]["event_mode"] or {}
    bp = res["rdma_cpu"]["busy_poll"] or {}
    secs = ev.get("server_window_s")
    T.add("server CPU, pull-only RDMA run (64 KiB pull_bw"
          + (f", {secs:.0f} s" if secs else "") + ", default settings)",
          ev.get("server_cpu_pct"), None, "abs<=", 2, "%", "",
          (f"pure busy-polling (RDMAPS_RDMA_EVENT_MODE=0): {fmt(bp.get('server_cpu_pct'))}%"
           if bp else why))

    # ---- scaling
    scaling = []
    best = {}  # (mode, servers, workers) -> the run with the best total
    for f in sorted(glob.glob(os.path.join(H, "scale_*.json"))):
        m = re.search(r"scale_(\w+)_s(\d+)_w(\d+)(?:_r\d+)?\.json$", f)
        doc = load_json(f)
        if not m or not doc or not doc.get("results"):
            continue
        key = (m.group(1), int(m.group(2)), int(m.group(3)))
        r = doc["results"][0]
        n = best.get(key, (None, None, 0))[2] + 1
        if key not in best or (r.get("bw_MBps") or 0) > (best[key][1].get("bw_MBps") or 0):
            best[key] = (m, r, n)
        else:
            best[key] = (best[key][0], best[key][1], n)
    for key, (m, r, nruns) in best.items():
        bw = r.get("bw_MBps")
        cpu_tot = (r.get("server_cpu_pct") or 0) + (r.get("client_cpu_pct") or 0)
        per = r.get("worker_bw_MBps") or ([bw] if bw else [])
        scaling.append({"mode": m.group(1), "servers": int(m.group(2)),
                        "workers": int(m.group(3)), "bytes": r.get("bytes"), "runs": nruns,
                        "bw_MBps": bw, "per_worker_MBps": per,
                        "per_worker_mean": sum(per) / len(per) if per else None,
                        "per_worker_min": min(per) if per else None,
                        "per_worker_max": max(per) if per else None,
                        "server_cpu_pct": r.get("server_cpu_pct"),
                        "client_cpu_pct": r.get("client_cpu_pct"),
                        "cpu_s_per_GB": cpu_tot / 100 / (bw / 1000) if bw else None})
    scaling.sort(key=lambda x: (x["mode"], x["servers"], x["workers"]))
    res["scaling"] = scaling
    verdicts = []
    for mode in ("pull_bw", "push_bw"):
        for s in (1, 2):
            rows = [x for x in scaling if x["mode"] == mode and x["servers"] == s]
            if len(rows) < 2 or not rows[0]["cpu_s_per_GB"] or not rows[-1]["cpu_s_per_GB"]:
                continue
            growth = rows[-1]["cpu_s_per_GB"] / rows[0]["cpu_s_per_GB"]
            best = max(x["bw_MBps"] or 0 for x in rows[:-1])
            keep = (rows[-1]["bw_MBps"] or 0) / best if best else 0
            # flat: one more worker costs no more CPU per byte (<= 1.5x over the
            # range), and the total does not collapse (>= 0.8x of the best
            # with fewer workers; with 2 cores it cannot grow much)
            verdicts.append({"mode": mode, "servers": s, "from": rows[0]["workers"],
                             "to": rows[-1]["workers"], "cost_growth": growth,
                             "total_kept": keep, "flat": growth <= 1.5 and keep >= 0.8})
    res["scaling_verdicts"] = verdicts
    res["targets"] = T.rows

    # runs whose timed part overran its -D by > 20%: requests that stalled
    # (or a starved machine); listed so that nobody reads them as figures
    anomalies = []
    for f in sorted(glob.glob(os.path.join(raw, "*", "*.json"))):
        doc = load_json(f)
        if not isinstance(doc, dict) or doc.get("tool") != "rdmaps-perf":
            continue
        d = doc.get("duration_s") or 0
        for r in doc.get("results", []):
            # the requests in flight at the deadline still complete: allow
            # their time (depth x size at the measured rate)
            drain = 0
            if "bw" in doc.get("mode", "") and r.get("bw_MBps"):
                drain = doc.get("depth", 1) * doc.get("threads", 1) * r["bytes"] / (
                    r["bw_MBps"] * 1e6 / max(doc.get("procs", 1), 1))
            if d > 0 and r.get("seconds", 0) > d * 1.2 + 0.05 + drain:
                anomalies.append(
                    f"{os.path.relpath(f, raw)}: {size_name(r['bytes'])}: the {d:g} s run took "
                    f"{r['seconds']:.2f} s ({r.get('iters')} requests, {fmt(r.get('bw_MBps'))} MB/s, "
                    f"server CPU {fmt(r.get('server_cpu_pct'))}%, workers "
                    f"{fmt(r.get('client_cpu_pct'))}%)")
            busy = (r.get("server_cpu_pct") or 0) + (r.get("client_cpu_pct") or 0)
            # over TCP moving data takes CPU on both ends (over RDMA it need not)
            if ("bw" in doc.get("mode", "") and doc.get("transport") == "tcp"
                    and r.get("server_cpu_pct") is not None and busy < 10):
                anomalies.append(
                    f"{os.path.relpath(f, raw)}: {size_name(r['bytes'])}: nearly idle while "
                    f"moving data ({fmt(r.get('bw_MBps'))} MB/s with {busy:.1f}% CPU in all): "
                    "requests waited")
            per = r.get("worker_bw_MBps") or []
            if len(per) > 1 and min(per) < 0.25 * max(per):
                anomalies.append(
                    f"{os.path.relpath(f, raw)}: {size_name(r['bytes'])}: unfair: worker "
                    f"processes got " + ", ".join(fmt(x) for x in per) + " MB/s")
            if r.get("errors"):
                anomalies.append(f"{os.path.relpath(f, raw)}: {size_name(r['bytes'])}: "
                                 f"{r['errors']} errors")
    res["anomalies"] = anomalies

    # ---- plots (gnuplot)
    plots = write_plot_data(prefix, res)
    pngs = run_gnuplot(prefix, plots_gp, plots)
    res["plots"] = [os.path.basename(p) for p in pngs]

    res["flagged_runs"] = FLAGGED
    md = markdown(res, T)
    with open(prefix + ".md", "w") as f:
        f.write(md)
    with open(prefix + ".json", "w") as f:
        json.dump(res, f, indent=1)
    print("\n".join(T.lines()))
    for name, cnt in FLAGGED:
        print(f"FLAGGED (not used): {name}: {cnt}")
    for a in anomalies:
        print(f"anomaly: {a}")
    for v in verdicts:
        print(f"scaling {v['mode']} x {v['servers']} server(s): at {v['to']} workers the CPU "
              f"per GB is {v['cost_growth']:.2f}x that at {v['from']}, the total "
              f"{v['total_kept']:.2f}x the best with fewer: "
              f"{'flat' if v['flat'] else 'NOT flat'}")
    if docs:
        update_docs(docs, img_dir, md, pngs, prefix)
    return 0


def write_plot_data(prefix, res):
    """Data files for plots.gp ('?' = missing)."""
    def v(x):
        return "?" if x is None else f"{x:.6g}"

    files = {}
    tcp = res["tcp"].get("sweep") or []
    if tcp:
        p = prefix + "-tcp.dat"
        with open(p, "w") as f:
            f.write("# bytes pull_med_us push_med_us qperf_rtt_us pull_MBps push_MBps "
                    "qperf_bw_MBps iperf3_MBps\n")
            for r in tcp:
                ip = res["tcp"]["iperf3_MBps"] if r["bytes"] == MIB else None
                f.write(" ".join([str(r["bytes"]), v(r["pull_median_us"]),
                                  v(r["push_median_us"]), v(r["qperf_rtt_us"]),
                                  v(r["pull_bw_MBps"]), v(r["push_bw_MBps"]),
                                  v(r["qperf_tcp_bw_MBps"]), v(ip)]) + "\n")
        files["tcp"] = p
    if res["rdma"]:
        p = prefix + "-rdma.dat"
        with open(p, "w") as f:
            f.write("# bytes pull_med_us ib_read_lat_us push_med_us ib_send_rtt_us "
                    "pull_MBps ib_read_bw_MBps push_MBps ib_send_bw_MBps\n")
            for r in res["rdma"]:
                f.write(" ".join([str(r["bytes"]), v(r["pull_median_us"]),
                                  v(r["ib_read_lat_typical_us"]), v(r["push_median_us"]),
                                  v(r["ib_send_rtt_us"]), v(r["pull_bw_MBps"]),
                                  v(r["ib_read_bw_MBps"]), v(r["push_bw_MBps"]),
                                  v(r["ib_send_bw_MBps"])]) + "\n")
        files["rdma"] = p
    return files


def run_gnuplot(prefix, plots_gp, files):
    if not shutil.which("gnuplot") or not os.path.exists(plots_gp) or not files:
        if files:
            print("report: gnuplot (or plots.gp) missing: no plots", file=sys.stderr)
        return []
    out = []
    for kind, dat in files.items():
        cmd = ["gnuplot", "-e", f"kind='{kind}'; dat='{dat}'; out='{prefix}-{kind}'",
               plots_gp]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(f"report: gnuplot {kind}: {r.stderr.strip()}", file=sys.stderr)
            continue
        for suffix in ("lat", "bw"):
            p = f"{prefix}-{kind}-{suffix}.png"
            if os.path.exists(p):
                out.append(p)
    return out


def guest_summary(text):
    if not text:
        return ""
    kv = {}
    for line in text.splitlines():
        if line.startswith("kernel "):
            kv["kernel"] = "kernel " + line.split(None, 1)[1]
        elif line.startswith("cpus "):
            kv["cpus"] = line.split(None, 1)[1] + " vCPUs"
        elif line.startswith("model name"):
            kv["cpu"] = line.split(":", 1)[1].strip()
        elif "active_mtu" in line:
            kv["mtu"] = "active MTU " + line.split(":", 1)[1].strip().split()[0]
    return ", ".join(kv[k] for k in ("kernel", "cpus", "cpu", "mtu") if k in kv)


def markdown(res, T):
    h = res["host"]
    L = []
    L.append(f"Run of {h.get('date', '?')} on `{h.get('hostname', '?')}`: kernel "
             f"{h.get('kernel', '?')}, {h.get('cpu', '?')} ({h.get('ncpu', '?')} cores), "
             f"load average {h.get('loadavg', '?')} before the run and "
             f"{(read(os.path.join(res['raw'], 'host', 'load-after.txt')) or '?').strip()} "
             f"after the host part, rdmaps "
             f"{h.get('git', '?')}. Guest: "
             + (guest_summary(res.get("guest_info")) or "not run") + ".")
    L.append("")
    L.append("### Targets (ratios to the baseline measured in the same run)")
    L.append("")
    L.append("| figure | ours | baseline | ratio | target | result |")
    L.append("| --- | ---: | ---: | ---: | --- | --- |")
    for r in T.rows:
        if r["op"] == "abs<=":
            base, ratio, tgt = "—", "—", f"<= {r['target']}{r['unit']}"
        else:
            base = f"{fmt(r['baseline'])} ({r['baseline_name']})" if r["baseline"] else "n/a"
            ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "n/a"
            tgt = f"{r['op']} {r['target']}x"
        ours = "n/a" if r["ours"] is None else \
            f"{fmt(r['ours'])}{'' if r['unit'] == 'x' else r['unit']}"
        note = f" — {r['note']}" if r["note"] else ""
        L.append(f"| {r['name']} | {ours} | {base} | {ratio} | {tgt} | "
                 f"**{r['status']}**{note} |")
    L.append("")
    tcp = res["tcp"].get("sweep") or []
    if tcp:
        L.append("### TCP loopback: rdmaps-perf beside qperf (same run)")
        L.append("")
        L.append("A pull and a push (answered by its ack) are round trips; qperf's `tcp_lat` "
                 "is one way (half its ping-pong), so it is shown doubled.")
        L.append("")
        L.append("| size | pull t_median [us] | push t_median [us] | qperf round trip [us] (2 x tcp_lat) | "
                 "pull BW [MB/s] | push BW [MB/s] | qperf tcp_bw [MB/s] |")
        L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in tcp:
            L.append(f"| {size_name(r['bytes'])} | {fmt(r['pull_median_us'])} | "
                     f"{fmt(r['push_median_us'])} | {fmt(r['qperf_rtt_us'])} | "
                     f"{fmt(r['pull_bw_MBps'])} | {fmt(r['push_bw_MBps'])} | "
                     f"{fmt(r['qperf_tcp_bw_MBps'])} |")
        t = res["tcp"]
        L.append("")
        L.append("1 MiB, one worker, one server, each run as long as the iperf3 runs "
                 "around it (127.0.0.1, one stream): iperf3 "
                 + ", ".join(fmt(v) for v in t["iperf3_runs_MBps"]) + " MB/s; pull "
                 + ", ".join(fmt(r.get("bw_MBps")) for r in t["pull_bw_1m_runs"])
                 + f" MB/s (server CPU {fmt(t['pull_bw_1m_server_cpu_pct'])}%); push "
                 + ", ".join(fmt(r.get("bw_MBps")) for r in t["push_bw_1m_runs"])
                 + f" MB/s (server CPU {fmt(t['push_bw_1m_server_cpu_pct'])}%).")
        L.append("")
    if res.get("optim"):
        k = res["optim"].get("kernels", {})
        L.append("### Optimizer apply rate (rdmaps-bench-optim, 1 core, "
                 f"{size_name(res['optim'].get('bytes', 0))} of gradient)")
        L.append("")
        L.append("| kernel | gradient GB/s | ratio to saxpy |")
        L.append("| --- | ---: | ---: |")
        for name, kk in k.items():
            L.append(f"| {name} | {fmt(kk.get('grad_gbps'))} | {fmt(kk.get('ratio_vs_saxpy'))} |")
        L.append("")
    if res["rdma"]:
        L.append("### SoftRoCE (rxe0 <- rxe1 in the QEMU/TCG guest): rdmaps-perf beside perftest")
        L.append("")
        L.append("rdmaps-perf with the default settings (event mode with a 50 us poll "
                 "spin, callers reap their own completions for up to 200 us, 16 KiB "
                 "seqlock chunks with compact chunks for small tensors, 64 KiB RDMA "
                 "buffers); perftest with `-x 1`, `-o 16` for reads. Pull latency and "
                 "push bandwidth ran in interleaved rounds (ib_read_lat, rdmaps-perf "
                 "pull_lat, ib_send_bw, rdmaps-perf push_bw; each round a new program) and "
                 "each tool's figure is the median of its rounds (the emulated guest runs a program "
                 "in a fast or a slow mode, about 2x apart). Every run's drop and retry counters "
                 "(`rdma statistic`, veth statistics, /proc/net/softnet_stat) are read before and "
                 "after it; a run whose counters moved is flagged and not used (listed below the "
                 "table). ib_read_bw at 1 MiB is shown as measured, but the pull-bandwidth "
                 "baseline is `ib_read_bw -s 229376`, the READ size rdmaps posts. ib_read_lat is a round trip like a pull; "
                 "ib_send_lat is one way, shown doubled beside a push (answered by its ack).")
        L.append("")
        L.append("| size | pull t_median [us] | ib_read_lat t_typical [us] | push t_median [us] | "
                 "ib_send_lat round trip [us] (2 x typical) | pull BW [MB/s] | ib_read_bw [MB/s] | "
                 "push BW [MB/s] | ib_send_bw [MB/s] |")
        L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in res["rdma"]:
            L.append(f"| {size_name(r['bytes'])} | {fmt(r['pull_median_us'])} | "
                     f"{fmt(r['ib_read_lat_typical_us'])} | {fmt(r['push_median_us'])} | "
                     f"{fmt(r['ib_send_rtt_us'])} | {fmt(r['pull_bw_MBps'])} | "
                     f"{fmt(r['ib_read_bw_MBps'])} | {fmt(r['push_bw_MBps'])} | "
                     f"{fmt(r['ib_send_bw_MBps'])} |")
        L.append("")
        if res.get("ib_read_bw_match1m_MBps"):
            L.append(f"ib_read_bw at rdmaps' READ size for a 1 MiB pull (-s 229376): "
                     f"{fmt(res['ib_read_bw_match1m_MBps'])} MB/s.")
            L.append("")
        for name, cnt in res.get("flagged_runs") or []:
            L.append(f"- flagged, not used: `{name}`: {cnt}")
        if res.get("flagged_runs"):
            L.append("")
        rr = [r for r in res["rdma"] if (r.get("pull_median_us_runs") or [None, None])[1:]
              or (r.get("push_bw_MBps_runs") or [None, None])[1:]]
        if rr:
            L.append("Every round (the table above holds each tool's best):")
            L.append("")
            L.append("| size | figure | rdmaps-perf per round | perftest per round |")
            L.append("| ---: | --- | --- | --- |")
            runs = lambda v: ", ".join(fmt(x) for x in (v or [])) or "n/a"
            for r in rr:
                if r.get("pull_median_us_runs"):
                    L.append(f"| {size_name(r['bytes'])} | pull t_median / ib_read_lat t_typical [us] | "
                             f"{runs(r['pull_median_us_runs'])} | {runs(r.get('ib_read_lat_typical_us_runs'))} |")
                if r.get("push_bw_MBps_runs"):
                    L.append(f"| {size_name(r['bytes'])} | push BW / ib_send_bw [MB/s] | "
                             f"{runs(r['push_bw_MBps_runs'])} | {runs(r.get('ib_send_bw_MBps_runs'))} |")
            L.append("")
        acks = res.get("guest_rxe_ack_failures")
        if acks:
            L.append(f"The guest kernel logged `rdma_rxe: Failed sending ACK` {acks} times "
                     "during this run (SoftRoCE under emulation dropping its own ACKs; "
                     "retransmissions slow whichever test it hits, mostly large READs).")
            L.append("")
        ev = res["rdma_cpu"]["event_mode"] or {}
        bp = res["rdma_cpu"]["busy_poll"] or {}
        L.append("Server CPU during a pull-only RDMA run (64 KiB pull_bw): "
                 f"{fmt(ev.get('server_cpu_pct'))}% of one core with the defaults "
                 f"({fmt(ev.get('server_cpu_s'), 3)} CPU-s in "
                 f"{fmt(ev.get('server_window_s'))} s, {fmt(ev.get('bw_MBps'))} MB/s pulled); "
                 f"{fmt(bp.get('server_cpu_pct'))}% with pure busy-polling, "
                 f"RDMAPS_RDMA_EVENT_MODE=0 ({fmt(bp.get('bw_MBps'))} MB/s).")
        L.append("")
    if res["scaling"]:
        runs = max(x.get("runs", 1) for x in res["scaling"])
        L.append("### Scaling over TCP loopback (64 KiB, 2 keys per worker, 2 s per run"
                 + (f", the better of {runs} runs per point" if runs > 1 else "") + ")")
        L.append("")
        L.append("| mode | servers | workers | total MB/s | per worker MB/s (min..max) | "
                 "server CPU % | workers CPU % | CPU-s per GB |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for x in res["scaling"]:
            L.append(f"| {x['mode']} | {x['servers']} | {x['workers']} | {fmt(x['bw_MBps'])} | "
                     f"{fmt(x['per_worker_mean'])} ({fmt(x['per_worker_min'])}.."
                     f"{fmt(x['per_worker_max'])}) | {fmt(x['server_cpu_pct'])} | "
                     f"{fmt(x['client_cpu_pct'])} | {fmt(x['cpu_s_per_GB'], 3)} |")
        L.append("")
        for v in res["scaling_verdicts"]:
            L.append(f"- {v['mode']}, {v['servers']} server(s): at {v['to']} workers the CPU "
                     f"per GB moved is {v['cost_growth']:.2f}x that at {v['from']} and the "
                     f"total is {v['total_kept']:.2f}x the best with fewer workers — "
                     f"**{'flat' if v['flat'] else 'not flat'}** (flat: <= 1.5x and >= 0.8x).")
        L.append("")
    if res.get("anomalies"):
        L.append("### Anomalies")
        L.append("")
        L.append("Runs whose timed part overran its duration by more than 20% beyond the "
                 "drain of the requests in flight, TCP bandwidth runs with less than 10% CPU "
                 "in all (requests waiting on something), and runs where one worker process got "
                 "less than a quarter of another's bandwidth:")
        L.append("")
        for a in res["anomalies"]:
            L.append(f"- {a}")
        L.append("")
    return "\n".join(L) + "\n"


def update_docs(docs, img_dir, md, pngs, prefix):
    text = read(docs)
    if text is None:
        print(f"report: {docs} missing", file=sys.stderr)
        return
    begin, end = "<!-- results:begin -->", "<!-- results:end -->"
    if begin not in text or end not in text:
        print(f"report: {docs} has no {begin} ... {end} markers", file=sys.stderr)
        return
    imgs = []
    if img_dir and pngs:
        os.makedirs(img_dir, exist_ok=True)
        base = os.path.basename(prefix)
        rel = os.path.relpath(img_dir, os.path.dirname(os.path.abspath(docs)))
        for p in pngs:
            name = "bench-" + os.path.basename(p)[len(base) + 1:]
            shutil.copy(p, os.path.join(img_dir, name))
            imgs.append(f"![{name}]({rel}/{name})")
    body = md + ("\n" + "\n\n".join(imgs) + "\n" if imgs else "")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(docs, "w") as f:
        f.write(head + begin + "\n" + body + end + tail)
    print(f"report: updated {docs}" + (f" and {len(imgs)} plot(s) in {img_dir}" if imgs else ""))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
