"""Masks and attention: one polarity (``keep`` means attend), broadcast axes named ``1``,
parity with ``nn.MultiheadAttention``, and zeros, not NaN, where nothing is real."""

from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from einops import rearrange
from jaxtyping import TypeCheckError
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ..core import masks
from ..core.attention import SelfAttention, attend
from ..core.broadcast import BroadcastGuard
from ..core.shapes import Float, Tensor, typechecked
from ..run.guards import NonFiniteError, NonFiniteLocator
from . import test_behaviour as behaviour
from .project import quiet_trainer
from .test_conventions import forbidden_reshapes

B, T, WIDTH, HEADS = 3, 5, 8, 2  # pairwise distinct, so no axis can stand in for another
LENGTHS = torch.tensor([5, 2, 3])


def test_builders_name_their_broadcast_axes_with_a_literal_one() -> None:
    keep = masks.real_steps(LENGTHS, T)  # each sequence's prefix
    assert keep.sum(dim=1).tolist() == LENGTHS.tolist()
    assert keep[1].tolist() == [True, True, False, False, False]
    assert masks.real_steps(torch.tensor([0]), 2).tolist() == [[False, False]]
    with pytest.raises(ValueError, match="lengths must lie in"):
        masks.real_steps(torch.tensor([6]), T)
    assert masks.key_padding(keep).shape == (B, 1, 1, T)
    assert masks.causal(T).shape == (1, 1, T, T)
    assert masks.both(masks.key_padding(keep), masks.causal(T)).shape == (B, 1, T, T)
    assert torch.equal(masks.causal(3)[0, 0], torch.ones(3, 3, dtype=torch.bool).tril())
    with pytest.raises(TypeCheckError):  # a (batch, 1, key, 1) mask is not a builder's output
        masks.both(rearrange(keep, "b k -> b 1 k 1"), masks.causal(T))


def test_a_mask_on_the_query_axis_or_a_float_mask_is_refused() -> None:
    attention = SelfAttention(WIDTH, HEADS)
    x = torch.randn(B, T, WIDTH)
    keep = masks.real_steps(LENGTHS, T)
    attention(x, masks.key_padding(keep))
    with pytest.raises(TypeCheckError):  # bug: padding broadcast as (B, 1, T, 1)
        attention(x, rearrange(keep, "b t -> b 1 t 1"))
    with pytest.raises(TypeCheckError):  # bug: a float 0/1 mask, which SDPA would add
        attention(x, masks.key_padding(keep).float())  # pyright: ignore[reportArgumentType]


def test_multihead_masks_round_trip_with_the_polarity_flipped() -> None:
    keep = masks.real_steps(LENGTHS, T)
    padding = masks.to_key_padding_mask(masks.key_padding(keep))
    assert torch.equal(padding, ~keep)
    future = masks.to_attn_mask(masks.causal(T))
    assert bool(future[0, 1]) and not bool(future[1, 0])
    back = masks.from_multihead(padding, future)
    assert torch.equal(back, masks.both(masks.key_padding(keep), masks.causal(T)))
    with pytest.raises(ValueError, match="needs"):
        masks.from_multihead()


def _parity_difference(causal: bool = False) -> float:
    """How far our attention, given ``nn.MultiheadAttention``'s weights, is from it at the
    real steps of padded sequences (both in eval mode)."""
    torch.manual_seed(0)
    ours = SelfAttention(WIDTH, HEADS, causal=causal).eval()
    theirs = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True).eval()
    x, keep = torch.randn(B, T, WIDTH), masks.real_steps(LENGTHS, T)
    future = masks.to_attn_mask(masks.causal(T)) if causal else None
    with torch.no_grad():
        ours.qkv.weight.copy_(theirs.in_proj_weight)
        ours.qkv.bias.copy_(theirs.in_proj_bias)
        ours.out.weight.copy_(theirs.out_proj.weight)
        ours.out.bias.copy_(theirs.out_proj.bias)
        expected, _ = theirs(x, x, x, key_padding_mask=~keep, attn_mask=future, need_weights=False)
        return float((ours(x, masks.key_padding(keep)) - expected)[keep].abs().max())


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_matches_multihead_attention_on_mapped_weights(causal: bool) -> None:
    assert _parity_difference(causal) <= 1e-5


def test_a_query_with_no_key_to_attend_gets_zeros() -> None:
    query, key = torch.randn(B, HEADS, T, 4), torch.randn(B, HEADS, 7, 4)
    value = torch.randn(B, HEADS, 7, 6)
    keep = masks.key_padding(masks.real_steps(torch.tensor([7, 0, 2]), 7))
    out = attend(query, key, value, keep)
    assert out.shape == (B, HEADS, T, 6)
    assert torch.equal(out[1], torch.zeros(HEADS, T, 6))
    assert bool(torch.isfinite(out).all())


