#!/usr/bin/python3
"""scripts/bench_models.py: the imported models of the benchmarks
(bench/work_import.c, bench/torch_anchor.py), exported with
tools/kiln-export into build/bench-models/ (not committed: resnet18's
weights are 45 MB). Run with Debian's PyTorch 1.13 and torchvision 0.14:

    /usr/bin/python3 scripts/bench_models.py [OUTDIR]

    resnet18.ir/.safetensors             torchvision resnet18 (1000 classes),
                                         seed 0, example input 1x3x64x64
    transformer_encoder.ir/.safetensors  nn.TransformerEncoderLayer(256, 4,
                                         dropout 0, batch_first), seed 0,
                                         example input 16x64x256

`make bench-compare` runs it first; `kiln bench` skips these workloads
when the files are absent. bench/torch_anchor.py builds the same modules
(bench_modules() below) with the same seeds.
"""
import os
import sys
from importlib.machinery import SourceFileLoader

import torch
import torch.nn as nn
import torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(256, 4, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


def bench_modules():
    """{name: (module, example shape)}, built with fixed seeds."""
    torch.manual_seed(0)
    r = torchvision.models.resnet18()
    torch.manual_seed(0)
    e = Encoder()
    return {'resnet18': (r, [1, 3, 64, 64]), 'transformer_encoder': (e, [16, 64, 256])}


def main(argv):
    out = argv[0] if argv else os.path.join(ROOT, 'build', 'bench-models')
    os.makedirs(out, exist_ok=True)
    ke = SourceFileLoader('kiln_export', os.path.join(ROOT, 'tools', 'kiln-export')).load_module()
    for name, (m, shape) in bench_modules().items():
        path = os.path.join(out, name)
        if os.path.exists(path + '.safetensors') and os.path.exists(path + '.ir'):
            continue
        m.train()
        ke.export_module(m, [(shape, 'float')], path, None, strip_comments=True)
        print('bench_models: %s.ir' % path, file=sys.stderr)


if __name__ == '__main__':
    main(sys.argv[1:])
