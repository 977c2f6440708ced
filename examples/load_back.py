"""examples/load_back.py: loads a kiln checkpoint (or --save-weights file)
back into the PyTorch module it was exported from and checks that every
state_dict entry came back.

    /usr/bin/python3 examples/load_back.py CHECKPOINT torchvision:resnet18 '{"num_classes": 10}'
    /usr/bin/python3 examples/load_back.py CHECKPOINT examples/encoder.py:Classifier
"""
import json
import os
import sys
from importlib.machinery import SourceFileLoader

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
KE = SourceFileLoader('kiln_export', os.path.join(HERE, '..', 'tools', 'kiln-export')).load_module()

path, spec = sys.argv[1], sys.argv[2]
kwargs = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
tensors, meta = KE.read_safetensors(path)
# a checkpoint also holds the optimizer's state ("optim.<param>.<buffer>")
state = {k: v for k, v in tensors.items() if not k.startswith('optim.')}
m = KE.load_class(spec, [], kwargs)
m.load_state_dict(state, strict=True)
m.eval()
print('load_back: %s: %d tensors loaded into %s (step %s)' % (
    path, len(state), type(m).__name__, meta.get('step', '?')))
with torch.no_grad():
    x = torch.zeros(1, 3, 28, 28) if 'resnet' in spec else torch.zeros(1, 28, 28)
    print('load_back: logits of a blank image:', m(x).numpy().round(3).tolist())
