"""A GPT decoder written as nanoGPT writes it, causal by a mask buffer or by
``scaled_dot_product_attention(..., is_causal=True)`` (``--sdpa``); run as a script, it trains
a few steps and samples. The subject of the behaviour audit's tests (test_behaviour_audit.py)."""

import argparse
import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class CausalSelfAttention(nn.Module):
    bias: torch.Tensor  # registered below unless --sdpa

    def __init__(self, width, heads, block, sdpa):
        super().__init__()
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.heads, self.sdpa = heads, sdpa
        if not sdpa:
            self.register_buffer("bias", torch.tril(torch.ones(1, 1, block, block)))

    def forward(self, x):
        T, split = x.size(1), "b t (h d) -> b h t d"
        q, k, v = (rearrange(t, split, h=self.heads) for t in self.c_attn(x).chunk(3, dim=-1))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.c_proj(rearrange(y, "b h t d -> b t (h d)"))


class Block(nn.Module):
    def __init__(self, width, heads, block, sdpa):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, block, sdpa)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, width, heads, depth, block, sdpa):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.h = nn.ModuleList(Block(width, heads, block, sdpa) for _ in range(depth))
        self.ln_f, self.lm_head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        flat = rearrange(logits, "b t v -> (b t) v"), rearrange(targets, "b t -> (b t)")
        return logits, F.cross_entropy(*flat)

    @torch.no_grad()
    def generate(self, idx, steps):
        for _ in range(steps):
            logits, _ = self(idx)
            probs = F.softmax(logits[:, -1, :], dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--time", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--sdpa", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = GPT(vocab=50, width=args.width, heads=4, depth=4, block=64, sdpa=args.sdpa)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(args.steps):
        data = torch.randint(50, (args.batch, args.time + 1))
        _, loss = model(data[:, :-1], data[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")
    model.eval()
    print(model.generate(data[:1, :4], 8).tolist())
