#!/usr/bin/python3
"""bench/torch_train.py: `kiln train`'s models and training loop in PyTorch
1.13 eager mode, for the epoch-time comparison in the README.

    /usr/bin/python3 bench/torch_train.py [--model mlp|cnn|lstm] [--epochs N]
        [--batch B] [--lr X] [--optimizer sgd|adam] [--seed S] [--data DIR]
        [--threads N] [--limit-train N]

The same program as kiln's defaults: Fashion-MNIST from the Debian package
(gzipped IDX read with gzip + numpy), pixels normalised with mean 0.2860
and std 0.3530, a shuffled order per epoch and a last partial batch;
mlp 784-256-256-10, cnn conv(1->16, 5x5) + relu + max-pool 2, conv(16->32,
5x5) + relu + max-pool 2, linear 512->128, relu, linear 128->10; lstm an
LSTM cell (input 28, hidden 128) over the 28 rows then linear 128->10;
cross-entropy; SGD with momentum 0.9 (lr 0.05) or Adam (lr 1e-3); cosine
annealing per step to 0 over the run. Prints one line per epoch (training
time excluding evaluation, samples/s, test accuracy) and a final
`test_accuracy=` line, like kiln.

Threads: --threads N (default 2) calls torch.set_num_threads(N) and
OpenBLAS's openblas_set_num_threads(N) through ctypes (this torch is
Debian's, built on the system OpenBLAS). Environment variables such as
OMP_WAIT_POLICY must be set before the process starts; run kiln with the
same ones.
"""
import argparse
import ctypes
import gzip
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, kind, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError("%s: not an unsigned-byte IDX file" % path)
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(shape)):
        raise ValueError("%s: %d bytes for shape %s" % (path, arr.size, shape))
    return arr.reshape(shape)


def load(dirname, split):
    def find(name):
        p = os.path.join(dirname, name + ".gz")
        return p if os.path.exists(p) else os.path.join(dirname, name)
    x = read_idx(find("%s-images-idx3-ubyte" % split))
    y = read_idx(find("%s-labels-idx1-ubyte" % split))
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - MEAN) / STD
    return x.unsqueeze(1).contiguous(), torch.from_numpy(y.astype(np.int64))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 256), nn.Linear(256, 256), nn.Linear(256, 10)

    def forward(self, x):
        h = torch.relu(self.fc1(x.reshape(x.size(0), 784)))
        return self.fc3(torch.relu(self.fc2(h)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 16, 5), nn.Conv2d(16, 32, 5)
        self.fc1, self.fc2 = nn.Linear(512, 128), nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.conv1(x)), 2, 2)
        h = F.max_pool2d(torch.relu(self.conv2(h)), 2, 2)
        return self.fc2(torch.relu(self.fc1(h.reshape(h.size(0), -1))))


class LSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell, self.fc = nn.LSTMCell(28, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = x.reshape(x.size(0), 28, 28)
        h = x.new_zeros(x.size(0), 128)
        c = h
        for t in range(28):
            h, c = self.cell(x[:, t], (h, c))
        return self.fc(h)


def set_threads(n):
    torch.set_num_threads(n)
    for name in ("libopenblas.so.0", "libblas.so.3"):
        try:
            ctypes.CDLL(name).openblas_set_num_threads(ctypes.c_int(n))
            return
        except (OSError, AttributeError):
            pass


def evaluate(model, x, y, batch=1000):
    model.eval()
    loss, hits = 0.0, 0
    with torch.no_grad():
        for i in range(0, x.size(0), batch):
            out = model(x[i:i + batch])
            loss += F.cross_entropy(out, y[i:i + batch], reduction="sum").item()
            hits += (out.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return loss / x.size(0), hits / x.size(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mlp", choices=["mlp", "cnn", "lstm"])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=DEFAULT_DIR)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit-train", type=int, default=0)
    a = ap.parse_args()
    set_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    if a.limit_train:
        xtr, ytr = xtr[:a.limit_train], ytr[:a.limit_train]
    model = {"mlp": MLP, "cnn": CNN, "lstm": LSTM}[a.model]()
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr or 0.05, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=a.lr or 1e-3)
    n = xtr.size(0)
    steps = a.epochs * math.ceil(n / a.batch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (1 + math.cos(math.pi * min(s, steps) / steps)) / 2)
    print("torch %s: model %s (%d parameters), eager, optimizer %s, batch %d, epochs %d, "
          "threads %d" % (torch.__version__, a.model, sum(p.numel() for p in model.parameters()),
                          a.optimizer, a.batch, a.epochs, torch.get_num_threads()))
    total = 0.0
    acc = 0.0
    for epoch in range(a.epochs):
        perm = torch.randperm(n)
        t0 = time.perf_counter()
        run = 0.0
        for i in range(0, n, a.batch):
            idx = perm[i:i + a.batch]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            run += loss.item()
        dt = time.perf_counter() - t0
        total += dt
        tl, acc = evaluate(model, xte, yte)
        print("epoch %d/%d  loss %.4f  test_loss %.4f  test_acc %.4f  time %.2fs  %.0f samples/s"
              % (epoch + 1, a.epochs, run / math.ceil(n / a.batch), tl, acc, dt, n / dt),
              flush=True)
    print("summary: %.2fs of training (%.0f samples/s)" % (total, a.epochs * n / total))
    print("test_accuracy=%.4f" % acc)


if __name__ == "__main__":
    main()
