"""rdmaps.torch: train an ordinary PyTorch model through rdmaps.

The parameters live on the servers and the optimizer (with its learning-rate
schedule) runs there; each worker computes gradients. A single-process
script changes by about five lines (docs/python.md)::

    import rdmaps.torch as rt

    rt.init()                                   # join the cluster (rdmaps-launch)
    model = rt.DistributedModel(model, rt.SGD(lr=0.1, momentum=0.9),
                                schedule=rt.Cosine(total_steps=steps, warmup_steps=steps // 10))
    for x, y in batches:                        # this worker's share of the data
        loss = F.cross_entropy(model(x), y)
        loss.backward()                         # pushes each gradient as soon as it is ready
        model.step()                            # ends the clock, starts the pulls

What happens underneath:

- every parameter is one key (``key_base + i`` in ``named_parameters()``
  order); the library cuts large keys into slices spread over the servers
  (``RDMAPS_SLICE_BYTES``);
- rank 0's initial values are what every worker starts from: rank 0 assigns
  them to the servers, every worker pulls them after a barrier;
- ``loss.backward()`` pushes each parameter's gradient from its gradient
  accumulator's hook the moment it is final, so communication overlaps the
  rest of the backward pass; the gradient tensor itself is sent (zero copy);
- ``model.step()`` ends the worker's clock and pulls the next values straight
  into ``param.data`` (zero copy); each layer's forward pre-hook waits only for
  that layer's own parameters, so the forward pass starts while later layers
  are still on their way;
- BSP, SSP or ASP is the servers' choice (``rdmaps-launch --consistency``).
  Schedules are given in steps (``model.step()`` calls, as a single-process
  script counts them) and turned into the servers' optimizer steps: one per
  clock under BSP, one per worker's push under ASP and SSP.

The optimizer classes (:class:`SGD`, :class:`Adam`, :class:`AdamW`,
:class:`Adagrad`) and schedules (:class:`Constant`, :class:`Cosine`,
:class:`Linear`, :class:`Step`, :class:`Exponential`) follow the servers'
formulas (``include/rdmaps/types.h``), which are PyTorch's: ``.torch(params)``
and ``.torch_scheduler(opt)`` build the same optimizer in plain PyTorch for a
single-process reference.
"""

import atexit
import math
from time import perf_counter as _now

import torch

import rdmaps

__all__ = [
    "init", "shutdown", "worker", "rank", "num_workers",
    "SGD", "Adam", "AdamW", "Adagrad",
    "Constant", "Cosine", "Linear", "Step", "Exponential",
    "DistributedModel", "DistributedOptimizer",
]

_worker = None
_owned = False


# ---------------------------------------------------------------------------
# the worker of this process

def init(worker=None, **kwargs):
    """Join the cluster (once per process) and return the ``rdmaps.Worker``.

    With no arguments the worker takes everything from the environment that
    ``rdmaps-launch`` / ``python3 -m rdmaps.launch`` sets (RDMAPS_SCHEDULER,
    ...); keyword arguments go to ``rdmaps.Worker`` (scheduler, transport,
    secret, timeout). Pass ``worker`` to use one you created yourself.
    """
    global _worker, _owned
    if worker is not None:
        _worker, _owned = worker, False
        return _worker
    if _worker is None:
        _worker, _owned = rdmaps.Worker(**kwargs), True
        atexit.register(_leave)
    return _worker


def _leave():
    """At exit: a script that never called shutdown() still leaves the cluster
    cleanly (no barrier: the others may be gone)."""
    if _worker is not None and _owned:
        shutdown(barrier=False)


def worker():
    """The worker of :func:`init` (RuntimeError before it)."""
    if _worker is None:
        raise RuntimeError("rdmaps.torch: call rdmaps.torch.init() first")
    return _worker


def shutdown(barrier=True):
    """Wait for every worker (barrier) and leave the cluster."""
    global _worker, _owned
    if _worker is None:
        return
    w, owned = _worker, _owned
    _worker, _owned = None, False
    try:
        if barrier:
            w.barrier()
    finally:
        if owned:
            w.close()


def rank():
    """This worker's rank (0 .. num_workers() - 1)."""
    return worker().rank


def num_workers():
    """Workers in the job."""
    return worker().num_workers


def consistency(w=None):
    """'bsp', 'ssp' or 'asp': the servers' consistency model."""
    return (w if w is not None else worker()).consistency


