#!/usr/bin/python3
"""Attack tests of issue 20 ("bounded everything, no blocking on one peer",
"logs are safe"): real rdmaps-sched, rdmaps-server and fmnist-train processes
on 127.0.0.1, an attacker of our own (flood_wire.py, standard library only).

    attack.py BIN_DIR SCENARIO

SCENARIO (one per finding; each asserts the fixed behaviour):
  sched_nonreader  STATUS requests on a connection that never reads: the
                   scheduler cuts it, heartbeats go on, a training job survives
  fd_flood         1,100 connections to the scheduler and the server under
                   `ulimit -n 256`: no spin (CPU time over the attack window
                   from /proc/PID/stat), bounded log, a worker joins and trains
                   after the flood
  parked_pulls     PULLs that park (count 0, a clock ahead) and PULLs for clock
                   2^32-1 from a peer that never reads: server RSS bounded, the
                   absurd ones refused, the memory reused after the
                   disconnect, a worker's samples/s within 2x of its own
  partial_push     64 MiB PUSH headers with a few bytes of body: cut after the
                   frame deadline, the memory returned
  idle_hello       connections that say hello and nothing more: the scheduler
                   closes them after the registration deadline, a server after
                   RDMAPS_IDLE_TIMEOUT_MS
Every process gets RDMAPS_SECRET; deadlines are shrunk through RDMAPS_*
variables so that each scenario takes seconds. Exit 0 pass, 1 fail.
"""
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flood_wire as fw  # noqa: E402
import wire  # noqa: E402

