"""Masks and attention: one polarity (``keep`` means attend), broadcast axes named ``1``,
parity with ``nn.MultiheadAttention``, and zeros, not NaN, where nothing is real."""

import pytest
import torch
from einops import rearrange
from jaxtyping import TypeCheckError
from torch import nn

from ..core import masks
from ..core.attention import SelfAttention, attend

B, T, WIDTH, HEADS = 3, 5, 8, 2  # pairwise distinct, so no axis can stand in for another
LENGTHS = torch.tensor([5, 2, 3])


def test_real_steps_marks_each_sequence_prefix() -> None:
    real = masks.real_steps(LENGTHS, T)
    assert real.sum(dim=1).tolist() == LENGTHS.tolist()
    assert real[1].tolist() == [True, True, False, False, False]
    assert masks.real_steps(torch.tensor([0]), 2).tolist() == [[False, False]]
    with pytest.raises(ValueError, match="lengths must lie in"):
        masks.real_steps(torch.tensor([6]), T)


def test_builders_name_their_broadcast_axes_with_a_literal_one() -> None:
    real = masks.real_steps(LENGTHS, T)
    assert masks.key_padding(real).shape == (B, 1, 1, T)
    assert masks.causal(T).shape == (1, 1, T, T)
    assert masks.both(masks.key_padding(real), masks.causal(T)).shape == (B, 1, T, T)
    assert masks.causal(3)[0, 0].tolist() == [[True, False, False], [True, True, False]] + [
        [True, True, True]
    ]
    with pytest.raises(TypeCheckError):  # a (batch, 1, key, 1) mask is not a builder's output
        masks.both(rearrange(real, "b k -> b 1 k 1"), masks.causal(T))


def test_a_mask_on_the_query_axis_or_a_float_mask_is_refused() -> None:
    attention = SelfAttention(WIDTH, HEADS)
    x = torch.randn(B, T, WIDTH)
    real = masks.real_steps(LENGTHS, T)
    attention(x, masks.key_padding(real))
    with pytest.raises(TypeCheckError):  # bug: padding broadcast as (B, 1, T, 1)
        attention(x, rearrange(real, "b t -> b 1 t 1"))
    with pytest.raises(TypeCheckError):  # bug: a float 0/1 mask, which SDPA would add
        attention(x, masks.key_padding(real).float())  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeCheckError):
        masks.masked_time_mean(x, rearrange(real, "b t -> b t 1"))  # pyright: ignore


def test_multihead_masks_round_trip_with_the_polarity_flipped() -> None:
    real = masks.real_steps(LENGTHS, T)
    padding = masks.to_key_padding_mask(masks.key_padding(real))
    assert torch.equal(padding, ~real)
    future = masks.to_attn_mask(masks.causal(T))
    assert bool(future[0, 1]) and not bool(future[1, 0])
    keep = masks.from_multihead(padding, future)
    assert torch.equal(keep, masks.both(masks.key_padding(real), masks.causal(T)))
    with pytest.raises(ValueError, match="needs"):
        masks.from_multihead()


@pytest.mark.parametrize("is_causal", [False, True])
def test_self_attention_matches_multihead_attention_on_mapped_weights(is_causal: bool) -> None:
    torch.manual_seed(0)
    ours = SelfAttention(WIDTH, HEADS, causal=is_causal).eval()
    theirs = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True).eval()
    with torch.no_grad():
        ours.qkv.weight.copy_(theirs.in_proj_weight)
        ours.qkv.bias.copy_(theirs.in_proj_bias)
        ours.out.weight.copy_(theirs.out_proj.weight)
        ours.out.bias.copy_(theirs.out_proj.bias)
    x = torch.randn(B, T, WIDTH)
    real = masks.real_steps(LENGTHS, T)
    future = masks.to_attn_mask(masks.causal(T)) if is_causal else None
    expected, _ = theirs(x, x, x, key_padding_mask=~real, attn_mask=future, need_weights=False)
    got = ours(x, masks.key_padding(real))
    assert (got - expected)[real].abs().max() <= 1e-5


def test_a_query_with_no_key_to_attend_gets_zeros() -> None:
    query, key, value = (
        torch.randn(B, HEADS, T, 4),
        torch.randn(B, HEADS, 7, 4),
        torch.randn(B, HEADS, 7, 6),
    )
    keep = masks.key_padding(masks.real_steps(torch.tensor([7, 0, 2]), 7))
    out = attend(query, key, value, keep)
    assert out.shape == (B, HEADS, T, 6)
    assert torch.equal(out[1], torch.zeros(HEADS, T, 6))
    assert bool(torch.isfinite(out).all())


def test_masked_reductions_read_only_real_steps_and_give_zeros_without_any() -> None:
    values = torch.randn(B, T, 4, dtype=torch.float64)
    lengths = torch.tensor([5, 0, 3])
    real = masks.real_steps(lengths, T)
    mean, peak = masks.masked_time_mean(values, real), masks.masked_time_max(values, real)
    assert torch.allclose(mean[2], values[2, :3].mean(dim=0))
    assert torch.equal(peak[2], values[2, :3].amax(dim=0))
    assert torch.equal(mean[1], torch.zeros(4, dtype=torch.float64))
    assert torch.equal(peak[1], torch.zeros(4, dtype=torch.float64))
    padded = torch.where(rearrange(real, "b t -> b t 1"), values, 1e6)
    assert torch.equal(masks.masked_time_mean(padded, real), mean)
    assert torch.equal(masks.masked_time_max(padded, real), peak)


def test_masked_cross_entropy_counts_real_targets_only() -> None:
    logits = torch.randn(B, T, 4)
    target = torch.randint(0, 4, (B, T))
    real = masks.real_steps(LENGTHS, T)
    loss = masks.masked_cross_entropy(logits, target, real)
    expected = nn.functional.cross_entropy(logits[real], target[real])
    assert torch.allclose(loss, expected)
    junk = torch.where(real, target, 99)  # padded targets out of range are never read
    assert torch.equal(masks.masked_cross_entropy(logits, junk, real), loss)
    nothing = torch.zeros(B, T, dtype=torch.bool)
    assert float(masks.masked_cross_entropy(logits, target, nothing)) == 0.0
    with pytest.raises(TypeCheckError):  # a (batch,) target for per-step logits
        masks.masked_cross_entropy(logits, target[:, 0], real)
