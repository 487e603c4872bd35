"""A small GPT written the way user code is, without annotations: the subject of the
annotate command's tests (tests/audit/test_annotate.py) and of docs/annotate.md."""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class Output(NamedTuple):
    logits: torch.Tensor
    loss: torch.Tensor | None


def attend(q, k, v, causal=True):
    scale = q.size(-1) ** -0.5
    weights = (q @ k.transpose(-2, -1)) * scale
    if causal:
        T = q.size(-2)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        weights = weights.masked_fill(future, float("-inf"))
    return weights.softmax(dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (rearrange(t, "b t (h d) -> b h t d", h=self.heads) for t in (q, k, v))
        y = attend(q, k, v)
        return self.proj(rearrange(y, "b h t d -> b t (h d)"))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, width, heads, depth, max_time):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Embedding(max_time, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.head = nn.Linear(width, vocab)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        x = self.embed(idx) + self.position(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        if targets is None:
            return Output(logits, None)
        flat = rearrange(logits, "b t v -> (b t) v"), rearrange(targets, "b t -> (b t)")
        return Output(logits, F.cross_entropy(*flat))

    @torch.no_grad()
    def generate(self, idx, steps):
        for _ in range(steps):
            logits = self(idx).logits[:, -1, :]
            idx = torch.cat([idx, logits.argmax(dim=-1, keepdim=True)], dim=1)
        return idx