def staleness_bound(w=None):
    """The SSP bound s of the servers (0 under BSP and ASP)."""
    return (w if w is not None else worker()).staleness_bound


# ---------------------------------------------------------------------------
# schedules: lr_t = lr * factor(t), t counted in steps of the job (clocks)

class _Schedule:
    name = "constant"

    def __init__(self, warmup_steps=0):
        if int(warmup_steps) != warmup_steps or warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, not {warmup_steps!r}")
        self.warmup_steps = int(warmup_steps)

    def _after(self, lr, t):  # lr at t steps after the warm-up
        return lr

    def lr_at(self, lr, t):
        """The learning rate of step t (0-based), as the servers compute it."""
        w = self.warmup_steps
        if t < w:
            return lr * (t + 1) / w
        return self._after(lr, t - w)

    def fields(self, per_clock):
        """The schedule's fields of the servers' spec, steps times per_clock."""
        return {"schedule": self.name, "warmup_steps": self.warmup_steps * per_clock}

    def torch_scheduler(self, optimizer):
        """A torch LambdaLR giving ``optimizer`` this schedule (call its
        ``step()`` after each ``optimizer.step()``)."""
        base = optimizer.param_groups[0]["lr"]
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda t: self.lr_at(base, t) / base)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Constant(_Schedule):
    """The optimizer's lr throughout (after an optional linear warm-up)."""


class _Decay(_Schedule):
    def __init__(self, total_steps, warmup_steps=0, lr_min=0.0):
        super().__init__(warmup_steps)
        if int(total_steps) != total_steps or total_steps < 1:
            raise ValueError(f"total_steps must be an integer >= 1, not {total_steps!r}")
        if self.warmup_steps >= total_steps:
            raise ValueError(f"warmup_steps {warmup_steps} must be below total_steps "
                             f"{total_steps} (the whole run, warm-up included)")
        if lr_min < 0:
            raise ValueError(f"lr_min must be >= 0, not {lr_min!r}")
        self.total_steps = int(total_steps)
        self.lr_min = float(lr_min)

    def fields(self, per_clock):
        f = super().fields(per_clock)
        f.update(total_steps=self.total_steps * per_clock, lr_min=self.lr_min)
        return f


class Cosine(_Decay):
    """Cosine from lr to lr_min over total_steps (warm-up included)."""
    name = "cosine"

    def _after(self, lr, t):
        T = self.total_steps - self.warmup_steps
        lo = min(self.lr_min, lr)
        return lo + (lr - lo) * (1 + math.cos(math.pi * min(t, T) / T)) / 2


class Linear(_Decay):
    """Linear from lr to lr_min over total_steps (warm-up included)."""
    name = "linear"

    def _after(self, lr, t):
        T = self.total_steps - self.warmup_steps
        lo = min(self.lr_min, lr)
        return lr - (lr - lo) * min(t, T) / T


class Step(_Schedule):
    """lr * gamma ** (t // step_size)."""
    name = "step"

    def __init__(self, step_size, gamma=0.1, warmup_steps=0):
        super().__init__(warmup_steps)
        if int(step_size) != step_size or step_size < 1:
            raise ValueError(f"step_size must be an integer >= 1, not {step_size!r}")
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], not {gamma!r}")
        self.step_size, self.gamma = int(step_size), float(gamma)

    def _after(self, lr, t):
        return lr * self.gamma ** (t // self.step_size)

    def fields(self, per_clock):
        f = super().fields(per_clock)
        f.update(step_size=self.step_size * per_clock, gamma=self.gamma)
        return f


class Exponential(_Schedule):
    """lr * gamma ** t."""
    name = "exp"

    def __init__(self, gamma, warmup_steps=0):
        super().__init__(warmup_steps)
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], not {gamma!r}")
        self.gamma = float(gamma)

    def _after(self, lr, t):
        return lr * self.gamma ** t

    def fields(self, per_clock):
        f = super().fields(per_clock)
        f.update(gamma=self.gamma ** (1.0 / per_clock))
        return f


# ---------------------------------------------------------------------------
# optimizers: what the servers run, named and parametrised as in torch.optim

