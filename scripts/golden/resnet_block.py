#!/usr/bin/python3
"""scripts/golden/resnet_block.py: a ResNet basic block (conv3x3, batch
norm in training mode with running statistics, ReLU(inplace=True), conv3x3,
batch norm, `out += identity`, ReLU(inplace=True)) as TorchScript IR from
PyTorch 1.13, trained for 3 SGD steps; tests/data/resnet_block/. Run:

    /usr/bin/python3 scripts/golden/resnet_block.py

Writes block.ir (the scripted function, inlined: its inputs are x, then
the parameters and buffers in the order of NAMES), init_<name>.npy, x.npy,
and step<S>_<name>.npy: every parameter and buffer after step S (1..3) of
    loss = block(x, ...); loss.backward(); p -= LR * p.grad; p.grad = None
(buffers are written by the block itself: running statistics and
num_batches_tracked), and step<S>_loss.npy.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'tests', 'data', 'resnet_block')
LR = 0.1
NAMES = ['conv1.weight', 'bn1.weight', 'bn1.bias', 'bn1.running_mean', 'bn1.running_var',
         'bn1.num_batches_tracked', 'conv2.weight', 'bn2.weight', 'bn2.bias',
         'bn2.running_mean', 'bn2.running_var', 'bn2.num_batches_tracked']
PARAMS = ['conv1.weight', 'bn1.weight', 'bn1.bias', 'conv2.weight', 'bn2.weight', 'bn2.bias']


def block(x, w1, g1, b1, rm1, rv1, n1, w2, g2, b2, rm2, rv2, n2):
    identity = x
    out = F.conv2d(x, w1, None, 1, 1)
    n1.add_(1)
    out = F.batch_norm(out, rm1, rv1, g1, b1, True, 0.1, 1e-5)
    out = F.relu(out, inplace=True)
    out = F.conv2d(out, w2, None, 1, 1)
    n2.add_(1)
    out = F.batch_norm(out, rm2, rv2, g2, b2, True, 0.1, 1e-5)
    out += identity
    out = F.relu(out, inplace=True)
    return (out * out).mean()


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    c = 3
    m = torch.nn.Module()
    m.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
    m.bn1 = torch.nn.BatchNorm2d(c)
    m.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
    m.bn2 = torch.nn.BatchNorm2d(c)
    with torch.no_grad():  # affine parameters away from their defaults
        for bn in (m.bn1, m.bn2):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    state = dict(m.state_dict(keep_vars=True))
    x = torch.randn(2, c, 5, 5)
    sfn = torch.jit.script(block)
    graph = sfn.graph
    torch._C._jit_pass_inline(graph)
    with open(os.path.join(OUT, 'block.ir'), 'w') as f:
        f.write(str(graph).replace(ROOT + '/', ''))
    np.save(os.path.join(OUT, 'x.npy'), x.numpy())
    for n in NAMES:
        np.save(os.path.join(OUT, 'init_%s.npy' % n), state[n].detach().numpy())
    for step in range(1, 4):
        loss = sfn(x, *[state[n] for n in NAMES])
        loss.backward()
        with torch.no_grad():
            for n in PARAMS:
                state[n] -= LR * state[n].grad
                state[n].grad = None
        np.save(os.path.join(OUT, 'step%d_loss.npy' % step), loss.detach().numpy())
        for n in NAMES:
            np.save(os.path.join(OUT, 'step%d_%s.npy' % (step, n)), state[n].detach().numpy())
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print('%d files, %d bytes in %s' % (len(os.listdir(OUT)), total, os.path.relpath(OUT, ROOT)))


if __name__ == '__main__':
    main()
