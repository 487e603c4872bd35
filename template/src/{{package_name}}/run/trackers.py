"""The W&B and MLflow presets (``configs/logger/wandb.yaml`` and ``mlflow.yaml``): what they
cannot say themselves, filled in by the command line (``cli.py``) before the loggers are built.

- MLflow's store is ``sqlite:///<root>/mlflow.db`` and its artifacts ``<root>/mlartifacts``,
  unless the preset or ``MLFLOW_TRACKING_URI`` names a store: current MLflow refuses the
  plain file store that ``save_dir`` alone would give it.
- A W&B run keeps its id in every checkpoint (:class:`WandbRunId`), and ``fit --ckpt_path``
  continues the run with that id instead of starting a second one beside it.
"""

from pathlib import Path
from typing import Any

import lightning as L
from jsonargparse import Namespace
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import WandbLogger

from .checkpoints import read
from .tracking import run_root

WANDB_RUN_ID = "wandb_run_id"
"""The checkpoint key that holds the W&B run id."""


def fill_logger_paths(
    config: Namespace, resumed_from: str | None, checkpoint_dir: str | None
) -> None:
    """Fill, in a subcommand's parsed ``config``, what the logger presets leave unset:
    MLflow's store under the run root, and the W&B run id recorded in ``resumed_from``, the
    ``--ckpt_path`` of a fit (``last``: the newest ``last*.ckpt`` in ``checkpoint_dir``).
    With a W&B logger, :class:`WandbRunId` joins the trainer's callbacks."""
    root = Path(run_root(config.trainer.get("default_root_dir"))).resolve()
    loggers = config.trainer.get("logger")  # one, a list, or a bool
    wandb = False
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        if not isinstance(logger, Namespace) or logger.get("init_args") is None:
            continue
        name, init = str(logger.get("class_path", "")).rsplit(".", 1)[-1], logger.init_args
        if name == "MLFlowLogger":
            init.tracking_uri = init.get("tracking_uri") or f"sqlite:///{root / 'mlflow.db'}"
            init.artifact_location = init.get("artifact_location") or str(root / "mlartifacts")
        elif name == "WandbLogger":
            wandb = True
            if not (init.get("id") or init.get("version")):
                init.id = _recorded_wandb_id(resumed_from, checkpoint_dir)
    callbacks = config.trainer.get("callbacks") or []
    callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
    recorder = f"{__name__}.WandbRunId"
    if wandb and recorder not in [getattr(c, "class_path", None) for c in callbacks]:
        config.trainer.callbacks = [
            *callbacks,
            Namespace(class_path=recorder, init_args=Namespace()),
        ]


class WandbRunId(Callback):
    """Records the W&B run's id in every checkpoint (nothing without a W&B logger)."""

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger) and logger.version:
                checkpoint[WANDB_RUN_ID] = str(logger.version)


def _recorded_wandb_id(ckpt_path: str | None, checkpoint_dir: str | None) -> str | None:
    """The W&B run id in the checkpoint that a fit resumes from, if it holds one."""
    path: str | Path | None = ckpt_path
    if ckpt_path == "last" and checkpoint_dir and "://" not in checkpoint_dir:
        last = Path(checkpoint_dir).glob("last*.ckpt")
        path = max(last, key=lambda p: p.stat().st_mtime, default=None)
    elif ckpt_path in (None, "best", "hpc", "registry") or "://" in str(ckpt_path):
        path = None
    recorded = read(path).get(WANDB_RUN_ID) if path and Path(path).is_file() else None
    return recorded if isinstance(recorded, str) else None
