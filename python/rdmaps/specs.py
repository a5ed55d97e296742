"""How keys start out (:class:`Init`) and the optimizer the servers run for
them (:class:`Optimizer`): the job's choice, given to ``Worker.declare``."""
import math

__all__ = ["Init", "Optimizer"]

_INIT_KINDS = {"default": 0, "zeros": 1, "const": 2, "uniform": 3, "normal": 4, "push": 5}
_OPT_KINDS = {"sgd": 0, "momentum": 1, "nesterov": 2, "adagrad": 3, "adam": 4, "adamw": 5}
_SCHEDULES = {"constant": 0, "step": 1, "exp": 2, "cosine": 3, "linear": 4}


class Init:
    """A key's initial values.

    ``Init("zeros")``, ``Init("const", 0.5)``, ``Init("uniform", -0.1, 0.1,
    seed=1)``, ``Init("normal", 0.0, 0.01, seed=42)`` (mean, std),
    ``Init("push")`` (the first push of any worker sets the values) or
    ``Init("default")`` (the servers' RDMAPS_INIT). Random initialisers are
    deterministic in (seed, key, element): every worker may declare the same
    keys. ``Worker.declare`` also takes the kind as a plain string, or a
    float for a constant.
    """

    __slots__ = ("kind", "a", "b", "seed")

    def __init__(self, kind="default", a=0.0, b=0.0, seed=0):
        if kind not in _INIT_KINDS:
            raise ValueError("init: kind %r is not one of %s" % (kind, ", ".join(_INIT_KINDS)))
        a, b = float(a), float(b)
        if kind == "uniform" and not a < b:
            raise ValueError("init: uniform(a, b) needs a < b, got %g, %g" % (a, b))
        if kind == "normal" and not b >= 0:
            raise ValueError("init: normal(mean, std) needs std >= 0, got %g" % b)
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ValueError("init: a and b must be finite")
        seed = int(seed)
        if not 0 <= seed < 2 ** 64:
            raise ValueError("init: seed in [0, 2**64), got %d" % seed)
        self.kind, self.a, self.b, self.seed = kind, a, b, seed

    def _spec(self):
        return (_INIT_KINDS[self.kind], self.a, self.b, self.seed)

    def __repr__(self):
        return "Init(%r, %g, %g, seed=%d)" % (self.kind, self.a, self.b, self.seed)

    @classmethod
    def coerce(cls, value):
        """None, an Init, a kind string, a number (constant) or a dict."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, (int, float)):
            return cls("const", value)
        if isinstance(value, dict):
            return cls(**value)
        raise TypeError("init: None, rdmaps.Init, a kind ('zeros', 'push', ...), a number "
                        "or a dict, got %s" % type(value).__name__)


class Optimizer:
    """The optimizer the servers run for keys (``struct rps_optim_opts``).

    ``Optimizer("adam", lr=1e-3)``, ``Optimizer("sgd", lr=0.1, momentum=...)``.
    kind: sgd, momentum, nesterov, adagrad, adam, adamw. Fields (defaults as
    ``rps_optim_opts_init``): lr 0.01, momentum 0.9, beta1 0.9, beta2 0.999,
    eps 1e-8, weight_decay 0, clip_norm 0 (off), schedule 'constant' | 'step'
    (step_size, gamma) | 'exp' (gamma) | 'cosine' | 'linear' (total_steps,
    lr_min), warmup_steps 0, staleness_lr False. Steps count optimizer steps
    of a key: one per clock under BSP, one per push under ASP/SSP.

    ``Worker.declare`` also takes a dict of these fields, or a kind string.
    """

    _FIELDS = ("lr", "momentum", "beta1", "beta2", "eps", "weight_decay", "clip_norm",
               "schedule", "step_size", "gamma", "total_steps", "lr_min", "staleness_lr",
               "warmup_steps")

    def __init__(self, kind="sgd", **fields):
        if kind not in _OPT_KINDS:
            raise ValueError("optimizer: kind %r is not one of %s" % (kind, ", ".join(_OPT_KINDS)))
        for name in fields:
            if name not in self._FIELDS:
                raise ValueError("optimizer: no field %r (fields: %s)" % (name, ", ".join(self._FIELDS)))
        self.kind = kind
        self.fields = dict(fields)
        self._check()

    def _check(self):
        f = self.fields
        lr = f.get("lr", 0.01)
        if not lr > 0:
            raise ValueError("optimizer: lr %r must be > 0" % lr)
        sched = f.get("schedule", "constant")
        if sched not in _SCHEDULES:
            raise ValueError("optimizer: schedule %r is not one of %s" % (sched, ", ".join(_SCHEDULES)))
        total, warm = f.get("total_steps", 0), f.get("warmup_steps", 0)
        if sched in ("cosine", "linear") and not total:
            raise ValueError("optimizer: a %s schedule needs total_steps (the whole run)" % sched)
        if total and warm >= total:
            raise ValueError("optimizer: warmup_steps %d must be < total_steps %d" % (warm, total))
        for b in ("beta1", "beta2"):
            if b in f and not 0 <= f[b] < 1:
                raise ValueError("optimizer: %s %r must be in [0, 1)" % (b, f[b]))

    def _spec(self):
        d = {k: v for k, v in self.fields.items() if k != "schedule"}
        d["kind"] = _OPT_KINDS[self.kind]
        d["schedule"] = _SCHEDULES[self.fields.get("schedule", "constant")]
        return d

    def __repr__(self):
        args = "".join(", %s=%r" % kv for kv in sorted(self.fields.items()))
        return "Optimizer(%r%s)" % (self.kind, args)

    def __eq__(self, other):
        return isinstance(other, Optimizer) and self._spec() == other._spec()

    @classmethod
    def coerce(cls, value):
        """None, an Optimizer, a kind string or a dict (with 'kind')."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, dict):
            d = dict(value)
            return cls(d.pop("kind", "sgd"), **d)
        raise TypeError("optimizer: None, rdmaps.Optimizer, a kind ('adam', ...) or a dict, "
                        "got %s" % type(value).__name__)
