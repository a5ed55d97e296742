#!/usr/bin/python3
"""Attack tests (issue 20): real rdmaps-sched and rdmaps-server processes on
127.0.0.1, attacked by a sender of our own (wire.py, standard library only).
A legitimate worker, also spoken by wire.py so that every value is exact,
trains between the attacks; at the end its parameters must be exactly what
its own pushes made them, and the processes must still be up.

  attack_test.py BIN_DIR

Scenarios (each a reproduction of a finding of issue 20):
  no-secret       without the secret: PUSH, CLOCK, SYNC, DECLARE, PULL, REGISTER
                  and SHUTDOWN are refused (no proof, a forged proof); a key
                  name it tried to claim first stays free; the secret is in no
                  byte we send or receive
  impostor-server an impostor registering as a server (or taking a worker
                  slot) before the real one is refused; the real one joins
  replay          a captured handshake replayed is refused (fresh nonces)
  wrong-secret    refused, and the server's log names the peer and its claim
  twin            a second connection claiming the live worker's rank is refused
  shutdown        SHUTDOWN from a worker identity (an insider with the secret)
                  on a server's data port is refused; the server stays
  log-injection   an ERROR frame with a new line, a forged log line, terminal
                  escapes and 5,000 bytes: one escaped, cut line in the log
  clock           forged SYNC / CLOCK / PUSH with clock 2^32-1, and a CLOCK 20
                  ahead of the job, from an insider are refused and logged, the parameter unchanged, no
                  checkpoint of a future clock, the real ones kept (also when a
                  future-clock checkpoint file is planted)
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

SECRET = 'attack-test-secret-' + os.urandom(8).hex()
KEY, N = 7, 4
GRAD = [1.0, 2.0, 3.0, 4.0]
failures = []


def check(cond, what):
    print(('ok   ' if cond else 'FAIL ') + what, flush=True)
    if not cond:
        failures.append(what)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from free_port import free_port  # noqa: E402  (below the ephemeral range)


def wait_log(path, text, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with open(path, errors='replace') as f:
                if text in f.read():
                    return True
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    return False


def log_has(path, text, timeout=5.0):
    return wait_log(path, text, timeout)


def refused(fn):
    """The status of the Refused fn raised, or None if it did not."""
    try:
        fn()
    except wire.Refused as e:
        return e.status
    except (ConnectionError, socket.timeout):
        return -104
    return None


class Worker:
    """A worker spoken by wire.py: registered with the scheduler, connected
    to the server, training one key with exact gradients."""

    def __init__(self, sched, secret=SECRET):
        self.ctl, _ = wire.handshake('127.0.0.1', sched, secret, wire.WORKER, wire.ANY_RANK)
        wire.register(self.ctl, wire.WORKER)
        self.secret = secret
        self.rank = None
        self.server = None
        self.clock = 0
        self.steps = 0

    def join(self):
        self.rank, servers = wire.read_map(self.ctl)
        self.server = servers[0]
        self.connect()

    def connect(self):
        _, host, port = self.server
        self.conn, ack = wire.handshake(host, port, self.secret, wire.WORKER, self.rank)
        return ack

    def train(self, n):
        for _ in range(n):
            st = wire.push(self.conn, KEY, GRAD, self.clock)
            if st != 0:
                raise RuntimeError('push refused: %d' % st)
            wire.clock(self.conn, self.clock, [1])
            self.clock += 1
            self.steps += 1

    def values(self):
        st, v = wire.pull(self.conn, KEY, N)
        return st, v

    def expected(self):
        return [-self.steps * g for g in GRAD]  # SGD, lr 1, zeros


def main():
    bin_dir = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix='rdmaps-attack-')
    ckdir = os.path.join(tmp, 'ckpt')
    os.mkdir(ckdir)
    sched_port = free_port()
    env = dict(os.environ)
    for k in list(env):
        if k.startswith('RDMAPS_'):
            del env[k]
    env.update(RDMAPS_SCHEDULER='127.0.0.1:%d' % sched_port, RDMAPS_NUM_SERVERS='1',
               RDMAPS_NUM_WORKERS='2', RDMAPS_SECRET=SECRET, RDMAPS_SHARDS='1',
               RDMAPS_LR='1', RDMAPS_INIT='zeros', RDMAPS_CONSISTENCY='asp',
               RDMAPS_HEARTBEAT_TIMEOUT_MS='120000', RDMAPS_LOG_LEVEL='info',
               RDMAPS_CHECKPOINT_DIR=ckdir, RDMAPS_CHECKPOINT_EVERY='1',
               RDMAPS_TIMEOUT_MS='20000')
    sched_log = os.path.join(tmp, 'sched.log')
    server_log = os.path.join(tmp, 'server.log')
    procs = []
    try:
        procs.append(subprocess.Popen([os.path.join(bin_dir, 'rdmaps-sched')], env=env,
                                      stdout=open(sched_log, 'w'), stderr=subprocess.STDOUT))
        if not wait_log(sched_log, 'listening on'):
            raise RuntimeError('rdmaps-sched did not start')

        # -- impostor-server: without the secret, before the real server
        for what, fn in [
                ('no proof', lambda: impostor_register(sched_port, 'not-the-secret')),
                ('no secret', lambda: impostor_register(sched_port, '')),
                ('a worker slot', lambda: impostor_register(sched_port, 'not-the-secret',
                                                            wire.WORKER)),
        ]:
            st = refused(fn)
            check(st == -wire.EACCES, 'impostor-server (%s): registration refused with '
                  '-EACCES (got %s)' % (what, st))
        check(log_has(sched_log, 'a server asking for any rank: wrong secret'),
              'impostor-server: the scheduler logs the refused claim in words')
        check(log_has(sched_log, 'a worker asking for any rank: wrong secret'),
              'impostor-server: a worker slot is not taken without the secret either')

        procs.append(subprocess.Popen([os.path.join(bin_dir, 'rdmaps-server')], env=env,
                                      stdout=open(server_log, 'w'), stderr=subprocess.STDOUT))
        legit = Worker(sched_port)
        insider = Worker(sched_port)  # holds the secret: the job's second worker
        legit.join()
        insider.join()
        check(not log_has(server_log, 'EBUSY', 0.5) and procs[1].poll() is None,
              'impostor-server: the real server joined')
        check(wire.declare(legit.conn, KEY, N) == 0, 'the legitimate worker declares its key')
        legit.train(3)
        t0 = time.monotonic()
        legit.train(20)
        before = (time.monotonic() - t0) / 20

        _, host, sport = legit.server
        # -- no-secret
        c = wire.Conn(host, sport)
        h = wire.hello(wire.WORKER, legit.rank)
        c.send(wire.frame(wire.OP['HELLO'], h))
        _, _, _, ch = c.expect(wire.OP['CHALLENGE'])
        check(SECRET.encode() not in ch, 'no-secret: the challenge does not carry the secret')
        c.send(wire.frame(wire.OP['PUSH'], wire.PUSH.pack(KEY, 0, 0, 0, N, 0, 0, 0, 0) +
                          b'\0' * 16))
        seen, closed = c.closed()
        check(closed and any(s == -wire.EACCES for _, s, _ in seen),
              'no-secret: a PUSH instead of the proof is refused (%s)' % seen)
        for op, payload in [('PUSH', wire.PUSH.pack(KEY, 0, 0, 0, N, 0, 0, 0, 0) + b'\0' * 16),
                            ('CLOCK', wire.CLOCK.pack(0, 1) + b'\0' * 4),
                            ('SYNC', wire.SYNC.pack(0xFFFFFFFF, 0)),
                            ('DECLARE', wire.DECLARE.pack(KEY + 1, 0, 0, N, 1, 0.0, 0.0, 0, 0)),
                            ('PULL', wire.PULL.pack(KEY, 0, 0, 0, N, 0)),
                            ('SHUTDOWN', b'')]:
            c = wire.Conn(host, sport)
            c.send(wire.frame(wire.OP[op], payload))
            seen, closed = c.closed()
            check(closed, 'no-secret: %s without a handshake: connection closed' % op)
        check(wire.declare(legit.conn, KEY + 1, 2 * N) == 0,
              'no-secret: the key name the attacker tried to claim first is still the '
              'worker\'s to declare, with its own size')
        c = wire.Conn(host, sport)
        h = wire.hello(wire.WORKER, legit.rank)
        c.send(wire.frame(wire.OP['HELLO'], h))
        c.expect(wire.OP['CHALLENGE'])
        c.send(wire.frame(wire.OP['PROOF'], os.urandom(32)))
        seen, closed = c.closed()
        check(closed and any(s == -wire.EACCES for _, s, _ in seen),
              'no-secret: a forged proof is refused with -EACCES')
        for op in ('REGISTER', 'SHUTDOWN'):
            c = wire.Conn('127.0.0.1', sched_port)
            payload = (wire.REGISTER.pack(wire.SERVER, 0, 1, wire.ANY_RANK, b'127.0.0.1', 1, 0)
                       if op == 'REGISTER' else b'')
            c.send(wire.frame(wire.OP[op], payload))
            seen, closed = c.closed()
            check(closed, 'no-secret: %s to the scheduler without a handshake: closed' % op)
        check(SECRET.encode() not in legit.conn.sent and SECRET.encode() not in legit.ctl.sent,
              'no-secret: the secret is in no byte the legitimate worker sent')

        # -- replay: the legitimate worker's handshake bytes, captured, sent again
        captured = legit.conn.sent[:wire.HDR.size * 2 + wire.HELLO.size + 32]
        c = wire.Conn(host, sport)
        c.send(captured)
        seen, closed = c.closed()
        check(closed and any(s == -wire.EACCES for _, s, _ in seen),
              'replay: a captured handshake replayed is refused with -EACCES (%s)'
              % [(op, st) for op, st, _ in seen])

        # -- wrong-secret
        st = refused(lambda: wire.handshake(host, sport, 'a-wrong-one', wire.WORKER, legit.rank,
                                            check_server=False))
        check(st == -wire.EACCES, 'wrong-secret: refused with -EACCES (got %s)' % st)
        check(log_has(server_log, 'a worker claiming rank %d: wrong secret' % legit.rank),
              'wrong-secret: the server log names the peer and its claim')
        st = refused(lambda: wire.handshake(host, sport, 'a-wrong-one', wire.WORKER, legit.rank))
        check(st == -wire.EACCES, 'wrong-secret: our client finds the server does not know '
              'its (wrong) secret: mutual')

        # -- twin: the live rank claimed again, with the secret
        st = refused(lambda: wire.handshake(host, sport, SECRET, wire.WORKER, legit.rank))
        check(st == -wire.EADDRINUSE, 'twin: a second rank-%d connection is refused with '
              '-EADDRINUSE (got %s)' % (legit.rank, st))
        legit.train(2)

        # -- shutdown from a worker identity on the server's data port
        insider.conn.send(wire.frame(wire.OP['SHUTDOWN']))
        seen, closed = insider.conn.closed()
        check(closed, 'shutdown: SHUTDOWN from worker %d on a data port: connection closed'
              % insider.rank)
        time.sleep(0.3)
        check(procs[1].poll() is None, 'shutdown: the server is still running')

        # -- log-injection: an ERROR frame whose text is a new line, a forged
        # log line, terminal escapes and 5,000 more bytes
        insider.connect()
        forged = b'2026-01-01 00:00:00 server[0] error: FORGED-BY-PEER'
        insider.conn.send(wire.frame(wire.OP['ERROR'], b'bye\n' + forged + b'\x1b[2J\x1b[31m'
                                     + b'A' * 5000, status=-5))
        insider.conn.closed()
        check(log_has(server_log, 'FORGED-BY-PEER'), 'log-injection: the ERROR text is logged')
        with open(server_log, 'rb') as f:
            raw = f.read()
        lines = [ln for ln in raw.split(b'\n') if b'FORGED-BY-PEER' in ln]
        check(b'\x1b' not in raw, 'log-injection: no terminal escape byte in the server log')
        check(lines and all(not ln.startswith(forged) and b'bye\\x0a' + forged in ln
                            and b'\\x1b[2J' in ln and ln.endswith(b'...') and len(ln) < 1200
                            for ln in lines),
              'log-injection: the text stays on its line, escaped and cut (%r)'
              % [ln[:160] for ln in lines])

        # -- clock: forged clocks from the insider's own, authenticated connection
        for what, send in [
                ('SYNC', lambda c: wire.sync(c, 0xFFFFFFFF)),
                ('CLOCK', lambda c: wire.clock(c, 0xFFFFFFFF, [0])),
                ('PUSH', lambda c: c.send(wire.frame(wire.OP['PUSH'], wire.PUSH.pack(
                    KEY, 0, 0, 0, N, 0xFFFFFFFF, 0, 0, 0) + b'\0' * 16, req_id=9))),
        ]:
            insider.connect()
            send(insider.conn)
            seen, closed = insider.conn.closed()
            check(closed and any(s == -wire.ERANGE for _, s, _ in seen),
                  'clock: a forged %s at clock 2^32-1 is refused with -ERANGE (%s)'
                  % (what, seen))
            check(log_has(server_log, '%s at clock 4294967295 refused' % what),
                  'clock: the refused %s is logged' % what)
        # small steps: a CLOCK 20 ahead of the job (16 + staleness 0 is the rule)
        insider.connect()
        ahead = legit.clock + 20
        wire.clock(insider.conn, ahead, [0])
        seen, closed = insider.conn.closed()
        check(closed and any(s == -wire.ERANGE for _, s, _ in seen),
              'clock: a CLOCK 20 ahead of the job (%d) is refused with -ERANGE (%s)'
              % (ahead, seen))
        check(log_has(server_log, 'CLOCK at clock %d refused' % ahead)
              and log_has(server_log, '(at most 16 ahead is taken)'),
              'clock: the refused step is logged with the rule')
        st, v = legit.values()
        check(st == 0 and v == legit.expected(),
              'clock: the parameter is unchanged by the forged clocks (%s, want %s)'
              % (v, legit.expected()))
        # (before checkpoints start: the insider holds the shard clock at 0 until it leaves)
        t0 = time.monotonic()
        legit.train(20)
        after = (time.monotonic() - t0) / 20
        # a shared machine: 5 ms of slack per step over the 2x
        check(after <= 2 * before + 0.005, 'the legitimate worker trains at its speed after '
              'the attacks (%.2f ms/step, %.2f before)' % (after * 1e3, before * 1e3))
        # the insider leaves: the shard's clock follows the legitimate worker
        insider.ctl.send(wire.frame(wire.OP['SHUTDOWN']))
        # (checkpoints are written asynchronously, and one asked for while the
        # last is still being written is taken at the next clock: train on
        # until the state shows, never wait for a time)
        clocks = train_until(legit, ckdir, lambda c: c)
        check(clocks and max(clocks) <= legit.clock,
              'clock: checkpoints only of real clocks (%s, worker at %d)' % (clocks, legit.clock))
        newest = max(clocks) if clocks else 0
        if clocks:
            src = os.path.join(ckdir, 'server0-shard0-clock%d.ckpt' % newest)
            shutil.copy(src, os.path.join(ckdir, 'server0-shard0-clock2000000000.ckpt'))
        clocks = train_until(legit, ckdir, lambda c: [x for x in c if newest < x < 2000000000])
        real = [c for c in clocks if c < 2000000000]
        check(real and max(real) > newest and 2000000000 in clocks,
              'clock: with a future-clock checkpoint planted, new real checkpoints are kept '
              '(%s)' % clocks)

        # the job survived, with exactly the legitimate worker's values
        st, v = legit.values()
        check(st == 0 and v == legit.expected(),
              'the legitimate worker\'s values are exactly its own pushes (%s after %d steps)'
              % (v, legit.steps))
        check(all(p.poll() is None for p in procs), 'scheduler and server still running')
        legit.ctl.send(wire.frame(wire.OP['SHUTDOWN']))
    except Exception as e:  # a crash of the test is a failure, with its logs
        failures.append('exception: %r' % e)
        print('FAIL exception: %r' % e)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if failures:
            for name in (sched_log, server_log):
                print('---- ' + name)
                try:
                    print(open(name, errors='replace').read()[-4000:])
                except FileNotFoundError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print('%d failure(s)' % len(failures))
        return 1
    print('PASS')
    return 0


def ckpt_clocks(ckdir):
    return sorted(int(n.split('clock')[1].split('.')[0]) for n in os.listdir(ckdir)
                  if n.endswith('.ckpt'))


def train_until(worker, ckdir, want, timeout=30.0):
    """Train a step at a time until want(checkpoint clocks) holds (or the
    time is up); the clocks then."""
    end = time.monotonic() + timeout
    worker.train(3)
    while True:
        clocks = ckpt_clocks(ckdir)
        if want(clocks) or time.monotonic() > end:
            return clocks
        time.sleep(0.05)
        worker.train(1)


def impostor_register(port, secret, role=wire.SERVER):
    c, _ = wire.handshake('127.0.0.1', port, secret, role, wire.ANY_RANK,
                          check_server=False)
    wire.register(c, role)
    wire.read_map(c)


if __name__ == '__main__':
    sys.exit(main())
