"""``python3 -m rdmaps.launch --servers S --workers W [options] -- script.py [args]``

Start a whole local job -- ``rdmaps-sched``, S ``rdmaps-server`` and W copies
of the script -- exactly as ``rdmaps-launch`` does (this runs it: every option
of ``rdmaps-launch --help`` works), with the script run by this Python
interpreter. Each worker finds RDMAPS_SCHEDULER, RDMAPS_RANK, ... in its
environment, so ``rdmaps.Worker()`` needs no arguments. ``-m module`` runs a
module instead of a script; a program that is not a ``.py`` file is run as
it is.
"""
import os
import sys

from .cluster import find_program


def worker_argv(prog):
    """The workers' command line for what follows ``--``."""
    if not prog:
        raise SystemExit("rdmaps.launch: nothing to run: give `-- script.py [args]`")
    head = prog[0]
    if head == "-m" or head.endswith(".py") or (os.path.isfile(head) and not os.access(head, os.X_OK)):
        return [sys.executable] + prog
    return prog


def build_argv(argv):
    """rdmaps-launch's argv for ``python3 -m rdmaps.launch`` argv (without argv[0])."""
    if "--" not in argv:
        if any(a in ("-h", "--help") for a in argv):
            return [find_program("rdmaps-launch"), "--help"]
        raise SystemExit("usage: python3 -m rdmaps.launch --servers S --workers W [options] "
                         "-- script.py [args]  (rdmaps-launch --help for the options)")
    i = argv.index("--")
    return [find_program("rdmaps-launch")] + argv[:i] + ["--"] + worker_argv(argv[i + 1:])


def main(argv=None):
    args = build_argv(sys.argv[1:] if argv is None else argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(args[0], args)


if __name__ == "__main__":
    main()
