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
SHORT_NAMES = {"catalog": "test_shape_bug_catalog.py", "guard": "test_broadcast_guard.py"}
SHORT_NAMES |= {"masks": "test_masks.py"}


@typechecked
def _log_likelihood(
    mean: Float[Tensor, " batch"], action: Float[Tensor, " batch"]
) -> Float[Tensor, " batch"]:
    """One log-probability per row: the annotation ``Normal(mu (N, 1))`` violates."""
    return Normal(mean, 1.0).log_prob(action)


REFUSED = {  # the bug, and the argument the error names
    "critic column": (lambda: mse_loss(torch.randn(N, 1), torch.randn(N)), "target"),
    "squeezed batch": (lambda: mse_loss(torch.randn(1, 1)[0, 0], torch.randn(1)), "prediction"),
    "Normal.log_prob": (lambda: _log_likelihood(torch.randn(N, 1), torch.randn(N)), "mean"),
    "outer broadcast": (lambda: mse_loss(torch.randn(N, 1), torch.randn(1, N)), "target"),
}


@pytest.mark.parametrize("bug", REFUSED)
def test_the_annotation_refuses(bug: str) -> None:
    call, named = REFUSED[bug]
    with pytest.raises(TypeCheckError, match=f"parameter '{named}'"):
        call()


MISSED_BY_THE_GUARD = {  # legal one-sided broadcasting: only annotations or einops can tell
    "mask on the wrong axis": lambda: torch.randn(T, T) * torch.ones(T),  # along time, not batch
    "squeezed scalar": lambda: torch.randn(1, 1)[0, 0] - torch.randn(1),  # a 0-d tensor: scalar
}


@pytest.mark.parametrize("bug", MISSED_BY_THE_GUARD)
def test_the_guard_misses_a_stretch_of_one_operand(bug: str) -> None:
    with BroadcastGuard():
        MISSED_BY_THE_GUARD[bug]()


def test_einops_patterns_name_and_keep_the_axes() -> None:
    mask = torch.ones(T, dtype=torch.bool)
    assert rearrange(mask, "(batch) -> batch 1", batch=T).shape == (T, 1)
    with pytest.raises(EinopsError):  # a mask meant for an axis of another size
        rearrange(mask, "(batch) -> batch 1", batch=N)
    assert rearrange(torch.randn(1, 1), "batch 1 -> batch").shape == (1,)  # at batch size 1
    mean = rearrange(torch.randn(N, 1), "batch 1 -> batch")
    assert _log_likelihood(mean, torch.randn(N)).shape == (N,)  # one log-prob per row


def test_nan_from_a_layer_passes_annotation_and_guard() -> None:
    """Shapes are right and nothing broadcasts: only the NonFiniteLocator can find it."""
    net = ScalarMLP(3, (4,))
    torch.nn.init.constant_(next(net.parameters()), float("nan"))  # the first layer's weight
    with BroadcastGuard():
        loss = mse_loss(net(torch.randn(N, 3)), torch.randn(N))
    assert torch.isnan(loss)


def test_docs_page_names_only_tests_that_exist() -> None:
    cited = re.findall(r"`([\w/.]+)::(\w+)(?:\[([^\]]+)\])?`", (DOCS / "shape_bugs.md").read_text())
    assert len(cited) >= 16, "the page should cite a test in most cells"
    for file, name, case in cited:
        source = (Path(__file__).parent / SHORT_NAMES.get(file, str(file))).read_text()
        assert f"def {name}(" in source, f"{file}::{name} is cited but does not exist"
        assert not case or f'"{case}"' in source, f"no case {case!r}"
