"""Exceptions of rdmaps.

Every failure the library reports (a negative errno) becomes an
:class:`Error`, an ``OSError`` with ``errno`` set and a message saying what was
being done and the library's words for the code (``rps_strerror``)::

    try:
        req.wait()
    except rdmaps.ConnectionError as e:   # also a builtins.ConnectionError
        print(e.errno, e.strerror)

Subclasses (each also a subclass of the matching built-in exception):

* :class:`TimeoutError` -- ``ETIMEDOUT``: no answer within the timeout, or
  ``Request.wait(timeout)`` ran out (the request goes on).
* :class:`ConnectionError` -- a server connection broke or a server died
  (``ECONNRESET``, ``EPIPE``, ``ENOTCONN``, ``EHOSTDOWN``, ``ECONNREFUSED``,
  ``ECANCELED``, ``ESHUTDOWN``, network errors of RDMA).
* :class:`PermissionError` -- ``EACCES``: the job's secret was refused.
* :class:`InvalidArgumentError` -- ``EINVAL`` from the library (also a
  ``ValueError``); bad arguments found by the binding itself raise plain
  ``ValueError`` / ``TypeError`` before anything is sent.
"""
import builtins
import errno as _errno

__all__ = ["Error", "TimeoutError", "ConnectionError", "PermissionError",
           "InvalidArgumentError", "error_for"]


class Error(OSError):
    """A failure reported by librdmaps: ``errno`` and the library's message."""


class TimeoutError(Error, builtins.TimeoutError):
    """ETIMEDOUT: the cluster, a server or a request did not answer in time."""


class ConnectionError(Error, builtins.ConnectionError):
    """A server connection broke or a server is gone."""


class PermissionError(Error, builtins.PermissionError):
    """EACCES: the job's secret (RDMAPS_SECRET) was refused."""


class InvalidArgumentError(Error, ValueError):
    """EINVAL from the library (the reason is logged on stderr)."""


_CONNECTION = {
    _errno.ECONNRESET, _errno.EPIPE, _errno.ENOTCONN, _errno.EHOSTDOWN,
    _errno.ECONNREFUSED, _errno.ECONNABORTED, _errno.ECANCELED, _errno.ESHUTDOWN,
    _errno.ENETDOWN, _errno.ENETUNREACH, _errno.ENETRESET, _errno.EHOSTUNREACH,
    _errno.EREMOTEIO,
}


def error_for(code, message):
    """The exception for a positive errno ``code`` and ``message``."""
    code = abs(int(code))
    if code == _errno.ETIMEDOUT:
        cls = TimeoutError
    elif code in _CONNECTION:
        cls = ConnectionError
    elif code == _errno.EACCES:
        cls = PermissionError
    elif code == _errno.EINVAL:
        cls = InvalidArgumentError
    else:
        cls = Error
    return cls(code, message)
