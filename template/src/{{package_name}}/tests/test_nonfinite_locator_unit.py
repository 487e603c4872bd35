"""NonFiniteLocator on a tiny model whose third submodule turns NaN from a chosen step on."""

import math
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from einops import rearrange
from lightning.pytorch.callbacks import Callback, LambdaCallback, ModelCheckpoint
from lightning.pytorch.core.optimizer import LightningOptimizer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ..core.losses import mse_loss
from ..core.shapes import Float, Scalar, Tensor
from ..run.guards import NonFiniteError, NonFiniteLocator
from .project import quiet_trainer

Batch = tuple[Float[Tensor, "batch feature"], Float[Tensor, " batch"]]
ROWS, BATCH = 64, 16  # four steps per epoch
FEATURES = torch.randn(ROWS, 4, generator=torch.Generator().manual_seed(0))


class Poison(nn.Module):  # identity until switched on, then NaN everywhere
    def __init__(self) -> None:
        super().__init__()
        self.active = False

    def forward(self, x: Float[Tensor, "batch feature"]) -> Float[Tensor, "batch feature"]:
        return x * math.nan if self.active else x


class Tiny(L.LightningModule):
    def __init__(
        self, poison_step: int | None = None, manual: bool = False, middle: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), middle or Poison(), nn.Linear(8, 1))
        self.poison_step = poison_step
        self.automatic_optimization = not manual

    def training_step(self, batch: Batch, batch_idx: int) -> Scalar | None:
        x, y = batch
        poison = self.net[2]
        if isinstance(poison, Poison):
            poison.active = self.poison_step is not None and self.global_step >= self.poison_step
        loss = mse_loss(rearrange(self.net(x), "batch 1 -> batch"), y)
        self.log("train_loss", loss)
        if self.automatic_optimization:
            return loss
        optimizer = self.optimizers()
        assert isinstance(optimizer, LightningOptimizer)
        optimizer.zero_grad()
        self.manual_backward(loss)
        optimizer.step()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(
    root: Path, model: L.LightningModule, *callbacks: Callback, x: Tensor = FEATURES, **kw: Any
) -> None:
    """Three epochs on ``x`` under a NonFiniteLocator and ``callbacks``."""
    every = [NonFiniteLocator(), *callbacks]
    trainer = quiet_trainer(
        default_root_dir=root, max_epochs=3, accelerator="cpu", callbacks=every, **kw
    )
    trainer.fit(model, DataLoader(TensorDataset(x, x.sum(dim=1)), batch_size=BATCH))


def _report(root: Path, model: L.LightningModule, *callbacks: Callback) -> str:
    """The report of the NonFiniteError that ``_fit`` must raise."""
    with pytest.raises(NonFiniteError) as caught:
        _fit(root, model, *callbacks)
    return str(caught.value)


def test_nan_from_a_submodule_is_named_with_its_input_range(tmp_path: Path) -> None:
    """And the last checkpoint, of the step before, is untouched and finite."""
    model, last = Tiny(poison_step=5), tmp_path / "checkpoints" / "last.ckpt"
    saved_last = []  # last.ckpt before each batch: the state after the last good step
    snapshot = LambdaCallback(
        on_train_batch_start=lambda *_: last.exists() and saved_last.append(last.read_bytes())
    )
    saving = ModelCheckpoint(tmp_path / "checkpoints", every_n_train_steps=1, save_last=True)
    report = _report(tmp_path, model, snapshot, saving)
    batch_path = tmp_path / "nonfinite_batch.pt"
    assert report.splitlines()[-1] == (
        f"non-finite output first at net.2 (Poison) in batch 1 of epoch 1; "
        f"batch saved to {batch_path}"
    )
    assert f"input 0: float32 ({BATCH}, 8), min -" in report
    assert f"output 0: float32 ({BATCH}, 8), no finite values, {BATCH * 8} NaN, 0 Inf" in report
    saved = torch.load(batch_path, weights_only=True)
    assert (saved["epoch"], saved["batch_idx"], saved["global_step"]) == (1, 1, 5)
    torch.testing.assert_close(saved["batch"][0], FEATURES[BATCH : 2 * BATCH])
    assert saved["report"] == report
    assert (tmp_path / "nonfinite_report.txt").read_text() == report + "\n"
    assert all(parameter.isfinite().all() for parameter in model.parameters())
    assert last.read_bytes() == saved_last[-1]
    assert all(p.isfinite().all() for p in Tiny.load_from_checkpoint(last).parameters())
    assert torch.load(last, weights_only=True)["global_step"] == 5


