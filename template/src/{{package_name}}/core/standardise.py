"""Standardised inputs: ``(x - mean) / std`` per feature, with the training split's statistics.

The statistics are buffers, so they move with the model, and are not saved in its state:
the model's hyperparameters hold them, so a checkpoint alone rebuilds them. Imports only
torch and the shapes module.
"""

import torch
from torch import nn

from .shapes import Float, Tensor, typechecked


class Standardise(nn.Module):
    feature_mean: Tensor
    feature_std: Tensor

    def __init__(
        self, num_features: int, mean: list[float] | None = None, std: list[float] | None = None
    ) -> None:
        """``mean`` and ``std``: one value per feature (none: 0 and 1); another length is
        refused, where it would broadcast."""
        super().__init__()
        for name, stats in (("feature_mean", mean), ("feature_std", std)):
            if stats is not None and len(stats) != num_features:
                raise ValueError(f"{name} has {len(stats)} values, num_features={num_features}")
        mean, std = mean or [0.0] * num_features, std or [1.0] * num_features
        self.register_buffer("feature_mean", torch.tensor(mean), persistent=False)
        self.register_buffer("feature_std", torch.tensor(std), persistent=False)

    @typechecked
    def forward(self, x: Float[Tensor, "*batch feature"]) -> Float[Tensor, "*batch feature"]:
        return (x - self.feature_mean) / self.feature_std
