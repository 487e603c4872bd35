"""Experiment tracking: add a logger with ``--trainer.logger+=configs/logger/<name>.yaml``
(tensorboard, csv, wandb, mlflow), and each one writes under the run root.

- Every logger's ``save_dir`` is linked to ``--trainer.default_root_dir``, so moving the
  root on the command line moves the logs with it, and one folder holds a run's files.
- MLflow's store is ``sqlite:///<root>/mlflow.db`` and its artifacts ``<root>/mlartifacts``,
  unless the preset or ``MLFLOW_TRACKING_URI`` names a store: current MLflow refuses the
  plain file store that ``save_dir`` alone would give it.
- A W&B run keeps its id in every checkpoint, and ``fit --ckpt_path`` continues the run
  with that id instead of starting a second one beside it.

The presets name Lightning's own loggers; these functions only fill the paths and the id
that a preset cannot know, and leave whatever the user set.
"""

from pathlib import Path
from typing import Any

import lightning as L
from jsonargparse import Namespace
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.cli import LightningArgumentParser
from lightning.pytorch.loggers import WandbLogger

from .checkpoints import read

WANDB_RUN_ID = "wandb_run_id"
"""The checkpoint key that holds the W&B run id."""


def run_root(default_root_dir: str | Path | None) -> str:
    """The folder a run writes under: the Trainer's own default, the working directory,
    when ``--trainer.default_root_dir`` is unset."""
    return str(default_root_dir or Path.cwd())


def link_logs_to_run_root(parser: LightningArgumentParser) -> None:
    """Every configured logger's ``save_dir`` follows ``--trainer.default_root_dir``."""
    parser.link_arguments("trainer.default_root_dir", "trainer.logger.init_args.save_dir", run_root)


def fill_logger_paths(
    config: Namespace, resumed_from: str | None, checkpoint_dir: str | None
) -> None:
    """Fill, in a subcommand's parsed ``config``, what the logger presets leave unset:
    MLflow's store under the run root, and the W&B run id recorded in ``resumed_from``, the
    ``--ckpt_path`` of a fit (``last``: the newest ``last*.ckpt`` in ``checkpoint_dir``)."""
    root = Path(run_root(config.trainer.get("default_root_dir"))).resolve()
    run_id = None
    for logger in _logger_configs(config.trainer.get("logger")):
        init_args = logger.get("init_args")
        if init_args is None:
            continue
        name = str(logger.get("class_path", "")).rsplit(".", 1)[-1]
        if name == "MLFlowLogger":
            if not init_args.get("tracking_uri"):
                init_args.tracking_uri = f"sqlite:///{root / 'mlflow.db'}"
            if not init_args.get("artifact_location"):
                init_args.artifact_location = str(root / "mlartifacts")
        if name == "WandbLogger" and not (init_args.get("id") or init_args.get("version")):
            run_id = run_id or _recorded_wandb_id(resumed_from, checkpoint_dir)
            init_args.id = run_id


class WandbRunId(Callback):
    """Records the W&B run's id in every checkpoint (nothing without a W&B logger)."""

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger) and logger.version:
                checkpoint[WANDB_RUN_ID] = str(logger.version)


def _logger_configs(logger: Any) -> list[Namespace]:
    """The class_path/init_args entries of ``--trainer.logger`` (one, a list, or a bool)."""
    entries = logger if isinstance(logger, list) else [logger]
    return [entry for entry in entries if isinstance(entry, Namespace)]


def _recorded_wandb_id(ckpt_path: str | None, checkpoint_dir: str | None) -> str | None:
    """The W&B run id in the checkpoint that a fit resumes from, if it holds one."""
    if ckpt_path == "last" and checkpoint_dir and "://" not in checkpoint_dir:
        candidates = list(Path(checkpoint_dir).glob("last*.ckpt"))
        path: str | Path | None = max(candidates, key=lambda p: p.stat().st_mtime, default=None)
    elif ckpt_path in (None, "best", "hpc", "registry") or "://" in str(ckpt_path):
        path = None
    else:
        path = ckpt_path
    if path is None or not Path(path).is_file():
        return None
    recorded = read(path).get(WANDB_RUN_ID)
    return recorded if isinstance(recorded, str) else None
