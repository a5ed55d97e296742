#!/usr/bin/python3
"""fmnist-train --curves: the SVG (always) and the PNG (through gnuplot, when
installed) of a short --local run. The SVG must parse as XML and hold three
curves with points, loss falling; the PNG must be a PNG of the asked size.

  fmnist_curves.py BIN_DIR
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

BIN = sys.argv[1]
out = tempfile.mkdtemp(prefix="rps-curves-")
try:
    svg = os.path.join(out, "c.svg")
    subprocess.run([os.path.join(BIN, "fmnist-train"), "--local", "--epochs", "3",
                    "--train-limit", "4096", "--no-progress", "--curves", svg], check=True,
                   timeout=300)
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f".//{ns}polyline")
    if len(lines) != 3:
        sys.exit(f"FAIL: {len(lines)} curves in {svg} (want loss, accuracy, samples/s)")
    pts = [[tuple(map(float, p.split(","))) for p in (pl.get("points") or "").split()]
           for pl in lines]
    if any(len(p) < 3 for p in pts):
        sys.exit(f"FAIL: a curve with fewer than 3 points: {[len(p) for p in pts]}")
    loss = pts[0]  # SVG y grows downwards: a falling loss has a growing y
    if not loss[-1][1] > loss[0][1]:
        sys.exit(f"FAIL: the loss curve does not fall: first {loss[0]}, last {loss[-1]}")
    print(f"SVG: curves of {[len(p) for p in pts]} points, loss falling")
    if shutil.which("gnuplot"):
        png = os.path.join(out, "c.png")
        subprocess.run([os.path.join(BIN, "fmnist-train"), "--local", "--epochs", "2",
                        "--train-limit", "2048", "--no-progress", "--curves", png],
                       check=True, timeout=300)
        with open(png, "rb") as f:
            head = f.read(24)
        w, h = struct.unpack(">II", head[16:24])
        if head[:8] != b"\x89PNG\r\n\x1a\n" or (w, h) != (720, 720):
            sys.exit(f"FAIL: {png} is not a 720x720 PNG ({head[:8]!r}, {w}x{h})")
        print(f"PNG: {w}x{h}, {os.path.getsize(png)} bytes")
    else:
        print("no gnuplot here: the PNG is not checked")
    print("PASS")
finally:
    shutil.rmtree(out, ignore_errors=True)
