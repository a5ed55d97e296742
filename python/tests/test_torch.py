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


def _tiny(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _batch(rank, step):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)


def test_sync_ring_same_parameters_everywhere(cluster):
    """sync='ring': gradients all-reduced and averaged, the optimizer applied
    on every worker; the parameters are the same bits everywhere, those of
    one process that averages the three workers' gradients."""
    import rdmaps.torch as rt
    from conftest import workers, together
    c = cluster(servers=1, workers=3)
    ws = workers(c, 3)
    steps = 4
    tiny = [_tiny(r) for r in range(3)]  # here: torch's seed is global, not per thread

    def run(w):
        model = rt.DistributedModel(tiny[w.rank], rt.SGD(lr=0.1, momentum=0.9), worker=w,
                                    sync="ring")
        start = [p.detach().clone() for p in model.parameters()]
        for s in range(steps):
            x, y = _batch(w.rank, s)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            model.step()
        model.close()
        return start, [p.detach().clone() for p in model.parameters()]

    res = together(run, ws)
    ref = _tiny(0)  # rank 0's start
    for r in range(3):
        for a, b in zip(res[r][0], ref.parameters()):
            assert torch.equal(a, b.detach())  # everyone starts from rank 0's values
        for a, b in zip(res[r][1], res[0][1]):
            assert a.numpy().tobytes() == b.numpy().tobytes()  # the same bits
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        grads = []
        for r in range(3):
            ref.zero_grad()
            x, y = _batch(r, s)
            torch.nn.functional.cross_entropy(ref(x), y).backward()
            grads.append([p.grad.clone() for p in ref.parameters()])
        for i, p in enumerate(ref.parameters()):
            p.grad = sum(g[i] for g in grads) / 3
        opt.step()
    moved = False
    for a, b, s0 in zip(res[0][1], ref.parameters(), res[0][0]):
        assert torch.allclose(a, b.detach(), atol=1e-5), (a, b)
        moved |= not torch.equal(a, s0)
    assert moved
    for w in ws:
        w.close()


def test_sync_and_compress_options(cluster):
    import rdmaps.torch as rt
    from conftest import worker
    c = cluster(servers=1, workers=1, consistency="bsp")
    with worker(c) as w:
        with pytest.raises(ValueError, match="sync='bus'"):
            rt.DistributedModel(_tiny(0), rt.SGD(lr=0.1), worker=w, sync="bus")
        with pytest.raises(ValueError, match="compress='fp16' compresses pushes"):
            rt.DistributedModel(_tiny(0), rt.SGD(lr=0.1), worker=w, sync="ring",
                                compress="fp16")
        # ps with fp16 pushes: the servers get half the bytes
        model = rt.DistributedModel(_tiny(0), rt.SGD(lr=0.1), worker=w, compress="fp16")
        x, y = _batch(0, 0)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        model.step()
        model.synchronize()
        st = w.wire_stats(0)
        assert st["pushes"] == 1 and st["data_bytes"] * 2 == st["raw_bytes"], st
        model.close()
