"""Which tests run a LightningCLI command line in this process, so that the ``cli`` marker
is exactly those tests.

Building a LightningCLI parser (four subcommands, each with the Trainer's, the model's and
the data's signatures) costs about 0.2 s before anything trains, so the tests that call an
example's ``main`` in this process are most of what ``-m "not slow"`` still spends.
``-m "not slow and not cli"`` is the quick run. ``watch`` counts every ``LightningCLI``
constructed; the conftest compares each test's count with its marker.
"""

from collections.abc import Callable
from typing import Any

import pytest
from jsonargparse import ArgumentParser
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.loggers import TensorBoardLogger

_built = 0


def _counted(original: Callable[..., Any]) -> Callable[..., Any]:
    def init(*args: Any, **kwargs: Any) -> Any:
        global _built
        _built += 1
        return original(*args, **kwargs)

    return init


def find_stubs() -> None:
    """Let jsonargparse find its type stubs now. It reads the types of a class's unannotated
    parameters (TensorBoard's ``SummaryWriter``, behind the examples' default logger) from
    typeshed stubs, which it finds by asking a child Python for its ``sys.path``, once per
    process. Done before ``child_processes`` counts, so that the first test to build a
    command line is not charged with a process start."""
    ArgumentParser(exit_on_error=False).add_class_arguments(TensorBoardLogger, "logger")


def watch(patcher: pytest.MonkeyPatch) -> None:
    """Count LightningCLI constructions until ``patcher`` is undone."""
    patcher.setattr(LightningCLI, "__init__", _counted(LightningCLI.__init__))


def reset() -> None:
    global _built
    _built = 0


def mismatch(marked_cli: bool) -> str | None:
    """Why the test's ``cli`` marker is wrong for the command lines built since ``reset``."""
    if _built and not marked_cli:
        return f"ran {_built} command line(s) in this process: mark it @pytest.mark.cli"
    if marked_cli and not _built:
        return "is marked cli but ran no command line in this process"
    return None
