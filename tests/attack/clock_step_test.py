#!/usr/bin/python3
"""The exact boundary of the clock-step rule (issue 20, "values checked
against state"; server/frame.c clock_check, docs/security.md "Values checked
against state"): against real rdmaps-sched and rdmaps-server processes on
127.0.0.1, a worker of the job (an insider with the secret) spoken by our own
sender (wire.py, not the library's encoder) sends

  CLOCK c   taken iff c <= known + 16 + staleness   (then known = c + 1)
  PUSH at c taken iff c <= known + 16 + staleness   (known unchanged)
  SYNC c    taken iff c <= known + 65536            (then known = c)

where `known` is the highest clock the server knows of the worker and the
job. For each: one beyond the largest step is refused with ERROR -ERANGE,
the connection closed and the refusal logged with the peer's address and the
rule; nothing changes (the next boundary is still counted from the old
`known`, the parameters are unchanged); exactly the largest step is taken.
A second, legitimate worker trains before and after; its values stay exactly
its own pushes.

  clock_step_test.py BIN_DIR
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402
from attack_test import Worker, check, failures, free_port, log_has, wait_log  # noqa: E402
import attack_test  # noqa: E402

STEP = 16          # RPS_SRV_CLOCK_STEP (server/frame.c)
STALENESS = 3      # SSP: the rule is STEP + staleness
SYNC_JUMP = 65536  # RPS_SRV_SYNC_JUMP
KEY, KEY2, N = attack_test.KEY, 8, attack_test.N


def taken(w):
    """True if everything w sent so far was taken: a PULL after it is
    answered (frames of one connection are handled in order; a refusal
    would have been an ERROR and the end of the connection)."""
    try:
        st, _ = wire.pull(w.conn, KEY2, N, req_id=77)
        return st == 0
    except (wire.Refused, ConnectionError, OSError):
        return False


def refused_with(w, what, clock, known, step, server_log, port):
    seen, closed = w.conn.closed()
    check(closed and any(s == -wire.ERANGE and ('%s at clock %d refused' % (what, clock)) in t
                         for _, s, t in seen),
          '%s %d (known %d + %d + 1) is refused with -ERANGE and the connection closed (%s)'
          % (what, clock, known, step, seen))
    check(log_has(server_log, 'closing 127.0.0.1:%d: %s at clock %d refused: worker %d is '
                  'known here at clock %d' % (port, what, clock, w.rank, known)),
          '%s %d: the refusal is logged with the peer\'s address, the worker and its '
          'known clock' % (what, clock))


def main():
    bin_dir = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix='rdmaps-clockstep-')
    sched_port = free_port()
    env = dict(os.environ)
    for k in list(env):
        if k.startswith('RDMAPS_'):
            del env[k]
    env.update(RDMAPS_SCHEDULER='127.0.0.1:%d' % sched_port, RDMAPS_NUM_SERVERS='1',
               RDMAPS_NUM_WORKERS='2', RDMAPS_SECRET=attack_test.SECRET, RDMAPS_SHARDS='1',
               RDMAPS_LR='1', RDMAPS_INIT='zeros', RDMAPS_CONSISTENCY='ssp',
               RDMAPS_STALENESS=str(STALENESS), RDMAPS_HEARTBEAT_TIMEOUT_MS='120000',
               RDMAPS_LOG_LEVEL='info', RDMAPS_TIMEOUT_MS='20000')
    sched_log = os.path.join(tmp, 'sched.log')
    server_log = os.path.join(tmp, 'server.log')
    procs = []
    try:
        procs.append(subprocess.Popen([os.path.join(bin_dir, 'rdmaps-sched')], env=env,
                                      stdout=open(sched_log, 'w'), stderr=subprocess.STDOUT))
        if not wait_log(sched_log, 'listening on'):
            raise RuntimeError('rdmaps-sched did not start')
        procs.append(subprocess.Popen([os.path.join(bin_dir, 'rdmaps-server')], env=env,
                                      stdout=open(server_log, 'w'), stderr=subprocess.STDOUT))
        legit = Worker(sched_port)
        stepper = Worker(sched_port)  # holds the secret: the job's second worker
        legit.join()
        stepper.join()
        check(wire.declare(legit.conn, KEY, N) == 0, 'the legitimate worker declares its key')
        check(wire.declare(stepper.conn, KEY2, N) == 0, 'the stepping worker declares its key')
        legit.train(5)
        step = STEP + STALENESS

        def reconnect():
            """A new connection of the stepping worker; its local port. The
            server sees the last one close asynchronously: while it still
            counts it live, the rank is refused (-EADDRINUSE); try again then."""
            stepper.conn.close()
            end = time.monotonic() + 10
            while True:
                try:
                    stepper.connect()
                    return stepper.conn.s.getsockname()[1]
                except wire.Refused as e:
                    if e.status != -wire.EADDRINUSE or time.monotonic() > end:
                        raise
                    time.sleep(0.01)

        # known = the job's highest clock: the legitimate worker's next
        known = legit.clock
        # -- CLOCK: one beyond the largest step, then exactly the largest step
        port = reconnect()
        wire.clock(stepper.conn, known + step + 1, [0])
        refused_with(stepper, 'CLOCK', known + step + 1, known, step, server_log, port)
        check(log_has(server_log, '(at most %d ahead is taken)' % step),
              'CLOCK: the log states the rule (%d + staleness %d)' % (STEP, STALENESS))
        reconnect()
        wire.clock(stepper.conn, known + step, [0])
        check(taken(stepper), 'CLOCK %d (known %d + %d) is taken' % (known + step, known, step))
        # the refused CLOCK changed nothing: the rule counts from known + step + 1
        # now (had the refused one counted, the next CLOCK below would be taken)
        known = known + step + 1
        port = reconnect()
        wire.clock(stepper.conn, known + step + 1, [0])
        refused_with(stepper, 'CLOCK', known + step + 1, known, step, server_log, port)
        reconnect()
        wire.clock(stepper.conn, known + step, [0])
        check(taken(stepper), 'CLOCK %d (known %d + %d) is taken: the refusal before '
              'changed nothing' % (known + step, known, step))
        known = known + step + 1

        # -- PUSH: the same step; a taken PUSH does not move `known`
        port = reconnect()
        stepper.conn.send(wire.frame(wire.OP['PUSH'], wire.PUSH.pack(
            KEY2, 0, 0, 0, N, known + step + 1, 0, 0, 0) + struct.pack('<4f', 1, 1, 1, 1),
            req_id=9))
        refused_with(stepper, 'PUSH', known + step + 1, known, step, server_log, port)
        reconnect()
        st = wire.push(stepper.conn, KEY2, [0.5] * N, known + step)
        check(st == 0, 'PUSH at clock %d (known %d + %d) is taken (status %d)'
              % (known + step, known, step, st))
        st, v = wire.pull(stepper.conn, KEY2, N)
        check(st == 0 and v == [-0.5] * N,
              'the refused PUSH changed nothing, the taken one applied once (%s)' % v)

        # -- SYNC: at most 65,536 ahead
        port = reconnect()
        wire.sync(stepper.conn, known + SYNC_JUMP + 1)
        refused_with(stepper, 'SYNC', known + SYNC_JUMP + 1, known, SYNC_JUMP, server_log, port)
        reconnect()
        wire.sync(stepper.conn, known + SYNC_JUMP)
        check(taken(stepper), 'SYNC %d (known %d + %d) is taken'
              % (known + SYNC_JUMP, known, SYNC_JUMP))
        # the taken SYNC set known to its clock, the refused one did not (a
        # CLOCK one beyond the step from there names the known clock)
        known = known + SYNC_JUMP
        port = reconnect()
        wire.clock(stepper.conn, known + step + 1, [0])
        refused_with(stepper, 'CLOCK', known + step + 1, known, step, server_log, port)

        # the legitimate worker: unchanged values, and it still trains
        st, v = legit.values()
        check(st == 0 and v == legit.expected(),
              'the legitimate worker\'s values are unchanged by the stepping (%s, want %s)'
              % (v, legit.expected()))
        legit.train(5)
        st, v = legit.values()
        check(st == 0 and v == legit.expected(),
              'the legitimate worker trains on: its values are exactly its own pushes '
              '(%s after %d steps)' % (v, legit.steps))
        check(all(p.poll() is None for p in procs), 'scheduler and server still running')
        stepper.ctl.send(wire.frame(wire.OP['SHUTDOWN']))
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


if __name__ == '__main__':
    sys.exit(main())
