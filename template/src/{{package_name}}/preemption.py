"""On SLURM, save a checkpoint and requeue the job when the scheduler warns that time is up
(``#SBATCH --signal=SIGUSR1@90``; docs/clusters.md).

Lightning's own handler saves and requeues inside the signal handler, wherever each process
happens to be: under DDP one may wait in the checkpoint's barrier while another waits in a
gradient all-reduce, and the job hangs. This handler only notes the signal; after every
training batch the processes agree, in one all-reduce, whether any got it, so all of them
save ``hpc_ckpt_<N>.ckpt`` at the same step and the first one requeues the job. Lightning
resumes any run under SLURM without ``--ckpt_path`` from the newest of those files.
"""

import logging
import os
import signal
import subprocess
from pathlib import Path
from types import FrameType
from typing import Any

import lightning as L
from lightning.fabric.plugins.environments.slurm import SLURMEnvironment
from lightning.pytorch.callbacks import Callback

log = logging.getLogger(__name__)


class SlurmRequeue(Callback):
    def __init__(self) -> None:
        self._signal: signal.Signals | None = None
        self._previous: Any = None
        self._requested = False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Take SLURM's requeue signal before Lightning does: Lightning installs its own
        handler only where the signal has none."""
        environment = getattr(trainer.strategy, "cluster_environment", None)
        if isinstance(environment, SLURMEnvironment) and not environment.auto_requeue:
            return  # the user turned requeueing off
        if stage == "fit" and SLURMEnvironment.detect():
            requeue_signal = getattr(environment, "requeue_signal", None) or signal.SIGUSR1
            self._signal = signal.Signals(requeue_signal)
            self._previous = signal.signal(self._signal, self._note)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self._requested = True

    def on_train_batch_end(self, trainer: L.Trainer, *_: Any) -> None:
        if self._signal is None:
            return
        if not trainer.strategy.reduce_boolean_decision(self._requested, all=False):
            return
        self._requested = False
        for logger in trainer.loggers:
            logger.save()
        trainer.save_checkpoint(hpc_checkpoint_path(trainer.default_root_dir))
        if trainer.is_global_zero:
            requeue()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._signal is not None:
            signal.signal(self._signal, self._previous)
            self._signal = None

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, *_: Any) -> None:
        self.teardown(trainer, pl_module, "fit")


def hpc_checkpoint_path(root: str | Path) -> Path:
    """The next ``hpc_ckpt_<N>.ckpt`` in ``root``: Lightning resumes from the highest N."""
    names = [path.stem.removeprefix("hpc_ckpt_") for path in Path(root).glob("hpc_ckpt_*.ckpt")]
    number = max((int(name) for name in names if name.isdecimal()), default=0) + 1
    return Path(root) / f"hpc_ckpt_{number}.ckpt"


def requeue() -> None:
    """``scontrol requeue`` this job (this array task, in an array job)."""
    array = os.environ.get("SLURM_ARRAY_JOB_ID")
    job = f"{array}_{os.environ['SLURM_ARRAY_TASK_ID']}" if array else os.environ["SLURM_JOB_ID"]
    try:
        code = subprocess.run(["scontrol", "requeue", job], check=False).returncode
        status = f"scontrol requeue exited with status {code}" if code else ""
    except FileNotFoundError:
        status = "scontrol was not found"
    if status:
        log.warning("SLURM job %s was not requeued: %s", job, status)
    else:
        log.info("requeued SLURM job %s", job)
