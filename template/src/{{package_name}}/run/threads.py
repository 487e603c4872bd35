"""A run's CPU threads: ``--model.torch_threads``, else ``OMP_NUM_THREADS`` (a cluster's or DDP's
share), else 1. torch's default, every core, spins while others hold cores: fits run several times
slower."""

import os
import sys

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from .errors import UserError


def chosen(torch_threads: int | None) -> int:
    """The count a run uses; more than the usable cores warns (a user may know better)."""
    exported = (os.environ.get("OMP_NUM_THREADS") or "1").split(",")[0].strip()
    if torch_threads is None and not (exported.isdigit() and int(exported) > 0):
        raise UserError(f"OMP_NUM_THREADS={exported}: a thread count is an integer >= 1")
    threads = torch_threads or int(exported)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if threads > (cores or threads):
        print(f"warning: {threads} torch threads on {cores} usable cores", file=sys.stderr)
    return threads


class CpuThreads(Callback):
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.previous = torch.get_num_threads()
        torch.set_num_threads(chosen(pl_module.hparams.get("torch_threads")))

    def teardown(self, *_: object, **__: object) -> None:  # an in-process fit gives them back
        torch.set_num_threads(getattr(self, "previous", torch.get_num_threads()))

    on_exception = teardown  # a failed one too
