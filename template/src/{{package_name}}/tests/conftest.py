"""Fixtures shared by every test of the package.

``broadcast_guard``: request it to run a test inside :class:`BroadcastGuard`, so any
elementwise operation that stretches both operands fails the test at its source line.
"""

from collections.abc import Iterator

import pytest

from ..guards import BroadcastGuard


@pytest.fixture
def broadcast_guard() -> Iterator[BroadcastGuard]:
    with BroadcastGuard() as guard:
        yield guard
