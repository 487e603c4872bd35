"""The CPU threads a run computes with. By default torch splits every op over every core, and
its OpenMP workers spin while another process holds a core: beside a browser or a second run,
the small models here train 2-80x slower. So a run takes ``--model.torch_threads`` if given,
else ``OMP_NUM_THREADS`` (a cluster's export, or the share Lightning gives each DDP process),
else one thread, which the examples' models train fastest with, idle or not. docs/clusters.md
says what to export for several runs on one machine.
"""

import os
import sys

import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import Callback

from .errors import UserError

DEFAULT = 1


def chosen(torch_threads: int | None) -> int:
    """The option, else ``OMP_NUM_THREADS``, else :data:`DEFAULT`; more than the cores this
    process may use is a warning, not an error (a user may know better)."""
    exported = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if torch_threads is None and exported and not (exported.isdigit() and int(exported) > 0):
        raise UserError(f"OMP_NUM_THREADS={exported}: a thread count is an integer >= 1")
    threads = torch_threads or int(exported or DEFAULT)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cores and threads > cores:
        print(f"warning: {threads} torch threads on {cores} usable cores", file=sys.stderr)
    return threads


class CpuThreads(Callback):
    """Sets the module's ``torch_threads`` for a run and gives the previous count back when
    it ends, so an in-process fit (a test, a sweep trial) leaves its process as it was."""

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self.previous = torch.get_num_threads()
        self.threads = chosen(pl_module.hparams.get("torch_threads"))
        torch.set_num_threads(self.threads)

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        torch.set_num_threads(self.previous)

    def summary_extras(self, trainer: Trainer, pl_module: LightningModule) -> dict[str, int]:
        return {"torch_threads": self.threads}
