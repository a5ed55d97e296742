#!/usr/bin/python3
"""A TCP port on 127.0.0.1 free right now, below the ephemeral range.

Binding port 0 gives an ephemeral port, which an outgoing connection of any
other test may take between this check and the real bind (seen as "Address
already in use" when tests run in parallel). Ports below
net.ipv4.ip_local_port_range are never handed out to outgoing connections.

As a program: `free_port.py [RUN]` prints p with p .. p + RUN - 1 free.
As a module: free_port(run=1).
"""
import os
import random
import socket
import sys
import time


def free_port(run=1, host="127.0.0.1"):
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError):
        pass
    rng = random.Random(os.getpid() ^ int(time.time() * 1e6))
    for _ in range(500):
        p = rng.randrange(max(1024, lo - 20000), lo - run)
        socks = []
        try:
            for q in range(p, p + run):
                t = socket.socket()
                socks.append(t)
                t.bind((host, q))
            return p
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise SystemExit(f"free_port: no {run} free port(s) in a row below {lo} on {host}")


if __name__ == "__main__":
    print(free_port(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