@pytest.mark.parametrize(
    ("row", "value", "accumulate", "batch"),
    [(BATCH + 3, math.nan, 1, 1), (2 * BATCH, math.inf, 2, 2)],
    ids=["every step", "accumulated"],
)
def test_nan_in_the_data_is_blamed_on_the_batch(
    tmp_path: Path, row: int, value: float, accumulate: int, batch: int
) -> None:
    """With two batches per optimizer step the check runs after batch 3; the bad value came
    in batch 2, and the report says so."""
    x = FEATURES.clone()
    x[row, 2] = value
    with pytest.raises(NonFiniteError, match=f"non-finite input data in batch {batch} of epoch 0"):
        _fit(tmp_path, Tiny(), x=x, accumulate_grad_batches=accumulate)


class SqrtOfZero(nn.Module):  # adds sqrt(0): a finite forward whose backward divides by zero
    def forward(self, x: Float[Tensor, "batch feature"]) -> Float[Tensor, "batch feature"]:
        return x + torch.sqrt(x - x.detach())


class OutsideTheModule(Tiny):
    """Also optimizes a tensor that is no parameter of the module; its gradient turns NaN.
    The check reads the optimizer's parameters, so it sees one the module does not hold."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.ones(1, requires_grad=True)  # a plain tensor: not in parameters()

    def on_after_backward(self) -> None:
        self.scale.grad = torch.full_like(self.scale, math.nan)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD([*self.parameters(), self.scale], lr=0.1)


def test_nan_born_in_backward_names_the_gradient(tmp_path: Path) -> None:
    report = _report(tmp_path, Tiny(middle=SqrtOfZero()))
    assert "the forward replay stayed finite" in report
    summary = "non-finite gradient in net.0.weight and 1 more in batch 0 of epoch 0"
    assert report.splitlines()[-1].startswith(summary)


def test_a_nan_gradient_outside_the_module_still_stops_the_step(tmp_path: Path) -> None:
    report = _report(tmp_path, OutsideTheModule())
    assert "parameters with non-finite gradients: a parameter outside the module" in report
    assert report.splitlines()[-1].startswith("non-finite gradient in a parameter outside")


def test_manual_optimization_lists_gradients_without_replay(tmp_path: Path) -> None:
    report = _report(tmp_path, Tiny(poison_step=2, manual=True))
    assert "no forward replay" in report
    assert "parameters with non-finite gradients: net.0.weight, net.0.bias" in report
    assert report.splitlines()[-1].startswith("non-finite loss in batch 2 of epoch 0")


@pytest.mark.parametrize("gradient", [1e30, None], ids=["overflowing norm", "no gradients"])
def test_a_step_with_only_finite_gradients_is_no_alarm(gradient: float | None) -> None:
    """A 2-norm of gradients near 1e30 is inf in float32, yet every entry is finite; and a
    step may have nothing to norm (all parameters frozen, or an fp16 scaler hiding them)."""
    model = Tiny()
    for parameter in model.parameters():
        parameter.grad = None if gradient is None else torch.full_like(parameter, gradient)
    optimizer = torch.optim.SGD(model.parameters())
    NonFiniteLocator().on_before_optimizer_step(quiet_trainer(accelerator="cpu"), model, optimizer)
