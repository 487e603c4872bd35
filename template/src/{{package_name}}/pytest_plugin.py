"""Run a whole test suite under the broadcast guard:
``pytest -p <package>.pytest_plugin --broadcast-guard`` fails every test whose setup, body
or teardown stretches all the operands of an elementwise operation, at the stretching line.

A test opts out with ``@pytest.mark.no_broadcast_guard`` (docs/audit.md). The conftests load
and the tests are collected under a guard that only records provenance, so a grid made at
import time (``POS = torch.arange(T)``) is known for what it is (see :mod:`.core.broadcast`).
"""

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from .core.broadcast import BroadcastGuard


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("broadcast guard").addoption(
        "--broadcast-guard",
        action="store_true",
        help="fail every test that stretches all operands of an elementwise operation",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "no_broadcast_guard: run this test without --broadcast-guard's guard"
    )


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> Iterator[None]:
    """The first conftests load before ``pytest_configure``; ``-p`` has imported this
    module by then, and ``--broadcast-guard`` is parsed."""
    with _recording(early_config.known_args_namespace.broadcast_guard):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    with _recording(session.config.getoption("broadcast_guard")):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test's setup, body and teardown, under one guard."""
    guarded = item.config.getoption("broadcast_guard")
    if guarded and item.get_closest_marker("no_broadcast_guard") is None:
        with BroadcastGuard():
            return (yield)
    return (yield)


def _recording(on: object) -> Any:
    """Imports only record which tensors are index grids; tests are what is checked."""
    return BroadcastGuard(on_stretch=lambda stretch: None) if on else contextlib.nullcontext()
