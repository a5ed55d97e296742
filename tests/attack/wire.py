"""The rdmaps wire protocol, written again from docs/protocol.md and
src/proto.h with the standard library only (struct, hmac, hashlib, socket):
the attack tests' own sender, independent of the library's encoder.

Frame header (24 bytes, little-endian): magic u32, version u8, op u8,
flags u16, len u32, req_id u32, status i32, aux u32.

Handshake (src/auth.h): the client sends HELLO (magic, version, role, flags,
rank, channel, 32-byte nonce Nc); the listener answers CHALLENGE (Ns, mac_s);
the client checks mac_s and answers PROOF (mac_c); then HELLO_ACK or ERROR.
A node's token (RDMAPS_TOKEN, docs/security.md "Tokens") in place of the
secret: b"rdmaps-token-v1:ROLE:RANK:hex(K)[:verify-worker:hex(R of workers)]
[:ring:hex(HMAC-SHA256(secret, b"rdmaps-ring-v1"))]";
it gives K for its own identity (and any worker's, with verify-worker) only.
  R     = HMAC-SHA256(secret, b"rdmaps-role-v1" | role u8)      the role's key
  K     = HMAC-SHA256(R, b"rdmaps-id-v2" | rank u32le)          the identity's key
  mac_s = HMAC-SHA256(K, b"rdmaps-auth-v1" | b"S" | hello | Ns)
  mac_c = HMAC-SHA256(K, b"rdmaps-auth-v1" | b"C" | hello | Ns)
"""
import hashlib
import hmac
import os
import socket
import struct

MAGIC = 0x53504452
VERSION = 1

OP = dict(HELLO=1, HELLO_ACK=2, DECLARE=3, DECLARE_ACK=4, PUSH=5, PUSH_ACK=6, PULL=7,
          PULL_RESP=8, CLOCK=9, ERROR=10, SYNC=11, ASSIGN=12, CHALLENGE=13, PROOF=14,
          REGISTER=16, MAP=17, BARRIER=18, BARRIER_DONE=19, HEARTBEAT=20, NODE_DEAD=21,
          SHUTDOWN=22, STATUS=23)
SCHEDULER, SERVER, WORKER, CTL = 0, 1, 2, 3
ANY_RANK = 0xFFFFFFFF

HDR = struct.Struct('<IBBHIIiI')
HELLO = struct.Struct('<IBBHII32s')
HELLO_ACK = struct.Struct('<6IQ')
SHARD_DESC = struct.Struct('<QQII')
REGISTER = struct.Struct('<BBHI64sII')
MAP = struct.Struct('<6I')
NODE = struct.Struct('<IBBHII64s')
DECLARE = struct.Struct('<QIIQIffIQ')
DECLARE_ACK = struct.Struct('<QIIQQ')
PUSH = struct.Struct('<QIIQIIQff')
PULL = struct.Struct('<QIIQII')
CLOCK = struct.Struct('<II')
SYNC = struct.Struct('<II')
HEARTBEAT = struct.Struct('<II4Q')
assert (HDR.size, HELLO.size, HELLO_ACK.size, REGISTER.size, NODE.size, DECLARE.size,
        PUSH.size, PULL.size, HEARTBEAT.size) == (24, 48, 32, 80, 80, 48, 48, 32, 40)

EACCES, EPROTO, ERANGE, EADDRINUSE = 13, 71, 34, 98


class Refused(Exception):
    """The peer answered ERROR (status, text) or closed."""

    def __init__(self, status, text):
        super().__init__('%d %s' % (status, text))
        self.status = status
        self.text = text


def hdr(op, length, req_id=0, status=0, aux=0, flags=0, magic=MAGIC, version=VERSION):
    return HDR.pack(magic, version, op, flags, length, req_id, status, aux)


def frame(op, payload=b'', **kw):
    return hdr(op, len(payload), **kw) + payload


def hello(role, rank, nonce=None, channel=0, magic=MAGIC, version=VERSION):
    return HELLO.pack(magic, version, role, 0, rank, channel, nonce or os.urandom(32))


ROLE_WORDS = {'scheduler': SCHEDULER, 'server': SERVER, 'worker': WORKER, 'ctl': CTL}


def role_key(secret, role):
    return hmac.new(secret.encode(), b'rdmaps-role-v1' + bytes([role]), hashlib.sha256).digest()


def id_key(rkey, rank):
    return hmac.new(rkey, b'rdmaps-id-v2' + struct.pack('<I', rank), hashlib.sha256).digest()


def make_token(secret, role, rank):
    """The token rdmaps-launch gives (role, rank): written again from the docs."""
    words = {SERVER: 'server', WORKER: 'worker'}
    t = 'rdmaps-token-v1:%s:%d:%s' % (words[role], rank, id_key(role_key(secret, role), rank).hex())
    if role == SERVER:
        t += ':verify-worker:' + role_key(secret, WORKER).hex()
    else:
        t += ':ring:' + hmac.new(secret.encode(), b'rdmaps-ring-v1', hashlib.sha256).hexdigest()
    return t


def token_keys(token):
    """(role, rank, K, {role: R}) of a token."""
    f = token.split(':')
    assert f[0] == 'rdmaps-token-v1', token[:20]
    verify = {}
    for i in range(4, len(f), 2):
        if f[i].startswith('verify-'):
            verify[ROLE_WORDS[f[i][len('verify-'):]]] = bytes.fromhex(f[i + 1])
    return ROLE_WORDS[f[1]], int(f[2]), bytes.fromhex(f[3]), verify


