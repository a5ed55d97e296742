"""Logistic regression with NumPy on an rdmaps job: every worker trains on
its share of a synthetic data set; the servers hold w and run SGD.

    python3 -m rdmaps.launch --servers 1 --workers 2 --consistency bsp -- logreg.py
"""
import numpy as np
import rdmaps

rng = np.random.default_rng(0)                      # the same data on every worker
X = rng.normal(size=(4000, 20)).astype(np.float32)
y = (X @ rng.normal(size=20) > 0).astype(np.float32)

with rdmaps.Worker() as ps:
    Xi, yi = X[ps.rank::ps.num_workers], y[ps.rank::ps.num_workers]   # my share
    ps.declare(0, 20, init="zeros", optimizer=rdmaps.Optimizer("sgd", lr=0.5))
    ps.barrier()
    w, g = np.empty(20, np.float32), np.empty(20, np.float32)
    for step in range(100):
        ps.pull(0, w).wait()                        # w after every worker's steps < step
        p = 1 / (1 + np.exp(-(Xi @ w)))
        g[:] = Xi.T @ (p - yi) / len(yi) / ps.num_workers
        ps.push(0, g).wait()                        # the servers sum and apply them
        ps.clock()
    ps.pull(0, w).wait()
    print("worker %d: accuracy %.3f" % (ps.rank, np.mean((X @ w > 0) == y)))
    ps.barrier()
