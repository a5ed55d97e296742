"""Evaluate a model file of fmnist-train --save-model in NumPy alone.

  fmnist_eval.py MODEL.npz [SUMMARY.json] [DATA_DIR]

Reads the Fashion-MNIST test set (IDX files, gzip) and the model (keys "0".."3"
= the row blocks of W1, "4" b1, "5" W2, "6" b2, "7" W3, "8" b3; weights
row-major [in x out]), prints the test accuracy and, given the summary of the
run that wrote the model, fails unless it is the summary's test_accuracy to
1e-4. Run with Debian's /usr/bin/python3 (python3-numpy).
"""
import gzip
import json
import sys

import numpy as np

PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530  # examples/fmnist/idx.c


def idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def accuracy(model_path, data_dir):
    m = np.load(model_path)
    assert sorted(m.files, key=int) == [str(k) for k in range(9)], m.files
    for k in m.files:
        assert m[k].dtype == np.float32, (k, m[k].dtype)
    w1 = np.concatenate([m[str(b)].reshape(-1) for b in range(4)]).reshape(784, 256)
    b1, b3 = m["4"].reshape(256), m["8"].reshape(10)
    w2, b2 = m["5"].reshape(256, 128), m["6"].reshape(128)
    w3 = m["7"].reshape(128, 10)
    x = idx(f"{data_dir}/t10k-images-idx3-ubyte.gz").reshape(-1, 784)
    y = idx(f"{data_dir}/t10k-labels-idx1-ubyte.gz")
    x = (x.astype(np.float32) / np.float32(255) - np.float32(PIXEL_MEAN)) / np.float32(PIXEL_STD)
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    z = h2 @ w3 + b3
    return float(np.mean(np.argmax(z, axis=1) == y))


def main():
    model = sys.argv[1]
    summary = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    data = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/datasets/fashion-mnist"
    acc = accuracy(model, data)
    print(f"{model}: NumPy test accuracy {acc:.4f}")
    if summary:
        want = json.load(open(summary))["test_accuracy"]
        print(f"{summary}: test_accuracy {want:.4f}")
        if abs(acc - want) > 1e-4 + 1e-9:
            print(f"FAIL: NumPy {acc:.4f} != summary {want:.4f} (tolerance 1e-4)")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
