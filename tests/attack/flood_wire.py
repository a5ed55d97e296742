"""Flood helpers of the resource attacks (standard library only), written
from docs/protocol.md and src/proto.h: frames packed in bulk, a non-blocking
sender that never cuts a frame, and closed-connection detection. The
handshake is wire.py's (challenge-response): these tests attack what an
authenticated insider can do, which is what the limits must bound.

Frames: a 24-byte header (magic "RDPS", version 1, op, flags, len, req_id,
status, aux), little-endian, then the op's payload.
"""
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

MAGIC = 0x53504452
VERSION = 1

OP_HELLO, OP_HELLO_ACK, OP_DECLARE, OP_DECLARE_ACK = 1, 2, 3, 4
OP_PUSH, OP_PUSH_ACK, OP_PULL, OP_PULL_RESP = 5, 6, 7, 8
OP_CLOCK, OP_ERROR, OP_SYNC = 9, 10, 11
OP_REGISTER, OP_MAP, OP_BARRIER, OP_BARRIER_DONE, OP_HEARTBEAT, OP_STATUS = 16, 17, 18, 19, 20, 23

ROLE_SERVER, ROLE_WORKER, ROLE_CTL = 1, 2, 3
ANY_RANK = 0xFFFFFFFF

HDR = struct.Struct("<IBBHIIiI")
HEARTBEAT = struct.Struct("<II4Q")
PULL = struct.Struct("<QIIQII")
PUSH = struct.Struct("<QIIQIIQff")


def frame(op, payload=b"", req_id=0, status=0, aux=0, flags=0, length=None):
    """Header + payload; `length` overrides the header's len (partial frames)."""
    n = len(payload) if length is None else length
    return HDR.pack(MAGIC, VERSION, op, flags, n, req_id, status, aux) + payload


def pull(key=0, slice_=0, shard=0, offset=0, count=0, min_clock=0, req_id=0):
    return frame(OP_PULL, PULL.pack(key, slice_, shard, offset, count, min_clock), req_id=req_id)


def push_header(count, key=0, shard=0, clock=0, req_id=0):
    """The header and fixed part of a PUSH of `count` floats, without them."""
    fixed = PUSH.pack(key, 0, shard, 0, count, clock, 0, 0.0, 0.0)
    return frame(OP_PUSH, fixed, req_id=req_id, length=len(fixed) + 4 * count)


def status_request(req_id=0):
    return frame(OP_STATUS, b"", req_id=req_id)


def recv_exact(sock, n, timeout=5.0):
    sock.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def read_frame(sock, timeout=5.0):
    magic, ver, op, flags, n, req_id, status, aux = HDR.unpack(recv_exact(sock, HDR.size, timeout))
    if magic != MAGIC:
        raise ValueError("bad magic 0x%08x" % magic)
    return op, status, recv_exact(sock, n, timeout) if n else b""


def session(host, port, role, rank, secret, timeout=5.0):
    """A socket past the handshake (wire.py's challenge-response: the
    attacker holds the job's secret, as an insider would), or wire.Refused."""
    c, _ = wire.handshake(host, port, secret, role, rank)
    c.s.settimeout(timeout)
    return c.s


class Stream:
    """Sends `unit` (whole frames) again and again on a non-blocking socket
    without ever cutting a frame: what a partial send left is sent first."""

    def __init__(self, sock, unit, frame_len):
        self.sock, self.unit, self.frame_len = sock, unit, frame_len
        self.pending, self.bytes = memoryview(b""), 0

    def pump(self):
        """One send; the number of whole frames sent so far. Raises OSError
        when the peer has gone; returns early (BlockingIOError) when full."""
        if not self.pending:
            self.pending = memoryview(self.unit)
        try:
            k = self.sock.send(self.pending)
        except BlockingIOError:
            return None
        self.pending = self.pending[k:]
        self.bytes += k
        return self.bytes // self.frame_len


def is_closed(sock, wait=0.0):
    """Has the peer closed (EOF or reset)? Reads and drops what is there."""
    end = time.monotonic() + wait
    while True:
        sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            data = sock.recv(1 << 16)
            if not data:
                return True
            continue
        except (socket.timeout, BlockingIOError):
            pass
        except (ConnectionResetError, BrokenPipeError, OSError):
            return True
        if time.monotonic() >= end:
            return False
