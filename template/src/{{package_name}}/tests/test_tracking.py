"""The logger presets of ``configs/logger/``: each writes its files under the run root,
and on a fit with several at once, every one of them receives every metric and
hyperparameter of the example. A W&B run resumed with ``--ckpt_path last`` keeps its id.

All four presets run together on the PPO example, which logs through its own callback;
the other example runs with three, then resumes. Each fit is a tiny one.

W&B starts a service process even offline, so the tests that use it are slow as well as
cli. Each test ends W&B's run itself: Lightning leaves it open, and the next WandbLogger in
this process would log into it.
"""

import csv
import importlib
import importlib.util
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
import wandb
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.loggers import WandbLogger
from mlflow.tracking import MlflowClient
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from .helpers.paths import CONFIGS, PACKAGE

EXAMPLES = [name for name in ("regression", "ppo") if importlib.util.find_spec(f"{PACKAGE}.{name}")]
PRESETS = ("csv", "wandb", "mlflow")  # added to the examples' default, TensorBoard
METRICS = {
    "regression": {"train_loss", "val_loss", "val_r2", "val_mae"},
    "ppo": {
        *("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"),
        *("learning_rate", "episodic_return", "episodic_length", "sps", "eval_return"),
    },
}
HYPERPARAMETERS = {"learning_rate", "hidden_sizes"}  # two of each module's arguments
TINY = {
    "regression": ["--data.synthetic_samples=256", "--data.batch_size=64"],
    "ppo": [
        *("--model.num_envs=2", "--model.num_steps=16", "--model.total_env_steps=96"),
        *("--model.update_epochs=1", "--model.eval_every_env_steps=32"),
        *("--model.eval_episodes=1", "--model.hidden_sizes=[8]"),
    ],
}
SHORT = {"regression": "--trainer.max_epochs=1", "ppo": "--trainer.max_steps=2"}
"""Stops before the budget's end, so that a resumed fit has steps left to take."""
LONGER = {"regression": "--trainer.max_epochs=2", "ppo": "--trainer.max_steps=-1"}


@pytest.fixture(autouse=True)
def wandb_run_ended(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """End W&B's run after the test, and undo the WANDB_MODE that offline mode sets."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    yield
    wandb.finish()


def _fit(example: str, root: Path, *extra: str) -> LightningCLI:
    main: Callable[[list[str]], LightningCLI] = importlib.import_module(
        f"{PACKAGE}.{example}.__main__"
    ).main
    quiet = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]
    config = ["--config", str(CONFIGS / f"{example}.yaml")]
    return main(["fit", *config, f"--trainer.default_root_dir={root}", *quiet, *extra])


def _tensorboard(root: Path) -> tuple[set[str], set[str]]:
    (folder,) = {path.parent for path in root.glob("lightning_logs/version_0/events.out.*")}
    events = EventAccumulator(str(folder))
    events.Reload()
    return set(events.Tags()["scalars"]), _yaml_keys(folder / "hparams.yaml")


def _csv(root: Path) -> tuple[set[str], set[str]]:
    folder = root / "csv" / "version_0"
    with (folder / "metrics.csv").open(newline="") as handle:
        header = next(csv.reader(handle))
    return set(header), _yaml_keys(folder / "hparams.yaml")


def _mlflow(root: Path) -> tuple[set[str], set[str]]:
    assert (root / "mlflow.db").is_file()
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("lightning_logs")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    return set(run.data.metrics), set(run.data.params)


def _wandb(root: Path, logger: WandbLogger) -> tuple[set[str], set[str]]:
    assert list(root.glob(f"wandb/offline-run-*-{logger.version}/run-*.wandb"))
    run = logger.experiment
    return set(dict(run.summary)), set(dict(run.config))


def _yaml_keys(path: Path) -> set[str]:
    return {line.split(":")[0] for line in path.read_text().splitlines() if line[:1].isalpha()}


@pytest.mark.slow
@pytest.mark.cli
def test_every_logger_preset_receives_the_metrics_and_hyperparameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a logger that ignored the root would write
    root = tmp_path / "run"
    example = EXAMPLES[-1]  # PPO where there is one: it logs through its own callback
    cli = _fit(example, root, *TINY[example], SHORT[example], *_added(PRESETS))
    (wandb_logger,) = [x for x in cli.trainer.loggers if isinstance(x, WandbLogger)]
    _assert_received(
        example,
        {
            "tensorboard": _tensorboard(root),
            "csv": _csv(root),
            "mlflow": _mlflow(root),
            "wandb": _wandb(root, wandb_logger),
        },
    )
    assert [path.name for path in tmp_path.iterdir()] == ["run"]


@pytest.mark.slow
@pytest.mark.cli
def test_fit_resumed_from_last_continues_the_same_wandb_run(tmp_path: Path) -> None:
    example = EXAMPLES[0]  # the regression example where there is one: the other example
    first = _fit(example, tmp_path, *TINY[example], SHORT[example], *_added(["csv", "wandb"]))
    tensorboard, _, wandb_logger = first.trainer.loggers
    assert isinstance(wandb_logger, WandbLogger)
    _assert_received(
        example,
        {
            "tensorboard": _tensorboard(tmp_path),
            "csv": _csv(tmp_path),
            "wandb": _wandb(tmp_path, wandb_logger),
        },
    )
    run_id = wandb_logger.experiment.id
    wandb.finish()

    only_wandb = f"--trainer.logger={CONFIGS / 'logger' / 'wandb.yaml'}"
    resume = [LONGER[example], only_wandb, "--ckpt_path=last"]
    resumed = _fit(example, tmp_path, *TINY[example], *resume)
    (wandb_logger,) = resumed.trainer.loggers
    assert isinstance(wandb_logger, WandbLogger)
    assert wandb_logger.experiment.id == run_id
    assert resumed.trainer.global_step > first.trainer.global_step


def _added(presets: Iterable[str]) -> list[str]:
    return [f"--trainer.logger+={CONFIGS / 'logger' / f'{name}.yaml'}" for name in presets]


def _assert_received(example: str, received: dict[str, tuple[set[str], set[str]]]) -> None:
    """Every logger got every metric of the example and the hyperparameters."""
    for name, (metrics, hyperparameters) in received.items():
        assert metrics >= METRICS[example], f"{name} lacks {METRICS[example] - metrics}"
        assert hyperparameters >= HYPERPARAMETERS, f"{name} lacks {HYPERPARAMETERS}"
