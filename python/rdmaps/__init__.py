"""rdmaps from Python: workers of an rdmaps parameter server.

::

    import numpy as np, rdmaps

    with rdmaps.Worker() as w:               # RDMAPS_SCHEDULER, RDMAPS_SECRET, ...
        w.declare([0, 1], [784 * 10, 10], init="zeros", optimizer=rdmaps.Optimizer("sgd", lr=0.1))
        w.barrier()
        W, b = np.empty(7840, np.float32), np.empty(10, np.float32)
        gW, gb = np.zeros_like(W), np.zeros_like(b)
        for step in range(100):
            w.pull([0, 1], [W, b]).wait()     # in place, no copy
            ...                                # compute gW, gb
            w.push([0, 1], [gW, gb]).wait()
            w.clock()

Run it with ``python3 -m rdmaps.launch --servers 2 --workers 4 -- train.py``.

Contents: :class:`Worker` (declare, push, pull, pushpull, clock, barrier, ...),
:class:`Request` (what push/pull return: ``wait``, ``done``),
:class:`Init`, :class:`Optimizer` (the job's choices for its keys),
:class:`Scheduler`, :class:`Server`, :class:`Cluster` (start a local job from
Python), the exceptions of :mod:`rdmaps.errors`, and ``python3 -m
rdmaps.launch``.
"""
from .errors import (Error, TimeoutError, ConnectionError, PermissionError,  # noqa: F401
                     InvalidArgumentError)
from .specs import Init, Optimizer
from . import _core
from ._core import Request, Registration  # noqa: F401
from .cluster import Scheduler, Server, InProcessServer, Cluster, find_program  # noqa: F401

__all__ = ["Worker", "Request", "Registration", "Init", "Optimizer", "Error",
           "TimeoutError", "ConnectionError", "PermissionError", "InvalidArgumentError",
           "Scheduler", "Server", "InProcessServer", "Cluster", "find_program", "strerror", "__version__"]

__version__ = _core.HEADER_VERSION
strerror = _core.strerror


def _sizes(keys, sizes):
    if isinstance(keys, int):
        if not isinstance(sizes, int):
            if hasattr(sizes, "__len__") and len(sizes) == 1:
                return [keys], [int(sizes[0])]
            raise TypeError("declare(key, size): one key takes one int size")
        return [keys], [sizes]
    keys = list(keys)
    if isinstance(sizes, int):
        return keys, [sizes] * len(keys)
    return keys, list(sizes)


class Worker(_core.Worker):
    """A worker of an rdmaps job (``struct rps_worker``).

    ``Worker(scheduler=None, transport=None, secret=None, timeout=None)``
    registers with the scheduler, waits until the whole cluster is there and
    connects to every server. Arguments left None come from the environment
    (``RDMAPS_SCHEDULER`` "host:port", ``RDMAPS_TRANSPORT`` "tcp" | "rdma",
    ``RDMAPS_SECRET``, ``RDMAPS_TIMEOUT_MS``; docs/options.md); ``timeout`` is
    in seconds (connect, rendezvous and request timeout).

    A context manager: ``with rdmaps.Worker() as w: ...`` closes it at the end.
    Thread-safe: several Python threads may use one worker; every blocking
    call releases the GIL. Ctrl-C interrupts the join, ``Request.wait()``
    and :meth:`barrier` at once (KeyboardInterrupt; the worker stays usable).

    Keys are ints; each key is declared once with its length in float32
    elements (:meth:`declare`). Values are C-contiguous float32 buffers --
    NumPy arrays, CPU torch tensors, memoryviews -- used in place: push
    reads them, pull writes them, with no copy. :meth:`push`, :meth:`pull`
    and :meth:`pushpull` are asynchronous and return a :class:`Request`
    (``wait(timeout=None)``, ``done()``), which keeps the buffers alive
    until the library is done with them. :meth:`report` sends a figure
    (loss, accuracy, ...) to the scheduler's dashboard.

    Properties: rank, num_workers, num_servers, transport, consistency
    ('bsp' | 'ssp' | 'asp'), staleness_bound, max_staleness, clock_value,
    declared, closed.
    """

    def declare(self, keys, sizes, init=None, optimizer=None):
        """Create keys on their servers (idempotent: every worker may call it).

        keys: an int or a sequence of ints.
        sizes: the length of each key in float32 elements (one int for all
          keys, or one per key).
        init: None (the servers' RDMAPS_INIT), an :class:`Init`, a kind string
          ("zeros", "push", ...), a number (every element that value) or a
          dict of Init's arguments.
        optimizer: None (the servers' default optimizer), an
          :class:`Optimizer`, a kind string ("adam") or a dict
          ({"kind": "adam", "lr": 1e-3}). The spec goes with the keys to
          every server; giving a key another spec than it has raises
          rdmaps.InvalidArgumentError (the servers' reason is logged).

        Raises rdmaps.Error EEXIST when a key exists with another length.
        Blocks until every server answered (the GIL is released).
        """
        keys, sizes = _sizes(keys, sizes)
        init = Init.coerce(init)
        optimizer = Optimizer.coerce(optimizer)
        self._declare(keys, sizes, init._spec() if init is not None else None,
                      optimizer._spec() if optimizer is not None else None)

    def set_optimizer(self, keys, optimizer):
        """Give keys declared through this worker the optimizer spec (the
        rules of declare). ValueError for a key not declared here."""
        if isinstance(keys, int):
            keys = [keys]
        for k in keys:
            self.declared_size(k)
        self._set_optimizer(list(keys), Optimizer.coerce(optimizer)._spec())

    def __repr__(self):
        if self.closed:
            return "<rdmaps.Worker closed>"
        return "<rdmaps.Worker rank %d of %d, %d server(s), %s, %s>" % (
            self.rank, self.num_workers, self.num_servers, self.transport, self.consistency)
