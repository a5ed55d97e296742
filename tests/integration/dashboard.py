#!/usr/bin/python3
"""The scheduler's dashboard in a real browser (issue #25, docs/dashboard.md).

A real local job (rdmaps-sched, 2 rdmaps-server, 2 fmnist-train) with a
secret; headless Chromium driven by Selenium opens http://127.0.0.1:PORT/ and
checks what a person sees:
  - every node listed, alive, with its role and rank; servers' shards;
  - curves with points (loss and samples/s of both workers, test accuracy);
  - "Checkpoint now": no secret -> 401, a wrong one -> 403, and no file
    written; the right one -> every shard's checkpoint file; "Export the
    model" -> a .npz in the scheduler's checkpoint directory;
  - a worker that hangs (SIGSTOP) turns dead once the heartbeat timeout has
    passed (within 1.5 s more), and the events list says so;
  - no JavaScript error in the browser's console.
Then, without the browser: 300 idle connections on the scheduler's and a
server's HTTP port do not delay /, /api/state and /metrics (< 1 s each), and
the HTTP side is not reachable on a non-loopback address.

  dashboard.py BIN_DIR
Exit 77 (skipped) when Chromium cannot start, except under CI=1 or
RPS_REQUIRE_LAUNCHERS=1, where that fails. CHROMIUM / CHROMEDRIVER name other
binaries. DASHBOARD_SCREENSHOT=FILE.png saves what the page looked like
(docs/img/dashboard.png comes from here).
"""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BIN = sys.argv[1]
SECRET = "dash-test-secret"
HB_TIMEOUT_MS = 2000
procs = {}
OUT = tempfile.mkdtemp(prefix="rps-dash-")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    for f in sorted(glob.glob(os.path.join(OUT, "*.log"))):
        with open(f, errors="replace") as fh:
            lines = fh.readlines()[-15:]
        print(f"--- {os.path.basename(f)} (last lines)")
        sys.stdout.writelines(lines)
    raise SystemExit(1)


def skip(msg):
    if os.environ.get("CI", "0") == "1" or os.environ.get("RPS_REQUIRE_LAUNCHERS", "0") == "1":
        fail(f"{msg} (CI=1 / RPS_REQUIRE_LAUNCHERS=1: the browser test may not skip)")
    print(f"SKIP: {msg}", flush=True)
    raise SystemExit(77)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from free_port import free_port  # noqa: E402  (below the ephemeral range)


def wait_for(what, fn, timeout=30.0, every=0.1):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # the page is being redrawn: try again
            last = e
        time.sleep(every)
    fail(f"{what}: not seen within {timeout} s (last: {last!r})")


def http(url, method="GET", headers=None, timeout=5.0):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, e.read(), time.monotonic() - t0


def start_job():
    sport, mport = free_port(), free_port(3)
    while sport in range(mport, mport + 3):
        sport = free_port()
    env = dict(os.environ)
    env.update({
        "RDMAPS_SECRET": SECRET, "RDMAPS_NUM_SERVERS": "2", "RDMAPS_NUM_WORKERS": "2",
        "RDMAPS_SCHEDULER": f"127.0.0.1:{sport}", "RDMAPS_METRICS_PORT": str(mport),
        "RDMAPS_HEARTBEAT_MS": "200", "RDMAPS_HEARTBEAT_TIMEOUT_MS": str(HB_TIMEOUT_MS),
        "RDMAPS_CHECKPOINT_DIR": os.path.join(OUT, "ckpt"), "RDMAPS_LOG_LEVEL": "info",
        "RDMAPS_HOST": "127.0.0.1", "RDMAPS_TRANSPORT": "tcp", "RDMAPS_TIMEOUT_MS": "20000",
    })
    os.makedirs(env["RDMAPS_CHECKPOINT_DIR"])

    def run(name, argv, extra=None):
        e = dict(env)
        e.update(extra or {})
        procs[name] = subprocess.Popen(argv, env=e, stdout=open(os.path.join(OUT, name + ".log"), "w"),
                                       stderr=subprocess.STDOUT)

    # the scheduler's control port on every interface: its HTTP side must stay
    # on 127.0.0.1 all the same (RDMAPS_HTTP_HOST's default)
    run("sched", [os.path.join(BIN, "rdmaps-sched")], {"RDMAPS_SCHEDULER": f"0.0.0.0:{sport}"})
    time.sleep(0.3)
    if procs["sched"].poll() is not None:
        fail("rdmaps-sched exited at once")
    for r in range(2):
        run(f"server{r}", [os.path.join(BIN, "rdmaps-server")], {"RDMAPS_RANK": str(r)})
    # a long job (the test ends it): small epochs, an evaluation every 4
    for r in range(2):
        run(f"worker{r}", [os.path.join(BIN, "fmnist-train"), "--epochs", "100000",
                           "--train-limit", "1024", "--batch", "128", "--eval-every", "4",
                           "--no-progress"], {"RDMAPS_RANK": str(r)})
    return sport, mport