def test_masked_reductions_read_only_real_steps_and_give_zeros_without_any() -> None:
    values = torch.randn(B, T, 4, dtype=torch.float64)
    keep = masks.real_steps(torch.tensor([5, 0, 3]), T)
    mean, peak = masks.masked_time_mean(values, keep), masks.masked_time_max(values, keep)
    assert torch.allclose(mean[2], values[2, :3].mean(dim=0))
    assert torch.equal(peak[2], values[2, :3].amax(dim=0))
    assert torch.equal(mean[1], torch.zeros(4, dtype=torch.float64))
    assert torch.equal(peak[1], torch.zeros(4, dtype=torch.float64))
    padded = torch.where(rearrange(keep, "b t -> b t 1"), values, 1e6)
    assert torch.equal(masks.masked_time_mean(padded, keep), mean)
    assert torch.equal(masks.masked_time_max(padded, keep), peak)


# The catalogue's attention rows (docs/shape_bugs.md): each bug planted, and the defence that
# catches it. Code that calls .view is a string, kept out of the source by test_conventions.
BUG_6_SPLIT = """
def forward(self, x, keep=None):
    batch, time, _ = x.shape
    query, key, value = self.qkv(x).chunk(3, dim=-1)
    heads = [part.contiguous().view(batch, self.heads, time, -1) for part in (query, key, value)]
    attended = attend(*heads, keep)
    return self.out(attended.transpose(1, 2).flatten(2))
"""


def test_bug_3_the_wrong_triangle_is_caught_by_the_causality_check(monkeypatch) -> None:
    def upper(queries: int, device: torch.device | None = None) -> torch.Tensor:
        square = torch.ones(queries, queries, dtype=torch.bool, device=device)
        return rearrange(torch.triu(square), "q k -> 1 1 q k")

    monkeypatch.setattr(masks, "causal", upper)
    module, arguments, _ = behaviour._call("core.attention.SelfAttention/causal", "forward")
    assert behaviour.causality(module, "forward", arguments)


def test_bug_6_heads_split_by_view_without_a_transpose(monkeypatch: pytest.MonkeyPatch) -> None:
    assert forbidden_reshapes(BUG_6_SPLIT)  # the convention test refuses .view in the source
    namespace: dict[str, Any] = {"attend": attend}
    exec(compile(BUG_6_SPLIT, "<planted bug>", "exec"), namespace)
    planted = namespace["forward"]
    planted.__annotations__ = SelfAttention.forward.__wrapped__.__annotations__  # pyright: ignore
    # Checked against the right one's annotation, which it passes: the shapes are right.
    monkeypatch.setattr(SelfAttention, "forward", typechecked(planted))
    assert behaviour.pad_invariance("core.attention.SelfAttention", "forward")


def test_bug_7_heads_merged_as_dim_head_is_caught_by_the_parity_test(monkeypatch) -> None:
    merge = "batch time (head dim) -> batch head time dim"

    def swapped(self: SelfAttention, x: torch.Tensor, keep: torch.Tensor | None = None):  # noqa: ANN202
        parts = self.qkv(x).chunk(3, -1)
        query, key, value = (rearrange(part, merge, head=self.heads) for part in parts)
        attended = attend(query, key, value, keep)
        return self.out(rearrange(attended, "batch head time dim -> batch time (dim head)"))

    swapped.__annotations__ = SelfAttention.forward.__wrapped__.__annotations__  # pyright: ignore
    monkeypatch.setattr(SelfAttention, "forward", typechecked(swapped))
    assert _parity_difference() > 1e-3  # the right one matches: above
    # Annotation and behavioural checks miss it: each position of each sample is still
    # computed from its own sample's real steps alone.
    module, arguments, _ = behaviour._call("core.attention.SelfAttention", "forward")
    assert not behaviour.batch_independence(module, "forward", arguments)
    assert not behaviour.pad_invariance("core.attention.SelfAttention", "forward")


def test_bug_8_patch_order_is_named_by_the_einops_pattern() -> None:
    images = torch.randn(2, 3, 4, 6)  # batch channel height width; 2 x 2 patches
    reference = rearrange(F.unfold(images, kernel_size=2, stride=2), "b (c p) n -> b n (c p)", c=3)
    right = "b c (h p1) (w p2) -> b (h w) (c p1 p2)"
    wrong = "b c (p1 h) (p2 w) -> b (h w) (c p1 p2)"  # the patch axes taken as the outer ones

    @typechecked
    def patchify(images: Float[Tensor, "b c h w"], pattern: str) -> Float[Tensor, "b n f"]:
        return rearrange(images, pattern, p1=2, p2=2)

    assert torch.equal(patchify(images, right), reference)
    assert not torch.equal(patchify(images, wrong), reference)  # the annotation passes both


