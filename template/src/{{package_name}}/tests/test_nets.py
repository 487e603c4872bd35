"""The networks keep the batch axis at every batch size (``test_annotation_cases.py`` breaks
their input in every way)."""

import pytest
import torch

from ..core.nets import MLP, ScalarMLP


@pytest.mark.parametrize("batch", [1, 7])
def test_scalar_mlp_returns_one_value_per_row(batch: int) -> None:
    """And ``MLP`` one row of ``out_features`` per row."""
    x = torch.randn(batch, 3)
    assert ScalarMLP(in_features=3, hidden_sizes=(8, 8))(x).shape == (batch,)
    assert MLP(in_features=3, out_features=4, hidden_sizes=(8,))(x).shape == (batch, 4)


def test_mlp_rejects_unknown_activation() -> None:
    with pytest.raises(ValueError, match="activation"):
        MLP(3, 1, activation="sigmoid")  # type: ignore[arg-type]


def test_orthogonal_output_gain_scales_last_layer() -> None:
    net = MLP(in_features=16, out_features=4, hidden_sizes=(16,), output_gain=0.01)
    last = net.layers[-1]
    assert isinstance(last, torch.nn.Linear)
    torch.testing.assert_close(last.weight @ last.weight.T, 1e-4 * torch.eye(4))
