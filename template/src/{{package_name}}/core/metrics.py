"""Typed regression metrics, computed over a whole split rather than averaged per batch."""

import torch

from .shapes import Float, Scalar, Tensor, typechecked


@typechecked
def r2_score(prediction: Float[Tensor, " batch"], target: Float[Tensor, " batch"]) -> Scalar:
    """Coefficient of determination: 1 is perfect, 0 is no better than predicting the mean.
    Undefined (NaN) for a constant target, rather than a huge number that looks like a score."""
    residual = torch.sum((target - prediction) ** 2)
    total = torch.sum((target - target.mean()) ** 2)
    return torch.where(total > 0, 1.0 - residual / total, torch.nan)


@typechecked
def mean_absolute_error(
    prediction: Float[Tensor, " batch"], target: Float[Tensor, " batch"]
) -> Scalar:
    """Mean of ``|prediction - target|``, in the target's units."""
    return torch.mean(torch.abs(prediction - target))