def test_bug_9_a_time_first_table_is_refused_by_the_annotation_and_missed_by_the_guard() -> None:
    table = rearrange(torch.randn(T, WIDTH), "time feature -> time 1 feature")  # (T, 1, D)
    square = torch.randn(T, T, WIDTH)  # batch == time: nothing stretches both operands
    with BroadcastGuard():
        _ = square + table  # the guard misses a one-sided stretch
    with pytest.raises(RuntimeError):  # test sizes that differ make the shapes clash
        _ = torch.randn(B, T, WIDTH) + table

    @typechecked
    def positions(steps: int, width: int) -> Float[Tensor, "time feature"]:
        return rearrange(torch.randn(steps, width), "t f -> t 1 f")

    with pytest.raises(TypeCheckError):  # a typed table is (time, feature), as sinusoids' is
        positions(T, WIDTH)


def test_bug_12_a_loss_over_padded_targets_moves_with_the_padding() -> None:
    logits, keep = torch.randn(B, T, 4), masks.real_steps(LENGTHS, T)
    target = torch.randint(0, 4, (B, T))
    junk = torch.where(keep, target, (target + 1) % 4)
    flat = [rearrange(y, "b t -> (b t)") for y in (target, junk)]
    plain = [F.cross_entropy(rearrange(logits, "b t c -> (b t) c"), y) for y in flat]
    assert not torch.equal(*plain)  # the bug: padded targets count
    out_of_range = torch.where(keep, target, 99)  # never read, so never an index error
    masked = [masks.masked_cross_entropy(logits, y, keep) for y in (target, junk, out_of_range)]
    assert torch.equal(masked[0], masked[1]) and torch.equal(masked[0], masked[2])
    assert torch.allclose(masked[0], F.cross_entropy(logits[keep], target[keep]))
    nothing = torch.zeros(B, T, dtype=torch.bool)  # no real target: zero, not NaN
    assert float(masks.masked_cross_entropy(logits, target, nothing)) == 0.0

    def over_every_step(logits: Tensor, target: Tensor, keep: Tensor) -> Tensor:
        steps = rearrange(logits, "b t c -> (b t) c")
        return F.cross_entropy(steps, rearrange(target, "b t -> (b t)"))

    # Typed like the right one, which it passes; the pad-invariance check of every typed
    # function that takes a mask of real steps (test_behaviour.py) reports it.
    over_every_step.__annotations__ = masks.masked_cross_entropy.__wrapped__.__annotations__  # pyright: ignore
    assert behaviour.masked_function_pad_invariance(typechecked(over_every_step))


def test_bug_13_two_axes_of_one_size_hide_a_wrong_axis() -> None:
    def wrong_axis(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return masks.masked_time_mean(rearrange(values, "b t f -> b f t"), keep)

    same = torch.randn(B, T, T)  # feature == time: the wrong axis goes through
    assert wrong_axis(same, masks.real_steps(LENGTHS, T)).shape == (B, T)
    with pytest.raises(TypeCheckError):  # pairwise distinct test sizes refuse it
        wrong_axis(torch.randn(B, T, WIDTH), masks.real_steps(LENGTHS, T))


class HandAttention(nn.Module):
    """A softmax written by hand: a query with every key masked gets NaN, not zeros."""

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        scores = torch.einsum("bqd,bkd->bqk", x, x).masked_fill(~keep, -torch.inf)
        return torch.einsum("bqk,bkd->bqd", scores.softmax(dim=-1), x)


def test_a_fully_masked_row_under_a_hand_written_softmax_is_named_by_the_locator(
    tmp_path: Path,
) -> None:
    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.attention = nn.Linear(3, 4), HandAttention()

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int):  # noqa: ANN201
            x, keep = batch
            return self.attention(self.embed(x), rearrange(keep, "b k -> b 1 k")).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    lengths = torch.tensor([4, 0, 2, 3])  # the second sequence has no real step
    data = TensorDataset(torch.randn(4, 4, 3), masks.real_steps(lengths, 4))
    options = dict(max_epochs=1, accelerator="cpu", enable_checkpointing=False)
    trainer = quiet_trainer(default_root_dir=tmp_path, callbacks=[NonFiniteLocator()], **options)
    with pytest.raises(NonFiniteError, match="attention"):
        trainer.fit(Model(), DataLoader(data, batch_size=4))
