import numpy as np, rdmaps

rng = np.random.default_rng(0)                       # the same data on every worker
X = rng.normal(size=(4000, 20)).astype(np.float32)
y = (X @ rng.normal(size=20) > 0).astype(np.float32)

with rdmaps.Worker() as w:
    w.declare(0, 21, init="zeros", optimizer=rdmaps.Optimizer("sgd", lr=0.5))
    w.barrier()
    mine = slice(w.rank, None, w.num_workers)         # this worker's share
    Xs, ys = X[mine], y[mine]
    theta, grad = np.zeros(21, np.float32), np.zeros(21, np.float32)
    for step in range(200):
        w.pull(0, theta).wait()                       # into theta, no copy
        p = 1 / (1 + np.exp(-(Xs @ theta[:20] + theta[20])))
        grad[:20] = Xs.T @ (p - ys) / len(ys) / w.num_workers
        grad[20] = (p - ys).mean() / w.num_workers
        w.push(0, grad).wait()
        w.clock()
    w.pull(0, theta).wait()
    acc = (((X @ theta[:20] + theta[20]) > 0) == y).mean()
    print(f"worker {w.rank}: accuracy {acc:.4f}")
