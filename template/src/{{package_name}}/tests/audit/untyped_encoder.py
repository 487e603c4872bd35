"""A padded sequence classifier written the way user code is, without annotations, and a
few training steps when run as a script: an attention of its own and torch's encoder, both
given the padding mask. The subject of the behaviour audit's tests (test_behaviour_audit.py)."""

import argparse
from math import inf

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class MaskedAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x, padding):
        split = "b t (h d) -> b h t d"
        q, k, v = (rearrange(t, split, h=self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        weights = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
        weights = weights.masked_fill(rearrange(padding, "b t -> b 1 1 t"), -inf)
        return self.proj(rearrange(weights.softmax(-1) @ v, "b h t d -> b t (h d)"))


class Classifier(nn.Module):
    def __init__(self, vocab, width, heads, classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.attn = MaskedAttention(width, heads)
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, tokens, padding):
        x = self.embed(tokens)
        x = self.encoder(x + self.attn(x, padding), src_key_padding_mask=padding)
        real = rearrange((~padding).float(), "b t -> b t 1")
        return self.head((x * real).sum(1) / real.sum(1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--time", type=int, default=6)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Classifier(vocab=20, width=16, heads=2, classes=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        lengths = torch.randint(1, args.time + 1, (args.batch,))
        steps = rearrange(torch.arange(args.time), "t -> 1 t")
        padding = steps >= rearrange(lengths, "b -> b 1")
        tokens = torch.randint(1, 20, (args.batch, args.time)).masked_fill(padding, 0)
        loss = F.cross_entropy(model(tokens, padding), torch.randint(0, 3, (args.batch,)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"trained, loss {loss.item():.3f}")
