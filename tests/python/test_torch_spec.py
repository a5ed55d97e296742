"""rdmaps.torch without a cluster: the optimizer specs given to the servers,
the conversion of schedules to the servers' steps, torch optimizers read
and refused, and the torch scheduler of a schedule (the single-process
reference) following the servers' formula."""
import math

import pytest
import torch

import rdmaps.torch as rt


def params():
    return torch.nn.Linear(3, 2).parameters()


def servers_lr(s, t):
    """The servers' lr_at (src/optim.c), from a spec dict."""
    lr, W = s["lr"], s["warmup_steps"]
    if t < W:
        return lr * (t + 1) / W
    t -= W
    T = s.get("total_steps", 0) - W
    if s["schedule"] == "cosine":
        return s["lr_min"] + (lr - s["lr_min"]) * (1 + math.cos(math.pi * min(t, T) / T)) / 2
    if s["schedule"] == "linear":
        return lr - (lr - s["lr_min"]) * min(t, T) / T
    if s["schedule"] == "step":
        return lr * s["gamma"] ** (t // s["step_size"])
    if s["schedule"] == "exp":
        return lr * s["gamma"] ** t
    return lr


@pytest.mark.parametrize("sched", [rt.Constant(5), rt.Cosine(100, 10, 0.001),
                                   rt.Linear(100, 0, 0.01), rt.Step(30, 0.5, 3),
                                   rt.Exponential(0.97, 4)])
def test_torch_scheduler_is_the_servers_schedule(sched):
    opt = torch.optim.SGD(params(), lr=0.1)
    ts = sched.torch_scheduler(opt)
    s = rt.spec(rt.SGD(0.1), sched, "bsp", 4)
    for t in range(120):
        assert opt.param_groups[0]["lr"] == pytest.approx(servers_lr(s, t), rel=1e-12)
        assert sched.lr_at(0.1, t) == pytest.approx(servers_lr(s, t), rel=1e-12)
        opt.step()
        ts.step()


def test_bsp_spec_is_in_steps():
    s = rt.spec(rt.SGD(0.1, momentum=0.9), rt.Cosine(2340, 234), "bsp", 4)
    assert s == {"kind": "momentum", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.0,
                 "clip_norm": 0.0, "schedule": "cosine", "total_steps": 2340,
                 "warmup_steps": 234, "lr_min": 0.0, "staleness_lr": False}


@pytest.mark.parametrize("cons", ["asp", "ssp"])
def test_async_spec_counts_pushes(cons):
    # every push is a step: W per clock; momentum 1 - (1 - m)(W + 1)/2
    s = rt.spec(rt.SGD(0.1, momentum=0.9, nesterov=True), rt.Cosine(100, 10), cons, 4)
    assert (s["kind"], s["total_steps"], s["warmup_steps"]) == ("nesterov", 400, 40)
    assert s["momentum"] == pytest.approx(0.75)
    s = rt.spec(rt.SGD(0.1, momentum=0.9), rt.Cosine(100), cons, 4, async_momentum=False)
    assert s["momentum"] == 0.9
    s = rt.spec(rt.Adam(), rt.Step(10, 0.5), cons, 2)
    assert (s["step_size"], s["gamma"]) == (20, 0.5)
    s = rt.spec(rt.Adam(), rt.Exponential(0.81), cons, 2)
    assert s["gamma"] == pytest.approx(0.9)  # two pushes per clock
    assert "momentum" not in s


def test_from_torch():
    assert rt.from_torch(torch.optim.SGD(params(), lr=0.1)).kind == "sgd"
    o = rt.from_torch(torch.optim.SGD(params(), lr=0.2, momentum=0.8, nesterov=True,
                                      weight_decay=1e-4))
    assert (o.kind, o.lr, o.momentum, o.weight_decay) == ("nesterov", 0.2, 0.8, 1e-4)
    o = rt.from_torch(torch.optim.AdamW(params(), lr=1e-3, betas=(0.8, 0.9), eps=1e-6))
    assert (o.kind, o.betas, o.eps, o.weight_decay) == ("adamw", (0.8, 0.9), 1e-6, 0.01)
    assert rt.from_torch(torch.optim.Adagrad(params(), lr=0.1)).kind == "adagrad"


@pytest.mark.parametrize("make, words", [
    (lambda: torch.optim.SGD(params(), lr=0.1, momentum=0.9, dampening=0.1), "dampening"),
    (lambda: torch.optim.Adam(params(), amsgrad=True), "amsgrad"),
    (lambda: torch.optim.Adam(params(), maximize=True), "maximize"),
    (lambda: torch.optim.RMSprop(params()), "RMSprop"),
])
def test_from_torch_refuses_what_the_servers_do_not_run(make, words):
    with pytest.raises(ValueError, match=words):
        rt.from_torch(make())


@pytest.mark.parametrize("make, words", [
    (lambda: rt.SGD(0), "lr must be > 0"),
    (lambda: rt.SGD(0.1, momentum=1.0), "momentum"),
    (lambda: rt.SGD(0.1, nesterov=True), "nesterov needs momentum"),
    (lambda: rt.Adam(betas=(1.0, 0.9)), "betas"),
    (lambda: rt.Cosine(100, 100), "warmup_steps 100 must be below total_steps 100"),
    (lambda: rt.Cosine(0), "total_steps"),
    (lambda: rt.Step(0), "step_size"),
    (lambda: rt.Exponential(1.5), "gamma"),
])
def test_bad_settings_say_what_is_wrong(make, words):
    with pytest.raises(ValueError, match=words):
        make()


def test_lr_min_above_lr_is_capped():
    s = rt.spec(rt.SGD(0.1), rt.Cosine(10, lr_min=1.0), "bsp", 1)
    assert s["lr_min"] == 0.1


def test_no_worker_before_init():
    with pytest.raises(RuntimeError, match="init"):
        rt.worker()
