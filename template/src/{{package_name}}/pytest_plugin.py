"""Run a whole test suite under the broadcast guard:
``pytest -p <package>.pytest_plugin --broadcast-guard`` fails every test whose setup, body
or teardown stretches all the operands of an elementwise operation, at the stretching line.

``-p`` imports the plugin by its module name: no entry point, no install, only an importable
package. A test opts out with ``@pytest.mark.no_broadcast_guard`` when it stretches on
purpose, runs a guard of its own, or counts what ``torch.compile`` traces (dynamo sees the
guard, a ``TorchFunctionMode``). The conftests load and the tests are collected under a
guard that only records provenance, so a grid made at import time (``POS =
torch.arange(T)``) is known for what it is (see :mod:`.core.broadcast`).
"""

from collections.abc import Iterator

import pytest

from .core.broadcast import BroadcastGuard, Stretch

__all__ = ["pytest_addoption", "pytest_configure", "pytest_load_initial_conftests"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("broadcast guard").addoption(
        "--broadcast-guard",
        action="store_true",
        help="fail every test that stretches all operands of an elementwise operation",
    )


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> Iterator[None]:
    """The first conftests load before ``pytest_configure``; ``-p`` has imported this
    module by then, and ``--broadcast-guard`` is parsed."""
    if not early_config.known_args_namespace.broadcast_guard:
        return (yield)
    with BroadcastGuard(on_stretch=_ignore):
        return (yield)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "no_broadcast_guard: run this test without --broadcast-guard's guard"
    )
    if config.getoption("broadcast_guard"):
        config.pluginmanager.register(_GuardEveryTest(), "broadcast-guard")


def _ignore(stretch: Stretch) -> None:
    """Imports only record which tensors are index grids; tests are what is checked."""


class _GuardEveryTest:
    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Iterator[None]:
        with BroadcastGuard(on_stretch=_ignore):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        return (yield from _guarded(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        return (yield from _guarded(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        return (yield from _guarded(item))


def _guarded(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("no_broadcast_guard") is not None:
        return (yield)
    with BroadcastGuard():
        return (yield)
