#!/usr/bin/python3
"""scripts/gen_models.py: the imported-model corpus (tests/data/models/) for
tests/nn/test_models.c. Run with Debian's PyTorch 1.13 and torchvision 0.14:

    /usr/bin/python3 scripts/gen_models.py [NAME... | finetune]

For each model below (fixed seeds, random weights, small widths) it exports
with tools/kiln-export's export_module and writes

    tests/data/models/<name>.ir            the module graph (+ manifest)
    tests/data/models/<name>.safetensors   state_dict (F16 for the larger
                                           ones: the goldens are computed
                                           with the F16-rounded weights)
    tests/data/models/<name>.golden.safetensors
        input.<i>                the inputs
        eval.output.<k>          outputs in eval mode (tuples flattened)
        seed.<k>                 d loss / d output k (loss = sum(out * seed))
        eval.grad.<param>        parameter gradients of that loss, eval mode
                                 (models in GRADS only)
        train.output.<k>         outputs in training mode, and
        train.grad.<param>       its gradients, when they differ from eval's
                                 (metadata train_same_as_eval)
        train.buffer.<name>      buffers the training-mode forward changed
        nograd.output.<k>        eval mode under torch.no_grad() (FAST_PATH)
        metadata: ops (JSON list of the graph's node kinds), n_inputs,
                  n_outputs, rtol, atol

and tests/data/models/finetune.golden.safetensors (gen_finetune: 20 SGD
steps' losses of the CNN and resnet18 (training mode at lr 0.01 and 1e-4,
eval mode at 0.01) on Fashion-MNIST, float32 and float64, and how many
leading steps the two agree on). Training-mode goldens must be
well-conditioned (conditioning() below): generate() refuses inputs whose
float rounding alone moves the outputs by a third of the tolerance. Dropout
probabilities are 0 so training mode is deterministic.
"""
import json
import os
import sys
from importlib.machinery import SourceFileLoader

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch import Tensor
from typing import Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'tests', 'data', 'models')
KE = SourceFileLoader('kiln_export', os.path.join(ROOT, 'tools', 'kiln-export')).load_module()

# ---- hand-written models --------------------------------------------------------


class MLP(nn.Module):
    """kiln's built-in "mlp": 784-256-256-10 with ReLU."""
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class CNN(nn.Module):
    """kiln's built-in "cnn"."""
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(512, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = F.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc2(torch.relu(self.fc1(x)))


class NarrowResNet18(torchvision.models.resnet.ResNet):
    """torchvision's resnet18 (BasicBlock [2, 2, 2, 2], its forward) at
    widths 4-8-16-32 instead of 64-128-256-512."""
    def __init__(self, num_classes=10):
        nn.Module.__init__(self)
        B = torchvision.models.resnet.BasicBlock
        self._norm_layer = nn.BatchNorm2d
        self.inplanes, self.dilation, self.groups, self.base_width = 4, 1, 1, 64
        self.conv1 = nn.Conv2d(3, 4, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(B, 4, 2)
        self.layer2 = self._make_layer(B, 8, 2, stride=2)
        self.layer3 = self._make_layer(B, 16, 2, stride=2)
        self.layer4 = self._make_layer(B, 32, 2, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, num_classes)


class Encoder(nn.Module):
    def __init__(self, batch_first: bool):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=batch_first)

    def forward(self, x, pad_mask):
        return self.layer(x, src_key_padding_mask=pad_mask)


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, q, k, v):
        out, w = self.attn(q, k, v)
        return out, w


