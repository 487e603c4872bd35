"""Masks with one polarity: ``keep`` is True where a query may attend, or where a step is real.

``F.scaled_dot_product_attention`` reads a bool mask as *attend*; ``nn.MultiheadAttention``
reads ``key_padding_mask`` and a bool ``attn_mask`` as *blocked*. A mask handed across that
line unconverted attends to the padding only, and still trains. The ``to_*`` and
``from_multihead`` functions are the only places where the polarity flips.

A builder names its broadcast axes with a literal ``1``: ``Bool[Tensor, "batch 1 1 key"]``
cannot be the ``(batch, 1, key, 1)`` mask of a padding bug, which ``#query`` ("this size or
1") would accept. Consumers take ``#`` axes, so every builder's output fits.

A sequence with no real step gets zeros here, as a query with no key gets zeros from
``F.scaled_dot_product_attention`` (torch 2.5 and later); a hand-written softmax gives NaN."""

import torch
import torch.nn.functional as F
from einops import rearrange

from .shapes import Bool, Float, Int, Scalar, Tensor, typechecked


@typechecked
def real_steps(lengths: Int[Tensor, " batch"], steps: int) -> Bool[Tensor, "batch time"]:
    """``keep[b, t]``: step ``t`` of sequence ``b`` is real, ``t < lengths[b]``; padded
    sequences are left-aligned, their padding at the end."""
    if len(lengths) and (int(lengths.min()) < 0 or int(lengths.max()) > steps):
        raise ValueError(f"lengths must lie in [0, {steps}], got {lengths.tolist()}")
    time = torch.arange(steps, device=lengths.device)
    return rearrange(time, "time -> 1 time") < rearrange(lengths, "batch -> batch 1")


@typechecked
def key_padding(keep: Bool[Tensor, "batch key"]) -> Bool[Tensor, "batch 1 1 key"]:
    """The attention mask of padded keys: every head and query may attend the real keys."""
    return rearrange(keep, "batch key -> batch 1 1 key")


@typechecked
def causal(queries: int, device: torch.device | None = None) -> Bool[Tensor, "1 1 query key"]:
    """``keep[0, 0, q, k]``: query ``q`` may attend key ``k`` at or before it, ``k <= q``."""
    time = torch.arange(queries, device=device)
    return rearrange(rearrange(time, "q -> q 1") >= rearrange(time, "k -> 1 k"), "q k -> 1 1 q k")


@typechecked
def both(
    padding: Bool[Tensor, "batch 1 1 key"], future: Bool[Tensor, "1 1 query key"]
) -> Bool[Tensor, "batch 1 query key"]:
    """Attend only keys that are real and not in the future: the mask of a padded decoder."""
    return padding & future


@typechecked
def to_key_padding_mask(keep: Bool[Tensor, "batch 1 1 key"]) -> Bool[Tensor, "batch key"]:
    """``nn.MultiheadAttention``'s ``key_padding_mask``, True where a key is padding."""
    return ~rearrange(keep, "batch 1 1 key -> batch key")


@typechecked
def to_attn_mask(keep: Bool[Tensor, "1 1 query key"]) -> Bool[Tensor, "query key"]:
    """``nn.MultiheadAttention``'s bool ``attn_mask``, True where attention is blocked."""
    return ~rearrange(keep, "1 1 query key -> query key")


@typechecked
def from_multihead(
    key_padding_mask: Bool[Tensor, "batch key"] | None = None,
    attn_mask: Bool[Tensor, "query key"] | None = None,
) -> Bool[Tensor, "#batch 1 #query key"]:
    """The ``keep`` of ``nn.MultiheadAttention``'s masks (True where blocked), either or both."""
    padding = None if key_padding_mask is None else key_padding(~key_padding_mask)
    if attn_mask is None:
        if padding is None:
            raise ValueError("from_multihead needs key_padding_mask, attn_mask or both")
        return padding
    future = rearrange(~attn_mask, "query key -> 1 1 query key")
    return future if padding is None else padding & future


@typechecked
def masked_time_mean(
    values: Float[Tensor, "batch time feature"], keep: Bool[Tensor, "batch time"]
) -> Float[Tensor, "batch feature"]:
    """Each sequence's mean over its real steps; zeros for a sequence without one."""
    kept = torch.where(rearrange(keep, "batch time -> batch time 1"), values, 0.0)
    counts = rearrange(keep.sum(dim=1).clamp(min=1), "batch -> batch 1")
    return kept.sum(dim=1) / counts


@typechecked
def masked_time_max(
    values: Float[Tensor, "batch time feature"], keep: Bool[Tensor, "batch time"]
) -> Float[Tensor, "batch feature"]:
    """Each sequence's maximum over its real steps; zeros for a sequence without one."""
    kept = torch.where(rearrange(keep, "batch time -> batch time 1"), values, -torch.inf)
    return torch.where(rearrange(keep.any(dim=1), "batch -> batch 1"), kept.amax(dim=1), 0.0)


@typechecked
def masked_cross_entropy(
    logits: Float[Tensor, "batch time class"],
    target: Int[Tensor, "batch time"],
    keep: Bool[Tensor, "batch time"],
) -> Scalar:
    """Cross-entropy averaged over the real steps only; zero when there is none. A padded
    target may hold any value: it is never read."""
    flat = rearrange(logits, "batch time c -> (batch time) c")
    labels = rearrange(torch.where(keep, target, 0), "batch time -> (batch time)")
    losses = F.cross_entropy(flat, labels, reduction="none")
    kept = torch.where(rearrange(keep, "batch time -> (batch time)"), losses, 0.0)
    return kept.sum() / keep.sum().clamp(min=1)
