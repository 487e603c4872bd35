"""The cells of docs/shape_bugs.md that no other test proves: for each failure mode, which
defence catches it, and (where a defence cannot) that it really misses, so the page never
claims more than the code does. The last test checks that every test the page cites exists."""

import re
from pathlib import Path

import pytest
import torch
from einops import EinopsError, rearrange
from jaxtyping import TypeCheckError
from torch.distributions import Normal

from ..core.broadcast import BroadcastGuard
from ..core.losses import mse_loss
from ..core.nets import ScalarMLP
from ..core.shapes import Float, Tensor, typechecked
from .project import DOCS

N, T = 6, 4
TESTS = Path(__file__).resolve().parent
PAGE = DOCS / "shape_bugs.md"
SHORT_NAMES = {"catalog": "test_shape_bug_catalog.py", "guard": "test_broadcast_guard.py"}
SHORT_NAMES |= {"masks": "test_masks.py"}


@typechecked
def _log_likelihood(
    mean: Float[Tensor, " batch"], action: Float[Tensor, " batch"]
) -> Float[Tensor, " batch"]:
    """One log-probability per row: the annotation the seed's ``Normal`` bug violates."""
    return Normal(mean, 1.0).log_prob(action)


def test_critic_column_is_refused_by_the_annotation() -> None:
    with pytest.raises(TypeCheckError, match="prediction"):
        mse_loss(torch.randn(N, 1), torch.randn(N))


def test_mask_on_the_wrong_axis_is_missed_by_the_guard_when_one_side_fits() -> None:
    """``(N, T) * (T,)`` stretches only the mask: legal broadcasting, so the guard passes
    it; only the annotation or an einops pattern that names the axis can tell."""
    values, mask_for_the_batch_axis = torch.randn(T, T), torch.ones(T)
    with BroadcastGuard():
        masked = values * mask_for_the_batch_axis  # multiplies along time instead
    assert masked.shape == (T, T)


def test_einops_names_the_axis_a_mask_is_meant_for() -> None:
    mask = torch.ones(T, dtype=torch.bool)
    assert rearrange(mask, "(batch) -> batch 1", batch=T).shape == (T, 1)
    with pytest.raises(EinopsError):
        rearrange(mask, "(batch) -> batch 1", batch=N)


def test_squeezed_batch_of_one_is_refused_by_the_annotation() -> None:
    prediction = torch.randn(1, 1)[0, 0]  # what .squeeze() returns at batch size 1
    with pytest.raises(TypeCheckError):
        mse_loss(prediction, torch.randn(1))


def test_einops_keeps_the_batch_axis_at_batch_size_one() -> None:
    column = torch.randn(1, 1)
    assert rearrange(column, "batch 1 -> batch").shape == (1,)
    assert ScalarMLP(3, (4,))(torch.randn(1, 3)).shape == (1,)


def test_squeezed_scalar_is_missed_by_the_guard() -> None:
    """A 0-d tensor against ``(1,)`` is scalar broadcasting, which is always allowed."""
    with BroadcastGuard():
        error = torch.randn(1, 1)[0, 0] - torch.randn(1)  # a squeezed batch of one, minus a target
    assert error.shape == (1,)


def test_normal_log_prob_of_the_wrong_shape_is_refused_by_the_annotation() -> None:
    with pytest.raises(TypeCheckError):
        _log_likelihood(torch.randn(N, 1), torch.randn(N))


def test_einops_column_mean_gives_one_log_prob_per_row() -> None:
    mean = rearrange(torch.randn(N, 1), "batch 1 -> batch")
    assert _log_likelihood(mean, torch.randn(N)).shape == (N,)


def test_outer_broadcast_is_refused_by_the_annotation() -> None:
    with pytest.raises(TypeCheckError):
        mse_loss(torch.randn(N, 1), torch.randn(1, N))


def test_nan_from_a_layer_passes_annotation_and_guard() -> None:
    """Shapes are right and nothing broadcasts: only the NonFiniteLocator can find it."""
    net = ScalarMLP(3, (4,))
    first_layer = net.layers[0]
    assert isinstance(first_layer, torch.nn.Linear)
    torch.nn.init.constant_(first_layer.weight, float("nan"))
    with BroadcastGuard():
        prediction = net(torch.randn(N, 3))
        loss = mse_loss(prediction, torch.randn(N))
    assert torch.isnan(loss)


def test_docs_page_names_only_tests_that_exist() -> None:
    cited = re.findall(r"`([\w/.]+)::(\w+)(?:\[([^\]]+)\])?`", PAGE.read_text())
    assert len(cited) >= 16, "the page should cite a test in most cells"
    for file, name, case in cited:
        source = (TESTS / SHORT_NAMES.get(file, str(file))).read_text()
        assert f"def {name}(" in source, f"{file}::{name} is cited but does not exist"
        assert case is None or case == "" or f'"{case}"' in source, f"no case {case!r}"
