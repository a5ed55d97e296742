"""Start a local rdmaps job from Python: the scheduler and servers as
processes of the rdmaps programs (``rdmaps-sched``, ``rdmaps-server``), for
notebooks and tests.

::

    with rdmaps.Cluster(servers=2, workers=1, consistency="bsp") as c:
        with rdmaps.Worker(scheduler=c.scheduler, secret=c.secret) as w:
            ...

The programs are found in ``$RPS_BIN_DIR``, then where this package was
built or installed from, then on ``PATH`` (:func:`find_program`).
"""
import os
import secrets
import random
import shutil
import signal
import socket
import subprocess
import time

from . import _core

__all__ = ["find_program", "Scheduler", "Server", "InProcessServer", "Cluster"]


def _bin_dirs():
    dirs = []
    if os.environ.get("RPS_BIN_DIR"):
        dirs.append(os.environ["RPS_BIN_DIR"])
    try:
        from . import _build_info
        dirs.append(_build_info.BINDIR)
    except ImportError:
        pass
    return dirs


def find_program(name):
    """The path of an rdmaps program (``rdmaps-sched``, ``rdmaps-server``,
    ``rdmaps-launch``): ``$RPS_BIN_DIR``, the build or install this package
    belongs to, then ``PATH``. FileNotFoundError naming where it looked."""
    tried = []
    for d in _bin_dirs():
        p = os.path.join(d, name)
        tried.append(p)
        if os.access(p, os.X_OK):
            return p
    p = shutil.which(name)
    if p:
        return p
    raise FileNotFoundError(
        "%s not found (looked at %s and on PATH): set RPS_BIN_DIR to the folder of "
        "the rdmaps programs" % (name, ", ".join(tried) or "no build folder"))


def free_port(host="127.0.0.1"):
    """A TCP port free on host right now (bound and released), below the
    ephemeral range when one is free there: a port from the ephemeral range
    can be taken by any process's outgoing connection before the scheduler
    or server binds it ("Address already in use")."""
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError):
        pass
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        p = rng.randrange(max(1024, lo - 20000), max(1025, lo - 1))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, p))
                return p
            except OSError:
                continue
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class _Process:
    """A program of the job, stopped by stop() (SIGINT, then SIGKILL)."""

    role = "?"

    def __init__(self, argv, env, log):
        self.argv = argv
        self._log = log
        out = log if log is not None else subprocess.DEVNULL
        if isinstance(log, str):
            out = open(log, "ab")
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT if log is not None else None,
                                     start_new_session=True)
        if isinstance(log, str):
            out.close()

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        """Send a signal (SIGKILL by default: a crash, for fault tests)."""
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, timeout=5.0):
        """Ask it to stop (SIGINT), wait up to timeout, then SIGKILL. Returns
        its exit status."""
        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __repr__(self):
        state = "running" if self.alive() else "exited %s" % self.proc.returncode
        return "<rdmaps.%s pid %d %s>" % (type(self).__name__, self.pid, state)


def _job_env(base, **settings):
    env = dict(os.environ if base is None else base)
    for k, v in settings.items():
        if v is not None:
            env["RDMAPS_" + k.upper()] = str(v)
    return env


