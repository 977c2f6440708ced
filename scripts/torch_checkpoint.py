#!/usr/bin/python3
"""scripts/torch_checkpoint.py: kiln's checkpoints and PyTorch, both ways
(run where PyTorch is installed: /usr/bin/python3 with Debian's
python3-torch; `make test` does not need it).

For each built-in model (mlp, cnn, lstm):
 1. `kiln train` a few hundred steps and save a checkpoint;
 2. load it into the equivalent PyTorch module (Note [PyTorch names] in
    src/nn/torch_names.c) with load_state_dict(strict=False): no missing
    keys, the only unexpected keys are the optimizer's "optim.*";
 3. PyTorch's test accuracy on the Fashion-MNIST test set equals
    `kiln eval`'s (the same predictions: at most 2 of 10000 images may
    differ by float rounding);
 4. write the PyTorch module's state_dict as a plain safetensors file (no
    metadata, as safetensors.torch.save_file writes) and check that
    `kiln eval` accepts it (notice: plain) and gives the same accuracy.
Reads and writes safetensors itself (the format is a JSON header and raw
bytes), so the safetensors package is not needed.

Usage: /usr/bin/python3 scripts/torch_checkpoint.py [--kiln build/kiln] [--steps N]"""
import argparse
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
DT = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BOOL": torch.bool}
TD = {v: k for k, v in DT.items()}


def load_safetensors(path):
    """{name: tensor} and the __metadata__ dict of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=DT[e["dtype"]]) if end > b else \
            torch.empty(0, dtype=DT[e["dtype"]])
        out[name] = t.reshape(e["shape"])
    return out, meta


def save_safetensors(path, tensors):
    """What safetensors.torch.save_file(tensors, path) writes (no metadata)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        b = t.numpy().tobytes()
        header[name] = {"dtype": TD[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


class LSTMNet(nn.Module):
    """kiln's lstm: an LSTM over the 28 rows, fc on the last hidden state."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 128, batch_first=True)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc(self.lstm(x.view(-1, 28, 28))[0][:, -1])


def torch_model(arch):
    """The PyTorch module equivalent to kiln's arch, and its input shape."""
    if arch == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10)), (-1, 784)
    if arch == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, 10)), (-1, 1, 28, 28)
    return LSTMNet(), (-1, 1, 28, 28)


def idx(path):
    with gzip.open(path) as f:
        raw = f.read()
    nd = raw[3]
    dims = struct.unpack(">" + "I" * nd, raw[4:4 + 4 * nd])
    return np.frombuffer(raw[4 + 4 * nd:], dtype=np.uint8).reshape(dims)


def test_accuracy(model, shape):
    x = torch.from_numpy((idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) / 255.0 - MEAN)
                         / STD).float()
    y = torch.from_numpy(idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    with torch.no_grad():
        pred = torch.cat([model(x[i:i + 1000].reshape(shape)).argmax(1)
                          for i in range(0, len(x), 1000)])
    return (pred == y).float().mean().item()


def kiln_eval(kiln, path):
    r = subprocess.run([kiln, "eval", path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("kiln eval %s failed: %s" % (path, r.stderr))
    acc = float(r.stdout.split("test_accuracy=")[1].split()[0])
    return acc, r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--models", default="mlp,cnn,lstm")
    a = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for arch in a.models.split(","):
            ck = os.path.join(tmp, arch + ".safetensors")
            subprocess.run([a.kiln, "train", "--model", arch, "--epochs", "1", "--steps",
                            str(a.steps), "--save", ck], check=True, stdout=subprocess.DEVNULL)
            sd, meta = load_safetensors(ck)
            model, shape = torch_model(arch)
            res = model.load_state_dict(sd, strict=False)
            ok_keys = not res.missing_keys and all(k.startswith("optim.")
                                                   for k in res.unexpected_keys)
            acc_torch = test_accuracy(model, shape)
            acc_kiln, _ = kiln_eval(a.kiln, ck)
            # the other way: PyTorch's state_dict, plain safetensors, kiln eval
            plain = os.path.join(tmp, arch + "-torch.safetensors")
            save_safetensors(plain, model.state_dict())
            acc_plain, note = kiln_eval(a.kiln, plain)
            ok = (ok_keys and abs(acc_torch - acc_kiln) <= 2e-4 and acc_plain == acc_kiln
                  and "plain state_dict" in note and meta.get("format") == "kiln-checkpoint-1")
            failed += not ok
            print("%-4s %s: keys %s (unexpected: %d optim.*), test accuracy PyTorch %.4f, "
                  "kiln eval %.4f, kiln eval of PyTorch's state_dict %.4f"
                  % (arch, "ok" if ok else "FAILED", "ok" if ok_keys else res,
                     len(res.unexpected_keys), acc_torch, acc_kiln, acc_plain))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