SECRET = "attack-secret"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
FMNIST_DATA = "/usr/share/datasets/fashion-mnist"


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from free_port import free_port  # noqa: E402,F401  (below the ephemeral range)


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def sanitized(pid):
    """Is pid built with AddressSanitizer? Its quarantine keeps freed memory
    (ASAN_OPTIONS quarantine_size_mb, 256 MB by default), so RSS cannot show
    that memory was given back; LeakSanitizer checks at exit that none is lost."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def check_returned(pid, cond, what):
    if sanitized(pid):
        print("not checked under AddressSanitizer (its quarantine keeps freed memory): %s"
              % what, flush=True)
        return
    check(cond, what)


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print("ok: %s" % what, flush=True)


ALL_JOBS = []  # stopped at the end, whatever happened


class Job:
    """rdmaps-sched + 1 rdmaps-server (+ workers run on demand)."""

    def __init__(self, bindir, tmp, workers=1, env=None, nofile=None, tag=""):
        self.bin, self.tmp, self.procs, self.tag = bindir, tmp, [], tag
        ALL_JOBS.append(self)
        self.extra_env = env or {}
        self.sport, self.dport = free_port(), free_port()
        self.env = dict(os.environ)
        self.env.update({
            "RDMAPS_SECRET": SECRET,
            "RDMAPS_SCHEDULER": "127.0.0.1:%d" % self.sport,
            "RDMAPS_NUM_SERVERS": "1",
            "RDMAPS_NUM_WORKERS": str(workers),
            "RDMAPS_HOST": "127.0.0.1",
            "RDMAPS_LOG_LEVEL": "info",
            "RDMAPS_HEARTBEAT_MS": "200",
            "RDMAPS_HEARTBEAT_TIMEOUT_MS": "30000",
            "RDMAPS_SHARDS": "2",
        })
        self.env.update(env or {})
        self.nofile = nofile
        self.sched = self.spawn("sched", [bindir + "/rdmaps-sched"], {})
        self.server = self.spawn("server", [bindir + "/rdmaps-server"],
                                 {"RDMAPS_ROLE": "server", "RDMAPS_PORT": str(self.dport)})
        wait_port(self.sport)
        wait_port(self.dport)

    def spawn(self, name, argv, extra):
        env = dict(self.env)
        env.update(extra)
        out = open(os.path.join(self.tmp, self.tag + name + ".log"), "ab")

        def limits():
            if self.nofile and name in ("sched", "server"):
                resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

        p = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                             preexec_fn=limits)
        self.procs.append(p)
        return p

    def log(self, name):
        with open(os.path.join(self.tmp, self.tag + name + ".log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_size(self, name):
        return os.path.getsize(os.path.join(self.tmp, self.tag + name + ".log"))

    def train(self, tag, epochs=2, limit=8192, timeout=120, extra=None):
        """fmnist-train as worker 0 (in the background); returns the Popen."""
        args = [self.bin + "/fmnist-train", "--epochs", str(epochs), "--train-limit", str(limit),
                "--no-progress", "--eval-every", str(epochs)]
        return self.spawn(tag, args, dict({"RDMAPS_ROLE": "worker", "RDMAPS_RANK": "0"},
                                          **(extra or {})))

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.time() + 5
        for p in self.procs:
            try:
                p.wait(max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class FakeWorker:
    """The job's second worker, spoken by wire.py: registered as rank 1,
    heartbeats, enters every workers' barrier. Its rank is the identity the
    attacker (an insider holding the secret) uses at the server: the server
    takes one live connection per rank, and fmnist-train is rank 0."""

    def __init__(self, job, rank=1):
        self.rank, self.stop = rank, False
        self.c, _ = wire.handshake("127.0.0.1", job.sport, SECRET, wire.WORKER, wire.ANY_RANK)
        wire.register(self.c, wire.WORKER, want_rank=rank)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        barrier = fw.frame(fw.OP_BARRIER, aux=0)
        joined, next_hb = False, 0.0
        self.c.s.settimeout(0.1)
        while not self.stop:
            try:
                op = self.c.recv_frame()[0]
                if op == fw.OP_MAP and not joined:
                    joined = True
                    self.c.s.sendall(barrier)
                elif op == fw.OP_BARRIER_DONE:
                    self.c.s.sendall(barrier)  # wait in the next one at once
            except socket.timeout:
                pass
            except Exception:
                return
            if joined and time.time() >= next_hb:
                try:
                    self.c.s.sendall(fw.frame(fw.OP_HEARTBEAT, fw.HEARTBEAT.pack(0, 0, 0, 0, 0, 0)))
                except OSError:
                    return
                next_hb = time.time() + 0.2


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise Fail("nothing listens on port %d after %d s" % (port, timeout))


def wait_done(p, timeout):
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def samples_per_s(text):
    m = re.findall(r"done: .* ([0-9.]+) samples/s", text)
    return float(m[-1]) if m else None


# ---- scenarios ---------------------------------------------------------------------


def wait_log(job, name, text, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if text in job.log(name):
            return True
        time.sleep(0.05)
    raise Fail("no '%s' in the %s log after %d s" % (text, name, timeout))


def frozen(job, w):
    """The worker stopped (SIGSTOP): the server serves nobody but the attacker,
    so its CPU time is the attack's. Heartbeat timeout: 30 s in these jobs."""
    class Ctx:
        def __enter__(self):
            os.kill(w.pid, signal.SIGSTOP)

        def __exit__(self, *a):
            os.kill(w.pid, signal.SIGCONT)
    return Ctx()


def flood_conns(port, n):
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            pass
    return socks


def no_spin(job, name, pid, secs, attack):
    """Run attack(), hold secs; CPU time and log growth of pid over the window."""
    c0, l0, t0 = cpu_s(pid), job.log_size(name), time.time()
    held = attack()
    time.sleep(secs)
    window, used, grown = time.time() - t0, cpu_s(pid) - c0, job.log_size(name) - l0
    print("%s: %.2f s CPU over %.1f s, log +%d bytes, %d descriptors, %d attack sockets" %
          (name, used, window, grown, nfds(pid), len(held)))
    check(used < 0.1 * window, "%s did not spin (%.2f s CPU in %.1f s)" % (name, used, window))
    check(grown < 64 * 1024, "%s log grew %d bytes (< 64 KiB)" % (name, grown))
    return held