class _Optimizer:
    kind = None

    def __init__(self, lr, weight_decay=0.0, clip_norm=0.0):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, not {lr!r}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, not {weight_decay!r}")
        if clip_norm < 0:
            raise ValueError(f"clip_norm must be >= 0 (0: off), not {clip_norm!r}")
        self.lr, self.weight_decay, self.clip_norm = float(lr), float(weight_decay), float(clip_norm)

    def fields(self):
        return {"kind": self.kind, "lr": self.lr, "weight_decay": self.weight_decay,
                "clip_norm": self.clip_norm}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class SGD(_Optimizer):
    """SGD with optional momentum / Nesterov momentum (torch.optim.SGD with
    dampening 0): v = momentum * v + g; w -= lr * v (Nesterov: lr * (g + momentum * v))."""

    def __init__(self, lr, momentum=0.0, nesterov=False, weight_decay=0.0, clip_norm=0.0):
        super().__init__(lr, weight_decay, clip_norm)
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), not {momentum!r}")
        if nesterov and momentum <= 0:
            raise ValueError("nesterov needs momentum > 0")
        self.momentum, self.nesterov = float(momentum), bool(nesterov)

    @property
    def kind(self):
        if self.momentum == 0:
            return "sgd"
        return "nesterov" if self.nesterov else "momentum"

    def fields(self):
        f = super().fields()
        f["momentum"] = self.momentum
        return f

    def torch(self, params):
        return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum,
                               nesterov=self.nesterov, weight_decay=self.weight_decay)


class Adam(_Optimizer):
    """Adam (L2 weight decay added to the gradient, as torch.optim.Adam)."""
    kind = "adam"

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, clip_norm=0.0):
        super().__init__(lr, weight_decay, clip_norm)
        b1, b2 = betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"betas must be in [0, 1), not {betas!r}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, not {eps!r}")
        self.betas, self.eps = (float(b1), float(b2)), float(eps)

    def fields(self):
        f = super().fields()
        f.update(beta1=self.betas[0], beta2=self.betas[1], eps=self.eps)
        return f

    def torch(self, params):
        return torch.optim.Adam(params, lr=self.lr, betas=self.betas, eps=self.eps,
                                weight_decay=self.weight_decay)


class AdamW(Adam):
    """Adam with decoupled weight decay: w -= lr_t * weight_decay * w."""
    kind = "adamw"

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, clip_norm=0.0):
        super().__init__(lr, betas, eps, weight_decay, clip_norm)

    def torch(self, params):
        return torch.optim.AdamW(params, lr=self.lr, betas=self.betas, eps=self.eps,
                                 weight_decay=self.weight_decay)


class Adagrad(_Optimizer):
    """AdaGrad: s += g * g; w -= lr * g / (sqrt(s) + eps)."""
    kind = "adagrad"

    def __init__(self, lr=0.01, eps=1e-8, weight_decay=0.0, clip_norm=0.0):
        super().__init__(lr, weight_decay, clip_norm)
        if not eps > 0:
            raise ValueError(f"eps must be > 0, not {eps!r}")
        self.eps = float(eps)

    def fields(self):
        f = super().fields()
        f["eps"] = self.eps
        return f

    def torch(self, params):
        return torch.optim.Adagrad(params, lr=self.lr, eps=self.eps,
                                   weight_decay=self.weight_decay)


def from_torch(optimizer):
    """The servers' optimizer equal to a torch.optim optimizer's (its first
    parameter group): SGD, Adam, AdamW or Adagrad. ValueError for anything
    the servers do not run (other classes, dampening, amsgrad, ...)."""
    g = optimizer.param_groups[0]
    for other in optimizer.param_groups[1:]:
        if {k: v for k, v in other.items() if k != "params"} != \
           {k: v for k, v in g.items() if k != "params"}:
            raise ValueError("rdmaps.torch: parameter groups with different settings: "
                             "the servers run one optimizer per model")
    name = type(optimizer).__name__
    if g.get("maximize"):
        raise ValueError(f"rdmaps.torch: {name}(maximize=True) is not supported by the "
                         f"servers: negate the loss")
    if isinstance(optimizer, torch.optim.SGD):
        if g.get("dampening", 0):
            raise ValueError("rdmaps.torch: SGD dampening is not supported by the servers")
        return SGD(g["lr"], g["momentum"], g["nesterov"], g["weight_decay"])
    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        if g.get("amsgrad"):
            raise ValueError(f"rdmaps.torch: {name}(amsgrad=True) is not supported by the servers")
        cls = AdamW if isinstance(optimizer, torch.optim.AdamW) else Adam
        return cls(g["lr"], g["betas"], g["eps"], g["weight_decay"])
    if isinstance(optimizer, torch.optim.Adagrad):
        if g.get("lr_decay", 0) or g.get("initial_accumulator_value", 0):
            raise ValueError("rdmaps.torch: Adagrad lr_decay / initial_accumulator_value "
                             "are not supported by the servers")
        return Adagrad(g["lr"], g["eps"], g["weight_decay"])
    raise ValueError(f"rdmaps.torch: the servers do not run {name}: use SGD, Adam, AdamW "
                     f"or Adagrad")


