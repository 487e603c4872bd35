"""Shared by every test: the ``broadcast_guard`` fixture runs a test inside
:class:`BroadcastGuard`. The quick run, ``pytest -m "not slow and not cli"``, is checked: a
test with neither marker fails if the processes it started (in fixtures or body) used CPU
time, as ``os.times`` counts the children this process waited for.
"""

import os
from collections.abc import Generator, Iterator

import pytest
import torch
from jsonargparse import ArgumentParser
from lightning.pytorch.loggers import TensorBoardLogger

from ..core.broadcast import BroadcastGuard

_children_at_setup = 0.0


@pytest.fixture
def broadcast_guard() -> Iterator[BroadcastGuard]:
    with BroadcastGuard() as guard:
        yield guard


def _children_seconds() -> float:
    times = os.times()
    return times.children_user + times.children_system


def pytest_configure(config: pytest.Config) -> None:
    """Let jsonargparse find its typeshed stubs (for TensorBoard's unannotated parameters) now:
    it asks a child Python for its ``sys.path`` once per process, a child of no test. Every
    test process, and every process a test starts, computes with one thread: on a busy
    machine (``pytest -n auto`` is one) torch's default of every core slows a fit several-fold."""
    ArgumentParser(exit_on_error=False).add_class_arguments(TensorBoardLogger, "logger")
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _children_at_setup
    _children_at_setup = _children_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    marked = item.get_closest_marker("slow") or item.get_closest_marker("cli")
    if call.when == "call" and report.passed and not marked:
        used = _children_seconds() - _children_at_setup
        if used > 0:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} started a process ({used:.2f} s of its CPU time): "
                "mark it @pytest.mark.slow"
            )
    return report
