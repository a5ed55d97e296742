#!/usr/bin/python3
"""Compressed pushes on the wire (docs/protocol.md "Compressed pushes"),
spoken by tests/attack/wire.py (standard-library Python, written from the
documentation, not the library's encoder) to a real rdmaps-sched and
rdmaps-server on 127.0.0.1 (ASP, SGD, lr 1, zeros: a parameter is minus
the sum of what was applied).

  compress_wire.py BIN_DIR

- One worker pushes six keys back to back, one frame each: float32, fp16,
  bf16, top-k (index + value pairs), sign and sign with a scale per block
  (signb); the values pulled are exactly
  minus the sum of the decoded gradients (every value chosen representable).
- Another worker (with the secret) sends compressed pushes that are wrong:
  a wrong size for each codec, an index out of range, a repeated index, k
  above the count, a signb block of 0, an unknown codec, a compressed ASSIGN. Each is refused
  with an ERROR -EPROTO naming what was wrong, its connection closed, the
  refusal logged, and the first worker's parameters are unchanged.
- The server's /metrics count the frames and bytes per codec exactly.
"""
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'attack'))
import wire  # noqa: E402

SECRET = 'compress-test-' + os.urandom(8).hex()
N = 6
NONE, FP16, BF16, TOPK, RANDK, SIGN, SIGNB = range(7)
NAMES = ['none', 'fp16', 'bf16', 'topk', 'randk', 'sign', 'signb']
KEYS = {NONE: 11, FP16: 12, BF16: 13, TOPK: 14, SIGN: 15, SIGNB: 16}
failures = []


def check(cond, what):
    print(('ok   ' if cond else 'FAIL ') + what, flush=True)
    if not cond:
        failures.append(what)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from free_port import free_port  # noqa: E402  (below the ephemeral range)


def free_metrics_base():
    """A port p with p + 1 free too: the scheduler serves on p, server rank 0
    on p + 1 (a p + 1 taken by another process made the server exit)."""
    return free_port(2)


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


# ---- the codecs, from docs/protocol.md ----
def enc_fp16(v):
    return struct.pack('<%de' % len(v), *v)


def enc_bf16(v):
    # representable values only: the top half of the binary32 is exact
    return b''.join(struct.pack('<f', x)[2:] for x in v)


def enc_sparse(pairs):
    idx = [i for i, _ in pairs]
    val = [x for _, x in pairs]
    return struct.pack('<I%dI%df' % (len(pairs), len(pairs)), len(pairs), *idx, *val)


