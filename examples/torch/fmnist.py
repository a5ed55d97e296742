#!/usr/bin/python3
"""Fashion-MNIST in PyTorch through rdmaps: the MLP 784-256-128-10 of
examples/fmnist (fmnist-train), written as an ordinary PyTorch script.

Distributed (default), one copy per worker:
    rdmaps-launch --servers 2 --workers 4 --consistency bsp -- \\
        /usr/bin/python3 examples/torch/fmnist.py --summary-json out.json
The parameters live on the servers, which run the optimizer and its schedule
(rdmaps.torch); each worker computes the gradient of its share of every
global batch (--batch is GLOBAL: B / W samples per worker, gradients averaged).

--local: the same model, data order and recipe in one process with
torch.optim and no rdmaps at all: the reference.

The lines that differ between the two are marked "# rdmaps".
"""
import argparse
import gzip
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"
PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530  # of x / 255 over the training set (idx.c)


def load(data, prefix):
    """(images float32 [n, 784] normalised, labels int64 [n]) of an IDX pair."""
    def read(path, magic, ndims):
        try:
            with gzip.open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            sys.exit(f"fmnist.py: cannot open {path} (install dataset-fashion-mnist or "
                     f"give --data DIR)")
        head = np.frombuffer(raw, ">u4", 1 + ndims)
        if head[0] != magic:
            sys.exit(f"fmnist.py: {path}: not an IDX file of the expected kind")
        return head[1:], np.frombuffer(raw, np.uint8, offset=4 + 4 * ndims)

    dims, x = read(f"{data}/{prefix}-images-idx3-ubyte.gz", 0x803, 3)
    if dims[1] * dims[2] != 784 or x.size != dims[0] * 784:
        sys.exit(f"fmnist.py: {prefix} images: unexpected shape {tuple(dims)}")
    ldims, y = read(f"{data}/{prefix}-labels-idx1-ubyte.gz", 0x801, 1)
    if ldims[0] != dims[0] or y.size != dims[0] or y.max() >= 10:
        sys.exit(f"fmnist.py: {prefix} labels: {ldims[0]} for {dims[0]} images, or out of range")
    x = (x.reshape(-1, 784).astype(np.float32) / np.float32(255) - np.float32(PIXEL_MEAN)) \
        / np.float32(PIXEL_STD)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)
        for fc in (self.fc1, self.fc2, self.fc3):  # He-normal weights, zero biases (mlp.c)
            nn.init.kaiming_normal_(fc.weight, nonlinearity="relu")
            nn.init.zeros_(fc.bias)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=256, help="GLOBAL mini-batch (default 256)")
    p.add_argument("--data", default=DATA, help=f"IDX files (default {DATA})")
    p.add_argument("--local", action="store_true", help="one process, no rdmaps (reference)")
    p.add_argument("--summary-json", metavar="FILE", help="JSON summary at the end (worker 0)")
    p.add_argument("--seed", type=int, default=1, help="init and data order (default 1)")
    p.add_argument("--train-limit", type=int, default=0, help="use the first N training images")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_const", const=1, default=-1)
    g.add_argument("--no-progress", dest="progress", action="store_const", const=0)
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--sync", choices=["ps", "ring"], default="ps",
                   help="ps: the servers run the optimizer (default); ring: the workers "
                        "all-reduce the gradients and each runs it (fmnist-train --sync)")
    p.add_argument("--compress", default=None, metavar="CODEC",
                   help="push gradients compressed: none|fp16|bf16|sign|topk:R|randk:R "
                        "(fmnist-train --compress; --sync ps only)")
    p.add_argument("--pull-precision", default=None, choices=("fp32", "fp16", "bf16"),
                   help="pull the parameters from the servers' rounded copy: fp32 "
                        "(default)|fp16|bf16 (fmnist-train --pull-precision; --sync ps only)")
    p.add_argument("--profile", action="store_true",
                   help="time each step's phases (forward, backward, step) and print the "
                        "mean ms per step at the end (also in the JSON summary)")
    r = p.add_argument_group("training recipe (run by the servers; fmnist-train's defaults)")
    r.add_argument("--optimizer", default="momentum",
                   choices=["sgd", "momentum", "nesterov", "adagrad", "adam", "adamw"])
    r.add_argument("--lr", type=float, default=0.1)
    r.add_argument("--momentum", type=float, default=0.9)
    r.add_argument("--weight-decay", type=float, default=0.0)
    r.add_argument("--clip-norm", type=float, default=0.0)
    r.add_argument("--lr-schedule", default="cosine", choices=["constant", "cosine", "linear"])
    r.add_argument("--lr-min", type=float, default=0.0)
    r.add_argument("--warmup-epochs", type=float, default=-1,
                   help="default: a tenth of --epochs; 0: none")
    r.add_argument("--staleness-lr", action="store_true")
    r.add_argument("--no-async-momentum", action="store_true")
    a = p.parse_args()
    if a.epochs < 1 or a.batch < 1 or a.eval_every < 1:
        p.error("--epochs, --batch and --eval-every must be >= 1")
    if a.lr <= 0 or not 0 <= a.momentum < 1:
        p.error("--lr must be > 0 and --momentum in [0, 1)")
    return a


