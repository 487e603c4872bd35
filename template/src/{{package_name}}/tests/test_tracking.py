"""The logger presets of ``configs/logger/`` write under the run root, and on a tiny fit with
several at once each gets every metric and hyperparameter (``trackers/`` imports the helpers)."""

import csv
from collections.abc import Iterable
from pathlib import Path

import pytest
from lightning.pytorch.cli import LightningCLI
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from .project import CONFIGS, EXAMPLES, QUIET, example_main

METRICS = {"regression": {"train_loss", "val_loss", "val_r2", "val_mae"}}
METRICS["ppo"] = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"}
METRICS["ppo"] |= {"learning_rate", "episodic_return", "episodic_length", "sps", "eval_return"}
METRICS["sequence"] = {"train_loss", "val_loss", "val_accuracy"}
HYPERPARAMETERS = dict.fromkeys(METRICS, {"learning_rate", "hidden_sizes"})  # two of each
HYPERPARAMETERS["sequence"] = {"learning_rate", "width"}
TINY = {"regression": ["--data.synthetic_samples=256", "--data.batch_size=64"]}
TINY["ppo"] = ["--model.num_envs=2", "--model.num_steps=16", "--model.total_env_steps=96"]
TINY["ppo"] += ["--model.update_epochs=1", "--model.eval_every_env_steps=32"]
TINY["ppo"] += ["--model.eval_episodes=1", "--model.hidden_sizes=[8]"]
TINY["sequence"] = ["--model.width=8", "--model.heads=2", "--model.layers=1"]
SHORT = dict.fromkeys(EXAMPLES, "--trainer.max_epochs=1") | {"ppo": "--trainer.max_steps=2"}
"""Stops before the budget's end, so that a resumed fit has steps left to take."""


def fit(example: str, root: Path, *extra: str) -> LightningCLI:
    config = ["--config", str(CONFIGS / f"{example}.yaml")]
    args = ["fit", *config, f"--trainer.default_root_dir={root}", *QUIET, *extra]
    return example_main(example)(args)


def tensorboard(root: Path) -> tuple[set[str], set[str]]:
    (folder,) = {path.parent for path in root.glob("lightning_logs/version_0/events.out.*")}
    events = EventAccumulator(str(folder)).Reload()
    return set(events.Tags()["scalars"]), _yaml_keys(folder / "hparams.yaml")


def csv_logged(root: Path) -> tuple[set[str], set[str]]:
    folder = root / "csv" / "version_0"
    with (folder / "metrics.csv").open(newline="") as handle:
        header = next(csv.reader(handle))
    return set(header), _yaml_keys(folder / "hparams.yaml")


def _yaml_keys(path: Path) -> set[str]:
    return {line.split(":")[0] for line in path.read_text().splitlines() if line[:1].isalpha()}


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
def test_tensorboard_and_csv_receive_the_metrics_and_hyperparameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: str
) -> None:
    monkeypatch.chdir(tmp_path)  # where a logger that ignored the root would write
    root = tmp_path / "run"
    fit(example, root, *TINY[example], SHORT[example], *added(["csv"]))
    assert_received(example, {"tensorboard": tensorboard(root), "csv": csv_logged(root)})
    assert [path.name for path in tmp_path.iterdir()] == ["run"]


def added(presets: Iterable[str]) -> list[str]:
    return [f"--trainer.logger+={CONFIGS / 'logger' / f'{name}.yaml'}" for name in presets]


def assert_received(example: str, received: dict[str, tuple[set[str], set[str]]]) -> None:
    """Every logger got every metric of the example and the hyperparameters."""
    for name, logged in received.items():
        for got, expected in zip(logged, (METRICS[example], HYPERPARAMETERS[example]), strict=True):
            assert got >= expected, f"{name} lacks {expected - got}"
