"""Experiment tracking: add a logger with ``--trainer.logger+=configs/logger/<name>.yaml``.
Its ``save_dir`` follows ``--trainer.default_root_dir``: the path a preset cannot know."""

from pathlib import Path

from lightning.pytorch.cli import LightningArgumentParser


def run_root(default_root_dir: str | Path | None) -> str:
    """The folder a run writes under; unset, the Trainer's own default, the working directory."""
    return str(default_root_dir or Path.cwd())


def link_logs_to_run_root(parser: LightningArgumentParser) -> None:
    parser.link_arguments("trainer.default_root_dir", "trainer.logger.init_args.save_dir", run_root)
