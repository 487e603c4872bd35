"""Fixtures and checks shared by every test of the package.

``broadcast_guard``: request it to run a test inside :class:`BroadcastGuard`, so any
elementwise operation that stretches both operands fails the test at its source line.

The ``slow`` marker is checked, not just written: a test that starts a child process
(command line, DDP, async envs) fails unless it is marked slow, and one marked slow fails
unless it starts one. So ``pytest -m "not slow"`` is every test that stays in this process.
The ``cli`` marker is checked the same way: exactly the tests that build a LightningCLI
command line in this process. ``pytest -m "not slow and not cli"`` is the quick run.
"""

from collections.abc import Generator, Iterator

import pytest

from ..guards import BroadcastGuard
from .helpers import child_processes, in_process_cli

_watching = pytest.MonkeyPatch()


@pytest.fixture
def broadcast_guard() -> Iterator[BroadcastGuard]:
    with BroadcastGuard() as guard:
        yield guard


def pytest_configure(config: pytest.Config) -> None:
    in_process_cli.find_stubs()  # its one child process is no test's
    child_processes.watch(_watching)
    in_process_cli.watch(_watching)


def pytest_unconfigure(config: pytest.Config) -> None:
    _watching.undo()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture of the test is set up, so that a module fixture's process counts.
    child_processes.reset()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # The test's own body only: a module fixture's command line is shared by many tests.
    in_process_cli.reset()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "call" and report.passed:
        problem = child_processes.mismatch(
            item.get_closest_marker("slow") is not None
        ) or in_process_cli.mismatch(item.get_closest_marker("cli") is not None)
        if problem:
            report.outcome = "failed"
            report.longrepr = f"{item.nodeid} {problem}"
    return report