def sched_nonreader(job):
    """The scheduler must cut a peer that asks for STATUS and never reads."""
    w = job.train("worker", epochs=20, limit=16384)  # ~10 s: the attack happens in it
    wait_log(job, "server", "worker 0 connected")
    s = fw.session("127.0.0.1", job.sport, fw.ROLE_CTL, fw.ANY_RANK, SECRET)
    port = s.getsockname()[1]
    s.setblocking(False)
    st, sent, t0, cut = fw.Stream(s, fw.status_request() * 256, fw.HDR.size), 0, time.time(), False
    while time.time() - t0 < 15:
        try:
            n = st.pump()
        except OSError as e:  # reset: the scheduler cut us
            print("send: %s" % e)
            cut = True
            break
        if n is None:
            time.sleep(0.01)
        else:
            sent = n
        # never recv(): our receive window stays shut
    if not cut:
        cut = fw.is_closed(s, 5.0)
    cut_s = time.time() - t0
    print("STATUS requests sent %d, cut after %.1f s (scheduler %s)" % (sent, cut_s, job.sched.poll()))
    check(cut, "the scheduler cut the peer that does not read (%.1f s)" % cut_s)
    rc = wait_done(w, 120)
    slog = job.log("sched")
    check(rc == 0, "the training job finished (fmnist-train exit %s)" % rc)
    check(cut_s < 12, "cut within seconds (%.1f s), not after RDMAPS_TIMEOUT_MS" % cut_s)
    # the peer is cut for its output (queue over the limit, or not moving for
    # RDMAPS_FRAME_TIMEOUT_MS) or, when TCP flow control stops it in the middle
    # of a request, for that request's deadline: either way within seconds
    check(re.search(r"closing 127.0.0.1:%d: (peer not reading|a frame header not whole)" %
                    port, slog),
          "the scheduler said why it cut the peer")
    check(not re.search(r"no heartbeat", slog), "no node missed its heartbeats")
    check(job.sched.poll() is None or job.sched.returncode == 0, "the scheduler is up or exited 0")


def fd_flood(job):
    """1,100 connections to a port of a process with ulimit -n 256."""
    # the scheduler, before the job is complete (it is waiting for the worker)
    held = no_spin(job, "sched", job.sched.pid, 3.0, lambda: flood_conns(job.sport, 1100))
    for x in held:
        x.close()
    time.sleep(0.3)
    w = job.train("worker", epochs=6, limit=16384)
    wait_log(job, "server", "worker 0 connected")
    check(True, "a worker joined through the scheduler after the flood")
    # the server, in the job (it serves only once the job is complete)
    with frozen(job, w):
        held = no_spin(job, "server", job.server.pid, 3.0, lambda: flood_conns(job.dport, 1100))
        for x in held:
            x.close()
        time.sleep(0.3)
        try:  # rank 0 is fmnist-train's: the answer is a refusal, but an answer
            fw.session("127.0.0.1", job.dport, fw.ROLE_WORKER, 0, SECRET).close()
            answer = "accepted"
        except wire.Refused as e:
            answer = "refused: %s" % e
        check(True, "a handshake with the server is answered after the flood (%s)" % answer)
    slog = job.log("sched") + job.log("server")
    check("Too many open files" in slog, "the descriptor limit was reached and reported")
    n = slog.count("Too many open files")
    check(n <= 8, "reported %d times, not once per accept" % n)
    rc = wait_done(w, 120)
    check(rc == 0, "the training finished (exit %s)" % rc)


def session_retry(port, rank, timeout=5.0):
    """A handshake as worker `rank`; retried while the server still holds the
    previous connection of that rank (one live connection per rank)."""
    end = time.time() + timeout
    while True:
        s = fw.session("127.0.0.1", port, fw.ROLE_WORKER, rank, SECRET)
        if not fw.is_closed(s, 0.1):
            return s
        s.close()
        if time.time() > end:
            raise Fail("the server kept refusing worker rank %d" % rank)
        time.sleep(0.1)


def pull_flood(port, n, secs, rank=1):
    """Worker `rank` (the fake's) sends pulls and never reads the answers:
    half park (count 0, clock 60: not reached by a worker that never clocks),
    half ask for clock 2^32-1."""
    s = session_retry(port, rank)
    s.setblocking(False)
    batch = b"".join(fw.pull(count=0, min_clock=(0xFFFFFFFF if i % 2 else 60), req_id=i)
                     for i in range(4096))
    st, sent, t0 = fw.Stream(s, batch, fw.HDR.size + fw.PULL.size), 0, time.time()
    while sent < n and time.time() - t0 < secs:
        try:
            k = st.pump()
        except OSError:
            break
        if k is None:
            time.sleep(0.01)
        else:
            sent = k
    return s, sent


