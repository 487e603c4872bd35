"""The guard's one exception, index grids and masks, from both sides: the standard ways of
building attention masks and position grids pass under BroadcastGuard, while the accuracy
bug, the seed's bugs and data that only resembles a grid still raise."""

from collections.abc import Callable

import pytest
import torch
from einops import rearrange

from ..core import broadcast
from ..core.broadcast import BroadcastError, BroadcastGuard

B, T, N, C = 4, 6, 5, 3
Tensor = torch.Tensor


def _row(x: Tensor) -> Tensor:
    return rearrange(x, "t -> 1 t")


def _column(x: Tensor) -> Tensor:
    return rearrange(x, "t -> t 1")


def _padding_mask() -> Tensor:
    lengths = torch.tensor([6, 3, 5, 2])
    return _row(torch.arange(T)) < _column(lengths)


def _causal_mask() -> Tensor:
    return _column(torch.arange(T)) >= _row(torch.arange(T))


def _causal_and_padding() -> Tensor:
    return _causal_mask() & rearrange(_padding_mask(), "batch t -> batch 1 1 t")


def _cross_attention_padding() -> Tensor:
    """Queries and keys padded to lengths of their own: two masks, each of them a comparison
    of a grid with data (the grid on either side), combined."""
    queries = _column(torch.tensor([4, 2, 6, 1])) > _row(torch.arange(T))
    keys = _row(torch.arange(T - 2)) < _column(torch.tensor([3, 4, 1, 2]))
    return rearrange(queries, "b q -> b q 1") & rearrange(keys, "b k -> b 1 k")


def _pairwise_mask() -> Tensor:
    """Of a mask that comes from data, not from a grid: two views of the same mask."""
    m = torch.rand(B, T) > 0.3
    return rearrange(m, "batch t -> batch t 1") & rearrange(m, "batch t -> batch 1 t")


def _relative_positions() -> Tensor:
    pos = torch.arange(T)
    return _row(pos) - _column(pos)


def _triangular_mask_of_ones_or_data() -> Tensor:
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    return causal | rearrange(torch.rand(B, T) > 0.5, "batch t -> batch 1 t")


def _alibi_with_causal_mask() -> Tensor:
    """BLOOM-style ALiBi: per-head slopes times key positions ``(H, 1, T)``, added to a
    ``full(-inf).triu(1)`` causal mask ``(1, T, T)``."""
    heads = 4
    slopes = 2.0 ** (-8.0 * torch.arange(1, heads + 1) / heads)
    alibi = rearrange(slopes, "h -> h 1 1") * rearrange(torch.arange(T), "k -> 1 1 k")
    causal = torch.full((T, T), float("-inf")).triu(1)
    return alibi + rearrange(causal, "q k -> 1 q k")


def _one_hot() -> Tensor:
    return _column(torch.randint(0, C, (N,))) == torch.arange(C)


def _sinusoidal_angles() -> Tensor:
    frequencies = 1.0 / 10000 ** (torch.arange(0, 8, 2) / 8)
    return torch.sin(_column(torch.arange(T).float()) * _row(frequencies))


def _position_ids_after_a_cache() -> Tensor:
    return _column(torch.tensor([3, 0, 7])) + torch.arange(T)


MASK_BUILDERS: dict[str, Callable[[], Tensor]] = {
    "padding mask": _padding_mask,
    "causal mask": _causal_mask,
    "causal & padding": _causal_and_padding,
    "cross-attention padding": _cross_attention_padding,
    "pairwise mask": _pairwise_mask,
    "relative positions": _relative_positions,
    "tril of ones | data mask": _triangular_mask_of_ones_or_data,
    "ALiBi with a causal mask": _alibi_with_causal_mask,
    "one-hot": _one_hot,
    "sinusoidal angles": _sinusoidal_angles,
    "position ids": _position_ids_after_a_cache,
}


@pytest.mark.parametrize("case", list(MASK_BUILDERS), ids=list(MASK_BUILDERS))
def test_mask_and_grid_builders_pass(case: str, broadcast_guard: BroadcastGuard) -> None:
    built = MASK_BUILDERS[case]()
    assert built.ndim >= 2


def _accuracy_of_argmax_kept_as_a_column() -> Tensor:
    pred = torch.randn(N, C).argmax(-1, keepdim=True)
    return (pred == torch.randint(0, C, (N,))).float().mean()