class GPTBlock(nn.Module):
    """A GPT-2 block in plain PyTorch: pre-LayerNorm, causal self-attention,
    GELU MLP, residuals."""
    def __init__(self, d=32, heads=4, seq=16):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.register_buffer('causal', torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (C // self.heads) ** 0.5)
        att = att.masked_fill(self.causal[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class LSTM2(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h, c


class GRU1(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(16, 32, batch_first=True)

    def forward(self, x):
        out, h = self.gru(x)
        return out, h


class RNNStack(nn.Module):
    """nn.RNN both ways: tanh, 2 layers, bidirectional, sequence first, zero
    h0; relu, no biases, batch_first, a given h0."""
    def __init__(self):
        super().__init__()
        self.tanh = nn.RNN(4, 6, num_layers=2, bidirectional=True)
        self.relu = nn.RNN(4, 6, nonlinearity='relu', bias=False, batch_first=True)

    def forward(self, x, h0):
        a, ha = self.tanh(x)
        b, hb = self.relu(x.transpose(0, 1), h0)
        return a, ha, b, hb


class LSTMGRUBidirectional(nn.Module):
    """nn.LSTM with a projection (2 layers, bidirectional, batch_first, given
    h0 and c0) and nn.GRU without biases (2 layers, bidirectional, given h0)."""
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3, batch_first=True)
        self.gru = nn.GRU(4, 6, num_layers=2, bidirectional=True, bias=False)

    def forward(self, x, h0, c0, g0):
        out, (h, c) = self.lstm(x, (h0, c0))
        o2, h2 = self.gru(x.transpose(0, 1), g0)
        return out, h, c, o2, h2


class RNNCells(nn.Module):
    """nn.LSTMCell, nn.GRUCell and nn.RNNCell (relu, no biases) stepped over
    the sequence in a TorchScript loop."""
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(4, 5)
        self.gru = nn.GRUCell(4, 5)
        self.rnn = nn.RNNCell(4, 5, nonlinearity='relu', bias=False)

    def forward(self, x):
        h = torch.zeros(x.size(1), 5)
        c = torch.zeros(x.size(1), 5)
        g = torch.zeros(x.size(1), 5)
        r = torch.zeros(x.size(1), 5)
        for t in range(x.size(0)):
            h, c = self.lstm(x[t], (h, c))
            g = self.gru(x[t], g)
            r = self.rnn(x[t], r)
        return h, c, g, r


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.fc1 = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, tokens):
        h = self.emb(tokens).mean(dim=1)
        return self.fc2(torch.tanh(self.fc1(h)))


class AudioConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(1, 8, 9, stride=2)
        self.c2 = nn.Conv1d(8, 16, 9, stride=2)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class UNetBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 16, 3, padding=1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.fuse = nn.Conv2d(16, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 3, 1)

    def forward(self, x):
        d = torch.relu(self.down(x))
        m = torch.relu(self.mid(F.max_pool2d(d, 2)))
        u = torch.cat([self.up(m), d], dim=1)
        f = torch.relu(self.fuse(u))
        f = F.interpolate(f, scale_factor=2.0, mode='nearest')
        return self.head(f)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(64, 32)
        self.mu = nn.Linear(32, 8)
        self.logvar = nn.Linear(32, 8)
        self.dec1 = nn.Linear(8, 32)
        self.dec2 = nn.Linear(32, 64)

    def forward(self, x, eps):
        h = torch.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.exp(0.5 * logvar) * eps
        return torch.sigmoid(self.dec2(torch.relu(self.dec1(z)))), mu, logvar


class BNTrain(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.fc(h.mean(dim=(2, 3)))


class LayerNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.ln = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.ln(self.fc1(x))))


class GroupNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.gn(self.conv(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(**kw)


def efficientnet_b0_narrow():
    setting, last = torchvision.models.efficientnet._efficientnet_conf(
        'efficientnet_b0', width_mult=0.25, depth_mult=0.5)
    # stochastic depth off too (its default 0.2 made training mode random)
    return torchvision.models.efficientnet.EfficientNet(setting, 0.0, stochastic_depth_prob=0.0,
                                                       num_classes=10, last_channel=last)


def densenet121_narrow():
    return torchvision.models.DenseNet(growth_rate=4, block_config=(6, 12, 24, 16),
                                       num_init_features=8, num_classes=10, drop_rate=0.0)


def vgg11_bn_narrow():
    cfg = [8, 'M', 16, 'M', 32, 32, 'M', 64, 64, 'M', 64, 64, 'M']
    m = torchvision.models.VGG(torchvision.models.vgg.make_layers(cfg, batch_norm=True),
                               num_classes=10, dropout=0.0)
    m.avgpool = nn.AdaptiveAvgPool2d((1, 1))
    m.classifier = nn.Sequential(nn.Linear(64, 32), nn.ReLU(True), nn.Dropout(0.0),
                                 nn.Linear(32, 10))
    return m


def img(b=2, c=3, s=32):
    return [([b, c, s, s], 'float')]


# name: (constructor, example inputs, store F16, input maker or None)
MODELS = {
    'mlp': (MLP, [([4, 784], 'float')], True),
    'cnn': (CNN, [([4, 1, 28, 28], 'float')], False),
    # 64x64 images: at 32x32 the last stage is 1x1, so training-mode batch
    # norm normalises 2 values per channel, nearly equal ones, and float
    # rounding moved the outputs by more than the tolerance (see
    # conditioning(): the input rounding alone moved them 2x rtol)
    'resnet18': (NarrowResNet18, img(s=64), True),
    'mobilenet_v2': (tv('mobilenet_v2', width_mult=0.25, num_classes=10, dropout=0.0), img(s=128),
                     True),
    'mobilenet_v3_small': (tv('mobilenet_v3_small', width_mult=0.25, num_classes=10,
                              dropout=0.0), img(), True),
    'squeezenet1_1': (tv('squeezenet1_1', num_classes=10, dropout=0.0), img(s=64), True),
    # shufflenet_v2_x0_5's channels with a 256-wide conv5 (1024 in x0_5)
    'shufflenet_v2_x0_5': (lambda: torchvision.models.ShuffleNetV2(
        [4, 8, 4], [24, 48, 96, 192, 256], num_classes=10), img(s=128), True),
    'densenet121': (densenet121_narrow, img(s=64), True),
    'efficientnet_b0': (efficientnet_b0_narrow, img(b=4, s=64), True),
    'vgg11_bn': (vgg11_bn_narrow, img(), True),
    'transformer_encoder': (lambda: Encoder(True), [([2, 6, 32], 'float'), ([2, 6], 'pad')],
                            False),
    'transformer_encoder_seq_first': (lambda: Encoder(False),
                                      [([6, 2, 32], 'float'), ([2, 6], 'pad')], False),
    'multihead_attention': (MHA, [([2, 5, 32], 'float')] * 3, False),
    'gpt2_block': (GPTBlock, [([2, 16, 32], 'float')], False),
    'lstm': (LSTM2, [([2, 7, 16], 'float')], False),
    'gru': (GRU1, [([2, 7, 16], 'float')], False),
    'rnn_stack': (RNNStack, [([5, 2, 4], 'float'), ([1, 2, 6], 'float')], False),
    'lstm_gru_bidirectional': (LSTMGRUBidirectional, [([2, 5, 4], 'float'), ([4, 2, 3], 'float'),
                                                      ([4, 2, 6], 'float'), ([4, 2, 6], 'float')],
                               False),
    'rnn_cells': (RNNCells, [([5, 2, 4], 'float')], False),
    'text_classifier': (TextClassifier, [([4, 12], 'long')], False),
    'audio_conv1d': (AudioConv, [([2, 1, 256], 'float')], False),
    'unet_block': (UNetBlock, [([1, 3, 16, 16], 'float')], False),
    'vae': (VAE, [([4, 64], 'float'), ([4, 8], 'float')], False),
    'batchnorm2d_train': (BNTrain, [([4, 3, 8, 8], 'float')], False),
    'layernorm': (LayerNormNet, [([4, 16], 'float')], False),
    'groupnorm': (GroupNormNet, [([2, 3, 8, 8], 'float')], False),
}


# the models whose parameter gradients are in the goldens (the others' weights
# are larger; their outputs are checked)
GRADS = {'cnn', 'resnet18', 'transformer_encoder', 'transformer_encoder_seq_first',
         'multihead_attention', 'gpt2_block', 'lstm', 'gru', 'rnn_stack',
         'lstm_gru_bidirectional', 'rnn_cells', 'text_classifier', 'audio_conv1d',
         'unet_block', 'vae', 'batchnorm2d_train', 'layernorm', 'groupnorm'}


# graphs with PyTorch's fused transformer kernels: their goldens also hold
# nograd.output.<k>, eval mode under torch.no_grad(), where nn.Transformer-
# EncoderLayer (batch_first) and nn.MultiheadAttention (self-attention)
# take the fast path through them
FAST_PATH = {'aten::_transformer_encoder_layer_fwd', 'aten::_native_multi_head_attention'}


def make_inputs(examples, seed):
    g = torch.Generator().manual_seed(seed)
    ts = []
    for shape, dt in examples:
        if dt == 'long':
            ts.append(torch.randint(0, 100, shape, generator=g))
        elif dt == 'pad':  # a key padding mask: the last positions of batch 1 padded
            m = torch.zeros(shape, dtype=torch.bool)
            m[-1, -2:] = True
            ts.append(m)
        else:
            ts.append(torch.randn(shape, generator=g))
    return ts


def flatten(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    return [out]


def run(m, inputs, seeds):
    """(outputs, {param: grad}) for loss = sum(out_k * seed_k)."""
    m.zero_grad(set_to_none=True)
    outs = flatten(m(*inputs))
    loss = sum((o * s).sum() for o, s in zip(outs, seeds) if o.is_floating_point())
    loss.backward()
    grads = {k: p.grad.clone() if p.grad is not None else torch.zeros_like(p)
             for k, p in m.named_parameters()}
    return [o.detach().clone() for o in outs], grads


def generate(name):
    ctor, examples, half = MODELS[name]
    torch.manual_seed(0)
    m = ctor()
    if half:  # the weights the file holds, so the goldens match them
        with torch.no_grad():
            for p in list(m.parameters()) + [b for b in m.buffers() if b.is_floating_point()]:
                p.copy_(p.half().float())
    ex = [(s, 'bool' if d == 'pad' else d) for s, d in examples]
    out = os.path.join(OUT, name)
    m.train()
    sm = KE.export_module(m, ex, out, torch.float16 if half else None, strip_comments=True)
    ops = sorted({n.kind() for n in sm.graph.nodes()} |
                 {n.kind() for b in _blocks(sm.graph) for n in b.nodes()})
    inputs = make_inputs(examples, 1)
    g = torch.Generator().manual_seed(2)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    m.eval()
    with torch.no_grad():
        probe = flatten(m(*inputs))
    seeds = [torch.randn(o.shape, generator=g) for o in probe]
    gold = {}
    for i, t in enumerate(inputs):
        gold['input.%d' % i] = t
    for i, s in enumerate(seeds):
        gold['seed.%d' % i] = s
    res = {}
    for mode in ('eval', 'train'):
        m.load_state_dict(state)
        m.train(mode == 'train')
        res[mode] = run(m, inputs, seeds)
        if mode == 'train':
            for k, v in m.named_buffers():
                if not torch.equal(v, state[k]):
                    gold['train.buffer.%s' % k] = v.detach().clone()
    same = all(torch.equal(a, b) for a, b in zip(res['eval'][0], res['train'][0]))
    if FAST_PATH & set(ops):  # eval under no_grad: the fused kernels' path
        m.load_state_dict(state)
        m.eval()
        with torch.no_grad():
            for i, o in enumerate(flatten(m(*inputs))):
                gold['nograd.output.%d' % i] = o.clone()
    for mode in ('eval',) if same else ('eval', 'train'):
        outs, grads = res[mode]
        for i, o in enumerate(outs):
            gold['%s.output.%d' % (mode, i)] = o
        if name in GRADS:
            for k, v in grads.items():
                gold['%s.grad.%s' % (mode, k)] = v
    m.load_state_dict(state)
    if not same:
        c = conditioning(m, inputs)
        print('%-32s training mode: float input rounding moves outputs by %.3g x tolerance'
              % (name, c))
        assert c < 0.3, '%s: ill-conditioned in training mode (%.3g); change its inputs' % (name, c)
        m.load_state_dict(state)
    meta = {'train_same_as_eval': str(same).lower(), 'ops': json.dumps(ops), 'n_inputs': str(len(inputs)), 'n_outputs': str(len(seeds)),
            'rtol': '1e-4', 'atol': '1e-5'}
    KE.write_safetensors(out + '.golden.safetensors', gold, meta)
    size = sum(os.path.getsize(out + s) for s in ('.ir', '.safetensors', '.golden.safetensors'))
    print('%-32s %7.1f KB' % (name, size / 1024))


def conditioning(m, inputs, rtol=1e-4, atol=1e-5):
    """How far float32 rounding of the inputs alone (relative noise 1e-7,
    in float64) moves the training-mode outputs, in units of the goldens'
    tolerance: the largest of |change| / (atol + rtol |out|). A golden near
    1 or above cannot be matched by an equally correct implementation that
    rounds differently."""
    import copy
    md = copy.deepcopy(m).double().train()
    xs = [t.double() if t.is_floating_point() else t for t in inputs]
    worst = 0.0
    with torch.no_grad():
        y0 = flatten(md(*xs))
        for s in range(3):
            g = torch.Generator().manual_seed(100 + s)
            xp = [t * (1 + 1e-7 * torch.randn(t.shape, generator=g, dtype=torch.float64))
                  if t.is_floating_point() else t for t in xs]
            for a, b in zip(flatten(md(*xp)), y0):
                if b.is_floating_point():
                    worst = max(worst, ((a - b).abs() / (atol + rtol * b.abs())).max().item())
    return worst


def _blocks(graph):
    todo = [graph]
    out = []
    while todo:
        b = todo.pop()
        for n in b.nodes():
            for sb in n.blocks():
                out.append(sb)
                todo.append(sb)
    return out


# the fine-tunes: (entry, model, training mode, lr). resnet18 in training
# mode at lr 0.01 is chaotic after 3 steps (see conditioned_steps below), so
# it is also fine-tuned where float32 is well-conditioned for all 20 steps:
# in eval mode (batch norm statistics frozen, as fine-tuning with small
# batches often does; the weights still train) at the same lr, and in
# training mode at lr 1e-4
FINETUNE = (('cnn', 'cnn', True, 0.01), ('resnet18', 'resnet18', True, 0.01),
            ('resnet18_frozen_bn', 'resnet18', False, 0.01),
            ('resnet18_lr1e-4', 'resnet18', True, 1e-4))
FMNIST = '/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz'
FMNIST_LABELS = '/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz'


def gen_finetune(steps=20, batch=16, momentum=0.9):
    """tests/data/models/finetune.golden.safetensors: <entry>.losses, the
    training losses of `steps` SGD steps (the entry's lr, momentum) from the
    exported weights on the first Fashion-MNIST images in order (normalised
    as kiln does; 3-channel models get the grey channel repeated), with the
    model in training or eval mode; metadata <entry>.model, .training, .lr,
    .conditioned_steps and `entries`."""
    import gzip
    import numpy as np
    with gzip.open(FMNIST) as f:
        px = np.frombuffer(f.read(), np.uint8, offset=16)[:steps * batch * 784]
    with gzip.open(FMNIST_LABELS) as f:
        ys = np.frombuffer(f.read(), np.uint8, offset=8)[:steps * batch]
    x_all = ((px.astype(np.float32) / 255 - 0.2860) / 0.3530).reshape(-1, 1, 28, 28)
    gold = {}
    meta = {'steps': str(steps), 'batch': str(batch), 'momentum': repr(momentum),
            'entries': json.dumps([e[0] for e in FINETUNE])}
    for entry, name, training, lr in FINETUNE:
        runs = {}
        for dt in (torch.float32, torch.float64, 'perturbed'):
            ctor = MODELS[name][0]
            m = ctor()
            sd, _ = KE.read_safetensors(os.path.join(OUT, name + '.safetensors'))
            m.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in sd.items()})
            if dt == 'perturbed':  # float64 from weights moved by relative 1e-6 noise
                dt = 'perturbed'
                m.double()
                g = torch.Generator().manual_seed(3)
                with torch.no_grad():
                    for p in m.parameters():
                        p.mul_(1 + 1e-6 * torch.randn(p.shape, generator=g, dtype=torch.float64))
            key, dt = dt, torch.float64 if dt == 'perturbed' else dt
            m.to(dt).train(training)
            opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=momentum)
            losses = []
            for i in range(steps):
                x = torch.from_numpy(x_all[i * batch:(i + 1) * batch].copy()).to(dt)
                if MODELS[name][1][0][0][1] == 3:
                    x = x.expand(-1, 3, -1, -1).contiguous()
                y = torch.from_numpy(ys[i * batch:(i + 1) * batch].astype(np.int64))
                loss = F.cross_entropy(m(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            runs[key] = losses
        losses = runs[torch.float32]
        # <entry>.conditioned_steps: the leading steps whose float32 loss is
        # within a tenth of the test's tolerance (2e-4 (1 + loss)) of the
        # float64 run's. Past them the trajectory is chaotic (training-mode
        # batch norm over 16 values per channel in resnet18's last stage, 1x1
        # at 28x28 inputs): at lr 0.01 PyTorch's own float32 run leaves the
        # exact one by 5x the tolerance at step 5, so a float32 run that
        # rounds differently cannot follow; at lr 1e-3 it still leaves it at
        # step 8, at 3e-4 at step 10; frozen statistics hold all 20.
        # A step must also be insensitive to the weights: the float64 run
        # from weights moved by relative 1e-6 (kiln's first-step losses
        # differ from PyTorch's by up to 5e-7) must stay as close; resnet18
        # in training mode at lr 1e-4 fails that at step 20 alone.
        ok = 0
        while ok < steps and all(abs(r[ok] - runs[torch.float64][ok]) <= 2e-5 * (1 + abs(r[ok]))
                                 for r in (losses, runs['perturbed'])):
            ok += 1
        meta[entry + '.conditioned_steps'] = str(ok)
        meta[entry + '.model'] = name
        meta[entry + '.training'] = str(int(training))
        meta[entry + '.lr'] = repr(lr)
        gold[entry + '.losses'] = torch.tensor(losses, dtype=torch.float64)
        gold[entry + '.losses_f64'] = torch.tensor(runs[torch.float64], dtype=torch.float64)
        print('finetune %-20s losses %.4f -> %.4f, %d steps conditioned' % (entry, losses[0], losses[-1], ok))
    KE.write_safetensors(os.path.join(OUT, 'finetune.golden.safetensors'), gold, meta)


def main(names):
    os.makedirs(OUT, exist_ok=True)
    for name in names or MODELS:
        if name != 'finetune':
            generate(name)
    if not names or 'finetune' in names:
        gen_finetune()


if __name__ == '__main__':
    main(sys.argv[1:])