def parked_pulls(job):
    """Parked and absurd pulls from a peer that never reads."""
    fake = FakeWorker(job)
    w = job.train("worker", epochs=4, limit=16384)
    wait_log(job, "server", "worker 0 connected")
    with frozen(job, w):  # the server serves the attacker only: its RSS is the attack's
        rss0 = rss_mb(job.server.pid)
        s, sent = pull_flood(job.dport, 2_000_000, 4)
        time.sleep(0.3)
        rss1 = rss_mb(job.server.pid)
        print("pulls sent %d; server RSS %.0f -> %.0f MB" % (sent, rss0, rss1))
        check(sent > 10000, "the attacker got %d pulls in" % sent)
        check(rss1 - rss0 < 16, "server RSS grew %.0f MB (< 16 MB) under the flood" % (rss1 - rss0))
        s.close()
        time.sleep(0.5)
        s, sent2 = pull_flood(job.dport, 2_000_000, 4)
        time.sleep(0.3)
        rss2 = rss_mb(job.server.pid)
        s.close()
        print("second flood %d pulls; server RSS %.0f MB" % (sent2, rss2))
        check_returned(job.server.pid, rss2 - rss1 < 4,
                       "what the first flood held was freed and reused (RSS %.0f -> %.0f MB)"
                       % (rss1, rss2))
    log = job.log("server")
    check("RDMAPS_MAX_PARKED_PULLS" in log, "pulls beyond the parked cap were refused, and said so")
    check("at most 64 ahead" in log, "pulls for clock 2^32-1 were refused, and said so")
    check(wait_done(w, 120) == 0, "the training went on after the floods")
    fake.stop = True
    job.stop()
    # The same training alone and under attack, each in a job of its own,
    # alternated twice: the machine's load changes, so each gets its best.
    att, base = [], []
    for i in range(2):
        for attacked in (False, True):
            v = train_speed(job, attacked, "%s%d-" % ("attacked" if attacked else "alone", i))
            (att if attacked else base).append(v)
    print("samples/s: alone %s, under attack %s" % (base, att))
    check(max(att) > max(base) / 2, "the worker kept its speed within 2x (best %.0f vs %.0f "
          "samples/s)" % (max(att), max(base)))


def train_speed(job0, attacked, tag):
    """fmnist-train's samples/s in a new job (with the idle second worker),
    under a pull flood if `attacked`: one attacker that floods for a second,
    stops being read, gives up and comes back."""
    job = Job(job0.bin, job0.tmp, env=job0.extra_env, tag=tag)
    fake = FakeWorker(job)
    try:
        w = job.train("worker", epochs=4, limit=16384)
        wait_log(job, "server", "worker 0 connected")
        stop, rounds = time.time() + 90, 0
        while attacked and w.poll() is None and time.time() < stop:
            try:
                a, _ = pull_flood(job.dport, 2_000_000, 1.0)
                rounds += 1
                a.close()
            except (ConnectionError, OSError, Fail):
                time.sleep(0.2)
        rc = wait_done(w, 120)
        check(rc == 0, "%straining finished (exit %s; %d attack rounds)" % (tag, rc, rounds))
        check(job.server.poll() in (None, 0), "the server is up or ended with the job")
        v = samples_per_s(job.log("worker"))
        check(v, "%s: %.0f samples/s" % (tag, v or 0))
        return v
    finally:
        fake.stop = True
        job.stop()


def partial_push(job):
    """A 64 MiB PUSH with 48 MiB of body, then silence: cut at the deadline,
    the memory returned."""
    fake = FakeWorker(job)
    w = job.train("worker", epochs=4, limit=16384)
    wait_log(job, "server", "worker 0 connected")
    with frozen(job, w):
        rss0 = rss_mb(job.server.pid)
        s = session_retry(job.dport, fake.rank)
        s.settimeout(30)  # a loaded machine reads 48 MiB slowly
        count = (64 << 20) // 4 - 12  # len = 48 + 4 count = 64 MiB
        s.sendall(fw.push_header(count, req_id=1) + b"\0" * (48 << 20))
        t0 = time.time()
        rss1 = rss_mb(job.server.pid)
        print("server RSS %.0f -> %.0f MB with a partial 64 MiB push" % (rss0, rss1))
        closed = fw.is_closed(s, 8.0)
        took = time.time() - t0
        check(closed, "the partial push was cut (%.1f s after its last byte; deadline 2 s "
              "+ 64 MiB at 64 MiB/s)" % took)
        check(took < 6, "cut near the deadline (%.1f s)" % took)
        time.sleep(0.5)
        rss2 = rss_mb(job.server.pid)
        print("server RSS after the cut %.0f MB" % rss2)
        check(rss1 - rss0 > 32, "the partial push held memory (%.0f MB)" % (rss1 - rss0))
        check_returned(job.server.pid, rss2 < rss1 - 32,
                       "its buffer was given back (RSS %.0f -> %.0f -> %.0f MB)" % (rss0, rss1, rss2))
    check("frame not whole within its deadline" in job.log("server"), "the server said why")
    check(wait_done(w, 120) == 0, "the training finished")
    fake.stop = True


