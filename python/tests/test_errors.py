"""Bad input raises TypeError / ValueError naming the key (nothing sent);
the library's failures raise rdmaps.Error subclasses with errno and words."""
import errno
import time

import numpy as np
import pytest

import rdmaps
from conftest import worker, SLOW


@pytest.fixture
def w(cluster):
    c = cluster(servers=1, workers=1)
    with worker(c) as w:
        w.declare([7, 8], [6, 2], init="zeros")
        yield w


def test_wrong_dtype(w):
    with pytest.raises(TypeError, match=r"key 7: dtype must be float32.*format 'd'"):
        w.push(7, np.zeros(6, np.float64))
    with pytest.raises(TypeError, match=r"key 8: dtype must be float32.*format 'i'"):
        w.pull([7, 8], [np.zeros(6, np.float32), np.zeros(2, np.int32)])
    with pytest.raises(TypeError, match="key 7: dtype must be float32"):
        w.push(7, bytearray(24))


def test_non_contiguous(w):
    a = np.zeros(12, np.float32)[::2]
    with pytest.raises(TypeError, match="key 7: the array is not C-contiguous"):
        w.push(7, a)
    with pytest.raises(TypeError, match="key 7: the array is not C-contiguous"):
        w.pull(7, np.zeros((6, 2), np.float32).T[0])


def test_wrong_length_names_key_and_size(w):
    with pytest.raises(ValueError, match="key 7: 5 float32 elements given, the key was declared with 6"):
        w.push(7, np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="key 8: 3 float32 elements given, the key was declared with 2"):
        w.pull([7, 8], [np.zeros(6, np.float32), np.zeros(3, np.float32)])
    with pytest.raises(ValueError, match="declared with 8 in all"):
        w.push([7, 8], np.zeros(9, np.float32))
    with pytest.raises(ValueError, match="2 keys but 3 buffers"):
        w.push([7, 8], [np.zeros(6, np.float32)] * 3)


def test_undeclared_and_bad_keys(w):
    with pytest.raises(ValueError, match=r"key 9 was not declared through this worker"):
        w.push(9, np.zeros(1, np.float32))
    with pytest.raises(ValueError, match="key -1"):
        w.push(-1, np.zeros(1, np.float32))
    with pytest.raises(TypeError, match="keys are ints"):
        w.push("7", np.zeros(6, np.float32))
    with pytest.raises(ValueError, match="empty"):
        w.push([], np.zeros(0, np.float32))


def test_not_a_buffer_and_read_only(w):
    with pytest.raises(TypeError, match=r"key 7: expected a float32 buffer .* got list"):
        w.push(7, [0.0] * 6)
    ro = np.zeros(6, np.float32)
    ro.flags.writeable = False
    w.push(7, ro).wait()  # reading is fine
    with pytest.raises(TypeError, match="key 7: the buffer is read-only"):
        w.pull(7, ro)
    with pytest.raises(TypeError, match="read-only"):
        w.pull(8, memoryview(np.zeros(2, np.float32).tobytes()).cast("f"))
    raw = np.zeros(13, np.uint8)
    with pytest.raises(TypeError, match="key 8: the buffer is not aligned"):
        w.pull(8, raw[1:9].view(np.float32))
    w.push(7, [np.zeros(6, np.float32)]).wait()  # one key, a list of one buffer


def test_declare_errors(w):
    with pytest.raises(rdmaps.Error) as e:
        w.declare(7, 5)  # exists with 6
    assert e.value.errno == errno.EEXIST and "another length" in str(e.value)
    with pytest.raises(ValueError, match="size must be an int > 0"):
        w.declare(9, 0)
    with pytest.raises(ValueError, match="2 keys but 1 sizes"):
        w.declare([9, 10], [3])


def test_wait_timeout_leaves_request_alive(cluster):
    c = cluster(servers=1, workers=2, consistency="bsp")
    from conftest import workers, together
    a, b = workers(c, 2)
    try:
        together(lambda w: (w.declare(1, 4, init="zeros"), w.barrier()), [a, b])
        a.push(1, np.ones(4, np.float32)).wait()
        a.clock()
        out = np.zeros(4, np.float32)
        r = a.pull(1, out)  # clock 1 needs b's clock 0
        t0 = time.monotonic()
        with pytest.raises(rdmaps.TimeoutError) as e:
            r.wait(timeout=0.2)
        assert 0.15 <= time.monotonic() - t0 < 2 * SLOW
        assert e.value.errno == errno.ETIMEDOUT and isinstance(e.value, TimeoutError)
        assert not r.done()
        with pytest.raises(ValueError, match="in flight"):
            r.exception()
        b.push(1, np.ones(4, np.float32)).wait()
        b.clock()
        r.wait(timeout=10 * SLOW)
        assert out.tolist() == [-2.0] * 4
        with pytest.raises(ValueError, match="timeout"):
            r.wait(timeout=-1)
        together(lambda w: w.barrier(), [a, b])
    finally:
        together(lambda w: w.close(), [a, b])


def test_no_scheduler_and_wrong_secret(cluster):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t0 = time.monotonic()
    with pytest.raises((rdmaps.ConnectionError, rdmaps.TimeoutError)) as e:
        rdmaps.Worker(scheduler="127.0.0.1:%d" % port, secret="x", timeout=1)
    assert time.monotonic() - t0 < 10
    assert e.value.errno in (errno.ECONNREFUSED, errno.ETIMEDOUT)
    assert "joining the job" in str(e.value)
    c = cluster(servers=1, workers=1)
    with pytest.raises(rdmaps.PermissionError) as e:
        rdmaps.Worker(scheduler=c.scheduler, secret="not-the-secret", transport=c.transport,
                      timeout=2 * SLOW)
    assert e.value.errno == errno.EACCES and "secret" in str(e.value)
    assert isinstance(e.value, PermissionError)
    with pytest.raises(ValueError, match="transport"):
        rdmaps.Worker(transport="udp")
    with pytest.raises(ValueError, match="timeout"):
        rdmaps.Worker(timeout=0)


def test_error_classes():
    from rdmaps.errors import error_for
    assert type(error_for(errno.ETIMEDOUT, "x")) is rdmaps.TimeoutError
    for code in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN, errno.EHOSTDOWN):
        e = error_for(code, "x")
        assert isinstance(e, rdmaps.ConnectionError) and isinstance(e, ConnectionError)
        assert isinstance(e, OSError) and e.errno == code
    assert isinstance(error_for(errno.EACCES, "x"), PermissionError)
    assert type(error_for(errno.ENOSPC, "x")) is rdmaps.Error
    assert "RDMAPS_SHARD_BYTES" in rdmaps.strerror(-errno.ENOSPC) or rdmaps.strerror(errno.ENOSPC)