def spec(optimizer, schedule=None, consistency="bsp", workers=1, async_momentum=True,
         staleness_lr=False):
    """The servers' optimizer spec (a dict of struct rps_optim_opts' fields)
    for ``optimizer`` and ``schedule`` given in steps of the job, on
    ``workers`` workers under ``consistency``.

    Under ASP/SSP every push is an optimizer step of its own, so the schedule's
    steps are multiplied by the number of workers; with ``async_momentum``
    (and W > 1) the momentum is shortened to 1 - (1 - m)(W + 1) / 2, which
    keeps the total momentum about the same (examples/fmnist/recipe.h)."""
    if isinstance(optimizer, torch.optim.Optimizer):
        optimizer = from_torch(optimizer)
    schedule = schedule if schedule is not None else Constant()
    per_clock = 1 if consistency == "bsp" else max(1, int(workers))
    f = optimizer.fields()
    if "momentum" in f and consistency != "bsp" and workers > 1 and async_momentum:
        f["momentum"] = max(0.0, 1.0 - (1.0 - f["momentum"]) * (workers + 1) / 2.0)
    f.update(schedule.fields(per_clock))
    if "lr_min" in f:  # the floor of cosine / linear, as their lr_at: at most lr
        f["lr_min"] = min(f["lr_min"], f["lr"])
    f["staleness_lr"] = bool(staleness_lr)
    return f


def describe(s):
    """One line: 'momentum lr 0.1 momentum 0.9, cosine over 2340 steps after 234 warm-up steps'."""
    d = f"{s['kind']} lr {s['lr']:g}"
    if s["kind"] in ("momentum", "nesterov"):
        d += f" momentum {s['momentum']:.4g}"
    if s.get("weight_decay"):
        d += f" weight decay {s['weight_decay']:g}"
    d += f", {s['schedule']}"
    if s.get("total_steps"):
        d += f" over {s['total_steps']} steps"
    if s.get("warmup_steps"):
        d += f" after {s['warmup_steps']} warm-up steps"
    if s.get("staleness_lr"):
        d += ", lr / (1 + staleness)"
    return d


# ---------------------------------------------------------------------------
# the model

def _note(e, text):
    """Add what rdmaps.torch was doing to an exception (kept as it is: type,
    errno, message)."""
    if hasattr(e, "add_note"):  # Python >= 3.11
        e.add_note(text)


def _as_array(t):
    """A NumPy view of a CPU float32 contiguous tensor (same memory, no copy)."""
    return t.detach().numpy()


