"""Inputs standardised per feature, ``(x - mean) / std``, with the training split's
statistics: buffers, so they move with the model, left out of its state, since the model's
hyperparameters hold them. Imports only torch and the shapes module.
"""

import torch
from torch import nn

from .shapes import Float, Tensor, typechecked


class Standardise(nn.Module):
    mean: Tensor
    std: Tensor

    def __init__(
        self, num_features: int, mean: list[float] | None = None, std: list[float] | None = None
    ) -> None:
        """Each feature's ``mean`` and ``std`` (none: 0 and 1); another length would broadcast."""
        super().__init__()
        for name, stats in (("feature_mean", mean), ("feature_std", std)):
            if stats is not None and len(stats) != num_features:
                raise ValueError(f"{name} has {len(stats)} values, num_features={num_features}")
        self.register_buffer("mean", torch.tensor(mean or [0.0] * num_features), persistent=False)
        self.register_buffer("std", torch.tensor(std or [1.0] * num_features), persistent=False)

    @typechecked
    def forward(self, x: Float[Tensor, "*batch feature"]) -> Float[Tensor, "*batch feature"]:
        return (x - self.mean) / self.std