def ident_key(secret, role, rank):
    """K of (role, rank) under a job secret, or under a token when it covers
    it; otherwise the best a holder of that token can do: its own key."""
    if secret.startswith('rdmaps-token-v1:'):
        trole, trank, k, verify = token_keys(secret)
        if (role, rank) == (trole, trank):
            return k
        if role in verify:
            return id_key(verify[role], rank)
        return k
    return id_key(role_key(secret, role), rank)


def mac(secret, direction, hello_bytes, nonce_s):
    _, _, role, _, rank, _, _ = HELLO.unpack(hello_bytes)
    return hmac.new(ident_key(secret, role, rank),
                    b'rdmaps-auth-v1' + direction + hello_bytes + nonce_s,
                    hashlib.sha256).digest()


class Conn:
    """One TCP connection speaking frames; `sent` keeps every byte we wrote
    (what an eavesdropper on loopback captures)."""

    def __init__(self, host, port, timeout=10.0):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s.settimeout(timeout)
        self.sent = b''

    def send(self, data):
        self.sent += data
        self.s.sendall(data)

    def recv_exact(self, n):
        buf = b''
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise Refused(-104, 'connection closed')
            buf += chunk
        return buf

    def recv_frame(self):
        h = HDR.unpack(self.recv_exact(HDR.size))
        magic, version, op, flags, length, req_id, status, aux = h
        if magic != MAGIC:
            raise Refused(-EPROTO, 'bad magic %#x' % magic)
        return op, status, aux, req_id, self.recv_exact(length)

    def expect(self, op):
        got, status, aux, req_id, payload = self.recv_frame()
        if got == OP['ERROR']:
            raise Refused(status, payload.decode(errors='replace'))
        if got != op:
            raise Refused(-EPROTO, 'op %d where %d was expected' % (got, op))
        return status, aux, req_id, payload

    def closed(self, timeout=5.0):
        """Frames until the peer closes: (list of (op, status, text), closed?)."""
        self.s.settimeout(timeout)
        seen = []
        try:
            while True:
                op, status, aux, req_id, payload = self.recv_frame()
                seen.append((op, status, payload.decode(errors='replace')))
        except Refused:
            return seen, True
        except (socket.timeout, ConnectionError):
            return seen, False

    def close(self):
        self.s.close()


def handshake(host, port, secret, role, rank, channel=0, check_server=True):
    """Connect and authenticate; returns (conn, hello_ack payload). Raises
    Refused with the listener's status when it refuses us."""
    c = Conn(host, port)
    h = hello(role, rank, channel=channel)
    c.send(frame(OP['HELLO'], h))
    _, _, _, ch = c.expect(OP['CHALLENGE'])
    nonce_s, mac_s = ch[:32], ch[32:]
    if check_server and not hmac.compare_digest(mac_s, mac(secret, b'S', h, nonce_s)):
        c.close()
        raise Refused(-EACCES, 'the listener does not know our secret')
    c.send(frame(OP['PROOF'], mac(secret, b'C', h, nonce_s)))
    _, _, _, ack = c.expect(OP['HELLO_ACK'])
    return c, ack


def register(conn, role, want_rank=ANY_RANK, host='127.0.0.1', port=0):
    conn.send(frame(OP['REGISTER'], REGISTER.pack(role, 0, port, want_rank,
                                                  host.encode().ljust(64, b'\0'),
                                                  os.getpid(), 0)))


def read_map(conn):
    """Frames until the MAP: (your_rank, servers [(rank, host, port)])."""
    while True:
        op, status, aux, req_id, payload = conn.recv_frame()
        if op == OP['ERROR']:
            raise Refused(status, payload.decode(errors='replace'))
        if op != OP['MAP']:
            continue
        your_id, your_rank, ns, nw, nn, epoch = MAP.unpack(payload[:MAP.size])
        servers = []
        for i in range(nn):
            nid, role, alive, port, rank, pid, host = NODE.unpack_from(payload,
                                                                       MAP.size + i * NODE.size)
            if role == SERVER:
                servers.append((rank, host.split(b'\0')[0].decode(), port))
        return your_rank, sorted(servers)


def declare(conn, key, nelems, shard=0, req_id=1):
    conn.send(frame(OP['DECLARE'], DECLARE.pack(key, 0, shard, nelems, 1, 0.0, 0.0, 0, 0),
                    req_id=req_id))
    status, aux, rid, payload = conn.expect(OP['DECLARE_ACK'])
    return status


def push(conn, key, values, clock, shard=0, req_id=2, op='PUSH'):
    data = struct.pack('<%df' % len(values), *values)
    conn.send(frame(OP[op], PUSH.pack(key, 0, shard, 0, len(values), clock, 0, 0.0, 0.0) + data,
                    req_id=req_id))
    status, aux, rid, payload = conn.expect(OP['PUSH_ACK'])
    return status


def pull(conn, key, count, min_clock=0, shard=0, req_id=3):
    conn.send(frame(OP['PULL'], PULL.pack(key, 0, shard, 0, count, min_clock), req_id=req_id))
    status, aux, rid, payload = conn.expect(OP['PULL_RESP'])
    n = (len(payload) - PULL.size) // 4
    return status, list(struct.unpack_from('<%df' % n, payload, PULL.size))


def clock(conn, c, pushes):
    conn.send(frame(OP['CLOCK'], CLOCK.pack(c, len(pushes)) +
                    struct.pack('<%dI' % len(pushes), *pushes)))


def sync(conn, c):
    conn.send(frame(OP['SYNC'], SYNC.pack(c, 0)))