def warmup_steps(a, steps):
    total = a.epochs * steps
    warm = a.warmup_epochs if a.warmup_epochs >= 0 else 0.1 * a.epochs
    warm = int(round(warm * steps))
    if warm >= total and a.lr_schedule != "constant":
        sys.exit(f"fmnist.py: --warmup-epochs is {warm} steps, not shorter than the run's {total}")
    return total, warm


def recipe(a, steps, rt):  # rdmaps
    """The servers' optimizer and schedule of the flags (rdmaps.torch classes)."""
    kw = dict(weight_decay=a.weight_decay, clip_norm=a.clip_norm)
    opt = {"sgd": lambda: rt.SGD(a.lr, 0.0, **kw),
           "momentum": lambda: rt.SGD(a.lr, a.momentum, **kw),
           "nesterov": lambda: rt.SGD(a.lr, a.momentum, nesterov=True, **kw),
           "adagrad": lambda: rt.Adagrad(a.lr, **kw),
           "adam": lambda: rt.Adam(a.lr, **kw),
           "adamw": lambda: rt.AdamW(a.lr, **kw)}[a.optimizer]()
    total, warm = warmup_steps(a, steps)
    sched = {"constant": lambda: rt.Constant(warm),
             "cosine": lambda: rt.Cosine(total, warm, a.lr_min),
             "linear": lambda: rt.Linear(total, warm, a.lr_min)}[a.lr_schedule]()
    return opt, sched


def local_recipe(a, steps, params):
    """--local: the same recipe with torch.optim and a LambdaLR, no rdmaps
    (the formulas of include/rdmaps/types.h, which are torch.optim's)."""
    opt = {"sgd": lambda: torch.optim.SGD(params, a.lr, weight_decay=a.weight_decay),
           "momentum": lambda: torch.optim.SGD(params, a.lr, a.momentum,
                                               weight_decay=a.weight_decay),
           "nesterov": lambda: torch.optim.SGD(params, a.lr, a.momentum, nesterov=True,
                                               weight_decay=a.weight_decay),
           "adagrad": lambda: torch.optim.Adagrad(params, a.lr, eps=1e-8,
                                                  weight_decay=a.weight_decay),
           "adam": lambda: torch.optim.Adam(params, a.lr, weight_decay=a.weight_decay),
           "adamw": lambda: torch.optim.AdamW(params, a.lr, weight_decay=a.weight_decay)
           }[a.optimizer]()
    total, warm = warmup_steps(a, steps)
    lo = min(a.lr_min, a.lr)

    def lr_at(t):  # warm-up, then the schedule over the rest of the run
        if t < warm:
            return a.lr * (t + 1) / warm
        t, T = t - warm, total - warm
        if a.lr_schedule == "cosine":
            return lo + (a.lr - lo) * (1 + math.cos(math.pi * min(t, T) / T)) / 2
        if a.lr_schedule == "linear":
            return a.lr - (a.lr - lo) * min(t, T) / T
        return a.lr
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: lr_at(t) / a.lr)
    kind = "sgd" if a.optimizer == "momentum" and a.momentum == 0 else a.optimizer
    spec = {"kind": kind, "lr": a.lr,
            "momentum": a.momentum if kind in ("momentum", "nesterov") else 0.0,
            "weight_decay": a.weight_decay,
            "schedule": a.lr_schedule, "total_steps": total, "warmup_steps": warm,
            "staleness_lr": False}
    return opt, sched, spec


