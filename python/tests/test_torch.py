"""CPU torch tensors, used in place: parameters (requires_grad) too."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import worker  # noqa: E402


def test_torch_tensors_in_place(cluster):
    c = cluster(servers=2, workers=1)
    with worker(c) as w:
        p = torch.nn.Parameter(torch.zeros(3, 4))
        w.declare([1, 2], [12, 5], init="zeros")
        grad = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        w.push(1, grad).wait()
        w.clock()
        w.pull(1, p).wait()  # into the parameter's memory, no copy
        assert p.requires_grad
        assert torch.equal(p.detach(), -grad)
        # a flat tensor with views per key
        flat = torch.zeros(17)
        w.pull([1, 2], [flat[:12], flat[12:]]).wait()
        assert flat[:12].tolist() == (-grad).flatten().tolist()
        w.push([1, 2], torch.ones(17)).wait()


def test_torch_errors_name_the_key(cluster):
    c = cluster(servers=1, workers=1)
    with worker(c) as w:
        w.declare(3, 6, init="zeros")
        with pytest.raises(TypeError, match="key 3: dtype must be float32"):
            w.push(3, torch.zeros(6, dtype=torch.float64))
        with pytest.raises(TypeError, match="key 3: the array is not C-contiguous"):
            w.pull(3, torch.zeros(6, 2).t()[0])
        with pytest.raises(ValueError, match="key 3: 5 float32 elements given, the key was declared with 6"):
            w.pull(3, torch.zeros(5))
        half = torch.zeros(6, dtype=torch.float16)
        with pytest.raises(TypeError, match="key 3: dtype must be float32"):
            w.push(3, half)
        v = np.zeros(6, np.float32)
        w.pull(3, v).wait()