class Scheduler(_Process):
    """``rdmaps-sched`` on host:port (port None: a free one), waiting for
    ``num_servers`` servers and ``num_workers`` workers. ``env``: the
    environment (default: this process's) to which the settings are added;
    ``log``: None (inherit stderr), a file path, or subprocess.DEVNULL.

    ``address`` is its "host:port" (what workers and servers take as
    ``scheduler``)."""

    def __init__(self, num_servers, num_workers, port=None, host="127.0.0.1", secret=None,
                 env=None, log=None, start_timeout=10.0, **settings):
        last = None
        for _ in range(10 if port is None else 1):
            p = port or free_port(host)
            self.address = "%s:%d" % (host, p)
            e = _job_env(env, scheduler=self.address, num_servers=num_servers,
                         num_workers=num_workers, secret=secret, **settings)
            super().__init__([find_program("rdmaps-sched")], e, log)
            try:
                self._wait_listening(host, p, start_timeout)
                return
            except OSError as err:
                last = err
                self.stop(1)
        raise OSError("rdmaps-sched did not start: %s" % last)

    def _wait_listening(self, host, port, timeout):
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if not self.alive():
                raise OSError("rdmaps-sched exited with %s" % self.proc.returncode)
            try:
                with socket.create_connection((host, port), 0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise OSError("rdmaps-sched not listening on %s:%d after %g s" % (host, port, timeout))


class Server(_Process):
    """``rdmaps-server`` joining the scheduler at ``scheduler`` ("host:port").
    ``settings`` become RDMAPS_* variables (``consistency="bsp"``,
    ``shards=2``, ``optimizer="sgd"``, ``lr=1``, ``init="zeros"``, ...;
    docs/options.md)."""

    def __init__(self, scheduler, host="127.0.0.1", transport=None, secret=None, env=None,
                 log=None, **settings):
        e = _job_env(env, scheduler=scheduler, host=host, transport=transport, secret=secret,
                     role="server", **settings)
        super().__init__([find_program("rdmaps-server")], e, log)


class InProcessServer(_core.InProcessServer):
    """An rdmaps server run by a thread of THIS process (``rps_server_create``
    / ``rps_server_run`` of <rdmaps/server.h>), joining the scheduler at
    ``scheduler``. ``settings`` are rdmaps settings by name (``shards=2``,
    ``consistency="bsp"``, ``optimizer="sgd"``, ...; docs/options.md) on top of
    the defaults and the RDMAPS_* environment. It serves until ``stop()``
    (or the end of a ``with`` block) or until the job ends (``wait()``).
    Handy in a notebook; a server that must be killable (fault tests) is
    :class:`Server`, a process."""

    def __init__(self, scheduler, host="127.0.0.1", transport=None, secret=None, **settings):
        super().__init__(scheduler, host, transport, secret,
                         {k: str(v) for k, v in settings.items() if v is not None})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class Cluster:
    """A scheduler and ``servers`` servers on this machine, for ``workers``
    workers that the caller starts (``rdmaps.Worker(scheduler=c.scheduler,
    secret=c.secret)``, or processes given ``c.env``).

    secret: None makes a random one. ``settings`` are RDMAPS_* settings for
    every process (``consistency="bsp"``, ``staleness=2``, ``shards=2``,
    ``timeout_ms=5000``, ...). ``stop()`` (or the end of a ``with`` block)
    stops the servers and the scheduler. ``in_process=True``: the servers are
    :class:`InProcessServer` threads of this process (the scheduler is still a
    process: it has no library API)."""

    def __init__(self, servers=1, workers=1, transport="tcp", secret=None, host="127.0.0.1",
                 worker_host=None, env=None, log=None, in_process=False, **settings):
        self.secret = secret if secret is not None else secrets.token_hex(8)
        self.transport = transport
        base = _job_env(env, transport=transport, num_servers=servers, num_workers=workers,
                        **settings)
        self.sched = Scheduler(servers, workers, secret=self.secret, env=base, log=log)
        self.scheduler = self.sched.address
        self.servers = []
        try:
            for _ in range(servers):
                if in_process:
                    s = dict(settings, num_servers=servers, num_workers=workers)
                    self.servers.append(InProcessServer(self.scheduler, host=host,
                                                        transport=transport,
                                                        secret=self.secret, **s))
                else:
                    self.servers.append(Server(self.scheduler, host=host, transport=transport,
                                               secret=self.secret, env=base, log=log))
        except BaseException:
            self.stop()
            raise
        self.env = _job_env(base, scheduler=self.scheduler, secret=self.secret,
                            host=worker_host or host)

    def stop(self, timeout=5.0):
        """Stop the servers, then the scheduler (idempotent)."""
        for s in self.servers:
            if isinstance(s, Server) and s.alive():
                s.proc.send_signal(signal.SIGINT)
        for s in self.servers:
            if isinstance(s, Server):
                s.stop(timeout)
            else:
                s.stop()
        self.sched.stop(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
