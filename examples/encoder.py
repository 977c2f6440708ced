"""examples/encoder.py: a small transformer encoder classifier for 28x28
images read as 28 rows of 28 pixels (for examples/import_pytorch.sh)."""
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, d_model: int = 64, heads: int = 4):
        super().__init__()
        self.embed = nn.Linear(28, d_model)
        self.encoder = nn.TransformerEncoderLayer(d_model, heads, 2 * d_model, dropout=0.0,
                                                  batch_first=True)
        self.head = nn.Linear(d_model, 10)

    def forward(self, x):  # x [B, 28, 28]
        h = self.encoder(self.embed(x))
        return self.head(h.mean(dim=1))
