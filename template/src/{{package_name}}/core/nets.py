"""Typed multilayer perceptrons.

``ScalarMLP`` is an ``MLP`` with one output, returned as ``(batch,)`` through
``rearrange("batch 1 -> batch")``: the shape a regression target or a value estimate has. A
bare squeeze would also drop the batch axis at batch size 1; the pattern fails loudly instead.

Weights are orthogonally initialised (gain sqrt(2) for hidden layers, ``output_gain`` for
the last), biases zeroed: the initialisation PPO relies on, harmless for regression."""

import math
from collections.abc import Sequence
from typing import Literal

from einops import rearrange
from torch import nn

from .shapes import Float, Tensor, typechecked

Activation = Literal["tanh", "relu", "silu", "gelu"]

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "silu": nn.SiLU, "gelu": nn.GELU}


def orthogonal_linear(in_features: int, out_features: int, gain: float) -> nn.Linear:
    """A linear layer with orthogonal weights scaled by ``gain`` and zero bias."""
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


class MLP(nn.Module):
    """Fully connected layers with one activation between them."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        hidden_sizes: Sequence[int] = (64, 64),
        activation: Activation = "tanh",
        output_gain: float = 1.0,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}"
            )
        layers: list[nn.Module] = []
        width = in_features
        for hidden in hidden_sizes:
            layers += [orthogonal_linear(width, hidden, math.sqrt(2)), _ACTIVATIONS[activation]()]
            width = hidden
        layers.append(orthogonal_linear(width, out_features, output_gain))
        self.layers = nn.Sequential(*layers)

    @typechecked
    def forward(self, x: Float[Tensor, "batch feature"]) -> Float[Tensor, "batch out"]:
        return self.layers(x)


class ScalarMLP(MLP):
    """An MLP with a single output per row, returned without its trailing axis."""

    def __init__(
        self,
        in_features: int,
        hidden_sizes: Sequence[int] = (64, 64),
        activation: Activation = "tanh",
        output_gain: float = 1.0,
    ) -> None:
        super().__init__(in_features, 1, hidden_sizes, activation, output_gain)

    @typechecked
    def forward(self, x: Float[Tensor, "batch feature"]) -> Float[Tensor, " batch"]:
        return rearrange(self.layers(x), "batch 1 -> batch")
