"""The metrics agree with their definitions and refuse mismatched shapes."""

import math

import pytest
import torch
from jaxtyping import TypeCheckError

from ..core.metrics import mean_absolute_error, r2_score


def test_r2_is_one_for_a_perfect_fit_and_zero_for_the_mean() -> None:
    target = torch.tensor([1.0, 2.0, 4.0])
    assert r2_score(target, target) == 1.0
    assert r2_score(torch.full((3,), float(target.mean())), target) == pytest.approx(0.0)


def test_r2_is_undefined_for_a_constant_target() -> None:
    assert math.isnan(r2_score(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 3.0])))


def test_metrics_reject_a_column_target() -> None:
    with pytest.raises(TypeCheckError, match="target"):
        r2_score(torch.randn(6), torch.randn(6, 1))
    with pytest.raises(TypeCheckError, match="target"):
        mean_absolute_error(torch.randn(6), torch.randn(6, 1))
