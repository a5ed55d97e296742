#!/usr/bin/python3
"""Build text-train's data set from this machine's package lists.

    extract.py OUT_DIR [--input FILE]

Reads `apt-cache dumpavail` (or FILE, a file in that format) and writes
OUT_DIR/train.tsv, OUT_DIR/test.tsv and OUT_DIR/classes.tsv.

One example per package (the first stanza of a name seen twice): its name, its
Section and the first line of its Description (the short description). The
label is the Section with the archive area removed: "contrib/games",
"non-free/games" and "non-free-firmware/games" all become "games", so Debian
12's sections make 58 classes (contrib and non-free add no section of their
own). A package without a Section or Description is skipped (counted).

Split: a package goes to the test set when FNV-1a 64 of its name modulo 10 is 0
(about 10%), else to the training set: a fixed function of the name, so the
split does not depend on the order of the lists or on the machine's mirrors.

Files (UTF-8, one example a line, fields separated by a tab; tabs and
newlines never occur inside a field):
    train.tsv / test.tsv:  CLASS_INDEX <tab> SECTION <tab> NAME <tab> DESCRIPTION
    classes.tsv:           CLASS_INDEX <tab> SECTION <tab> TRAIN_COUNT <tab> TEST_COUNT
Classes are numbered by name (sorted), so the numbering is stable.
"""
import os
import subprocess
import sys

AREAS = ("contrib/", "non-free/", "non-free-firmware/", "main/")
TEST_MOD = 10


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def section_class(section):
    for a in AREAS:
        if section.startswith(a):
            return section[len(a):]
    return section


def stanzas(lines):
    cur = {}
    for line in lines:
        line = line.rstrip("\n")
        if not line:
            if cur:
                yield cur
            cur = {}
            continue
        if line[0] in " \t":
            continue  # continuation: long descriptions, tags
        k, sep, v = line.partition(":")
        if sep:
            cur.setdefault(k, v.strip())
    if cur:
        yield cur


def clean(s):
    return " ".join(s.replace("\t", " ").split())


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    out = argv[1]
    src = None
    if len(argv) >= 4 and argv[2] == "--input":
        src = argv[3]
    if src:
        with open(src, encoding="utf-8", errors="replace") as f:
            text = f.read()
    else:
        try:
            text = subprocess.run(["apt-cache", "dumpavail"], check=True, capture_output=True,
                                  text=True, errors="replace").stdout
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"extract.py: apt-cache dumpavail failed: {e}; pass --input FILE "
                  "(a file in its format, e.g. /var/lib/dpkg/available)", file=sys.stderr)
            return 1
    seen, rows, skipped = set(), [], 0
    for st in stanzas(text.splitlines()):
        name, sec, desc = st.get("Package"), st.get("Section"), st.get("Description")
        if not name or name in seen:
            continue
        seen.add(name)
        if not sec or not desc:
            skipped += 1
            continue
        rows.append((section_class(sec), name, clean(desc)))
    if not rows:
        print("extract.py: no package with a Section and a Description found", file=sys.stderr)
        return 1
    classes = sorted({r[0] for r in rows})
    idx = {c: i for i, c in enumerate(classes)}
    counts = {c: [0, 0] for c in classes}
    os.makedirs(out, exist_ok=True)
    files = {}
    for part in ("train", "test"):
        files[part] = open(os.path.join(out, part + ".tsv.tmp"), "w", encoding="utf-8")
    for c, name, desc in sorted(rows, key=lambda r: r[1]):
        test = fnv1a64(name) % TEST_MOD == 0
        files["test" if test else "train"].write(f"{idx[c]}\t{c}\t{name}\t{desc}\n")
        counts[c][1 if test else 0] += 1
    for part, f in files.items():
        f.close()
        os.replace(f.name, os.path.join(out, part + ".tsv"))
    with open(os.path.join(out, "classes.tsv.tmp"), "w", encoding="utf-8") as f:
        for c in classes:
            f.write(f"{idx[c]}\t{c}\t{counts[c][0]}\t{counts[c][1]}\n")
    os.replace(os.path.join(out, "classes.tsv.tmp"), os.path.join(out, "classes.tsv"))
    ntr = sum(v[0] for v in counts.values())
    nte = sum(v[1] for v in counts.values())
    print(f"extract.py: {len(rows)} packages ({skipped} skipped without Section or Description), "
          f"{len(classes)} classes, {ntr} train, {nte} test -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
