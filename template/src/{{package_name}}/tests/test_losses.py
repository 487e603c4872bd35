"""Every loss refuses the seed's shapes, accepts batch size 1 and agrees with torch."""

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from jaxtyping import TypeCheckError

from ..core.losses import (
    bce_with_logits_loss,
    cross_entropy_loss,
    gaussian_nll_loss,
    huber_loss,
    l1_loss,
    masked_mean,
    mse_loss,
)
from ..core.metrics import mean_absolute_error, r2_score

Tensor = torch.Tensor
Loss = Callable[[Tensor, Tensor], Tensor]


def _gaussian_nll(prediction: Tensor, target: Tensor) -> Tensor:
    return gaussian_nll_loss(prediction, torch.ones_like(prediction), target)


PAIRED_LOSSES: dict[str, Loss] = {
    "mse_loss": mse_loss,
    "l1_loss": l1_loss,
    "huber_loss": huber_loss,
    "gaussian_nll_loss": _gaussian_nll,
    "bce_with_logits_loss": bce_with_logits_loss,
}
paired = pytest.mark.parametrize("loss", PAIRED_LOSSES.values(), ids=PAIRED_LOSSES.keys())


REFUSED: dict[str, tuple[Tensor, Tensor, str | None]] = {
    "column target": (torch.randn(6), torch.randn(6, 1), "target"),
    "column prediction": (torch.randn(6, 1), torch.randn(6), None),
    "unequal batches": (torch.randn(6), torch.randn(5), None),
    "integer target": (torch.randn(6), torch.arange(6), None),
}


@paired
@pytest.mark.parametrize("case", REFUSED)
def test_loss_rejects_mismatched_arguments(loss: Loss, case: str) -> None:
    prediction, target, named = REFUSED[case]
    with pytest.raises(TypeCheckError, match=named):
        loss(prediction, target)


@paired
def test_loss_accepts_a_batch_of_one_and_matching_trailing_axes(loss: Loss) -> None:
    value = loss(torch.randn(1), torch.randn(1))
    assert value.shape == () and torch.isfinite(value)
    assert loss(torch.randn(4, 3, 2), torch.randn(4, 3, 2)).shape == ()


def test_gaussian_nll_rejects_variance_without_trailing_axis() -> None:
    with pytest.raises(TypeCheckError, match="variance"):
        gaussian_nll_loss(torch.randn(6, 2), torch.ones(6), torch.randn(6, 2))


@given(batch=st.integers(min_value=1, max_value=64))
def test_mse_rejects_column_target_at_any_batch_size(batch: int) -> None:
    with pytest.raises(TypeCheckError):
        mse_loss(torch.randn(batch), torch.randn(batch, 1))


def test_losses_match_torch_on_correct_shapes() -> None:
    prediction, target = torch.randn(8), torch.randn(8)
    torch.testing.assert_close(mse_loss(prediction, target), F.mse_loss(prediction, target))
    torch.testing.assert_close(l1_loss(prediction, target), F.l1_loss(prediction, target))
    torch.testing.assert_close(
        huber_loss(prediction, target, delta=0.5), F.huber_loss(prediction, target, delta=0.5)
    )


def test_cross_entropy_shapes() -> None:
    logits, labels = torch.randn(6, 3), torch.randint(0, 3, (6,))
    torch.testing.assert_close(cross_entropy_loss(logits, labels), F.cross_entropy(logits, labels))
    assert cross_entropy_loss(torch.randn(1, 3), torch.tensor([2])).shape == ()
    with pytest.raises(TypeCheckError):
        cross_entropy_loss(logits, torch.randint(0, 3, (6, 1)))
    with pytest.raises(TypeCheckError):
        cross_entropy_loss(logits, labels.float())
    with pytest.raises(TypeCheckError):
        cross_entropy_loss(logits, torch.randint(0, 3, (5,)))


def test_masked_mean_averages_selected_values_only() -> None:
    values = torch.tensor([[1.0, 2.0, 100.0], [3.0, 100.0, 100.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    torch.testing.assert_close(masked_mean(values, mask), torch.tensor(2.0))
    assert masked_mean(torch.ones(1, 1), torch.zeros(1, 1, dtype=torch.bool)) == 0.0


def test_masked_mean_rejects_broadcasting_mask() -> None:
    values = torch.randn(4, 5)
    with pytest.raises(TypeCheckError, match="mask"):
        masked_mean(values, torch.ones(4, 1, dtype=torch.bool))
    with pytest.raises(TypeCheckError):
        masked_mean(values, torch.ones(4, 5))


# The metrics agree with their definitions and refuse mismatched shapes.
def test_r2_is_one_for_a_perfect_fit_zero_for_the_mean_and_undefined_for_a_constant() -> None:
    target = torch.tensor([1.0, 2.0, 4.0])
    assert r2_score(target, target) == 1.0
    assert r2_score(torch.full((3,), float(target.mean())), target) == pytest.approx(0.0)
    assert math.isnan(r2_score(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 3.0])))


@pytest.mark.parametrize("metric", [r2_score, mean_absolute_error])
def test_metrics_reject_a_column_target(metric: Callable[[Tensor, Tensor], object]) -> None:
    with pytest.raises(TypeCheckError, match="target"):
        metric(torch.randn(6), torch.randn(6, 1))