def idle_hello(job):
    """Hello, then silence: closed after the deadlines."""
    a = fw.session("127.0.0.1", job.sport, fw.ROLE_WORKER, fw.ANY_RANK, SECRET)
    t0 = time.time()
    # checked before the second handshake, which can take a second under load
    check(not fw.is_closed(a, 0.5), "not closed before the deadline")
    c = fw.session("127.0.0.1", job.sport, fw.ROLE_CTL, fw.ANY_RANK, SECRET)
    check(fw.is_closed(a, 5.0), "the scheduler closed a worker that did not register (%.1f s)"
          % (time.time() - t0))
    check(fw.is_closed(c, 5.0), "the scheduler closed an rdmaps-ctl that asked nothing (%.1f s)"
          % (time.time() - t0))
    check("did not register" in job.log("sched"), "the scheduler said why")
    fake = FakeWorker(job)
    w = job.train("worker", epochs=6, limit=16384)
    wait_log(job, "server", "worker 0 connected")
    with frozen(job, w):
        b = session_retry(job.dport, fake.rank)
        t0 = time.time()
        check(fw.is_closed(b, 5.0), "the server closed a silent connection (%.1f s)"
              % (time.time() - t0))
    check("RDMAPS_IDLE_TIMEOUT_MS" in job.log("server"), "the server said why")
    for x in (a, b, c):
        x.close()
    # the legit worker was silent as long (frozen): it reconnects and finishes
    check(wait_done(w, 120) == 0, "the training finished")
    fake.stop = True


SCENARIOS = {
    "sched_nonreader": (sched_nonreader, {"RDMAPS_FRAME_TIMEOUT_MS": "2000",
                                          "RDMAPS_HEARTBEAT_TIMEOUT_MS": "2000"}, None),
    "fd_flood": (fd_flood, {}, 256),
    "parked_pulls": (parked_pulls, {"RDMAPS_MAX_PARKED_PULLS": "4096",
                                    "RDMAPS_NUM_WORKERS": "2"}, None),
    "partial_push": (partial_push, {"RDMAPS_FRAME_TIMEOUT_MS": "2000", "RDMAPS_NUM_WORKERS": "2",
                                    "RDMAPS_FRAME_MIN_RATE": "64M"}, None),
    "idle_hello": (idle_hello, {"RDMAPS_REGISTER_TIMEOUT_MS": "1500", "RDMAPS_NUM_WORKERS": "2",
                                "RDMAPS_IDLE_TIMEOUT_MS": "1500"}, None),
}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in SCENARIOS:
        print(__doc__)
        return 2
    if not os.path.isdir(FMNIST_DATA):
        print("skip: no Fashion-MNIST in %s" % FMNIST_DATA)
        return 77
    fn, env, nofile = SCENARIOS[sys.argv[2]]
    tmp = tempfile.mkdtemp(prefix="rdmaps-attack-")
    job = None
    try:
        job = Job(os.path.abspath(sys.argv[1]), tmp, env=env, nofile=nofile)
        fn(job)
        print("PASS %s" % sys.argv[2])
        return 0
    except Exception as e:  # a Fail, or the attacker's own surprise: show the logs
        print("FAIL %s: %s: %s" % (sys.argv[2], type(e).__name__, e))
        if not isinstance(e, Fail):
            import traceback
            traceback.print_exc(file=sys.stdout)
        for f in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, f), "rb") as fh:
                data = fh.read()
            print("---- %s (last 3000 bytes of %d)" % (f, len(data)))
            print(data[-3000:].decode("utf-8", "replace"))
        return 1
    finally:
        for j in ALL_JOBS:
            j.stop()
        subprocess.call(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
