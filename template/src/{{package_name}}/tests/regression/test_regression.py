"""The regression example end to end: CLI, CSV input and its errors, summary.json."""

import csv
import json
from pathlib import Path

import lightning as L
import pytest
import torch
from einops import rearrange
from jaxtyping import TypeCheckError

from ...core.broadcast import BroadcastGuard
from ...regression import RegressionData, RegressionModule
from ...regression.__main__ import main
from ...regression.module import Column
from ...run.errors import UserError
from ...run.guards import BroadcastGuardCallback
from ..project import CONFIGS, fit_summary, refusal

CONFIG = CONFIGS / "regression.yaml"
QUICK = [
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=3",
    "--trainer.limit_val_batches=2",
]
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]


def _fit(root: Path, *extra: str) -> dict:
    main(["fit", "--config", str(CONFIG), f"--trainer.default_root_dir={root}", *QUIET, *extra])
    (summary_path,) = root.rglob("summary.json")
    return json.loads(summary_path.read_text())


def _write_csv(path: Path, rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return path


@pytest.mark.cli
def test_fast_dev_run_fits(tmp_path: Path) -> None:
    main(
        [
            "fit",
            "--config",
            str(CONFIG),
            f"--trainer.default_root_dir={tmp_path}",
            "--trainer.fast_dev_run=true",
            *QUIET,
        ]
    )


@pytest.mark.cli
def test_fit_writes_summary_and_checkpoints_that_load_with_weights_only(tmp_path: Path) -> None:
    summary = _fit(tmp_path, *QUICK)
    assert {"val_r2", "val_mae", "train_seconds", "epochs"} <= summary.keys()
    assert summary["epochs"] == 2 and summary["train_seconds"] > 0
    checkpoints = {path.name for path in tmp_path.rglob("*.ckpt")}
    assert "last.ckpt" in checkpoints
    assert any(name.startswith("best-") for name in checkpoints)
    # Flat hyperparameters of built-in types: a checkpoint needs no pickled classes.
    last = tmp_path / "checkpoints" / "last.ckpt"
    hyperparameters = torch.load(last, weights_only=True)["hyper_parameters"]
    assert hyperparameters["learning_rate"] == 0.003
    assert list(hyperparameters["hidden_sizes"]) == [128, 128]
    module = RegressionModule.load_from_checkpoint(last, weights_only=True)
    assert (module.learning_rate, module.weight_decay) == (0.003, 0.0)


def test_column_target_in_training_step_raises_naming_target() -> None:
    module = RegressionModule(num_features=3)
    x, y = torch.randn(6, 3), torch.randn(6)
    assert module.training_step((x, y), 0).shape == ()
    with pytest.raises(TypeCheckError, match="target"):
        module.training_step((x, rearrange(y, "batch -> batch 1")), 0)


@pytest.mark.cli
def test_csv_trains_on_numeric_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    generator = torch.Generator().manual_seed(0)
    rows: list[list[object]] = [["id", "a", "b", "price"]]
    for index in range(60):
        a, b = torch.randn(2, generator=generator).tolist()
        rows.append([f"row{index}", a, b, 3 * a - b])
    path = _write_csv(tmp_path / "houses.csv", rows)
    summary = _fit(tmp_path / "run", *QUICK, f"--data.csv_path={path}", "--data.target=price")
    assert summary["val_r2"] is not None
    data = RegressionData(csv_path=path, target="price")
    assert data.num_features == 2


def test_target_statistics_come_from_training_split(tmp_path: Path) -> None:
    rows: list[list[object]] = [["x", "y"]]
    rows += [[i, float(i)] for i in range(50)]
    data = RegressionData(csv_path=_write_csv(tmp_path / "t.csv", rows), target="y")
    train_targets = torch.stack([y for _, y in data.train_set])
    assert data.target_mean == pytest.approx(float(train_targets.mean()))
    features = torch.stack([x for x, _ in data.train_set])
    assert data.feature_mean == pytest.approx(features.mean(dim=0).tolist())


def test_csv_without_target_is_refused(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "t.csv", [["a", "y"], [1, 2], [3, 4]])
    with pytest.raises(UserError, match="csv_path and --data.target"):
        RegressionData(csv_path=path)


def test_blank_lines_and_byte_order_mark_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("\ufeffa,y\n1,2\n\n3,4\n5,7\n\n", encoding="utf-8")
    data = RegressionData(csv_path=path, target="y", val_fraction=0.34)
    assert data.num_features == 1 and len(data.train_set) + len(data.val_set) == 3


@pytest.mark.cli
def test_step_limited_run_anneals_over_its_steps(tmp_path: Path) -> None:
    summary = _fit(
        tmp_path,
        "--trainer.max_epochs=-1",
        "--trainer.max_steps=4",
        "--trainer.limit_val_batches=1",
    )
    assert summary["global_step"] == 4


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="nothere.csv: no such file"):
        RegressionData(csv_path=tmp_path / "nothere.csv", target="y")


@pytest.mark.slow
def test_default_config_reaches_r2_of_095(tmp_path: Path) -> None:
    # The shipped config's whole budget, run as the README runs it: in its own process.
    summary = fit_summary("regression", CONFIG, QUIET, tmp_path)
    assert summary["val_r2"] >= 0.95, summary


@pytest.mark.cli
def test_schedule_without_a_length_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["fit", "--config", str(CONFIG), f"--trainer.default_root_dir={tmp_path}", *QUIET]
    line = refusal(capsys, lambda: main([*args, "--trainer.max_epochs=-1"]))
    assert line == (
        "error: the cosine schedule needs a length: set --trainer.max_epochs or --trainer.max_steps"
    )


# BroadcastGuard raises nothing over a short fit: no step stretches an operand pair.
def test_regression_fit_has_no_broadcast_false_alarm(broadcast_guard: BroadcastGuard) -> None:
    # The fixture guards the whole fit (setup, validation, checkpoints); the callback's own
    # guard proves the training-time path is active for every one of its steps.
    data = RegressionData()
    module = RegressionModule(
        data.num_features, target_mean=data.target_mean, target_std=data.target_std
    )
    callback = BroadcastGuardCallback(steps=6)
    trainer = L.Trainer(
        max_epochs=2,
        limit_train_batches=3,
        limit_val_batches=2,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, data)
    assert callback.guarded == 6


# Column: the values of every batch, in order, as torch.cat gives them, across its growth.
def test_batches_across_its_growth_come_back_as_torch_cat_gives_them() -> None:
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randn(size, generator=generator) for size in (1, 3000, 4096, 9000, 7)]
    column = Column()
    for batch in batches:
        column.append(batch)
    assert torch.equal(column.take(), torch.cat(batches))
    column.append(batches[1])  # empty again after take
    assert torch.equal(column.take(), batches[1])


def test_bf16_values_are_kept_in_float32_and_a_wider_batch_widens_the_column() -> None:
    column = Column()
    column.append(torch.tensor([1.0, 2.0], dtype=torch.bfloat16))
    column.append(torch.tensor([3.0], dtype=torch.float64))
    taken = column.take()
    assert taken.dtype == torch.float64
    assert taken.tolist() == [1.0, 2.0, 3.0]


def test_take_before_any_batch_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no batches"):
        Column().take()