def enc_sign(scale, signs):
    bits = bytearray((len(signs) + 7) // 8)
    for i, s in enumerate(signs):
        if s > 0:
            bits[i // 8] |= 1 << (i % 8)
    return struct.pack('<f', scale) + bytes(bits)


def enc_signb(block, scales, signs):
    """uint32 block, float32 scale[ceil(n / block)], the bits as sign's"""
    return struct.pack('<I%df' % len(scales), block, *scales) + enc_sign(0, signs)[4:]


GRAD = {
    NONE: ([0.5, -1.25, 2.0, 0.0, 3.5, -0.125], None),
    FP16: ([1.5, -0.25, 1024.0, 0.0009765625, -3.0, 0.75], enc_fp16),
    BF16: ([2.0, -0.5, 3.0, 1.0 / 128, -65536.0, 0.375], enc_bf16),
}
TOPK_PAIRS = [(1, -4.0), (4, 2.5)]
SIGN_SCALE, SIGNS = 0.75, [1, -1, -1, 1, 1, -1]
SIGNB_BLOCK, SIGNB_SCALES, SIGNB_SIGNS = 4, [0.5, 2.0], [-1, 1, 1, -1, -1, 1]


def frames():
    """(key, codec, count, data bytes, decoded gradient) of one push round."""
    out = []
    for c, (g, f) in GRAD.items():
        data = struct.pack('<%df' % N, *g) if f is None else f(g)
        out.append((KEYS[c], c, N, data, g))
    dense = [0.0] * N
    for i, x in TOPK_PAIRS:
        dense[i] = x
    out.append((KEYS[TOPK], TOPK, N, enc_sparse(TOPK_PAIRS), dense))
    out.append((KEYS[SIGN], SIGN, N, enc_sign(SIGN_SCALE, SIGNS),
                [SIGN_SCALE * s for s in SIGNS]))
    out.append((KEYS[SIGNB], SIGNB, N, enc_signb(SIGNB_BLOCK, SIGNB_SCALES, SIGNB_SIGNS),
                [SIGNB_SCALES[i // SIGNB_BLOCK] * s for i, s in enumerate(SIGNB_SIGNS)]))
    return out


def push_frame(conn, key, codec, count, data, clock, req_id, op='PUSH'):
    conn.send(wire.frame(wire.OP[op], wire.PUSH.pack(key, 0, 0, 0, count, clock, 0, 0.0, 0.0) +
                         data, req_id=req_id, flags=codec))


class Worker:
    def __init__(self, sched):
        self.ctl, _ = wire.handshake('127.0.0.1', sched, SECRET, wire.WORKER, wire.ANY_RANK)
        wire.register(self.ctl, wire.WORKER)

    def join(self):
        self.rank, servers = wire.read_map(self.ctl)
        self.server = servers[0]
        self.connect()

    def connect(self):
        _, host, port = self.server
        self.conn, _ = wire.handshake(host, port, SECRET, wire.WORKER, self.rank)


def main():
    bin_dir = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix='rdmaps-compress-')
    sched_port = free_port()
    metrics_base = free_metrics_base()
    env = dict(os.environ)
    for k in list(env):
        if k.startswith('RDMAPS_'):
            del env[k]
    env.update(RDMAPS_SCHEDULER='127.0.0.1:%d' % sched_port, RDMAPS_NUM_SERVERS='1',
               RDMAPS_NUM_WORKERS='2', RDMAPS_SECRET=SECRET, RDMAPS_SHARDS='1',
               RDMAPS_OPTIMIZER='sgd', RDMAPS_LR='1', RDMAPS_INIT='zeros',
               RDMAPS_CONSISTENCY='asp', RDMAPS_HEARTBEAT_TIMEOUT_MS='120000',
               RDMAPS_LOG_LEVEL='info', RDMAPS_TIMEOUT_MS='20000',
               RDMAPS_METRICS_PORT=str(metrics_base), RDMAPS_HTTP_HOST='127.0.0.1')
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
        bad = Worker(sched_port)
        legit.join()
        bad.join()
        for c, key in KEYS.items():
            check(wire.declare(legit.conn, key, N) == 0, 'declare key %d' % key)

        # -- mixed float32 and compressed frames, back to back, twice
        rounds = 2
        for r in range(rounds):
            fr = frames()
            for j, (key, codec, count, data, _) in enumerate(fr):
                push_frame(legit.conn, key, codec, count, data, 0, 100 + j)
            acks = [legit.conn.expect(wire.OP['PUSH_ACK']) for _ in fr]
            check(all(a[0] == 0 for a in acks),
                  'round %d: %d pushes (float32, fp16, bf16, topk, sign, signb) acknowledged '
                  'with 0'
                  % (r, len(fr)))

        want = {}
        for key, codec, count, data, dec in frames():
            st, v = wire.pull(legit.conn, key, N)
            want[key] = [-rounds * x for x in dec]
            check(st == 0 and v == want[key],
                  '%s key %d: pulled %s, exactly %s' % (
                      NAMES[codec], key, v,
                      want[key]))

        # -- wrong compressed pushes: refused, nothing changed
        too_many = struct.pack('<I', N + 1) + b'\0' * (8 * (N + 1))
        cases = [
            ('fp16 of 6 elements in 10 bytes', KEYS[FP16], FP16, N, b'\0' * 10, 'PUSH',
             'exactly 12'),
            ('fp16 of 6 elements in 14 bytes', KEYS[FP16], FP16, N, b'\0' * 14, 'PUSH',
             'exactly 12'),
            ('bf16 of 6 elements in 24 bytes (float32)', KEYS[BF16], BF16, N, b'\0' * 24,
             'PUSH', 'exactly 12'),
            ('sign of 6 elements in 4 bytes', KEYS[SIGN], SIGN, N, b'\0' * 4, 'PUSH',
             'exactly 5'),
            ('topk with one pair short', KEYS[TOPK], TOPK, N, enc_sparse(TOPK_PAIRS)[:-4],
             'PUSH', 'exactly 20'),
            ('topk index 6 of 6 elements', KEYS[TOPK], TOPK, N, enc_sparse([(6, 1.0)]), 'PUSH',
             'out of range'),
            ('randk repeated index', KEYS[TOPK], RANDK, N, enc_sparse([(2, 1.0), (2, 1.0)]),
             'PUSH', 'indices must increase'),
            ('topk k above the count', KEYS[TOPK], TOPK, N, too_many, 'PUSH',
             '7 elements listed'),
            ('signb of 6 elements in blocks of 4 in 12 bytes', KEYS[SIGNB], SIGNB, N,
             enc_signb(SIGNB_BLOCK, SIGNB_SCALES, SIGNB_SIGNS)[:-1], 'PUSH', 'exactly 13'),
            ('signb of 6 elements with one scale for blocks of 4', KEYS[SIGNB], SIGNB, N,
             enc_signb(SIGNB_BLOCK, SIGNB_SCALES[:1], SIGNB_SIGNS), 'PUSH', 'exactly 13'),
            ('signb block of 0', KEYS[SIGNB], SIGNB, N,
             enc_signb(0, SIGNB_SCALES, SIGNB_SIGNS), 'PUSH', 'block of 0'),
            ('unknown codec 9', KEYS[FP16], 9, N, b'\0' * 12, 'PUSH', 'unknown codec'),
            ('compressed ASSIGN', KEYS[FP16], FP16, N, enc_fp16(GRAD[FP16][0]), 'ASSIGN',
             'compressed'),
        ]
        for n, (what, key, codec, count, data, op, text) in enumerate(cases):
            if n:  # the refused one's connection is closed: a new one
                bad.connect()
            push_frame(bad.conn, key, codec, count, data, 0, 7, op=op)
            seen, closed = bad.conn.closed()
            check(closed and any(op_ == wire.OP['ERROR'] and st == -wire.EPROTO
                                 for op_, st, _ in seen),
                  '%s: ERROR -EPROTO and the connection closed (%s)' % (what, seen))
            check(any(text in t for _, _, t in seen) or wait_log(server_log, text, 3),
                  '%s: the reason says "%s"' % (what, text))
        for key in KEYS.values():
            st, v = wire.pull(legit.conn, key, N)
            check(st == 0 and v == want[key],
                  'key %d unchanged by the refused pushes (%s)' % (key, v))
        # /metrics of server rank 0 (port base + 1): frames and bytes per codec
        text = urllib.request.urlopen('http://127.0.0.1:%d/metrics' % (metrics_base + 1),
                                      timeout=10).read().decode()
        metric = {}
        for line in text.splitlines():
            if line.startswith('rdmaps_push_'):
                name, val = line.rsplit(' ', 1)
                metric[name] = float(val)
        want_m = {}
        for key, codec, count, data, dec in frames():
            cname = NAMES[codec]
            want_m['rdmaps_push_frames_total{codec="%s"}' % cname] = rounds
            want_m['rdmaps_push_data_bytes_total{codec="%s"}' % cname] = rounds * len(data)
            want_m['rdmaps_push_raw_bytes_total{codec="%s"}' % cname] = rounds * 4 * N
        bad_m = {k: (metric.get(k), v) for k, v in want_m.items() if metric.get(k) != v}
        check(not bad_m, '/metrics: push frames and bytes per codec exact (wrong: %s)' % bad_m)
        check(all(p.poll() is None for p in procs), 'scheduler and server still running')
        legit.ctl.send(wire.frame(wire.OP['SHUTDOWN']))
        bad.ctl.send(wire.frame(wire.OP['SHUTDOWN']))
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