class DistributedModel(torch.nn.Module):
    """Wrap ``module`` so that its parameters live on the rdmaps servers.

    Arguments:
      module: an ordinary ``torch.nn.Module`` (CPU, float32 parameters). Rank
        0's parameter values are what every worker starts from.
      optimizer: what the servers run: :class:`SGD`, :class:`Adam`,
        :class:`AdamW`, :class:`Adagrad`, or a ``torch.optim`` optimizer of
        those kinds (its settings are read, it is not used).
      schedule: the learning-rate schedule in steps (``step()`` calls):
        :class:`Constant` (default), :class:`Cosine`, :class:`Linear`,
        :class:`Step`, :class:`Exponential`.
      worker: an ``rdmaps.Worker`` (default: :func:`init`'s).
      key_base: the first key (parameters take key_base, key_base + 1, ...).
      average: divide each gradient by the number of workers before it is
        pushed, so a BSP clock applies the mean (as one process with the
        global batch would).
      async_momentum, staleness_lr: see :func:`spec`.
      sync: ``"ps"`` (default): the parameters live on the servers, which run
        the optimizer, as above. ``"ring"``: the servers are not used; at
        ``step()`` the gradients are all-reduced among the workers
        (``Worker.allreduce``, a ring, docs/allreduce.md), averaged (with
        ``average``), and every worker applies the same optimizer and schedule
        locally (``optimizer.torch(params)``), so the parameters stay the same
        bits on every worker: what ``fmnist-train --sync ring`` does. Rank 0's
        initial values are what every worker starts from here too.
      compress: ``None`` / ``"none"`` (default), ``"fp16"``, ``"bf16"``,
        ``"sign"``, ``"sign:B"``, ``"topk:R"``, ``"randk:R"`` (options
        ``,momentum=M``, ``,warmup=STEPS,from=R0``): every gradient is pushed
        compressed (``Worker.set_compression``, docs/compression.md); a push
        to the servers only (``sync="ring"`` sends float32: ValueError).
      pull_precision: ``None`` / ``"fp32"`` (default), ``"fp16"``, ``"bf16"``:
        the parameters are pulled from the servers' rounded 2-byte copy (half
        the bytes; ``Worker.set_pull_precision``, docs/compression.md
        "Low-precision pulls"); the servers' optimizer stays float32
        (``sync="ring"`` pulls nothing: ValueError).

    Use: ``loss.backward()`` then ``model.step()``, once per batch. Do not
    modify ``param.data`` yourself: pulls write into it. ``synchronize()``
    waits for every value in flight (before saving ``state_dict()``).
    """

    def __init__(self, module, optimizer, schedule=None, worker=None, key_base=0,
                 average=True, async_momentum=True, staleness_lr=False, sync="ps",
                 compress=None, pull_precision=None):
        super().__init__()
        if sync not in ("ps", "ring"):
            raise ValueError(f"rdmaps.torch: sync={sync!r}: 'ps' (the servers run the "
                             f"optimizer) or 'ring' (all-reduce, the optimizer here)")
        if compress == "none":
            compress = None
        if compress is not None and sync == "ring":
            raise ValueError(f"rdmaps.torch: compress={compress!r} compresses pushes to the "
                             f"servers; sync='ring' all-reduces float32: use sync='ps'")
        if pull_precision == "fp32":
            pull_precision = None
        if pull_precision is not None and pull_precision not in ("fp16", "bf16"):
            raise ValueError(f"rdmaps.torch: pull_precision={pull_precision!r}: 'fp32' "
                             f"(default), 'fp16' or 'bf16'")
        if pull_precision is not None and sync == "ring":
            raise ValueError(f"rdmaps.torch: pull_precision={pull_precision!r} reads the "
                             f"servers' copy; sync='ring' pulls nothing: use sync='ps'")
        self.pull_precision = pull_precision
        if isinstance(optimizer, torch.optim.Optimizer):
            optimizer = from_torch(optimizer)
        if sync == "ring" and getattr(optimizer, "clip_norm", 0.0):
            raise ValueError("rdmaps.torch: clip_norm is applied by the servers; "
                             "sync='ring' runs torch's optimizer, which has none")
        self.sync, self.compress = sync, compress
        self.module = module
        w = worker if worker is not None else init()
        self._w = w
        self.rank, self.num_workers = w.rank, w.num_workers
        self.num_servers, self.consistency = w.num_servers, w.consistency
        self.spec = spec(optimizer, schedule, self.consistency, self.num_workers,
                         async_momentum, staleness_lr)
        self._scale = 1.0 / self.num_workers if average else 1.0

        self._names, self._params = [], []
        for name, p in module.named_parameters():
            if not p.requires_grad:
                continue
            if p.device.type != "cpu" or p.dtype != torch.float32:
                raise TypeError(f"rdmaps.torch: parameter {name} is {p.dtype} on {p.device}: "
                                f"rdmaps stores float32 CPU tensors (model.float().cpu())")
            if not p.data.is_contiguous():
                p.data = p.data.contiguous()
            self._names.append(name)
            self._params.append(p)
        if not self._params:
            raise ValueError("rdmaps.torch: the model has no trainable parameter")
        n = len(self._params)
        self._keys = [key_base + i for i in range(n)]
        self._index = {id(p): i for i, p in enumerate(self._params)}
        self._vals = [_as_array(p.data).reshape(-1) for p in self._params]
        self._pull = [None] * n   # request of the values in flight into param i
        self._push = [None] * n   # request of the gradient in flight of param i
        self._pushed = [False] * n
        self._order = []          # parameters in the order forward uses them
        self._seen = set()
        self._closed = False
        self.steps = 0
        # seconds spent in rdmaps calls on the training thread (comm_times())
        self._t_push = self._t_pull_wait = self._t_step = 0.0

        if sync == "ring":
            self._ring_setup(optimizer, schedule)
        else:
            self._declare()
            self._start_values()
        self._hook()

    # -- set-up --

    def _declare(self):
        for i, (k, v) in enumerate(zip(self._keys, self._vals)):
            try:
                self._w.declare(k, v.size, optimizer=self.spec)
            except Exception as e:  # the binding's exception, with what it was for
                _note(e, f"rdmaps.torch: declaring parameter {self._names[i]} (key {k}, "
                         f"{v.size} floats)")
                raise
        if self.compress is not None:
            self._w.set_compression(self._keys, self.compress)
        if self.pull_precision is not None:
            self._w.set_pull_precision(self._keys, self.pull_precision)
        # pulls straight into param.data (over RDMA: no bounce buffer, no
        # copy); an optimisation only: 64 buffers per worker at most
        self._regs = []
        for v in self._vals:
            try:
                self._regs.append(self._w.register(v))
            except rdmaps.Error:
                break

    def _ring_setup(self, optimizer, schedule):
        """sync='ring': rank 0's values to everyone (an all-reduce of them
        and zeros: exact), the job's optimizer and schedule here."""
        if self.rank != 0:
            for v in self._vals:
                v[...] = 0.0
        self._w.allreduce(self._keys, self._vals)
        self._regs = []
        self._opt = optimizer.torch(self._params)
        sched = schedule if schedule is not None else Constant()
        self._sched = sched.torch_scheduler(self._opt)
        total = sum(v.size for v in self._vals)
        self._gflat = torch.zeros(total, dtype=torch.float32)
        self._gviews, off = [], 0
        for v in self._vals:
            self._gviews.append(self._gflat[off:off + v.size])
            off += v.size
        self._gbufs = [_as_array(g) for g in self._gviews]

    def _ring_step(self):
        """sync='ring': sum the gradients (scaled by 1/W with average), then
        the local optimizer and schedule."""
        for i, p in enumerate(self._params):
            if p.grad is None:
                self._gviews[i].zero_()
            else:
                self._gviews[i].copy_(p.grad.reshape(-1))
        if self._scale != 1.0:
            self._gflat.mul_(self._scale)
        try:
            self._w.allreduce(self._keys, self._gbufs)
        except Exception as e:
            _note(e, "rdmaps.torch: all-reducing the gradients (sync='ring')")
            raise
        for i, p in enumerate(self._params):
            p.grad = self._gviews[i].view_as(p)
        self._opt.step()
        self._sched.step()
        for p in self._params:
            p.grad = None

    def _start_values(self):
        """Rank 0 assigns its values; after a barrier everyone pulls them."""
        w = self._w
        if self.rank == 0:  # an assignment belongs to no clock
            w.assign(self._keys, self._vals)
        w.barrier()
        for i in range(len(self._params)):
            self._pull[i] = w.pull(self._keys[i], self._vals[i])
        for i in range(len(self._params)):
            self._wait_pull(i)

    def _hook(self):
        # the gradient accumulator of each parameter: its hook runs once the
        # parameter's .grad is final for this backward pass (torch 1.13 has no
        # register_post_accumulate_grad_hook)
        self._accs = []
        with torch.enable_grad():  # a graph node even when built under no_grad()
            for i, p in enumerate(self._params):
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._grad_hook(i))
                self._accs.append(acc)
        # each module waits for its own parameters just before its forward
        self._handles = []
        for m in self.module.modules():
            own = [self._index[id(p)] for p in m.parameters(recurse=False)
                   if id(p) in self._index]
            if own:
                self._handles.append(m.register_forward_pre_hook(self._pre_hook(own)))

    def _grad_hook(self, i):
        def hook(*_):
            self._grad_ready(i)
        return hook

    def _pre_hook(self, idx):
        def hook(module, inputs):
            for i in idx:
                if i not in self._seen:
                    self._seen.add(i)
                    self._order.append(i)
                if self._pull[i] is not None:
                    t = _now()
                    self._wait_pull(i)
                    self._t_pull_wait += _now() - t
        return hook

    # -- the step --

    def _grad_ready(self, i):
        p = self._params[i]
        g = p.grad
        if g is None or self._closed or self.sync == "ring":
            return
        if self._pushed[i]:
            raise RuntimeError(f"rdmaps.torch: a second gradient of {self._names[i]} in one "
                               f"step: call model.step() after every backward()")
        if g.dtype != torch.float32 or g.layout != torch.strided:
            raise TypeError(f"rdmaps.torch: gradient of {self._names[i]} is {g.dtype} "
                            f"{g.layout}: dense float32 gradients only")
        if not g.is_contiguous():
            g = p.grad = g.contiguous()
        if self._scale != 1.0:
            g.mul_(self._scale)
        t = _now()
        if self._push[i] is not None:  # the last step's: long done in practice
            self._push[i].wait()
        self._push[i] = self._w.push(self._keys[i], _as_array(g).reshape(-1))
        self._pushed[i] = True
        self._t_push += _now() - t

    def step(self):
        """End this worker's step: push what backward() did not, end the clock,
        start the pulls of the next values (in the order forward uses them)."""
        if self._closed:
            raise RuntimeError("rdmaps.torch: step() after close()")
        t = _now()
        if self.sync == "ring":
            self._ring_step()
            self.steps += 1
            self._t_step += _now() - t
            return
        for i, p in enumerate(self._params):
            if not self._pushed[i] and p.grad is not None:
                self._grad_ready(i)  # gradient set outside autograd's hooks
        self._w.clock()
        order = self._order + [i for i in range(len(self._params)) if i not in self._seen]
        for i in order:
            if self._pull[i] is not None:  # not used by the last forward
                self._wait_pull(i)
            self._pull[i] = self._w.pull(self._keys[i], self._vals[i])
        for i, p in enumerate(self._params):
            # the request keeps the gradient alive until it is sent; the next
            # backward gets a fresh one
            p.grad = None
            self._pushed[i] = False
        self.steps += 1
        self._t_step += _now() - t

    def comm_times(self):
        """Where the training thread spent its time in rdmaps since the model
        was made, in seconds: ``push`` (the gradients' pushes from backward's
        hooks, included in backward's time), ``pull_wait`` (forward waiting
        for fresh values, included in forward's time), ``step`` (``step()``:
        end the clock, start the pulls), and ``steps``. For a per-step profile
        (examples/torch/fmnist.py --profile)."""
        return {"push": self._t_push, "pull_wait": self._t_pull_wait, "step": self._t_step,
                "steps": self.steps}

    def zero_grad(self, set_to_none=True):
        """Gradients are handed to the pushes by step(): nothing to clear."""
        for p in self._params:
            if p.grad is not None and not self._pushed[self._index[id(p)]]:
                p.grad = None

    def _wait_pull(self, i):
        req, self._pull[i] = self._pull[i], None
        try:
            req.wait()
        except Exception as e:
            _note(e, f"rdmaps.torch: pulling parameter {self._names[i]} (key {self._keys[i]})")
            raise

    def synchronize(self):
        """Wait for every pull and push in flight: param.data then holds the
        values of the current clock."""
        for i in range(len(self._params)):
            if self._pull[i] is not None:
                self._wait_pull(i)
            if self._push[i] is not None:
                req, self._push[i] = self._push[i], None
                req.wait()

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @property
    def max_staleness(self):
        """Largest staleness a pull of this worker saw (0 under BSP)."""
        return self._w.max_staleness

    def close(self):
        """Wait for what is in flight and remove the hooks (the worker stays)."""
        if self._closed:
            return
        self.synchronize()
        for h in self._handles:
            h.remove()
        for r in self._regs:
            r.unregister()
        self._closed = True


class DistributedOptimizer:
    """BytePS/Horovod style: keep the torch optimizer's settings, run them on
    the servers::

        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        opt = rt.DistributedOptimizer(opt, model, schedule=rt.Cosine(steps))
        ...
        opt.zero_grad(); loss.backward(); opt.step()

    ``model`` must be the module whose parameters the optimizer holds; it is
    wrapped in a :class:`DistributedModel` (``opt.model``)."""

    def __init__(self, optimizer, model, schedule=None, **kwargs):
        ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
        trainable = {id(p) for p in model.parameters() if p.requires_grad}
        if ids != trainable:
            raise ValueError("rdmaps.torch: the optimizer must hold exactly the model's "
                             "trainable parameters")
        self.model = DistributedModel(model, from_torch(optimizer), schedule, **kwargs)
        self.param_groups = optimizer.param_groups

    def zero_grad(self, set_to_none=True):
        self.model.zero_grad()

    def step(self):
        self.model.step()

    def synchronize(self):
        self.model.synchronize()
