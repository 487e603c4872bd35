"""Losses whose prediction and target must carry the same named shape.

``F.mse_loss`` given ``(N,)`` and ``(N, 1)`` warns, broadcasts to ``(N, N)`` and trains the
model to predict ``mean(y)``. Here both arguments are ``Same``, ``Float[Tensor, " batch *rest"]``,
so the same mistake raises at the call and names the argument and both shapes."""

import torch
import torch.nn.functional as F

from .shapes import Bool, Float, Int, Scalar, Tensor, typechecked

Same = Float[Tensor, " batch *rest"]


@typechecked
def mse_loss(prediction: Same, target: Same) -> Scalar:
    """Mean squared error over every element."""
    return F.mse_loss(prediction, target)


@typechecked
def l1_loss(prediction: Same, target: Same) -> Scalar:
    """Mean absolute error over every element."""
    return F.l1_loss(prediction, target)


@typechecked
def huber_loss(prediction: Same, target: Same, delta: float = 1.0) -> Scalar:
    """Squared error below ``delta``, linear above: robust to outlying targets."""
    return F.huber_loss(prediction, target, delta=delta)


@typechecked
def gaussian_nll_loss(mean: Same, variance: Same, target: Same, eps: float = 1e-6) -> Scalar:
    """Negative log-likelihood of ``target`` under a Gaussian with a predicted variance. The
    variance has the target's full shape: ``F.gaussian_nll_loss`` would also accept one trailing
    axis fewer and broadcast it, which is a second way to lose a shape silently."""
    return F.gaussian_nll_loss(mean, target, variance, eps=eps)


@typechecked
def bce_with_logits_loss(logits: Same, target: Same) -> Scalar:
    """Binary cross-entropy on raw logits; ``target`` holds probabilities in [0, 1]."""
    return F.binary_cross_entropy_with_logits(logits, target)


@typechecked
def cross_entropy_loss(
    logits: Float[Tensor, "batch class"], target: Int[Tensor, " batch"]
) -> Scalar:
    """Cross-entropy of integer class labels under unnormalised ``logits``."""
    return F.cross_entropy(logits, target)


@typechecked
def masked_mean(values: Same, mask: Bool[Tensor, " batch *rest"]) -> Scalar:
    """Mean of ``values`` where ``mask`` is true; zero when nothing is selected. The mask must
    have the values' exact shape: a ``(batch, 1)`` mask against ``(batch, time)`` values would
    broadcast, and the mean would count padding."""
    selected = torch.where(mask, values, torch.zeros_like(values))
    return selected.sum() / mask.sum().clamp(min=1)
