"""What every command line here shares: a parser whose refusals end the output in one
line, one checkpoint folder per run root, and a clean end to a multi-process run.

jsonargparse reports a wrong type over two lines, the key on the first and the reason on
the second, after the usage text. A failed run's last line should name both, so the
message is joined into one line before it is printed; the exit status stays 2.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import torch
from lightning.pytorch.cli import LightningArgumentParser


class OneLineErrorParser(LightningArgumentParser):
    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        lines = (line.strip() for line in message.splitlines())
        super().error(" ".join(line for line in lines if line), ex)


def checkpoint_dir(default_root_dir: str | Path | None) -> str:
    """Where every run under ``default_root_dir`` keeps its checkpoints: one folder, not
    each run's ``version_N``, so a rerun after a crash finds ``last.ckpt``."""
    return str(Path(default_root_dir or Path.cwd()) / "checkpoints")


@contextmanager
def processes_released() -> Iterator[None]:
    """Destroy the process group that a DDP run leaves behind. A process that exits with a
    gloo group still alive can abort in C++ ("terminate called without an active
    exception") after the run itself succeeded, and exit non-zero."""
    try:
        yield
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
