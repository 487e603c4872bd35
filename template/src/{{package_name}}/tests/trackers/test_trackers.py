"""The W&B and MLflow presets: on a fit with every preset at once, each logger receives
every metric and hyperparameter of the example, under the run root; a W&B run resumed with
``--ckpt_path last`` keeps its id.

W&B starts a service process even offline, so these tests are slow as well as cli.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
import wandb
from lightning.pytorch.loggers import WandbLogger
from mlflow.tracking import MlflowClient

from ..project import CONFIGS
from ..test_tracking import (
    EXAMPLES,
    SHORT,
    TINY,
    added,
    assert_received,
    csv_logged,
    fit,
    tensorboard,
)

LONGER = {"regression": "--trainer.max_epochs=2", "ppo": "--trainer.max_steps=-1"}
LONGER["sequence"] = LONGER["regression"]


@pytest.fixture(autouse=True)
def wandb_run_ended(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """End W&B's run after the test (Lightning leaves it open, and the next WandbLogger
    would log into it), and undo the WANDB_MODE that offline mode sets."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    yield
    wandb.finish()


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


@pytest.mark.slow
@pytest.mark.cli
def test_every_logger_preset_receives_the_metrics_and_hyperparameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a logger that ignored the root would write
    root = tmp_path / "run"
    example = "ppo" if "ppo" in EXAMPLES else EXAMPLES[-1]  # PPO logs in its training_step
    cli = fit(example, root, *TINY[example], SHORT[example], *added(["csv", "wandb", "mlflow"]))
    (wandb_logger,) = [x for x in cli.trainer.loggers if isinstance(x, WandbLogger)]
    assert_received(
        example,
        {
            "tensorboard": tensorboard(root),
            "csv": csv_logged(root),
            "mlflow": _mlflow(root),
            "wandb": _wandb(root, wandb_logger),
        },
    )
    assert [path.name for path in tmp_path.iterdir()] == ["run"]


@pytest.mark.slow
@pytest.mark.cli
def test_fit_resumed_from_last_continues_the_same_wandb_run(tmp_path: Path) -> None:
    example = EXAMPLES[0]  # the regression example where there is one: the other example
    first = fit(example, tmp_path, *TINY[example], SHORT[example], *added(["wandb"]))
    _, wandb_logger = first.trainer.loggers
    assert isinstance(wandb_logger, WandbLogger)
    assert_received(example, {"wandb": _wandb(tmp_path, wandb_logger)})
    run_id = wandb_logger.experiment.id
    wandb.finish()

    only_wandb = f"--trainer.logger={CONFIGS / 'logger' / 'wandb.yaml'}"
    resumed = fit(
        example, tmp_path, *TINY[example], LONGER[example], only_wandb, "--ckpt_path=last"
    )
    (wandb_logger,) = resumed.trainer.loggers
    assert isinstance(wandb_logger, WandbLogger)
    assert wandb_logger.experiment.id == run_id
    assert resumed.trainer.global_step > first.trainer.global_step