def describe(s):
    d = f"{s['kind']} lr {s['lr']:g}"
    if s["kind"] in ("momentum", "nesterov"):
        d += f" momentum {s['momentum']:.4g}"
    if s.get("weight_decay"):
        d += f" weight decay {s['weight_decay']:g}"
    d += f", {s['schedule']} over {s['total_steps']} steps"
    if s.get("warmup_steps"):
        d += f" after {s['warmup_steps']} warm-up steps"
    if s.get("staleness_lr"):
        d += ", lr / (1 + staleness)"
    return d


def fnv1a(params):
    """FNV-1a (64 bit) of the parameters' float32 bytes, in parameter order."""
    h = 14695981039346656037
    for p in params:
        for b in p.detach().numpy().tobytes():
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def accuracy(model, x, y):
    with torch.no_grad():
        correct = 0
        for i in range(0, len(x), 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    return correct / len(x)


class Reporter:
    """The dashboard's curves (docs/dashboard.md), as fmnist-train reports
    them: every REPORT_S seconds the mean loss of the steps since the last
    report, this worker's samples/s and the staleness its pulls saw; rank 0's
    test accuracy after each evaluation (Worker.report). Training goes on if
    the scheduler cannot be told (said once)."""
    REPORT_S = 0.25

    def __init__(self, w, per_step):
        self.w, self.per_step, self.warned = w, per_step, False
        self.t, self.loss, self.steps = time.monotonic(), 0.0, 0

    def report(self, name, value):
        try:
            self.w.report(name, value)  # False: over the 100/s bound, dropped
        except OSError as e:  # rdmaps.Error
            if not self.warned:
                print(f"fmnist.py: reporting {name} to the scheduler: {e} (training goes on)",
                      file=sys.stderr, flush=True)
                self.warned = True

    def step(self, loss, force):
        now = time.monotonic()
        dt = now - self.t
        self.loss += loss
        self.steps += 1
        if not force and dt < self.REPORT_S:
            return
        self.report("loss", self.loss / self.steps)
        self.report("samples_s", self.steps * self.per_step / dt if dt > 0 else 0.0)
        self.report("staleness", self.w.max_staleness)
        self.t, self.loss, self.steps = now, 0.0, 0


def progress(epoch, epochs, done, total, loss, sps, acc):
    fill = int(30 * done / total)
    print(f"\repoch {epoch}/{epochs} [{'#' * fill}{'.' * (30 - fill)}] {100 * done // total:3d}% "
          f"loss {loss:.4f} | {sps:.0f} samples/s | test acc "
          + (f"{acc:.4f} " if acc >= 0 else "-      "), end="", flush=True)


def main():
    a = parse_args()
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    if a.train_limit and a.train_limit < len(xtr):
        xtr, ytr = xtr[:a.train_limit], ytr[:a.train_limit]
    model = MLP()  # every worker builds it; rank 0's values are the ones trained

    if a.local:
        rank, workers, servers, transport, cons, staleness = 0, 1, 0, "local", "local", 0
    else:
        import rdmaps.torch as rt  # rdmaps
        w = rt.init()  # rdmaps: join the cluster (rdmaps-launch set the environment)
        rank, workers = rt.rank(), rt.num_workers()
        servers, transport = w.num_servers, w.transport
        cons, staleness = rt.consistency(w), rt.staleness_bound(w)
    per_step = a.batch // workers
    nlocal = len(xtr) // workers
    first = rank * nlocal
    steps = nlocal // per_step if per_step else 0
    if per_step == 0 or steps == 0:
        sys.exit(f"fmnist.py: batch {a.batch} on {workers} workers and {len(xtr)} images "
                 f"make no step")
    if a.local:
        opt, lr_sched, spec = local_recipe(a, steps, model.parameters())
        train_model = model
    else:
        opt_spec, sched = recipe(a, steps, rt)
        train_model = rt.DistributedModel(model, opt_spec, schedule=sched,  # rdmaps
                                          async_momentum=not a.no_async_momentum,
                                          staleness_lr=a.staleness_lr,
                                          sync=a.sync, compress=a.compress,
                                          pull_precision=a.pull_precision)
        spec = train_model.spec

    bar = rank == 0 and (a.progress == 1 or (a.progress < 0 and sys.stdout.isatty()))
    if rank == 0:
        print(f"fmnist.py: {workers} worker(s), {servers} server(s), transport {transport}, "
              f"consistency {cons}, batch {a.batch} ({per_step} per worker), {steps} steps/epoch,"
              f" {len(xtr)} training images", flush=True)
        print(f"fmnist.py: optimizer {describe(spec)}", flush=True)

    reporter = None if a.local else Reporter(w, per_step)  # rdmaps: the dashboard's curves
    order = np.arange(first, first + nlocal)
    acc, loss_epoch, train_time, sps = -1.0, 0.0, 0.0, 0.0
    clk = time.perf_counter
    prof = {"data": 0.0, "forward": 0.0, "backward": 0.0, "step": 0.0, "rest": 0.0}
    # rdmaps: a worker that replaced a dead one joins at the job's clock (the
    # steps the job made): it goes on from there, with the same rank's data
    c0 = 0 if a.local else w.clock_value
    e0, s0 = c0 // steps + 1, c0 % steps
    if c0:
        print(f"fmnist.py: worker {rank} joins the running job at clock {c0}: epoch {e0}, "
              f"step {s0 + 1} of {steps}", flush=True)
    for e in range(e0, a.epochs + 1):
        t0 = time.monotonic()
        last_draw, loss_sum = 0.0, 0.0
        rng = np.random.default_rng(a.seed * 1000003 + e * 7919 + rank)
        perm = order[rng.permutation(nlocal)]
        train_model.train()
        first_step = s0 if e == e0 else 0
        for s in range(first_step, steps):
            t_a = clk() if a.profile else 0.0
            idx = torch.from_numpy(perm[s * per_step:(s + 1) * per_step])
            x, y = xtr[idx], ytr[idx]
            t_b = clk() if a.profile else 0.0
            loss = F.cross_entropy(train_model(x), y)
            t_c = clk() if a.profile else 0.0
            if a.local:
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if a.clip_norm > 0:  # per tensor, as the servers clip
                    for p in model.parameters():
                        torch.nn.utils.clip_grad_norm_(p, a.clip_norm)
                t_d = clk() if a.profile else 0.0
                opt.step()
                lr_sched.step()
            else:
                loss.backward()     # rdmaps: pushes each gradient when ready
                t_d = clk() if a.profile else 0.0
                train_model.step()  # rdmaps: ends the clock, pulls the next values
            t_e = clk() if a.profile else 0.0
            lv = loss.item()
            loss_sum += lv
            if reporter:  # rdmaps
                reporter.step(lv, s + 1 == steps)
            now = time.monotonic()
            if bar and (now - last_draw > 0.2 or s + 1 == steps):
                el = now - t0
                progress(e, a.epochs, s + 1, steps, loss_sum / (s + 1 - first_step),
                         (s + 1 - first_step) * per_step * workers / el if el > 0 else 0, acc)
                last_draw = now
            if a.profile:
                t_f = clk()
                for k, d in (("data", t_b - t_a), ("forward", t_c - t_b), ("backward", t_d - t_c),
                             ("step", t_e - t_d), ("rest", t_f - t_e)):
                    prof[k] += d
        el = time.monotonic() - t0
        train_time += el
        loss_epoch = loss_sum / (steps - first_step)
        sps = (steps - first_step) * per_step * workers / el
        if not a.local:
            train_model.synchronize()
        if rank == 0 and (e % a.eval_every == 0 or e == a.epochs):
            train_model.eval()
            acc = accuracy(train_model, xte, yte)
            if reporter:  # rdmaps
                reporter.report("test_accuracy", acc)
            if bar:
                progress(e, a.epochs, steps, steps, loss_epoch, sps, acc)
                print()
            else:
                print(f"epoch {e}/{a.epochs} loss {loss_epoch:.4f} samples/s {sps:.0f} "
                      f"test_accuracy {acc:.4f}", flush=True)
    steps_run = max(0, steps * a.epochs - c0)
    sps_all = steps_run * per_step * workers / train_time if train_time > 0 else 0.0
    profile_ms = None
    if a.profile and steps_run > 0:
        profile_ms = {k: round(1000 * v / steps_run, 4) for k, v in prof.items()}
        if not a.local:  # rdmaps: the parts of forward/backward/step spent in rdmaps
            ct = train_model.comm_times()
            profile_ms["pull_wait"] = round(1000 * ct["pull_wait"] / steps_run, 4)
            profile_ms["push"] = round(1000 * ct["push"] / steps_run, 4)
        profile_ms["total"] = round(1000 * train_time / steps_run, 4)
    if rank == 0:
        print(f"fmnist.py: done: test accuracy {acc:.4f}, train loss {loss_epoch:.4f}, "
              f"{sps_all:.0f} samples/s", flush=True)
        if profile_ms:
            what = "optimizer" if a.local else "step()"
            print("fmnist.py: ms per step: " + ", ".join(
                f"{'step (' + what + ')' if k == 'step' else k} {v:.3f}"
                for k, v in profile_ms.items()), flush=True)
        if a.summary_json:
            summary = {
                "test_accuracy": round(acc, 4), "train_loss": round(loss_epoch, 4),
                "epochs": a.epochs, "samples_per_sec": round(sps_all, 1),
                "workers": workers, "servers": servers, "transport": transport,
                "consistency": cons, "staleness": staleness,
                "sync": a.sync, "compress": a.compress or "none",
                "pull_precision": a.pull_precision or "fp32",
                "staleness_lr": int(spec["staleness_lr"]),
                "max_staleness": train_model.max_staleness if not a.local else 0,
                "batch": a.batch, "optimizer": spec["kind"], "lr": float(f"{spec['lr']:.9g}"),
                "momentum": float(f"{spec.get('momentum', 0.0):.9g}"),
                "weight_decay": float(f"{spec['weight_decay']:.9g}"),
                "lr_schedule": spec["schedule"], "total_steps": spec.get("total_steps", 0),
                "warmup_steps": spec["warmup_steps"], "steps_per_epoch": steps,
                "train_loss_exact": f"{loss_epoch:.17g}", "params_fnv1a": fnv1a(model.parameters()),
            }
            if profile_ms:
                summary["profile_ms"] = profile_ms
            with open(a.summary_json, "w") as f:
                json.dump(summary, f, indent=2)
                f.write("\n")
    if not a.local:
        train_model.close()
        rt.shutdown()  # rdmaps: final barrier, leave the cluster


if __name__ == "__main__":
    main()
