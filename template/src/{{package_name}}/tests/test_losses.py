"""The losses and metrics agree with torch and with their definitions, at batch size 1 too.
Refusals: ``test_annotation_cases.py`` (every argument) and ``test_shapes.py`` (``(N, 1)``)."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxtyping import TypeCheckError

from ..core.losses import cross_entropy_loss, huber_loss, l1_loss, masked_mean, mse_loss
from ..core.metrics import r2_score


@pytest.mark.parametrize("rows", [1, 8])
def test_losses_match_torch_on_correct_shapes(rows: int) -> None:
    prediction, target = torch.randn(rows), torch.randn(rows)
    torch.testing.assert_close(mse_loss(prediction, target), F.mse_loss(prediction, target))
    torch.testing.assert_close(l1_loss(prediction, target), F.l1_loss(prediction, target))
    torch.testing.assert_close(
        huber_loss(prediction, target, delta=0.5), F.huber_loss(prediction, target, delta=0.5)
    )
    logits, labels = torch.randn(rows, 3), torch.randint(0, 3, (rows,))
    torch.testing.assert_close(cross_entropy_loss(logits, labels), F.cross_entropy(logits, labels))


@settings(deadline=None)  # the first call builds the check; timing is not under test
@given(batch=st.integers(min_value=1, max_value=64))
def test_mse_refuses_a_column_target_at_any_batch_size(batch: int) -> None:
    # The column-target bug, the habit to copy: (N, 1) against (N,) raises, N = 1 too.
    with pytest.raises(TypeCheckError, match="target"):
        mse_loss(torch.randn(batch), torch.randn(batch, 1))


def test_masked_mean_rejects_broadcasting_mask() -> None:
    """A full-shape bool mask averages the selected values only (none selected: 0); one that
    would broadcast, or a float one, is refused."""
    values = torch.tensor([[1.0, 2.0, 100.0], [3.0, 100.0, 100.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    torch.testing.assert_close(masked_mean(values, mask), torch.tensor(2.0))
    assert masked_mean(torch.ones(1, 1), torch.zeros(1, 1, dtype=torch.bool)) == 0.0
    with pytest.raises(TypeCheckError, match="parameter 'mask'"):
        masked_mean(values, torch.ones(2, 1, dtype=torch.bool))
    with pytest.raises(TypeCheckError):
        masked_mean(values, torch.ones(2, 3))


def test_r2_is_one_for_a_perfect_fit_zero_for_the_mean_and_undefined_for_a_constant() -> None:
    target = torch.tensor([1.0, 2.0, 4.0])
    assert r2_score(target, target) == 1.0
    assert r2_score(torch.full((3,), float(target.mean())), target) == pytest.approx(0.0)
    assert math.isnan(r2_score(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 3.0])))