def _accuracy_of_a_binary_classifier() -> Tensor:
    return ((torch.randn(N, 1) > 0) == (torch.rand(N) > 0.5)).float().mean()


def _filled_zeros_buffer() -> Tensor:
    """CleanRL's storage: allocated with ``zeros``, filled step by step, then used."""
    advantages = torch.zeros(3, N)
    for step in range(3):
        advantages[step] = torch.randn(N)
    return _column(advantages[0]) * torch.randn(N).exp()


def _grid_overwritten_through_a_view() -> Tensor:
    positions = rearrange(torch.arange(2 * N).float(), "(two n) -> two n", two=2)
    positions[0].copy_(torch.randn(N))
    return rearrange(positions, "two n -> two n 1") - torch.randn(N)


def _noise_drawn_into_zeros() -> Tensor:
    return _column(torch.zeros(N).normal_()) - torch.randn(N)


def _synthetic_targets_from_linspace() -> Tensor:
    """``y = sin(x) + noise`` with ``x (N, 1)`` from a grid and noise ``(N,)``: data."""
    x = _column(torch.linspace(-1, 1, N))
    return torch.sin(x) + 0.1 * torch.randn(N)


def _ones_as_weights() -> Tensor:
    return (torch.ones(N) * _column(torch.randn(N)) ** 2).mean()


def _and_of_integers() -> Tensor:
    return _column(torch.randint(0, 4, (N,))) & torch.randint(0, 4, (N,))


def _done_flags_of_two_shapes() -> Tensor:
    """``terminated (N, 1) | truncated (N,)``: two boolean masks, both from data."""
    return _column(torch.rand(N) > 0.9) | (torch.rand(N) > 0.9)


def _done_flags_from_one_buffer() -> Tensor:
    """Terminated and truncated kept as the two columns of one buffer: views of one tensor,
    but of different elements, so not a pairwise mask."""
    flags = torch.rand(N, 2) > 0.9
    return flags[:, 0:1] | flags[:, 1]


def _float_padding_mask_times_data() -> Tensor:
    padding = _padding_mask().float()
    return rearrange(padding, "batch t -> batch t 1") * torch.randn(T)


STILL_BUGS: dict[str, Callable[[], Tensor]] = {
    "accuracy, argmax kept as a column": _accuracy_of_argmax_kept_as_a_column,
    "accuracy of a binary classifier": _accuracy_of_a_binary_classifier,
    "float comparison": lambda: torch.randn(N, 1) > torch.randn(N),
    "regression loss": lambda: ((torch.randn(N, 1) - torch.randn(N)) ** 2).mean(),
    "PPO advantages": lambda: -(torch.randn(N, 1) * torch.randn(N).exp()).mean(),
    "filled zeros buffer": _filled_zeros_buffer,
    "grid overwritten through a view": _grid_overwritten_through_a_view,
    "noise drawn into zeros": _noise_drawn_into_zeros,
    "targets from linspace plus noise": _synthetic_targets_from_linspace,
    "ones as weights": _ones_as_weights,
    "bitwise and of integers": _and_of_integers,
    "terminated (N, 1) | truncated (N,)": _done_flags_of_two_shapes,
    "done flags from columns of one buffer": _done_flags_from_one_buffer,
    "float padding mask times data": _float_padding_mask_times_data,
}


@pytest.mark.parametrize("case", list(STILL_BUGS), ids=list(STILL_BUGS))
def test_data_stretches_still_raise(case: str) -> None:
    with pytest.raises(BroadcastError, match="stretched every operand"), BroadcastGuard():
        STILL_BUGS[case]()


@pytest.mark.no_broadcast_guard
def test_grid_made_before_the_guard_counts_as_data() -> None:
    """Provenance is seen only while a guard is on; the audit starts its guard first."""
    pos = torch.arange(T)
    with pytest.raises(BroadcastError), BroadcastGuard():
        _ = _row(pos) - _column(pos)


def test_provenance_is_forgotten_with_the_tensor() -> None:
    with BroadcastGuard():
        grids = [torch.arange(T) for _ in range(100)]
        tracked = len(broadcast._TRACKED)
        del grids
        assert len(broadcast._TRACKED) <= tracked - 100
