"""The column-target bug this project exists for, reproduced: a ``(N, 1)`` target against
``(N,)`` predictions. With checks on it raises at the loss; with checks off it trains a model
that only predicts the mean. ``pytest -s -k unchecked_column_target`` prints both R².
"""

import subprocess
import sys

import pytest
import torch
from einops import rearrange
from jaxtyping import TypeCheckError

from ..core.losses import mse_loss
from ..core.metrics import r2_score
from ..core.nets import ScalarMLP
from ..core.shapes import checks_disabled
from .project import PACKAGE, child_environment

Tensor = torch.Tensor
TRAIN_STEPS = 300


def _dataset(seed: int, rows: int = 512) -> tuple[Tensor, Tensor]:
    x = torch.randn(rows, 4, generator=torch.Generator().manual_seed(seed))
    y = torch.sin(2.0 * x[:, 0]) + x[:, 1] * x[:, 2] + torch.tanh(x[:, 3])
    return x, y


def _train_and_score(column_target: bool) -> float:
    """Full-batch Adam on a fixed budget; returns R² on held-out rows."""
    torch.manual_seed(0)
    (x, y), (x_val, y_val) = _dataset(seed=1), _dataset(seed=2)
    target = rearrange(y, "batch -> batch 1") if column_target else y
    net = ScalarMLP(4, hidden_sizes=(64, 64), activation="silu")
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(TRAIN_STEPS):
        optimizer.zero_grad()
        mse_loss(net(x), target).backward()
        optimizer.step()
    with torch.no_grad():
        return float(r2_score(net(x_val), y_val))


def test_column_target_raises_naming_argument_and_both_shapes() -> None:
    with pytest.raises(TypeCheckError) as error:
        mse_loss(torch.randn(6), torch.randn(6, 1))
    message = str(error.value)
    assert all(part in message for part in ("parameter 'target'", "f32[6]", "f32[6,1]")), message


@pytest.mark.no_broadcast_guard
def test_unchecked_column_target_learns_only_the_mean() -> None:
    """And ``checks_disabled`` turns the checks back on as it exits."""
    correct = _train_and_score(column_target=False)
    with checks_disabled(), pytest.warns(UserWarning, match="target size"):
        buggy = _train_and_score(column_target=True)
    with pytest.raises(TypeCheckError):
        mse_loss(torch.randn(3), torch.randn(3, 1))
    print(
        f"\ncolumn target, {TRAIN_STEPS} full-batch Adam steps: R² correct {correct:.3f}, "
        f"R² with (N, 1) target and checks off {buggy:.3f}"
    )
    assert correct > 0.9
    assert abs(buggy) < 0.05


@pytest.mark.slow
def test_environment_variable_turns_checks_off() -> None:
    probe = (
        f"import torch; from {PACKAGE}.core.losses import mse_loss; "
        "print(mse_loss(torch.zeros(6), torch.zeros(6, 1)).item())"
    )
    command = [sys.executable, "-W", "ignore", "-c", probe]
    env = child_environment({"JAXTYPING_DISABLE": "1"})
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0.0"