def stop_job():
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)  # a stopped process dies of it too
    for p in procs.values():
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def open_browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        skip(f"python3-selenium is not installed ({e})")
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    driver_bin = (os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or
                  "/usr/bin/chromedriver")
    if not os.path.exists(chromium) or not os.path.exists(driver_bin):
        skip(f"no Chromium ({chromium}) or chromedriver ({driver_bin}): apt-get install "
             "chromium chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1900", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service(driver_bin), options=opts)
    except Exception as e:
        skip(f"Chromium cannot start here: {str(e).splitlines()[0] if str(e) else e!r}")


# The page redraws twice a second: read what is needed in one script, so that
# no element goes stale between two reads.
def rows(driver):
    return [tuple(r) for r in driver.execute_script(
        "return Array.from(document.querySelectorAll('#nodes tbody tr.node'))"
        ".map(tr => [tr.dataset.role, tr.dataset.rank, tr.dataset.state]);")]


def points(driver, series, worker):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".reduce((a, p) => a + Number(p.dataset.points || 0), 0);",
        f'svg.chart[data-series="{series}"] polyline[data-worker="{worker}"]')


def count(driver, css):
    return driver.execute_script("return document.querySelectorAll(arguments[0]).length;", css)


def texts(driver, css):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.textContent);",
        css)


def ckpt_files():
    return sorted(glob.glob(os.path.join(OUT, "ckpt", "*.ckpt")))


def press(driver, button, secret):
    box = driver.find_element("id", "secret")
    box.clear()
    if secret:
        box.send_keys(secret)
    driver.find_element("id", button).click()


def result(driver):
    r = driver.find_element("id", "action-result")
    return r.get_attribute("class") or "", r.text


def browser_checks(driver, url):
    t0 = time.monotonic()
    driver.get(url)
    want = {("server", "0"), ("server", "1"), ("worker", "0"), ("worker", "1")}
    wait_for("4 nodes alive on the page",
             lambda: {(r, k) for r, k, s in rows(driver) if s == "alive"} == want)
    log(f"page shows 2 servers and 2 workers alive ({time.monotonic() - t0:.1f} s after opening)")
    wait_for("shard rows of both servers (2 x RDMAPS_SHARDS 2)",
             lambda: count(driver, "#servers tbody tr.shard-row") == 4)
    for w in (0, 1):
        for s in ("loss", "samples_s"):
            wait_for(f"curve {s} of worker {w} with >= 3 points",
                     lambda: points(driver, s, w) >= 3)
    wait_for("test accuracy curve with a point",
             lambda: count(driver, 'svg.chart[data-series="test_accuracy"] circle') > 0)
    log(f"curves: loss {points(driver, 'loss', 0)}/{points(driver, 'loss', 1)} points, "
        f"samples_s {points(driver, 'samples_s', 0)}/{points(driver, 'samples_s', 1)}")

    # actions: no secret, a wrong one, then the right one
    before = ckpt_files()
    press(driver, "btn-checkpoint", "")
    wait_for("401 shown for no secret",
             lambda: "error" in result(driver)[0] and "401" in result(driver)[1])
    log(f"no secret: {result(driver)[1]!r}")
    press(driver, "btn-checkpoint", "not-the-secret")
    wait_for("403 shown for a wrong secret",
             lambda: "error" in result(driver)[0] and "403" in result(driver)[1])
    time.sleep(1.0)
    if ckpt_files() != before:
        fail(f"a refused checkpoint wrote files: {sorted(set(ckpt_files()) - set(before))}")
    log(f"wrong secret: {result(driver)[1]!r}; no file written by either")
    press(driver, "btn-checkpoint", SECRET)
    wait_for("checkpoint done on the page",
             lambda: "ok" in result(driver)[0] and "checkpoint done" in result(driver)[1],
             timeout=20)
    made = sorted(set(ckpt_files()) - set(before))
    if len(made) < 4:
        fail(f"checkpoint: {len(made)} new files (want 2 servers x 2 shards): {made}")
    log(f"checkpoint: {result(driver)[1]}")
    press(driver, "btn-export", SECRET)
    wait_for("export done on the page",
             lambda: "ok" in result(driver)[0] and "export done" in result(driver)[1],
             timeout=30)
    npz = glob.glob(os.path.join(OUT, "ckpt", "model-*.npz"))
    if len(npz) != 1 or os.path.getsize(npz[0]) < 100000:
        fail(f"export: {npz}")
    log(f"export: {result(driver)[1]}")

    # a worker hangs (SIGSTOP: its connection stays open, its heartbeats stop):
    # dead on the page once the heartbeat timeout has passed, not before
    procs["worker1"].send_signal(signal.SIGSTOP)
    t_kill = time.monotonic()
    wait_for("worker 1 dead on the page",
             lambda: ("worker", "1", "dead") in rows(driver), timeout=HB_TIMEOUT_MS / 1000 + 3)
    dt = time.monotonic() - t_kill
    if not HB_TIMEOUT_MS / 1000 - 0.5 <= dt <= HB_TIMEOUT_MS / 1000 + 1.5:
        fail(f"worker 1 shown dead {dt:.1f} s after it stopped (heartbeat timeout "
             f"{HB_TIMEOUT_MS} ms, heartbeats every 200 ms, page every 500 ms)")
    wait_for("a death in the events list", lambda: [
        t for t in texts(driver, '#events li[data-kind="death"]') if "worker rank 1" in t])
    if ("worker", "0", "alive") not in rows(driver):
        fail(f"worker 0 not alive any more: {rows(driver)}")
    log(f"worker 1 stopped (SIGSTOP): dead on the page after {dt:.2f} s (heartbeat timeout "
        f"{HB_TIMEOUT_MS} ms); the events list says so")
    time.sleep(0.6)  # a few more updates after the death, for the console check
    shot = os.environ.get("DASHBOARD_SCREENSHOT")
    if shot:
        driver.save_screenshot(shot)
        log(f"screenshot: {shot}")

    # the console: no JavaScript error; the only failed loads are the refused actions
    bad = []
    for e in driver.get_log("browser"):
        if e.get("level") != "SEVERE":
            continue
        msg = e.get("message", "")
        if e.get("source") == "network" and "/api/checkpoint" in msg and (
                " 401 " in msg or " 403 " in msg):
            continue
        bad.append(e)
    if bad:
        fail(f"browser console errors: {json.dumps(bad, indent=1)}")
    log("browser console: no JavaScript error")


