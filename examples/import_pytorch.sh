#!/bin/sh
# examples/import_pytorch.sh: bring your own PyTorch model to kiln. Exports
# torchvision's resnet18 and a small transformer encoder (examples/encoder.py)
# with tools/kiln-export (Debian's PyTorch 1.13 as /usr/bin/python3), runs
# inference with `kiln run`, fine-tunes each on Fashion-MNIST for a few
# hundred steps in eager, jit and lazy mode with `kiln train --graph`, and
# loads the results back into PyTorch (examples/load_back.py).
#
#   make && sh examples/import_pytorch.sh          # STEPS=300 OUT=/tmp/kiln-import
set -e
KILN=${KILN:-build/kiln}
STEPS=${STEPS:-300}
OUT=${OUT:-/tmp/kiln-import}
mkdir -p "$OUT"

# 1. export once: NAME.ir (the scripted forward graph) + NAME.safetensors (state_dict)
tools/kiln-export torchvision:resnet18 --kwargs '{"num_classes": 10}' \
    --example 1,3,64,64 -o "$OUT/resnet18"
tools/kiln-export examples/encoder.py:Classifier --example 1,28,28 -o "$OUT/encoder"

# 2. inference (eval mode) on a random input
/usr/bin/python3 -c "import numpy as np; np.save('$OUT/x.npy', np.random.default_rng(0).standard_normal((2, 3, 64, 64), dtype=np.float32))"
"$KILN" run "$OUT/resnet18.ir" --weights "$OUT/resnet18.safetensors" --eval "$OUT/x.npy" \
    --out "$OUT/run"
echo "resnet18 logits: $OUT/run/out0.npy"

# 3. fine-tune in each mode (3-channel models get the grey channel repeated)
for model in resnet18 encoder; do
  for mode in eager jit lazy; do
    "$KILN" train --graph "$OUT/$model.ir" --weights "$OUT/$model.safetensors" \
        --mode "$mode" --epochs 1 --steps "$STEPS" --limit-test 2000 \
        --optimizer adam --save "$OUT/$model-$mode.safetensors"
  done
done

# 4. back into PyTorch
/usr/bin/python3 examples/load_back.py "$OUT/resnet18-lazy.safetensors" torchvision:resnet18 \
    '{"num_classes": 10}'
/usr/bin/python3 examples/load_back.py "$OUT/encoder-jit.safetensors" examples/encoder.py:Classifier
