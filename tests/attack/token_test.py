#!/usr/bin/python3
"""Attack tests (issue 20, "Identities"): a job in token mode (rdmaps-sched
with the job secret, rdmaps-server with only its server token) attacked by
an insider that holds only a worker's token (RDMAPS_TOKEN of worker 1), spoken
by wire.py (standard library only). A legitimate worker 0 (its own token)
trains between the attacks; at the end its parameters must be exactly what
its own pushes made them, and the processes must still be up.

  token_test.py BIN_DIR

Scenarios:
  server-role   with a worker token: REGISTER as a server (rank 0, any rank)
                refused; the real rdmaps-server started with a worker token
                exits without joining; a server token cannot claim another
                server rank
  other-rank    with worker 1's token: the hello of worker 0 (free, then
                live), of any rank, and a REGISTER for rank 0 after a hello
                of rank 1 are refused (scheduler and server)
  other-roles   the scheduler's and rdmaps-ctl's identities refused by the
                scheduler; the server refuses what its token cannot check and
                says so in its log
  shutdown      SHUTDOWN from worker 1 on the server's data port refused (the
                server stays); to the scheduler it takes out worker 1 only
  replay        worker 0's captured handshake replayed by worker 1 refused
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
from attack_test import check, failures, free_port, wait_log, log_has, refused  # noqa: E402

SECRET = 'token-test-secret-' + os.urandom(8).hex()
KEY, N = 7, 4
GRAD = [1.0, 2.0, 3.0, 4.0]


class Worker:
    """A worker spoken by wire.py with only its token."""

    def __init__(self, sched, token, rank):
        self.ctl, _ = wire.handshake('127.0.0.1', sched, token, wire.WORKER, rank)
        wire.register(self.ctl, wire.WORKER, rank)
        self.token, self.rank = token, rank
        self.clock = self.steps = 0

    def join(self):
        rank, servers = wire.read_map(self.ctl)
        assert rank == self.rank, (rank, self.rank)
        self.server = servers[0]
        _, host, port = self.server
        self.conn, _ = wire.handshake(host, port, self.token, wire.WORKER, self.rank)

    def train(self, n):
        for _ in range(n):
            if wire.push(self.conn, KEY, GRAD, self.clock) != 0:
                raise RuntimeError('push refused')
            wire.clock(self.conn, self.clock, [1])
            self.clock += 1
            self.steps += 1

    def values(self):
        return wire.pull(self.conn, KEY, N)

    def expected(self):
        return [-self.steps * g for g in GRAD]  # SGD, lr 1, zeros


def register_as(port, token, role, rank, want_rank=None):
    c, _ = wire.handshake('127.0.0.1', port, token, role, rank, check_server=False)
    wire.register(c, role, rank if want_rank is None else want_rank)
    wire.read_map(c)


def main():
    bin_dir = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix='rdmaps-token-')
    sched_port = free_port()
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith('RDMAPS_'))
    env.update(RDMAPS_SCHEDULER='127.0.0.1:%d' % sched_port, RDMAPS_NUM_SERVERS='1',
               RDMAPS_NUM_WORKERS='2', RDMAPS_SHARDS='1', RDMAPS_LR='1', RDMAPS_INIT='zeros',
               RDMAPS_CONSISTENCY='asp', RDMAPS_HEARTBEAT_TIMEOUT_MS='120000',
               RDMAPS_LOG_LEVEL='info', RDMAPS_TIMEOUT_MS='20000')
    w0 = wire.make_token(SECRET, wire.WORKER, 0)
    w1 = wire.make_token(SECRET, wire.WORKER, 1)  # the attacker's only credential
    s0 = wire.make_token(SECRET, wire.SERVER, 0)
    sched_log = os.path.join(tmp, 'sched.log')
    server_log = os.path.join(tmp, 'server.log')
    fake_log = os.path.join(tmp, 'fake-server.log')
    procs = []
    try:
        procs.append(subprocess.Popen([os.path.join(bin_dir, 'rdmaps-sched')],
                                      env=dict(env, RDMAPS_SECRET=SECRET),
                                      stdout=open(sched_log, 'w'), stderr=subprocess.STDOUT))
        if not wait_log(sched_log, 'listening on'):
            raise RuntimeError('rdmaps-sched did not start')

        # -- server-role: a worker token cannot register a server
        for rank in (0, wire.ANY_RANK):
            st = refused(lambda: register_as(sched_port, w1, wire.SERVER, rank))
            check(st == -wire.EACCES, 'server-role: REGISTER as server rank %d with a worker '
                  'token refused with -EACCES (got %s)' % (rank, st))
        check(log_has(sched_log, 'a server claiming rank 0: wrong secret'),
              'server-role: the scheduler logs the refused claim in words')
        fake = subprocess.Popen([os.path.join(bin_dir, 'rdmaps-server')],
                                env=dict(env, RDMAPS_TOKEN=w1, RDMAPS_TIMEOUT_MS='3000'),
                                stdout=open(fake_log, 'w'), stderr=subprocess.STDOUT)
        try:
            rc = fake.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fake.kill()
            rc = 'still running'
        check(rc not in (0, 'still running'), 'server-role: rdmaps-server with a worker token '
              'exits without joining (exit %s)' % rc)
        check(not log_has(sched_log, 'server rank 0, 127.0.0.1', 0.2),
              'server-role: no server joined the scheduler with it')

        procs.append(subprocess.Popen([os.path.join(bin_dir, 'rdmaps-server')],
                                      env=dict(env, RDMAPS_TOKEN=s0),
                                      stdout=open(server_log, 'w'), stderr=subprocess.STDOUT))
        st = refused(lambda: register_as(sched_port, s0, wire.SERVER, 1))
        check(st == -wire.EACCES, 'server-role: server 0\'s token cannot claim server rank 1 '
              '(got %s)' % st)

        # -- other-rank at the scheduler, before worker 0 joined (a free rank)
        for what, fn in [
                ('hello of worker 0', lambda: register_as(sched_port, w1, wire.WORKER, 0)),
                ('hello of any rank', lambda: register_as(sched_port, w1, wire.WORKER,
                                                          wire.ANY_RANK)),
                ('REGISTER for rank 0 after a hello of rank 1',
                 lambda: register_as(sched_port, w1, wire.WORKER, 1, want_rank=0)),
        ]:
            st = refused(fn)
            check(st == -wire.EACCES, 'other-rank: %s refused with -EACCES (got %s)'
                  % (what, st))
        check(log_has(sched_log, 'REGISTER asks for worker rank 0 but the hello proved rank 1'),
              'other-rank: the scheduler logs the REGISTER for another rank')

        legit = Worker(sched_port, w0, 0)
        insider = Worker(sched_port, w1, 1)
        legit.join()
        insider.join()
        check(wire.declare(legit.conn, KEY, N) == 0, 'the legitimate worker declares its key')
        legit.train(5)
        _, host, sport = legit.server

        # -- other-rank at the server: worker 0 is live
        st = refused(lambda: wire.handshake(host, sport, w1, wire.WORKER, 0, check_server=False))
        check(st == -wire.EACCES, 'other-rank: the server refuses worker 1 claiming live '
              'worker 0 with -EACCES, not a twin (got %s)' % st)
        st = refused(lambda: wire.handshake(host, sport, w1, wire.WORKER, 5, check_server=False))
        check(st == -wire.EACCES, 'other-rank: the server refuses worker 1 claiming rank 5 '
              '(got %s)' % st)
        # ... and our client sees the server does not answer worker 0's key
        st = refused(lambda: wire.handshake(host, sport, w1, wire.WORKER, 0))
        check(st == -wire.EACCES, 'other-rank: mutual: the listener\'s MAC for worker 0 does '
              'not match what worker 1 can compute (got %s)' % st)

        # -- other-roles
        for role, rank in [(wire.SCHEDULER, 0), (wire.CTL, 0), (wire.CTL, wire.ANY_RANK)]:
            st = refused(lambda: wire.handshake('127.0.0.1', sched_port, w1, role, rank,
                                                check_server=False))
            check(st == -wire.EACCES, 'other-roles: the scheduler refuses role %d rank %d '
                  'from a worker token (got %s)' % (role, rank, st))
        st = refused(lambda: wire.handshake(host, sport, w1, wire.CTL, 0, check_server=False))
        check(st == -wire.EACCES, 'other-roles: the server refuses rdmaps-ctl\'s identity '
              '(got %s)' % st)
        check(log_has(server_log, 'not an identity this process may check'),
              'other-roles: the server log says its token cannot check that identity')

        # -- replay: worker 0's handshake with the server, captured, sent again
        captured = legit.conn.sent[:wire.HDR.size * 2 + wire.HELLO.size + 32]
        c = wire.Conn(host, sport)
        c.send(captured)
        seen, closed = c.closed()
        check(closed and any(s == -wire.EACCES for _, s, _ in seen),
              'replay: worker 0\'s captured handshake replayed is refused with -EACCES (%s)'
              % [(op, s) for op, s, _ in seen])

        # -- shutdown
        insider.conn.send(wire.frame(wire.OP['SHUTDOWN']))
        seen, closed = insider.conn.closed()
        check(closed, 'shutdown: SHUTDOWN from worker 1 on the data port: connection closed')
        time.sleep(0.3)
        check(procs[1].poll() is None, 'shutdown: the server is still running')
        insider.ctl.send(wire.frame(wire.OP['SHUTDOWN']))
        check(log_has(sched_log, 'worker rank 1') and log_has(sched_log, 'left'),
              'shutdown: SHUTDOWN from worker 1 to the scheduler: worker 1 left')
        time.sleep(0.5)
        legit.train(5)
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
            for name in (sched_log, server_log, fake_log):
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


if __name__ == '__main__':
    sys.exit(main())
