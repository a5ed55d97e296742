#!/usr/bin/python3
"""tls_sniff.py OUT PORT[,PORT...]: copy every TCP payload seen on the
loopback interface to or from one of PORTs into OUT, until SIGTERM.

An AF_PACKET socket on "lo" (root or CAP_NET_RAW); exits 77 when not allowed.
Only the TCP payload bytes are kept (IPv4 and IPv6), in capture order, so a
test can grep them for plaintext (tests/integration/tls.sh, mode wire)."""
import os
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003


def main():
    out_path, ports = sys.argv[1], {int(p) for p in sys.argv[2].split(",")}
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind(("lo", 0))
    except (PermissionError, OSError) as e:
        print(f"tls_sniff: no packet capture on lo ({e}): needs root or CAP_NET_RAW",
              file=sys.stderr)
        sys.exit(77)
    # a job's burst must not overflow the capture socket (drops lose plaintext)
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE (root)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.settimeout(0.2)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    npkt = nbytes = 0
    with open(out_path + ".tmp", "wb") as out:
        open(out_path + ".ready", "w").close()
        stop_at = None
        while True:
            # told to stop: take what is queued, for at most 3 s (other
            # processes' loopback traffic never lets the socket go quiet)
            if stop and stop_at is None:
                stop_at = time.monotonic() + 3
            if stop_at is not None and time.monotonic() > stop_at:
                break
            try:
                frame, addr = s.recvfrom(262144)
            except socket.timeout:
                if stop:
                    break  # told to stop, and what was queued is taken
                continue
            if addr[2] == socket.PACKET_OUTGOING:
                continue  # on lo every packet is seen twice: keep the incoming copy
            if len(frame) < 14:
                continue
            eth_type = struct.unpack("!H", frame[12:14])[0]
            p = frame[14:]
            if eth_type == 0x0800 and len(p) >= 20 and p[9] == 6:
                ihl = (p[0] & 0x0F) * 4
                total = struct.unpack("!H", p[2:4])[0] or len(p)  # 0: a BIG TCP GSO packet
                tcp = p[ihl:total]
            elif eth_type == 0x86DD and len(p) >= 40 and p[6] == 6:
                plen = struct.unpack("!H", p[4:6])[0]
                tcp = p[40:40 + plen]
            else:
                continue
            if len(tcp) < 20:
                continue
            sport, dport = struct.unpack("!HH", tcp[0:4])
            if sport not in ports and dport not in ports:
                continue
            payload = tcp[(tcp[12] >> 4) * 4:]
            if payload:
                out.write(payload)
                npkt += 1
                nbytes += len(payload)
    s.close()
    os.rename(out_path + ".tmp", out_path)
    print(f"tls_sniff: {npkt} segments, {nbytes} payload bytes on ports {sorted(ports)}")


if __name__ == "__main__":
    main()