def slow_clients(port, what):
    """300 idle connections (half of them with half a request) do not delay others."""
    crowd = []
    for i in range(300):
        s = socket.create_connection(("127.0.0.1", port))
        if i % 2:
            s.sendall(b"GET /metr")
        crowd.append(s)
    time.sleep(0.2)
    worst = 0.0
    paths = ["/metrics"] + (["/", "/api/state", "/dash.js"] if what == "scheduler" else [])
    for _ in range(3):
        for p in paths:
            code, body, dt = http(f"http://127.0.0.1:{port}{p}", timeout=5)
            if code != 200 or not body:
                fail(f"{what} {p} with 300 idle clients: {code}")
            worst = max(worst, dt)
    for s in crowd:
        s.close()
    if worst >= 1.0:
        fail(f"{what}: slowest answer {worst:.2f} s with 300 idle clients (want < 1 s)")
    log(f"{what} port {port}: 300 idle clients, slowest of {3 * len(paths)} answers "
        f"{worst * 1000:.1f} ms")


def non_loopback_ip():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
            return None if ip.startswith("127.") else ip
    except OSError:
        return None


def main():
    sport, mport = start_job()
    url = f"http://127.0.0.1:{mport}/"
    wait_for("the dashboard's HTTP port", lambda: http(url, timeout=1)[0] == 200, timeout=15)
    # the HTTP API without a browser: refusals change nothing
    code, body, _ = http(url + "api/checkpoint", "POST")
    if code != 401:
        fail(f"POST /api/checkpoint without a secret: {code} {body!r}")
    code, body, _ = http(url + "api/checkpoint", "POST", {"Authorization": "Bearer x"})
    if code != 403:
        fail(f"POST /api/checkpoint with a wrong secret: {code} {body!r}")
    code, _, _ = http(url + "api/checkpoint", "GET")
    if code != 405:
        fail(f"GET /api/checkpoint: {code} (want 405)")
    driver = open_browser()
    try:
        browser_checks(driver, url)
    finally:
        driver.quit()
    slow_clients(mport, "scheduler")
    slow_clients(mport + 1, "server 0 /metrics")
    ip = non_loopback_ip()
    if ip:
        try:  # the control port, on 0.0.0.0, answers there: the address works
            socket.create_connection((ip, sport), timeout=2).close()
        except OSError as e:
            fail(f"the scheduler's control port {ip}:{sport} (0.0.0.0) refused: {e}")
        for port, what in ((mport, "the dashboard"), (mport + 1, "server 0's /metrics")):
            try:
                socket.create_connection((ip, port), timeout=2).close()
                fail(f"{what} answers on {ip}:{port}: it must listen on 127.0.0.1 only "
                     "(RDMAPS_HTTP_HOST)")
            except OSError as e:
                log(f"{what} on {ip}:{port} (not loopback): refused as it should be "
                    f"({e.strerror or e}); the control port {sport} there answers")
    else:
        log("no non-loopback IPv4 address here: the loopback-only check is skipped")
    print("PASS", flush=True)


try:
    main()
finally:
    stop_job()
    if os.environ.get("KEEP_OUT"):
        print(f"logs kept in {OUT}")
    else:
        shutil.rmtree(OUT, ignore_errors=True)
