#!/usr/bin/python3
"""scripts/golden/attention.py: goldens for kiln's decompositions of the
fused transformer kernels (src/ops/attention.c), read by
tests/ops/test_attention.c. Run with Debian's PyTorch 1.13:

    /usr/bin/python3 scripts/golden/attention.py

Writes tests/data/attention/attention.golden.safetensors: per case <c>

    <c>.in.<i>     the op's tensor arguments in schema order (float32; masks
                   bool or float32)
    <c>.out.<k>    PyTorch's fused kernel's outputs (torch.no_grad, where it
                   runs; it has no derivative)
    <c>.seed.<k>   d loss / d out k (loss = sum(out_k * seed_k))
    <c>.grad.<i>   d loss / d in i for the floating tensor arguments, by
                   PyTorch's autograd through the slow path (F.softmax and
                   linear for the attention, nn.TransformerEncoderLayer in
                   training mode with dropout 0 for the layer), in float64;
                   that path's forward is checked against the fused
                   kernel's first
    metadata <c>:  JSON of the case's non-tensor arguments
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'tests', 'data', 'attention')
sys.path.insert(0, os.path.join(ROOT, 'tools'))
from importlib.machinery import SourceFileLoader
KE = SourceFileLoader('kiln_export', os.path.join(ROOT, 'tools', 'kiln-export')).load_module()

B, T, D, H = 2, 4, 8, 2


def slow_mha(q, k, v, W, b, Wo, bo, mask, need, avg):
    """The attention the kernel computes, in plain ops (mask: bool, True = masked)."""
    dh = D // H
    Q = (q @ W[:D].T + b[:D]) / math.sqrt(dh)
    K = k @ W[D:2 * D].T + b[D:2 * D]
    V = v @ W[2 * D:].T + b[2 * D:]
    sh = lambda t: t.view(B, T, H, dh).transpose(1, 2)
    s = sh(Q) @ sh(K).transpose(-1, -2)
    if mask is not None:
        if mask.dim() == 2:
            mask = mask.view(B, 1, 1, T)
        s = s.masked_fill(mask != 0, float('-inf'))
    p = torch.softmax(s, -1)
    o = (p @ sh(V)).transpose(1, 2).reshape(B, T, D) @ Wo.T + bo
    return o, (p.mean(1) if avg else p) if need else None


def mha_case(gold, meta, name, g, qkv_mode, mask_kind, need, avg):
    x = torch.randn(B, T, D, generator=g)
    if qkv_mode == 'self':
        q = k = v = x
    elif qkv_mode == 'kv':
        q, k, v = x, torch.randn(B, T, D, generator=g), None
        v = k
    else:
        q, k, v = x, torch.randn(B, T, D, generator=g), torch.randn(B, T, D, generator=g)
    W = torch.randn(3 * D, D, generator=g) * 0.3
    b = torch.randn(3 * D, generator=g) * 0.1
    Wo = torch.randn(D, D, generator=g) * 0.3
    bo = torch.randn(D, generator=g) * 0.1
    mask, mtype = None, None
    if mask_kind == 'pad':
        mask = torch.zeros(B, T, dtype=torch.bool)
        mask[1, -2:] = True
        mtype = 1
    elif mask_kind == 'pad_float':
        mask = torch.zeros(B, T)
        mask[0, 0] = float('-inf')
        mask[1, -1] = float('-inf')
        mtype = 1
    elif mask_kind == 'full4d':
        mask = torch.rand(B, H, T, T, generator=g) > 0.6
        mask[..., 0] = False
        mtype = 2
    with torch.no_grad():
        outs = torch._native_multi_head_attention(q, k, v, D, H, W, b, Wo, bo, mask, need, avg, mtype)
    outs = [o for o in outs if o is not None]
    ins = [q, k, v, W, b, Wo, bo] + ([mask] if mask is not None else [])
    # the slow path in float64, the distinct tensors as leaves
    leaves = {}
    def leaf(t):
        if id(t) not in leaves:
            leaves[id(t)] = t.double().requires_grad_()
        return leaves[id(t)]
    dq, dk, dv = leaf(q), leaf(k), leaf(v)
    dw = [leaf(t) for t in (W, b, Wo, bo)]
    ro = slow_mha(dq, dk, dv, *dw, mask, need, avg)
    ro = [o for o in ro if o is not None]
    for a, r in zip(outs, ro):
        assert (a.double() - r).abs().max().item() < 1e-5, name
    seeds = [torch.randn(o.shape, generator=g) for o in outs]
    loss = sum((r * s.double()).sum() for r, s in zip(ro, seeds))
    loss.backward()
    store(gold, name, ins, outs, seeds, [leaf(t) for t in ins[:7]])
    meta[name] = json.dumps({'op': 'mha', 'embed_dim': D, 'num_head': H, 'need_weights': need,
                             'average_attn_weights': avg, 'mask_type': mtype,
                             'qkv': qkv_mode, 'n_in': len(ins)})


def store(gold, name, ins, outs, seeds, grad_of):
    for i, t in enumerate(ins):
        gold['%s.in.%d' % (name, i)] = t
    for k, (o, s) in enumerate(zip(outs, seeds)):
        gold['%s.out.%d' % (name, k)] = o
        gold['%s.seed.%d' % (name, k)] = s
    for i, t in enumerate(grad_of):
        if t.grad is not None:
            gold['%s.grad.%d' % (name, i)] = t.grad.float()


def layer_case(gold, meta, name, g, gelu, norm_first, pad):
    torch.manual_seed(int(torch.randint(0, 1 << 30, (1,), generator=g)))
    layer = nn.TransformerEncoderLayer(D, H, 16, dropout=0.0, activation='gelu' if gelu else 'relu',
                                       batch_first=True, norm_first=norm_first)
    with torch.no_grad():  # non-trivial norm parameters
        for n_ in (layer.norm1, layer.norm2):
            n_.weight.add_(torch.randn(D, generator=g) * 0.2)
            n_.bias.add_(torch.randn(D, generator=g) * 0.1)
    src = torch.randn(B, T, D, generator=g)
    mask = None
    if pad:
        mask = torch.zeros(B, T, dtype=torch.bool)
        mask[0, -1] = True
    sa = layer.self_attn
    ws = [sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
          layer.norm1.weight, layer.norm1.bias, layer.norm2.weight, layer.norm2.bias,
          layer.linear1.weight, layer.linear1.bias, layer.linear2.weight, layer.linear2.bias]
    layer.eval()
    with torch.no_grad():
        out = torch._transformer_encoder_layer_fwd(src, D, H, *ws[:4], gelu, norm_first, 1e-5,
                                                   *ws[4:], mask, 1 if pad else None)
        fast = layer(src, src_key_padding_mask=mask)  # the module's own fast path
    assert torch.equal(out, fast), name
    ins = [src] + [w.detach().clone() for w in ws] + ([mask] if pad else [])
    ld = layer.double().train()
    s64 = src.double().requires_grad_()
    ref = ld(s64, src_key_padding_mask=mask)
    assert (ref - out.double()).abs().max().item() < 1e-5, name
    seed = torch.randn(out.shape, generator=g)
    (ref * seed.double()).sum().backward()
    sa = ld.self_attn
    wd = [sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
          ld.norm1.weight, ld.norm1.bias, ld.norm2.weight, ld.norm2.bias,
          ld.linear1.weight, ld.linear1.bias, ld.linear2.weight, ld.linear2.bias]
    store(gold, name, ins, [out], [seed], [s64] + wd)
    meta[name] = json.dumps({'op': 'layer', 'embed_dim': D, 'num_heads': H, 'use_gelu': gelu,
                             'norm_first': norm_first, 'eps': 1e-5,
                             'mask_type': 1 if pad else None, 'n_in': len(ins)})


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    gold, meta = {}, {}
    mha_case(gold, meta, 'mha_self', g, 'self', None, True, True)
    mha_case(gold, meta, 'mha_pad_heads', g, 'self', 'pad', True, False)
    mha_case(gold, meta, 'mha_pad_float_noweights', g, 'self', 'pad_float', False, True)
    mha_case(gold, meta, 'mha_distinct_mask4d', g, 'distinct', 'full4d', True, True)
    mha_case(gold, meta, 'mha_kv_same', g, 'kv', None, True, True)
    layer_case(gold, meta, 'layer_relu_pad', g, False, False, True)
    layer_case(gold, meta, 'layer_gelu_norm_first', g, True, True, False)
    layer_case(gold, meta, 'layer_gelu_pad', g, True, False, True)
    meta['cases'] = json.dumps(sorted(k for k in meta))
    KE.write_safetensors(os.path.join(OUT, 'attention.golden.safetensors'), gold, meta)
    print('%d cases, %d tensors' % (len(meta) - 1, len(gold)))


if __name__ == '__main__':
    main()
