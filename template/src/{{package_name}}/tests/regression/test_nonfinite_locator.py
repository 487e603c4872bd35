"""NonFiniteLocator on the regression example: weights that explode mid-training stop the
run with a report naming the layer, and the last good checkpoint survives."""

import json
from pathlib import Path

import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from ...core.broadcast import BroadcastGuard
from ...regression import RegressionData, RegressionModule
from ...run.guards import BroadcastGuardCallback, NonFiniteError, NonFiniteLocator
from ..project import CONFIGS, PACKAGE, QUIET, quiet_trainer, run_example

CONFIG = CONFIGS / "regression.yaml"
SAMPLES = 1280  # four training steps of 256 rows per epoch
FIRST = "non-finite output first at net.layers.2 (Linear) in batch 2"  # of ExplodeLayer(step=6)


class ExplodeLayer(Callback):
    """Sets ``net.layers.2``'s weights to 3e38, the edge of float32, before global step
    ``step``, as a diverging run would; also records last.ckpt's bytes at that moment."""

    def __init__(self, step: int) -> None:
        self.step, self.last_bytes = step, b""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            assert isinstance(pl_module, RegressionModule)
            layer = pl_module.net.layers[2]
            assert isinstance(layer, torch.nn.Linear)
            with torch.no_grad():
                layer.weight.fill_(3e38)
            saving = trainer.checkpoint_callback
            assert isinstance(saving, ModelCheckpoint) and saving.dirpath is not None
            self.last_bytes = (Path(saving.dirpath) / "last.ckpt").read_bytes()


def _fit(root: Path, *callbacks: Callback) -> None:
    data = RegressionData(synthetic_samples=SAMPLES)
    model = RegressionModule(
        data.num_features, target_mean=data.target_mean, target_std=data.target_std
    )
    saving = ModelCheckpoint(root / "checkpoints", monitor="val_loss", save_last=True)
    options = dict(max_epochs=3, limit_val_batches=1, accelerator="cpu")
    quiet_trainer(default_root_dir=root, callbacks=[*callbacks, saving], **options).fit(model, data)


def test_exploding_layer_is_named_and_last_checkpoint_survives(tmp_path: Path) -> None:
    explode = ExplodeLayer(step=6)
    with pytest.raises(NonFiniteError) as caught:
        _fit(tmp_path, NonFiniteLocator(), explode)
    report = str(caught.value)
    assert report.splitlines()[-1].startswith(f"{FIRST} of epoch 1;")
    assert "  input 0: float32 (256, 128), min " in report and ", 0 NaN, 0 Inf" in report
    saved = torch.load(tmp_path / "nonfinite_batch.pt", weights_only=True)
    assert saved["batch"][0].shape == (256, 8) and saved["global_step"] == 6

    last = tmp_path / "checkpoints" / "last.ckpt"
    assert last.read_bytes() == explode.last_bytes
    assert torch.load(last, weights_only=True)["global_step"] == 4
    restored = RegressionModule.load_from_checkpoint(last)
    assert all(parameter.isfinite().all() for parameter in restored.parameters())


def test_a_finite_regression_fit_raises_no_false_alarm(
    broadcast_guard: BroadcastGuard, tmp_path: Path
) -> None:
    """Neither the locator nor BroadcastGuard fires. The fixture guards the whole fit; the
    callback's own guard proves the training-time path active in its six steps, over two epochs."""
    guard = BroadcastGuardCallback(steps=6)
    _fit(tmp_path, NonFiniteLocator(), guard)
    assert not list(tmp_path.glob("nonfinite_*"))
    assert guard.guarded == 6


@pytest.mark.slow
def test_cli_exits_1_with_its_traceback_and_one_line_summary_last(tmp_path: Path) -> None:
    """A diverging run is no user's mistake: it keeps its traceback and Python's status 1."""
    callbacks = [
        {"class_path": f"{PACKAGE}.run.guards.NonFiniteLocator"},
        {"class_path": f"{__name__}.ExplodeLayer", "init_args": {"step": 6}},
    ]
    args = ["fit", "--config", str(CONFIG), f"--trainer.default_root_dir={tmp_path}", *QUIET]
    args += ["--trainer.max_epochs=3", "--trainer.limit_val_batches=1"]
    args += [f"--data.synthetic_samples={SAMPLES}"]
    args += [f"--trainer.callbacks+={json.dumps(each)}" for each in callbacks]
    returncode, lines = run_example("regression", args, tmp_path)
    assert returncode == 1, "\n".join(lines[-30:])
    assert any(line.startswith("Traceback") for line in lines)
    assert lines[-1].startswith(FIRST), "\n".join(lines[-30:])
