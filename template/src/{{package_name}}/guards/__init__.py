"""Runtime guards for the shape mistakes that annotations cannot see.

- :mod:`.broadcast`: :class:`BroadcastGuard`, :class:`BroadcastError`, :class:`Stretch` and
  :func:`mark_grid`; torch only, so it can be copied into plain PyTorch code.
- :mod:`.callbacks`: the Lightning callbacks, :class:`BroadcastGuardCallback` and
  :class:`NonFiniteLocator` (with :class:`NonFiniteError`). They load on first use, so
  ``python -m <package>.audit`` on a plain PyTorch script does not import Lightning.
"""

from typing import TYPE_CHECKING

from .broadcast import BroadcastError, BroadcastGuard, Stretch, mark_grid

if TYPE_CHECKING:
    from .callbacks import BroadcastGuardCallback, NonFiniteError, NonFiniteLocator

__all__ = [
    "BroadcastError",
    "BroadcastGuard",
    "BroadcastGuardCallback",
    "NonFiniteError",
    "NonFiniteLocator",
    "Stretch",
    "mark_grid",
]


def __getattr__(name: str) -> object:
    if name in ("BroadcastGuardCallback", "NonFiniteError", "NonFiniteLocator"):
        from . import callbacks

        return getattr(callbacks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
