"""Multi-head self-attention with typed shapes, einops head splits and a ``keep`` mask.

Heads are split by ``rearrange``: a ``view`` without the transpose, or ``(dim head)`` where
the projection wrote ``(head dim)``, mixes the heads' features and still trains. The weights
are laid out as ``nn.MultiheadAttention``'s (one input projection for query, key and value,
in that order, then an output projection), so its trained weights copy on one to one."""

import torch.nn.functional as F
from einops import rearrange
from torch import nn

from . import masks
from .shapes import Bool, Float, Tensor, typechecked


@typechecked
def attend(
    query: Float[Tensor, "batch head query dim"],
    key: Float[Tensor, "batch head key dim"],
    value: Float[Tensor, "batch head key value"],
    keep: Bool[Tensor, "#batch #head #query key"] | None = None,
    dropout: float = 0.0,
) -> Float[Tensor, "batch head query value"]:
    """Scaled dot-product attention: each query's softmax over the keys ``keep`` allows."""
    return F.scaled_dot_product_attention(query, key, value, attn_mask=keep, dropout_p=dropout)


class SelfAttention(nn.Module):
    """``width`` features in and out, split into ``heads`` heads; ``causal`` lets each step
    attend only itself and the steps before it; ``dropout`` drops attention weights in training."""

    def __init__(self, width: int, heads: int, causal: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} does not split into {heads} heads")
        self.heads, self.causal, self.dropout = heads, causal, dropout
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    @typechecked
    def forward(
        self,
        x: Float[Tensor, "batch time feature"],
        keep: Bool[Tensor, "#batch 1 #time time"] | None = None,
    ) -> Float[Tensor, "batch time feature"]:
        split = "batch time (three head dim) -> three batch head time dim"
        query, key, value = rearrange(self.qkv(x), split, three=3, head=self.heads)
        if self.causal:
            future = masks.causal(x.shape[1], device=x.device)
            keep = future if keep is None else keep & future
        dropout = self.dropout if self.training else 0.0
        attended = attend(query, key, value, keep, dropout)
        return self.out(rearrange(attended, "batch head time dim -> batch time (head dim)"))
