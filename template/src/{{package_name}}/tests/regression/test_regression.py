"""The regression example end to end: CLI, CSV input, summary.json, checkpoints; compiled,
a wrong shape still raises at its boundary (a compiled fit: ``test_run_files.py``)."""

import json
from pathlib import Path

import pytest
import torch
from einops import rearrange
from jaxtyping import TypeCheckError

from ...regression import RegressionData, RegressionModule
from ...regression.__main__ import main
from ...run.validation import Column
from ..project import CONFIGS, QUIET, fit_summary, refusal

CONFIG = CONFIGS / "regression.yaml"
QUICK = ["--trainer.max_epochs=2", "--trainer.limit_train_batches=3"]
QUICK.append("--trainer.limit_val_batches=2")


def _fit(root: Path, *extra: str) -> dict:
    main(["fit", "--config", str(CONFIG), f"--trainer.default_root_dir={root}", *QUIET, *extra])
    (summary_path,) = root.rglob("summary.json")
    return json.loads(summary_path.read_text())


@pytest.mark.cli
def test_bf16_fit_writes_summary_and_checkpoints_that_load_weights_only(tmp_path: Path) -> None:
    summary = _fit(tmp_path, *QUICK, "--trainer.precision=bf16-mixed")
    assert {"val_r2", "val_mae", "train_seconds", "epochs"} <= summary.keys()
    assert summary["epochs"] == 2 and summary["train_seconds"] > 0
    assert any(path.name.startswith("best-") for path in tmp_path.rglob("*.ckpt"))
    # Flat hyperparameters of built-in types: a checkpoint needs no pickled classes.
    last = tmp_path / "checkpoints" / "last.ckpt"
    hyperparameters = torch.load(last, weights_only=True)["hyper_parameters"]
    assert hyperparameters["learning_rate"] == 0.003
    assert list(hyperparameters["hidden_sizes"]) == [128, 128]
    module = RegressionModule.load_from_checkpoint(last, weights_only=True)
    assert (module.learning_rate, module.weight_decay) == (0.003, 0.0)


def test_bom_and_blank_lines_are_read_and_statistics_are_the_training_rows(tmp_path: Path) -> None:
    """A spreadsheet's byte order mark (before the target's name here) and blank lines are
    read; the statistics the model normalises with are the training rows' alone."""
    path = tmp_path / "t.csv"
    rows = "".join(f"{float(i)},{i}\n\n" for i in range(50))
    path.write_text("\ufeffy,x\n" + rows, encoding="utf-8")
    data = RegressionData(csv_path=path, target="y")
    assert data.num_features == 1 and len(data.train_set) + len(data.val_set) == 50
    features, targets = data.train_set[:]
    assert data.target_mean == pytest.approx(float(targets.mean()))
    assert data.feature_mean == pytest.approx(features.mean(dim=0).tolist())


@pytest.mark.slow
def test_default_config_reaches_r2_of_095(tmp_path: Path) -> None:
    # The shipped config's whole budget, run as the README runs it: in its own process.
    summary = fit_summary("regression", CONFIG, QUIET, tmp_path)
    assert summary["val_r2"] >= 0.95, summary


@pytest.mark.cli
def test_schedule_takes_its_length_from_the_budget_or_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = refusal(capsys, lambda: _fit(tmp_path / "refused", "--trainer.max_epochs=-1"))
    assert line == (
        "error: the cosine schedule needs a length: set --trainer.max_epochs or --trainer.max_steps"
    )
    # The schedule anneals over fast_dev_run's one step, or max_steps without an epoch count.
    assert _fit(tmp_path / "dev", "--trainer.fast_dev_run=true")["global_step"] == 1
    steps = ["--trainer.max_epochs=-1", "--trainer.max_steps=4", "--trainer.limit_val_batches=1"]
    assert _fit(tmp_path / "steps", *steps)["global_step"] == 4


def test_column_gives_the_batches_as_torch_cat_does_and_keeps_float32_at_least() -> None:
    batches = [torch.randn(size) for size in (1, 3000, 4096, 9000, 7)]
    column = Column()
    for batch in batches:  # across its growth
        column.append(batch)
    assert torch.equal(column.take(), torch.cat(batches))
    with pytest.raises(RuntimeError, match="no batches"):  # empty again after take
        column.take()
    column.append(torch.tensor([1.0, 2.0], dtype=torch.bfloat16))
    column.append(torch.tensor([3.0], dtype=torch.float64))  # widens the column
    taken = column.take()
    assert taken.dtype == torch.float64 and taken.tolist() == [1.0, 2.0, 3.0]
    column.append(torch.tensor([1.0], dtype=torch.bfloat16))
    assert column.take().dtype == torch.float32


@pytest.mark.parametrize("compile", [False, True])
def test_a_column_target_or_input_raises_at_its_boundary(compile: bool) -> None:
    torch._dynamo.reset()
    module = RegressionModule(3, (8,), compile=compile, compile_backend="aot_eager")
    x, y = torch.randn(6, 3), torch.randn(6)
    assert module.training_step((x, y), 0).shape == ()
    assert module(x).shape == module(x).shape == (6,)
    with pytest.raises(TypeCheckError, match="target"):
        module.training_step((x, rearrange(y, "batch -> batch 1")), 0)
    with pytest.raises(TypeCheckError):
        module(torch.randn(4, 3, 1))
