#!/usr/bin/python3
"""rdmaps.torch against plain PyTorch: a worker of an rdmaps cluster (run it
under rdmaps-launch with --consistency bsp) trains a small model through
rdmaps.torch.DistributedModel on its share of fixed batches, and computes
the same steps in one process with torch.optim and the same schedule on
the whole batches. Under BSP the servers apply the mean of the workers'
gradients, so after every step the parameters must agree (to float
rounding: the sum's order differs). One worker may run under ASP or SSP: a
pull then sees at least the worker's own pushes, which are all there are.

    torch_equiv.py OPTIMIZER STEPS     (OPTIMIZER: momentum, nesterov, adamw,
                                        or torch-adam: a torch.optim.Adam given to
                                        rt.DistributedOptimizer)

Checks on the way: every worker starts from rank 0's values (the others
build their model from another seed), a layer's forward waits only for its
own pulls, a wrong parameter dtype is refused naming it, and a gradient
pushed twice in one step is refused.
"""
import sys

import torch
import torch.nn.functional as F
from torch import nn

import rdmaps.torch as rt

TOL = 2e-5


def model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(),
                         nn.Linear(16, 4))


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def main():
    kind, steps = sys.argv[1], int(sys.argv[2])
    w = rt.init()
    rank, nw = rt.rank(), rt.num_workers()
    if rt.consistency(w) != "bsp" and nw > 1:
        fail(f"run under --consistency bsp (or with one worker), not {rt.consistency(w)}")
    opt = {"momentum": rt.SGD(0.05, momentum=0.9),
           "nesterov": rt.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
           "adamw": rt.AdamW(1e-2, weight_decay=0.05),
           "torch-adam": rt.Adam(1e-2, betas=(0.8, 0.99), weight_decay=1e-3)}[kind]
    sched = rt.Cosine(total_steps=steps, warmup_steps=2, lr_min=1e-3)

    # the reference: rank 0's initial model, whole batches, torch.optim
    ref = model(1)
    ref_opt = opt.torch(ref.parameters())
    ref_sched = sched.torch_scheduler(ref_opt)

    # a float64 parameter is refused with its name
    try:
        rt.DistributedModel(model(1).double(), opt, schedule=sched, key_base=1000)
        fail("a float64 model was accepted")
    except TypeError as e:
        if "0.weight" not in str(e):
            fail(f"the dtype error does not name the parameter: {e}")

    mine = model(1 if rank == 0 else 7 + rank)  # rank 0's values must win
    if kind.startswith("torch-"):  # Horovod/BytePS style: the user's torch optimizer
        topt = torch.optim.Adam(mine.parameters(), lr=1e-2, betas=(0.8, 0.99),
                                weight_decay=1e-3)
        dopt = rt.DistributedOptimizer(topt, mine, schedule=sched)
        dm = dopt.model
        if dm.spec != rt.spec(opt, sched, "bsp", nw):
            fail(f"DistributedOptimizer's spec {dm.spec} is not {rt.spec(opt, sched, 'bsp', nw)}")
    else:
        dopt, dm = None, rt.DistributedModel(mine, opt, schedule=sched)
    for (n, p), q in zip(mine.named_parameters(), ref.parameters()):
        if not torch.equal(p.data, q.data):
            fail(f"rank {rank}: {n} does not start from rank 0's values")

    g = torch.Generator().manual_seed(123)
    for s in range(steps):
        x = torch.randn(8 * nw, 20, generator=g)
        y = torch.randint(0, 4, (8 * nw,), generator=g)
        # reference step on the whole batch
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
        ref_sched.step()
        # distributed step on this worker's share
        xs, ys = x[rank * 8:(rank + 1) * 8], y[rank * 8:(rank + 1) * 8]
        if dopt:
            dopt.zero_grad()
            F.cross_entropy(mine(xs), ys).backward()  # the hooks are on the module itself
            dopt.step()
        else:
            F.cross_entropy(dm(xs), ys).backward()
            dm.step()
        dm.synchronize()
        for (n, p), q in zip(mine.named_parameters(), ref.parameters()):
            d = (p.data - q.data).abs().max().item()
            if d > TOL:
                fail(f"rank {rank} step {s}: {n} differs from torch.optim by {d:g}")
    # a second gradient in one step (gradient accumulation) is refused
    loss = F.cross_entropy(dm(x[:8]), y[:8])
    loss.backward(retain_graph=True)
    try:
        loss.backward()
        fail("a second backward in one step was accepted")
    except RuntimeError as e:
        if "second gradient" not in str(e):
            fail(f"unexpected error for a second backward: {e}")
    dm.close()
    rt.shutdown()
    print(f"PASS: rank {rank} of {nw}, {kind}, {steps} steps: equal to torch.optim "
          f"within {TOL}", flush=True)


if __name__ == "__main__":
    main()
